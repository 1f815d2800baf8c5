// SPDX-License-Identifier: Apache-2.0

package loopext4format

// This file holds every system call of glove-loopext4-format but
// close(2) (the ones os/exec makes to start and wait for the formatting
// child aside): its start-up, and Create's file work in the
// materialization root, on the image and its name. It holds no
// capability.

import (
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"
)

// closeAbove closes every descriptor above fd (close_range).
func closeAbove(fd int) error { return unix.CloseRange(uint(fd)+1, ^uint(0), 0) }

func umask(mask int) { unix.Umask(mask) }

func noNewPrivs() (int, error) { return unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) }

// execEmptyEnv executes exe with argv and an empty environment.
func execEmptyEnv(exe string, argv []string) error { return unix.Exec(exe, argv, []string{}) }

func fstat(fd int) (st unix.Stat_t, err error) {
	err = unix.Fstat(fd, &st)
	return st, err
}

// lstatAt stats name below dir without following a symbolic link.
func lstatAt(dir int, name string) (st unix.Stat_t, err error) {
	err = unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// createImage creates image name below dir with exactly the flags and
// mode the allowlist admits: an existing name, a symbolic link included,
// is refused (EEXIST), never reused or followed.
func createImage(dir int, name string) (int, error) {
	return unix.Openat(dir, name, createFlags, 0o600)
}

// allocateAll allocates size bytes of fd (fallocate mode 0).
func allocateAll(fd int, size uint64) error { return unix.Fallocate(fd, 0, 0, int64(size)) }

func unlinkFile(dir int, name string) error { return unix.Unlinkat(dir, name, 0) }

// syncDir makes dir's entries durable (dir may be an O_PATH handle, so
// the directory is opened for the fsync).
func syncDir(dir int) error {
	fd, err := unix.Openat(dir, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Fsync(fd); err != nil {
		return fmt.Errorf("fsync: %w", err)
	}
	return nil
}

// reopenPath opens the inode of fd once more as a handle (O_PATH),
// through /proc/self/fd.
func reopenPath(fd int) (int, error) {
	return unix.Open("/proc/self/fd/"+strconv.Itoa(fd), unix.O_PATH|unix.O_CLOEXEC, 0)
}
