// SPDX-License-Identifier: Apache-2.0

package mounter

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"unsafe"

	"github.com/glove-sandbox/glove/helpers/helperkit"
	"golang.org/x/sys/unix"
)

// Every system call glove-mounter makes beyond the helperkit base, to
// compare line by line with seccomp.go; the flag constants serve both, so
// they cannot drift (a call with other flags is killed). *_unsafe.go:
// golang.org/x/sys (v0.50.0, the newest) has no open_tree_attr wrapper.

const (
	// O_PATH handles (no read or write access, only a handle to compare)
	// of a directory, or of a regular file of the fallback's copy, never
	// following a final symbolic link.
	walkOpenFlags = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fileOpenFlags = unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC

	// statx of a descriptor itself (an O_PATH symbolic link is the link),
	// or of a name in a directory, not following it.
	statFDFlags = unix.AT_EMPTY_PATH | unix.AT_SYMLINK_NOFOLLOW
	statAtFlags = unix.AT_SYMLINK_NOFOLLOW
	statMask    = unix.STATX_TYPE | unix.STATX_MODE | unix.STATX_INO | unix.STATX_MNT_ID

	// A new detached recursive clone (without OPEN_TREE_CLONE open_tree
	// would hand back the attached mount itself); the fallback's
	// mount_setattr applies to the whole clone.
	openTreeFlags = unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC | unix.AT_RECURSIVE | unix.AT_EMPTY_PATH
	setattrFlags  = unix.AT_EMPTY_PATH | unix.AT_RECURSIVE
	// mountAttrSize is struct mount_attr as passed (MOUNT_ATTR_SIZE_VER0).
	mountAttrSize = unsafe.Sizeof(unix.MountAttr{})

	fsopenFlags  = unix.FSOPEN_CLOEXEC
	fsmountFlags = unix.FSMOUNT_CLOEXEC
	// alwaysAttrs, on every mount made: a set-id file or a device node on
	// a source must not become one inside a sandbox.
	alwaysAttrs = unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV

	// sysAdmin, the row's one capability, is OnDemand: effective only in
	// raised, around cloneTree, cloneTreeSetattr and newTmpfs.
	sysAdmin = uint64(1) << unix.CAP_SYS_ADMIN
)

// ident is what the identity checks compare: device, inode, the mount a
// descriptor was reached through, file type and permission bits.
type ident struct {
	dev, ino, mnt uint64
	mode          uint16
}

func (i ident) sameObject(o ident) bool { return i.dev == o.dev && i.ino == o.ino }

// identOf stats the object a descriptor refers to; identAt, name inside
// directory dirfd.
func identOf(fd int) (ident, error)                 { return statx(fd, "", statFDFlags) }
func identAt(dirfd int, name string) (ident, error) { return statx(dirfd, name, statAtFlags) }

func statx(dirfd int, name string, flags int) (ident, error) {
	var st unix.Statx_t
	if err := unix.Statx(dirfd, name, flags, statMask, &st); err != nil {
		return ident{}, fmt.Errorf("statx: %w", err)
	}
	if need := uint32(unix.STATX_TYPE | unix.STATX_INO | unix.STATX_MNT_ID); st.Mask&need != need {
		return ident{}, fmt.Errorf("statx: the kernel did not report type, inode and mount id (mask %#x)", st.Mask)
	}
	return ident{dev: unix.Mkdev(st.Dev_major, st.Dev_minor), ino: st.Ino, mnt: st.Mnt_id, mode: st.Mode}, nil
}

// openDir opens name relative to dirfd as an O_PATH directory handle;
// openFile as an O_PATH handle of whatever it is.
func openDir(dirfd int, name string) (int, error)  { return openat(dirfd, name, walkOpenFlags) }
func openFile(dirfd int, name string) (int, error) { return openat(dirfd, name, fileOpenFlags) }

func openat(dirfd int, name string, flags int) (int, error) {
	fd, err := unix.Openat(dirfd, name, flags, 0)
	if err != nil {
		return -1, fmt.Errorf("openat: %w", err)
	}
	return fd, nil
}

// fdName returns the kernel's name for fd, through procFD (/proc/self/fd):
// only ever a hint, checked by identity.
func fdName(procFD, fd int) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(procFD, strconv.Itoa(fd), buf)
	if err != nil {
		return "", fmt.Errorf("readlinkat: %w", err)
	}
	if n >= len(buf) {
		return "", fmt.Errorf("readlinkat: name longer than %d bytes", len(buf)-1)
	}
	return string(buf[:n]), nil
}

// raised runs fn, which makes a descriptor, with CAP_SYS_ADMIN effective.
func raised(fn func() (int, error)) (fd int, err error) {
	err = helperkit.Raised(sysAdmin, func() (err error) {
		fd, err = fn()
		return err
	})
	return fd, err
}

// cloneTree is open_tree_attr(2) (Linux 6.15): a detached recursive clone
// of src with attr on every mount before the descriptor exists. Unlike
// mount_setattr(2) it cannot change an attached mount (the kernel refuses
// attributes without OPEN_TREE_CLONE).
func cloneTree(src int, attr *unix.MountAttr) (int, error) {
	return raised(func() (int, error) { return openTreeAttr(src, attr, mountAttrSize) })
}

func openTreeAttr(src int, attr *unix.MountAttr, size uintptr) (int, error) {
	var empty byte // "": src itself (AT_EMPTY_PATH)
	r, _, errno := unix.Syscall6(unix.SYS_OPEN_TREE_ATTR, uintptr(src), uintptr(unsafe.Pointer(&empty)),
		openTreeFlags, uintptr(unsafe.Pointer(attr)), size, 0)
	if errno != 0 {
		return -1, fmt.Errorf("open_tree_attr: %w", errno)
	}
	return int(r), nil
}

// HasOpenTreeAttr reports whether the kernel has open_tree_attr(2): on
// descriptor -1 it fails with EBADF if so, ENOSYS if not.
func HasOpenTreeAttr() bool {
	_, err := openTreeAttr(-1, nil, 0)
	return !errors.Is(err, unix.ENOSYS)
}

// cloneTreeSetattr is the fallback before 6.15: open_tree(2) clones and
// mount_setattr(2) applies attr. mount_setattr takes any mount, so the
// helper lives in private copies of the supervisor's mount namespace
// (enterPrivateMountNS), where the kernel refuses it on an attached mount
// of another namespace (EINVAL): a subverted helper can change only its
// copies and clones, never a mount the supervisor, host or a sandbox
// uses. The price: a source must be found again in the copy (localize).
func cloneTreeSetattr(src int, attr *unix.MountAttr) (int, error) {
	return raised(func() (int, error) {
		fd, err := unix.OpenTree(src, "", openTreeFlags)
		if err != nil {
			return -1, fmt.Errorf("open_tree: %w", err)
		}
		if err := unix.MountSetattr(fd, "", setattrFlags, attr); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("mount_setattr: %w", err)
		}
		return fd, nil
	})
}

// enterPrivateMountNS moves every thread into a new mount namespace, a
// copy of the supervisor's, and checks none is left in the old one.
// unshare(2) acts on the calling thread only, hence AllThreadsSyscall (no
// cgo); each thread gets its own copy (setns(2) would need
// CAP_SYS_CHROOT), later threads inherit their creator's, and each keeps
// its own cwd and root, never changed. open_tree clones only mounts of
// the caller's copy, so requests are served on one locked thread, the
// one that opens the roots (newServer).
func enterPrivateMountNS() error {
	var old unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/mnt", &old); err != nil {
		return fmt.Errorf("stat own mount namespace: %w", err)
	}
	if _, _, errno := syscall.AllThreadsSyscall(unix.SYS_UNSHARE, unix.CLONE_NEWNS, 0, 0); errno != 0 {
		return fmt.Errorf("unshare mount namespace on every thread: %w", errno)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("list own threads: %w", err)
	}
	for _, task := range tasks {
		var st unix.Stat_t
		if err := unix.Stat("/proc/self/task/"+task.Name()+"/ns/mnt", &st); err != nil {
			return fmt.Errorf("stat mount namespace of thread %s: %w", task.Name(), err)
		}
		if st.Dev == old.Dev && st.Ino == old.Ino {
			return fmt.Errorf("thread %s is still in the supervisor's mount namespace", task.Name())
		}
	}
	return nil
}

// newTmpfs creates a detached tmpfs: fsopen, FSCONFIG_SET_STRING per
// option (key, value), FSCONFIG_CMD_CREATE, fsmount with attrs.
func newTmpfs(opts [][2]string, attrs int) (int, error) {
	return raised(func() (int, error) {
		fsfd, err := unix.Fsopen("tmpfs", fsopenFlags)
		if err != nil {
			return -1, fmt.Errorf("fsopen tmpfs: %w", err)
		}
		defer unix.Close(fsfd)
		for _, o := range opts {
			if err := unix.FsconfigSetString(fsfd, o[0], o[1]); err != nil {
				return -1, fmt.Errorf("fsconfig %s=%s: %w", o[0], o[1], err)
			}
		}
		if err := unix.FsconfigCreate(fsfd); err != nil {
			return -1, fmt.Errorf("fsconfig create: %w", err)
		}
		mfd, err := unix.Fsmount(fsfd, fsmountFlags, attrs)
		if err != nil {
			return -1, fmt.Errorf("fsmount: %w", err)
		}
		return mfd, nil
	})
}
