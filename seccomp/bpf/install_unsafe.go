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
// The caller must first set no_new_privs on the thread that calls Install:
// lock the goroutine with runtime.LockOSThread, call
// unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), then call Install from
// the same goroutine. Install checks this and returns ErrNoNewPrivs
// otherwise (threat: without no_new_privs a later execve of a setuid binary
// could gain privileges that the filter's author never reasoned about; for
// unprivileged callers the kernel refuses anyway). With TSYNC the kernel
// copies the calling thread's no_new_privs to all other threads together
// with the filter, so setting it on one thread is enough.
//
// The filter is installed with SECCOMP_FILTER_FLAG_TSYNC (threat: a Go
// process is always multi-threaded and goroutines migrate between threads,
// so a per-thread prctl(PR_SET_SECCOMP) would leave the other threads, and
// any goroutine scheduled on them, unfiltered). Filters cannot be removed;
// installing twice stacks both.
func Install(prog []unix.SockFilter) error {
	if len(prog) == 0 || len(prog) > maxInsns {
		return fmt.Errorf("install seccomp filter: program length %d outside 1..%d", len(prog), maxInsns)
	}

	// Pin the goroutine so the no_new_privs check and the seccomp call
	// observe the same kernel thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil {
		return fmt.Errorf("install seccomp filter: prctl(PR_GET_NO_NEW_PRIVS): %w", err)
	}
	if nnp != 1 {
		return fmt.Errorf("install seccomp filter: %w", ErrNoNewPrivs)
	}

	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	tid, _, errno := unix.Syscall(unix.SYS_SECCOMP,
		unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC,
		uintptr(unsafe.Pointer(&fprog)))
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
