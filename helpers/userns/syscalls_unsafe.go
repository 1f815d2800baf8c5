// SPDX-License-Identifier: Apache-2.0

package userns

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Every system call glove-userns makes itself, but close(2), is in this
// file and syscalls_linux.go: the list an auditor compares with the
// allowlist of seccomp.go.

// sysAdmin is the capability raised around cloneHolder alone.
const sysAdmin = uint64(1) << unix.CAP_SYS_ADMIN

// holderCloneFlags: a new process (not a thread, no shared memory) in a
// new user namespace, reporting its end with SIGCHLD. Nothing else new:
// the namespace is empty, and the sandbox's other namespaces are glove-shim's.
const holderCloneFlags = unix.CLONE_NEWUSER | uintptr(unix.SIGCHLD)

// ready is the holder's one byte.
var ready = [1]byte{'r'}

// cloneHolder forks the namespace's holder and returns its pid. Go cannot
// fork without executing, so the child runs only what follows the clone
// below: raw system calls (nosplit all the way to the kernel, no
// allocation, no lock, nothing of the runtime) with arguments computed
// before the clone. It arms its parent-death signal, makes itself dumpable, writes its byte on w and
// waits in ppoll until killed. Every signal but SIGKILL and SIGSTOP is
// blocked on this thread around the clone, so the child starts with them
// blocked and no signal handler of the copied runtime ever runs in it
// (threat: the service user signalling the holder to run Go's handler in a
// process that has none of the runtime's threads). A stopped holder is
// still killed: end sends SIGKILL.
//
// The caller holds the thread locked with CAP_SYS_ADMIN effective
// (helperkit.Raised): Debian's unprivileged_userns_clone=0 asks for it of
// the creator in the initial user namespace. The child's credentials are
// the new namespace's from the clone on: it never holds the capability
// over anything of the host.
func cloneHolder(w int) (int, error) {
	buf := uintptr(unsafe.Pointer(&ready[0]))
	all, old := ^uint64(0), uint64(0)
	pall, pold := uintptr(unsafe.Pointer(&all)), uintptr(unsafe.Pointer(&old))
	if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, pall, pold, 8, 0, 0); e != 0 {
		return -1, e
	}
	parent := uintptr(unix.Getpid())
	pid, _, e := unix.RawSyscall6(unix.SYS_CLONE, holderCloneFlags, 0, 0, 0, 0, 0)
	if e == 0 && pid == 0 {
		// The child. Any failure ends it: the parent then reads end of
		// file instead of the byte. It dies with the helper (threat: a
		// helper killed mid-request leaving a holder that waits for ever
		// with copies of its descriptors), also when the helper was gone
		// before the death signal was armed.
		if _, _, e := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0, 0); e != 0 {
			unix.RawSyscall(unix.SYS_EXIT_GROUP, 1, 0, 0)
		}
		if ppid, _, _ := unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0); ppid != parent {
			unix.RawSyscall(unix.SYS_EXIT_GROUP, 1, 0, 0)
		}
		if _, _, e := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_DUMPABLE, 1, 0, 0, 0, 0); e != 0 {
			unix.RawSyscall(unix.SYS_EXIT_GROUP, 1, 0, 0)
		}
		if n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(w), buf, 1); e != 0 || n != 1 {
			unix.RawSyscall(unix.SYS_EXIT_GROUP, 1, 0, 0)
		}
		for {
			unix.RawSyscall6(unix.SYS_PPOLL, 0, 0, 0, 0, 0, 0)
		}
	}
	// The parent restores its thread's mask whatever the clone did; a
	// failure to would leave a thread of the helper deaf to signals, and
	// it ends the helper (as helperkit.Raised does when it cannot lower a
	// capability).
	if _, _, re := unix.RawSyscall6(unix.SYS_RT_SIGPROCMASK, unix.SIG_SETMASK, pold, 0, 8, 0, 0); re != 0 {
		panic("glove-userns: restore the signal mask after clone: " + re.Error())
	}
	if e != 0 {
		return -1, e
	}
	return int(pid), nil
}
