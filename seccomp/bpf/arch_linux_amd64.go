// SPDX-License-Identifier: Apache-2.0

//go:build linux && amd64

package bpf

import "golang.org/x/sys/unix"

// AuditArch is the seccomp_data.arch value of the ABI this binary was
// built for. The filter kills any syscall arriving with another value
// (threat: the i386 int 0x80 entry uses a different syscall numbering, so a
// number allowed here could name a denied syscall there).
const AuditArch = unix.AUDIT_ARCH_X86_64

// x32SyscallBit marks x32-ABI syscalls, which share AUDIT_ARCH_X86_64 with
// native calls (threat: nr|0x40000000 reaches the same kernel handlers under
// a number the allowlist never mentions, so it must be killed explicitly).
const x32SyscallBit uint32 = 0x40000000
