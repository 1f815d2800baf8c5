// SPDX-License-Identifier: Apache-2.0

package streamproxy

import (
	"github.com/glove-sandbox/glove/seccomp/bpf"
	"golang.org/x/sys/unix"
)

// This file is data: glove-streamproxy's additions to
// helperkit.BaseSyscalls (reads, writes, close, the poller), for checking
// the descriptors of streamwire Open, keeping them and relaying on them.
// Not allowed, on purpose: socket, connect, accept, bind, open or openat
// of anything (it only uses descriptors it was handed), setsockopt, any
// ioctl but SIOCINQ, fsync of metadata beyond fdatasync.

// exact matches all 64 bits of an argument.
const exact = ^uint64(0)

// Syscalls is glove-streamproxy's addition to helperkit.BaseSyscalls.
var Syscalls = []bpf.Rule{
	// Descriptor checks: SO_DOMAIN and SO_TYPE of the two sockets,
	// SO_PEERCRED of both (connected; the upstream's uid and, per
	// exchange, its unchanged identity). Level SOL_SOCKET only.
	{Name: "getsockopt", Nr: unix.SYS_GETSOCKOPT, Conds: []bpf.Cond{{Arg: 1, Mask: exact, Value: unix.SOL_SOCKET}, {Arg: 2, Mask: exact, Value: unix.SO_DOMAIN}}},
	{Name: "getsockopt", Nr: unix.SYS_GETSOCKOPT, Conds: []bpf.Cond{{Arg: 1, Mask: exact, Value: unix.SOL_SOCKET}, {Arg: 2, Mask: exact, Value: unix.SO_TYPE}}},
	{Name: "getsockopt", Nr: unix.SYS_GETSOCKOPT, Conds: []bpf.Cond{{Arg: 1, Mask: exact, Value: unix.SOL_SOCKET}, {Arg: 2, Mask: exact, Value: unix.SO_PEERCRED}}},
	// The audit file: type and owner (fstat), flushed after each record.
	{Name: "fstat", Nr: unix.SYS_FSTAT},
	{Name: "fdatasync", Nr: unix.SYS_FDATASYNC},
	// Keeping descriptors past the handler (the audit file's dupCloexec,
	// net.FileConn's): close-on-exec duplicates from 0 up, never plain
	// F_DUPFD or dup2/dup3 onto a chosen number.
	{Name: "fcntl", Nr: unix.SYS_FCNTL, Conds: []bpf.Cond{{Arg: 1, Mask: exact, Value: unix.F_DUPFD_CLOEXEC}, {Arg: 2, Mask: exact, Value: 0}}},
	// net.FileConn asks for the socket's addresses.
	{Name: "getsockname", Nr: unix.SYS_GETSOCKNAME},
	{Name: "getpeername", Nr: unix.SYS_GETPEERNAME},
	// The relay's queue checks (Conn.Queued): SIOCINQ only.
	{Name: "ioctl", Nr: unix.SYS_IOCTL, Conds: []bpf.Cond{{Arg: 1, Mask: exact, Value: unix.SIOCINQ}}},
}
