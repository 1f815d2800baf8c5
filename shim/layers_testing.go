// SPDX-License-Identifier: Apache-2.0

//go:build glove_testlayers

package shim

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// testLayersVar names the layers to switch off, comma-separated, in a
// glove-shim built with the glove_testlayers tag. Only the attack tests
// build such a binary; it is never installed.
const testLayersVar = "GLOVE_SHIM_TEST_LAYERS_OFF"

func layersFromEnvironment() ([]string, error) {
	v := os.Getenv(testLayersVar)
	if v == "" {
		return nil, nil
	}
	names := strings.Split(v, ",")
	for _, n := range names {
		if !slices.Contains(Layers, n) {
			return nil, fmt.Errorf("%s: unknown layer %q (known: %s)", testLayersVar, n, strings.Join(Layers, ","))
		}
	}
	return names, nil
}

func (p *Plan) off(layer string) bool {
	for _, l := range p.Off {
		if l == layer {
			return true
		}
	}
	return false
}
