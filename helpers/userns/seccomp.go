// SPDX-License-Identifier: Apache-2.0

package userns

import (
	"github.com/glove-sandbox/glove/seccomp/bpf"
	"golang.org/x/sys/unix"
)

// This file is data: glove-userns's additions to helperkit.BaseSyscalls,
// only the calls of syscalls_linux.go and syscalls_unsafe.go. The
// namespace's holder (cloneHolder's child) runs under this same filter,
// inherited at the clone: its three calls are here too. Arguments are
// pinned wherever the call's effect lives in a scalar. Not allowed, on
// purpose: setns, unshare, mount calls, execve (the holder never executes
// anything), clone3, ptrace, and any open but the two pinned below.

// exact matches all 64 bits of an argument.
const exact = ^uint64(0)

func eq(arg uint8, v uint64) []bpf.Cond { return []bpf.Cond{{Arg: arg, Mask: exact, Value: v}} }

// Syscalls is glove-userns's addition to helperkit.BaseSyscalls.
var Syscalls = []bpf.Rule{
	// helperkit.Raised around the clone (the structure is a pointer; the
	// permitted set, CAP_SYS_ADMIN alone, bounds it).
	{Name: "capset", Nr: unix.SYS_CAPSET},
	// The holder: a process (no CLONE_THREAD, no shared memory) in a new
	// user namespace and nothing else new, these flags exactly.
	{Name: "clone", Nr: unix.SYS_CLONE, Conds: eq(0, uint64(holderCloneFlags))},
	{Name: "pipe2", Nr: unix.SYS_PIPE2, Conds: eq(1, unix.O_CLOEXEC)},
	// The holder itself: killed with the helper (SIGKILL as its
	// parent-death signal, its parent checked), dumpable (its /proc files
	// the service user's), then waiting with no descriptor (nfds 0) until
	// killed.
	{Name: "prctl", Nr: unix.SYS_PRCTL, Conds: []bpf.Cond{{Arg: 0, Mask: exact, Value: unix.PR_SET_PDEATHSIG}, {Arg: 1, Mask: exact, Value: uint64(unix.SIGKILL)}}},
	{Name: "getppid", Nr: unix.SYS_GETPPID},
	{Name: "prctl", Nr: unix.SYS_PRCTL, Conds: []bpf.Cond{{Arg: 0, Mask: exact, Value: unix.PR_SET_DUMPABLE}, {Arg: 1, Mask: exact, Value: 1}}},
	{Name: "ppoll", Nr: unix.SYS_PPOLL, Conds: eq(1, 0)},
	// Beneath the /proc descriptor: the namespace read-only, its
	// setgroups and maps write-only; nothing created or truncated.
	{Name: "openat", Nr: unix.SYS_OPENAT, Conds: eq(2, readFlags)},
	{Name: "openat", Nr: unix.SYS_OPENAT, Conds: eq(2, writeFlags)},
	// The namespace's owner and inode.
	{Name: "ioctl", Nr: unix.SYS_IOCTL, Conds: eq(1, unix.NS_GET_OWNER_UID)},
	{Name: "fstat", Nr: unix.SYS_FSTAT},
	// Ending the holder: SIGKILL only, then its reaping.
	{Name: "kill", Nr: unix.SYS_KILL, Conds: eq(1, uint64(unix.SIGKILL))},
	{Name: "wait4", Nr: unix.SYS_WAIT4},
}
