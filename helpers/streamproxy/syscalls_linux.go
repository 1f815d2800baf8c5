// SPDX-License-Identifier: Apache-2.0

package streamproxy

import "golang.org/x/sys/unix"

// Every system call glove-streamproxy makes itself, but close(2), is in
// this file (the relay's reads, writes and deadlines go through package
// net): the list an auditor compares with the allowlist of seccomp.go.

// socketKind is fd's socket domain and type.
func socketKind(fd int) (domain, typ int, err error) {
	if domain, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN); err == nil {
		typ, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	}
	return domain, typ, err
}

// peerCred is the credentials of fd's peer when it connected.
func peerCred(fd int) (*unix.Ucred, error) {
	return unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
}

func fstat(fd int) (st unix.Stat_t, err error) { err = unix.Fstat(fd, &st); return st, err }

// statusFlags is fd's file status flags (F_GETFL).
func statusFlags(fd int) (int, error) { return unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0) }

// dupCloexec duplicates fd close-on-exec.
func dupCloexec(fd int) (int, error) { return unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0) }

// queued is the bytes received on socket fd and not yet read (SIOCINQ).
func queued(fd int) (int, error) { return unix.IoctlGetInt(fd, unix.SIOCINQ) }

// writeRetry is one write(2) of b, retried only when interrupted before
// writing anything.
func writeRetry(fd int, b []byte) (int, error) {
	for {
		n, err := unix.Write(fd, b)
		if err != unix.EINTR {
			return n, err
		}
	}
}

// fdatasync is fdatasync(2), retried when interrupted.
func fdatasync(fd int) error {
	for {
		if err := unix.Fdatasync(fd); err != unix.EINTR {
			return err
		}
	}
}
