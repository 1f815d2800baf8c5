// SPDX-License-Identifier: Apache-2.0

package bpf

import "golang.org/x/sys/unix"

// archRuntimeSyscalls are the amd64-only syscalls the Go runtime and the
// os package may issue in the victim processes.
var archRuntimeSyscalls = []uintptr{
	unix.SYS_ARCH_PRCTL,
	unix.SYS_EPOLL_WAIT,
	unix.SYS_TIME,
}
