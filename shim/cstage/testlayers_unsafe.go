// SPDX-License-Identifier: Apache-2.0

//go:build glove_testlayers

package cstage

// The attack tests' glove-shim (built with the glove_testlayers tag, never
// installed) lets the plan switch layers off in the C stages too, as
// shim/layers_testing.go does in Go; production builds compile gp_off to
// a constant 0.

// #cgo CFLAGS: -DGLOVE_TESTLAYERS
import "C"
