// SPDX-License-Identifier: Apache-2.0

package helperkit

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Capabilities, ambient capabilities and no_new_privs are per thread, and
// a Go program has several threads before main runs. A change made with a
// plain system call would leave the other threads holding what this one
// gave up (threat: a subverted helper goroutine scheduled on another
// thread keeps the capability). syscall.AllThreadsSyscall6 runs the call
// on every thread and fails if any thread's result differs. It needs a
// binary built with CGO_ENABLED=0, which the Makefile and testenv use.

var errCgo = errors.New("all-thread system calls are unavailable in a cgo binary: build helpers with CGO_ENABLED=0")

// allThreadsCapset sets permitted to mask, effective to eff and
// inheritable to nothing on every thread. The arguments live on the heap,
// which the collector never moves, and are kept alive across the call.
func allThreadsCapset(mask, eff uint64) error {
	hdr, data := &unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, capData(mask, eff)
	_, _, e := syscall.AllThreadsSyscall6(unix.SYS_CAPSET, uintptr(unsafe.Pointer(hdr)), uintptr(unsafe.Pointer(&data[0])), 0, 0, 0, 0)
	runtime.KeepAlive(hdr)
	runtime.KeepAlive(data)
	if e == syscall.ENOTSUP {
		return errCgo
	} else if e != 0 {
		return fmt.Errorf("capset: %w", e)
	}
	return nil
}
