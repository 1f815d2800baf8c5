// SPDX-License-Identifier: Apache-2.0

//go:build linux

package bpf

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNoNewPrivs is returned by Install when the calling thread has not set
// no_new_privs.
var ErrNoNewPrivs = errors.New("no_new_privs is not set on the calling thread")

// Install attaches prog (from Compile) to every thread of the process.
//
// The caller must first set no_new_privs on the thread that calls Install
// (lock the goroutine to it, prctl(PR_SET_NO_NEW_PRIVS), call Install from
// the same goroutine); Install returns ErrNoNewPrivs otherwise (threat:
// without no_new_privs a later execve of a setuid binary could gain
// privileges that the filter's author never reasoned about). With TSYNC
// the kernel copies the caller's no_new_privs to all other threads with
// the filter.
//
// The filter is installed with SECCOMP_FILTER_FLAG_TSYNC (threat: a Go
// process is always multi-threaded and goroutines migrate between threads,
// so a per-thread filter would leave the other threads, and any goroutine
// scheduled on them, unfiltered). Filters cannot be removed; installing
// twice stacks both.
func Install(prog []unix.SockFilter) error {
	if len(prog) == 0 || len(prog) > maxInsns {
		return fmt.Errorf("install seccomp filter: program length %d outside 1..%d", len(prog), maxInsns)
	}
	// The no_new_privs check and the seccomp call must see one thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("install seccomp filter: prctl(PR_GET_NO_NEW_PRIVS): %w", err)
	} else if nnp != 1 {
		return fmt.Errorf("install seccomp filter: %w", ErrNoNewPrivs)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	tid, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return fmt.Errorf("install seccomp filter: seccomp(SET_MODE_FILTER, TSYNC): %w", errno)
	}
	if tid != 0 {
		// With TSYNC a positive result names a thread whose filter state
		// diverged; nothing was installed, and carrying on would run the
		// helper unconfined.
		return fmt.Errorf("install seccomp filter: seccomp(SET_MODE_FILTER, TSYNC): thread %d could not be synchronized", tid)
	}
	return nil
}
