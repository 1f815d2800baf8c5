// SPDX-License-Identifier: Apache-2.0

//go:build !glove_testlayers

package shim

// layersFromEnvironment is empty in every production build: no variable,
// flag or config.json member can switch a layer of the sandbox off. The
// attack tests build glove-shim with the glove_testlayers tag to get
// layers_testing.go instead (see shim/attack_test.go).
func layersFromEnvironment() ([]string, error) { return nil, nil }

// off reports whether layer is switched off. Always false here, whatever
// a plan says: a plan is data between the stages, not a source of policy.
func (p *Plan) off(layer string) bool { return false }
