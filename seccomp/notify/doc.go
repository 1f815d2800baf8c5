// SPDX-License-Identifier: Apache-2.0

// Package notify holds the seccomp user-notification ioctls (seccomp(2),
// SECCOMP_RET_USER_NOTIF) that gloved's local-service handler uses to
// answer a sandboxed program's connect(2): receive a notification, check
// that it is still valid, answer it with an error or a value, and install
// a descriptor in the calling program at the number it named.
//
// It needs no cgo (gloved is built without). The ioctl numbers are
// golang.org/x/sys/unix's, which follow linux/seccomp.h; the tests derive
// them again from the _IOWR/_IOW formula and run a real filter through
// them. Everything here works from Linux 5.9 (SECCOMP_IOCTL_NOTIF_ADDFD
// with SECCOMP_ADDFD_FLAG_SETFD); nothing newer is used.
//
// The notification's arguments are the program's, so untrusted: this
// package only moves them, and its callers must read the memory they
// point at (process_vm_readv or /proc/PID/mem) and check IDValid after
// reading, since the program may have died and its pid been reused
// (threat: an answer computed from another process's memory).
package notify
