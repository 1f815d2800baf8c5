// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"github.com/glove-sandbox/glove/seccomp/bpf"
	"golang.org/x/sys/unix"
)

// This file is data: glove-cgroup's additions to helperkit.BaseSyscalls,
// each call made only from syscalls_linux.go with the flags named there.
// Pointer arguments (names) cannot be read by a seccomp filter; what that
// leaves open is in SECURITY.md's known limits.
//
// Not allowed, on purpose: mount (hierarchies are found, never mounted),
// kill and any pidfd signal but 0 (a session is killed by writing
// cgroup.kill, so the helper never names a process to signal), O_CREAT
// or O_TRUNC opens, unlinkat of anything but a directory, chown, chmod.

// exact matches all 64 bits of an argument.
const exact = ^uint64(0)

// Syscalls is glove-cgroup's addition to helperkit.BaseSyscalls.
var Syscalls = []bpf.Rule{
	// Session directories, control files (read or write, never created,
	// never truncated) and /proc files, all relative to descriptors
	// opened at start-up.
	{Name: "openat", Nr: unix.SYS_OPENAT, Conds: []bpf.Cond{{Arg: 2, Mask: exact, Value: dirOpenFlags}}},
	{Name: "openat", Nr: unix.SYS_OPENAT, Conds: []bpf.Cond{{Arg: 2, Mask: exact, Value: readOpenFlags}}},
	{Name: "openat", Nr: unix.SYS_OPENAT, Conds: []bpf.Cond{{Arg: 2, Mask: exact, Value: writeOpenFlags}}},
	// Create a session cgroup, mode 0755 only; the kernel's cgroupfs
	// makes its control files owned by the creator.
	{Name: "mkdirat", Nr: unix.SYS_MKDIRAT, Conds: []bpf.Cond{{Arg: 2, Mask: exact, Value: cgroupMode}}},
	// Remove a session cgroup: directories only (a cgroup is one).
	{Name: "unlinkat", Nr: unix.SYS_UNLINKAT, Conds: []bpf.Cond{{Arg: 2, Mask: exact, Value: unix.AT_REMOVEDIR}}},
	// The inode of a session directory; the file system of a descriptor
	// claimed to be a pidfd.
	{Name: "fstat", Nr: unix.SYS_FSTAT},
	{Name: "fstatfs", Nr: unix.SYS_FSTATFS},
	// Liveness and permission check of a pidfd: signal 0 only, so the
	// helper can signal nothing through a pidfd.
	{Name: "pidfd_send_signal", Nr: unix.SYS_PIDFD_SEND_SIGNAL, Conds: []bpf.Cond{{Arg: 1, Mask: exact, Value: 0}}},
}
