// SPDX-License-Identifier: Apache-2.0

package bpf

// archRuntimeSyscalls is empty on arm64: every syscall the victims need is
// in the shared list (arm64 has no legacy epoll_wait, time or arch_prctl).
var archRuntimeSyscalls []uintptr
