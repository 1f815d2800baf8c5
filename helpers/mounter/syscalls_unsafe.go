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

// This file is the only place glove-mounter makes a system call beyond the
// helperkit base, so an auditor can compare it line by line with the
// allowlist in seccomp.go. The flag constants below are used both by the
// calls and by the allowlist, so the two cannot drift: a call made with
// other flags than these is killed. It is *_unsafe.go because
// golang.org/x/sys (v0.50.0, the newest) has no open_tree_attr wrapper and
// its mount_attr argument is a pointer.

const (
	// walkOpenFlags opens a directory as an O_PATH handle (no read or
	// write access to anything, only a handle to compare), never following
	// a final symbolic link; fileOpenFlags opens a regular file of the
	// fallback's copy (see below) the same way.
	walkOpenFlags = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fileOpenFlags = unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC

	// statFDFlags stats a descriptor itself (an O_PATH descriptor of a
	// symbolic link is the link, not its target); statAtFlags stats a
	// name inside a directory without following it.
	statFDFlags = unix.AT_EMPTY_PATH | unix.AT_SYMLINK_NOFOLLOW
	statAtFlags = unix.AT_SYMLINK_NOFOLLOW
	statMask    = unix.STATX_TYPE | unix.STATX_MODE | unix.STATX_INO | unix.STATX_MNT_ID

	// openTreeFlags clones the source and everything mounted beneath it
	// into a new, detached mount tree (OPEN_TREE_CLONE): without
	// OPEN_TREE_CLONE open_tree would hand back the attached mount itself.
	// setattrFlags applies the attributes to the whole clone (fallback).
	openTreeFlags = unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC | unix.AT_RECURSIVE | unix.AT_EMPTY_PATH
	setattrFlags  = unix.AT_EMPTY_PATH | unix.AT_RECURSIVE
	// mountAttrSize is struct mount_attr as passed (MOUNT_ATTR_SIZE_VER0).
	mountAttrSize = unsafe.Sizeof(unix.MountAttr{})

	fsopenFlags  = unix.FSOPEN_CLOEXEC
	fsmountFlags = unix.FSMOUNT_CLOEXEC
	// alwaysAttrs are set on every mount this helper creates: a set-id
	// file or a device node on a source must not become one inside a
	// sandbox.
	alwaysAttrs = unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV

	// sysAdmin is CAP_SYS_ADMIN for helperkit.Raised: the row's one
	// capability is OnDemand, effective only around the three calls that
	// need it (cloneTree, cloneTreeSetattr, newTmpfs).
	sysAdmin = uint64(1) << unix.CAP_SYS_ADMIN
)

// ident is what the identity checks compare: device, inode and the mount
// a descriptor was reached through, plus its file type and permission bits.
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

// fdName returns the kernel's name for descriptor fd, read through
// procFD (this process's /proc/self/fd, opened at start-up). It is only
// ever a hint, checked by identity afterwards.
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
// of src with attr applied to every mount of the clone before the
// descriptor exists. The kernel refuses attributes without
// OPEN_TREE_CLONE, so unlike mount_setattr(2) this call cannot change a
// mount that is attached to a mount table, which is why the helper uses
// it and is not allowed mount_setattr at all.
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

// HasOpenTreeAttr reports whether the kernel has open_tree_attr(2): a
// call on descriptor -1 fails with EBADF where it exists and ENOSYS
// where it does not.
func HasOpenTreeAttr() bool {
	_, err := openTreeAttr(-1, nil, 0)
	return !errors.Is(err, unix.ENOSYS)
}

// The fallback for kernels before 6.15: open_tree(2) makes the detached
// clone and mount_setattr(2) applies the attributes to it. mount_setattr
// accepts a descriptor of any mount, so the helper first leaves the
// supervisor's mount namespace for private copies of it
// (enterPrivateMountNS): the kernel refuses mount_setattr on an attached
// mount of another namespace (EINVAL), so a helper subverted through a
// request can change only its own copies and its clones, never a mount
// the supervisor, the host or a sandbox uses. The price: a source the
// supervisor sends, a mount of its namespace, must be found again in the
// helper's copy before it can be cloned (bind.go, localize).

// cloneTreeSetattr is cloneTree for kernels without open_tree_attr.
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

// enterPrivateMountNS moves every thread of the helper into a new mount
// namespace, a copy of the supervisor's, and checks that none is left in
// the old one. unshare(2) acts on the calling thread only, hence
// AllThreadsSyscall (no cgo in the helpers); each thread gets a copy of
// its own (joining one with setns(2) would need CAP_SYS_CHROOT, which
// the helper does not hold), threads the runtime starts later inherit
// their creator's, and each thread keeps a cwd and root of its own,
// which the helper never changes. Since open_tree clones only mounts of
// the calling thread's namespace, a request is served on one locked
// thread from roots opened again in its copy (bind.go, threadRoots).
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

// newTmpfs creates a detached tmpfs: fsopen, one FSCONFIG_SET_STRING per
// option (key, value), FSCONFIG_CMD_CREATE, fsmount with attrs. The file
// system context is closed before returning whatever happens.
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
