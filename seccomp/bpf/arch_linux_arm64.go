// SPDX-License-Identifier: Apache-2.0

//go:build linux && arm64

package bpf

import "golang.org/x/sys/unix"

// AuditArch is the seccomp_data.arch value of the ABI this binary was
// built for. The filter kills any syscall arriving with another value
// (threat: an AArch32 compat entry uses a different syscall numbering, so a
// number allowed here could name a denied syscall there).
const AuditArch = unix.AUDIT_ARCH_AARCH64

// x32SyscallBit is zero: arm64 has no x32-style alias ABI sharing the
// native audit arch.
const x32SyscallBit uint32 = 0
