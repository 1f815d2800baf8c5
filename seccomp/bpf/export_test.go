// SPDX-License-Identifier: Apache-2.0

package bpf

// For the external tests (package bpf_test), which use bpftest.
const (
	MaxInsns      = maxInsns
	X32SyscallBit = x32SyscallBit
)
