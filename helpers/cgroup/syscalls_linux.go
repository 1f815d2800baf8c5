// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Every system call glove-cgroup makes on cgroup file systems and
// processes is in this file, with the exact flags its seccomp.go allows.
// Paths are always a single name (or "PID/status") relative to a
// descriptor opened at start-up: nothing from a request is ever resolved
// from the file system root.

// Open flags, each matched exactly by the filter.
const (
	// dirOpenFlags opens a session cgroup directory: readable (so it can
	// serve as CLONE_INTO_CGROUP's descriptor), never a symbolic link.
	dirOpenFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	// readOpenFlags and writeOpenFlags open an existing control file;
	// neither can create or truncate one.
	readOpenFlags  = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	writeOpenFlags = unix.O_WRONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	// parentOpenFlags opens a delegated parent at start-up, before the
	// filter: a handle that grants nothing but a place to resolve from.
	parentOpenFlags = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	// cgroupMode is the mode of a session cgroup directory.
	cgroupMode = 0o755
)

// A pidfd lives on pidfs (PIDFS_MAGIC) since Linux 6.9, before that on
// the anonymous inode file system (ANON_INODE_FS_MAGIC).
const (
	pidfsMagic     = 0x50494446
	anonInodeMagic = 0x09041934
)

func openParent(path string) (int, error) {
	fd, err := unix.Openat(unix.AT_FDCWD, path, parentOpenFlags, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", path, err)
	}
	return fd, nil
}

// openPathAt opens name below dir as a handle only (O_PATH), to see that
// it exists (at start-up, before the filter).
func openPathAt(dir int, name string) (int, error) {
	return unix.Openat(dir, name, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
}

func openRead(dir int, name string) (int, error) { return unix.Openat(dir, name, readOpenFlags, 0) }

func openWrite(dir int, name string) (int, error) { return unix.Openat(dir, name, writeOpenFlags, 0) }

func openSession(parent int, name string) (int, error) {
	return unix.Openat(parent, name, dirOpenFlags, 0)
}

func mkdirSession(parent int, name string) error { return unix.Mkdirat(parent, name, cgroupMode) }

func rmdirSession(parent int, name string) error {
	return unix.Unlinkat(parent, name, unix.AT_REMOVEDIR)
}

// writeFile writes data to an existing file in one write(2): a cgroup
// control file takes one value per write. A write the kernel ended with
// EINTR is made again, at most writeTries times in all: v1's
// memory.limit_in_bytes checks for a pending signal before it sets the
// limit and fails with EINTR if one is (the Go runtime's preemption
// signal is enough; seen failing a session's Create), and every control
// file this helper writes takes the same value twice to the same effect.
func writeFile(dir int, name, data string) error {
	fd, err := openWrite(dir, name)
	if err != nil {
		return fmt.Errorf("open %s: %w", name, err)
	}
	defer unix.Close(fd)
	for try := 1; ; try++ {
		_, err := unix.Write(fd, []byte(data))
		if err == nil {
			return nil
		}
		if err != unix.EINTR || try == writeTries {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
}

// writeTries bounds writeFile's retries after EINTR: a signal pending at
// every try is not a race but a fault, reported as such.
const writeTries = 100

// readFile reads a control or proc file, at most 64 KiB of it.
func readFile(dir int, name string) (string, error) {
	fd, err := openRead(dir, name)
	if err != nil {
		return "", fmt.Errorf("open %s: %w", name, err)
	}
	defer unix.Close(fd)
	var buf []byte
	for chunk := make([]byte, 4096); len(buf) < 64<<10; {
		n, err := unix.Read(fd, chunk)
		if err != nil {
			return "", fmt.Errorf("read %s: %w", name, err)
		}
		if n == 0 {
			break
		}
		buf = append(buf, chunk[:n]...)
	}
	return string(buf), nil
}

func fstat(fd int) (st unix.Stat_t, err error) {
	err = unix.Fstat(fd, &st)
	return st, err
}

// fsType is the magic of the file system a descriptor lives on.
func fsType(fd int) (int64, error) {
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return 0, fmt.Errorf("fstatfs: %w", err)
	}
	return sfs.Type, nil
}

// alive reports whether the pidfd's process can still be signalled by
// us: signal 0 checks existence and permission and sends nothing.
func alive(pidfd int) (bool, error) {
	err := unix.PidfdSendSignal(pidfd, 0, nil, 0)
	if err != nil && !errors.Is(err, unix.ESRCH) {
		return false, fmt.Errorf("pidfd_send_signal 0: %w", err)
	}
	return err == nil, nil
}
