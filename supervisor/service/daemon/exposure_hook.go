// SPDX-License-Identifier: Apache-2.0

//go:build !glove_testfaults

package daemon

// exposureCheckOff is false in every production build: no setting, flag
// or variable can make a launch skip the check that no grant exposes the
// inherited stream's upstream (exposedBy). A gloved built with the
// glove_testfaults tag can switch it off (exposure_hook_testing.go), so
// that a test shows the next layer, seccomp's denial of socket and
// connect, stopping the same socket on its own.
func exposureCheckOff() bool { return false }
