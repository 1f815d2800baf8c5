// SPDX-License-Identifier: Apache-2.0

package helperkit

import (
	"github.com/glove-sandbox/glove/seccomp/bpf"
	"golang.org/x/sys/unix"
)

// This file is data: the system calls every helper may make once it
// serves, before its own additions (each helper's seccomp.go). Anything
// else kills the process (SECCOMP_RET_KILL_PROCESS), so a helper that is
// subverted through a crafted request cannot open files, create sockets,
// execute programs, ptrace, mount or enter namespaces beyond what its own
// list names. The list is what the Go runtime needs to schedule, collect
// garbage, deliver signals and poll, plus the two socket calls of the wire
// protocol.

// cloneNamespaceFlags are the clone flags that would create namespaces.
// CLONE_NEWTIME shares its bit with the exit signal in clone(2) and only
// exists for clone3, which is not allowed at all.
const cloneNamespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUSER | unix.CLONE_NEWPID |
	unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP

// BaseSyscalls is the allowlist shared by all helpers.
var BaseSyscalls = []bpf.Rule{
	// Go runtime: memory.
	{Name: "mmap", Nr: unix.SYS_MMAP}, {Name: "munmap", Nr: unix.SYS_MUNMAP}, {Name: "madvise", Nr: unix.SYS_MADVISE},
	// Go runtime: threads. A new thread is clone(CLONE_THREAD|...); a
	// clone without CLONE_THREAD (a new process) or with any namespace
	// flag is refused: a subverted helper must not fork a child that
	// outlives its filter's intent or unshares into a user namespace.
	{Name: "clone", Nr: unix.SYS_CLONE, Conds: []bpf.Cond{{Arg: 0, Mask: unix.CLONE_THREAD | cloneNamespaceFlags, Value: unix.CLONE_THREAD}}},
	{Name: "exit", Nr: unix.SYS_EXIT}, {Name: "exit_group", Nr: unix.SYS_EXIT_GROUP},
	{Name: "gettid", Nr: unix.SYS_GETTID}, {Name: "getpid", Nr: unix.SYS_GETPID},
	{Name: "futex", Nr: unix.SYS_FUTEX}, {Name: "nanosleep", Nr: unix.SYS_NANOSLEEP},
	{Name: "sched_yield", Nr: unix.SYS_SCHED_YIELD}, {Name: "sched_getaffinity", Nr: unix.SYS_SCHED_GETAFFINITY},
	{Name: "getrandom", Nr: unix.SYS_GETRANDOM}, {Name: "clock_gettime", Nr: unix.SYS_CLOCK_GETTIME},
	// Go runtime: signals (goroutine preemption sends SIGURG to its own
	// threads with tgkill; the filter cannot tell the target's process,
	// but the helper holds no signal privilege over other users anyway).
	{Name: "rt_sigaction", Nr: unix.SYS_RT_SIGACTION}, {Name: "rt_sigprocmask", Nr: unix.SYS_RT_SIGPROCMASK},
	{Name: "rt_sigreturn", Nr: unix.SYS_RT_SIGRETURN}, {Name: "sigaltstack", Nr: unix.SYS_SIGALTSTACK},
	{Name: "tgkill", Nr: unix.SYS_TGKILL}, {Name: "restart_syscall", Nr: unix.SYS_RESTART_SYSCALL},
	// Go runtime: the network poller behind the wire connection.
	{Name: "epoll_ctl", Nr: unix.SYS_EPOLL_CTL}, {Name: "epoll_pwait", Nr: unix.SYS_EPOLL_PWAIT}, {Name: "epoll_wait", Nr: unix.SYS_EPOLL_WAIT},
	// Descriptors: read, write (logs to stderr, the poller's wake-ups),
	// close; fcntl only to read and set descriptor and status flags
	// (the wire package forces FD_CLOEXEC on received descriptors), never
	// F_DUPFD or locks.
	{Name: "read", Nr: unix.SYS_READ}, {Name: "write", Nr: unix.SYS_WRITE}, {Name: "close", Nr: unix.SYS_CLOSE},
	{Name: "fcntl", Nr: unix.SYS_FCNTL, Conds: []bpf.Cond{{Arg: 1, Mask: ^uint64(0), Value: unix.F_GETFD}}},
	{Name: "fcntl", Nr: unix.SYS_FCNTL, Conds: []bpf.Cond{{Arg: 1, Mask: ^uint64(0), Value: unix.F_SETFD}}},
	{Name: "fcntl", Nr: unix.SYS_FCNTL, Conds: []bpf.Cond{{Arg: 1, Mask: ^uint64(0), Value: unix.F_GETFL}}},
	{Name: "fcntl", Nr: unix.SYS_FCNTL, Conds: []bpf.Cond{{Arg: 1, Mask: ^uint64(0), Value: unix.F_SETFL}}},
	// The wire protocol: one message per call on the inherited socket;
	// Hello reports the live capability sets.
	{Name: "recvmsg", Nr: unix.SYS_RECVMSG}, {Name: "sendmsg", Nr: unix.SYS_SENDMSG}, {Name: "capget", Nr: unix.SYS_CAPGET},
}
