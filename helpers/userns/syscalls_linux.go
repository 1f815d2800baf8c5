// SPDX-License-Identifier: Apache-2.0

package userns

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// openProc opens /proc once, at start (before the seccomp filter), as an
// O_PATH directory: every later open is beneath it.
func openProc() (int, error) {
	return unix.Open("/proc", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// The only flags of the helper's opens beneath /proc (seccomp.go pins
// them): the namespace read-only, a map file write-only. ns/user is a
// /proc magic link to the namespace itself, which O_NOFOLLOW would
// refuse (ELOOP); the map files are plain /proc files, opened without
// following a link.
const (
	readFlags  = unix.O_RDONLY | unix.O_CLOEXEC
	writeFlags = unix.O_WRONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW
)

// openAt opens name beneath the /proc descriptor: PID/ns/user or a map
// file of PID, the helper's own child, not yet reaped (so PID names no
// other process).
func openAt(proc int, name string, mode int) (int, error) {
	flags := readFlags
	if mode != unix.O_RDONLY {
		flags = writeFlags
	}
	for {
		fd, err := unix.Openat(proc, name, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// writeAt writes text to name beneath /proc in one write(2), as the
// kernel requires of the map files.
func writeAt(proc int, name, text string) error {
	fd, err := openAt(proc, name, unix.O_WRONLY)
	if err != nil {
		return err
	}
	n, err := unix.Write(fd, []byte(text))
	if err == nil && n != len(text) {
		err = fmt.Errorf("short write: %d of %d bytes", n, len(text))
	}
	return closeJoin(err, fd)
}

// nsIdentity is a user namespace descriptor's owner (NS_GET_OWNER_UID)
// and inode.
func nsIdentity(ns int) (owner uint32, ino uint64, err error) {
	if owner, err = unix.IoctlGetUint32(ns, unix.NS_GET_OWNER_UID); err != nil {
		return 0, 0, fmt.Errorf("NS_GET_OWNER_UID: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(ns, &st); err != nil {
		return 0, 0, fmt.Errorf("fstat: %w", err)
	}
	return owner, st.Ino, nil
}

func pipe(p *[2]int) error { return unix.Pipe2(p[:], unix.O_CLOEXEC) }

// readReady reads the holder's one byte; end of file means it died.
func readReady(fd int) error {
	var b [1]byte
	for {
		n, err := unix.Read(fd, b[:])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return err
		case n != 1:
			return fmt.Errorf("end of file")
		}
		return nil
	}
}

// kill sends SIGKILL to the holder (a child of this process, not yet
// reaped, so the pid cannot name another process).
func kill(pid int) error { return unix.Kill(pid, unix.SIGKILL) }

// reap waits for the holder.
func reap(pid int) error {
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(pid, &ws, 0, nil)
		if err != unix.EINTR {
			return err
		}
	}
}
