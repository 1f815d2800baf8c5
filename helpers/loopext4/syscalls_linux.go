// SPDX-License-Identifier: Apache-2.0

package loopext4

// This file holds every system call of glove-loopext4 but close(2): first
// those that use its capabilities: opening the root-only loop devices
// (CAP_DAC_OVERRIDE), configuring them, and creating, inspecting and
// freezing ext4 mounts (CAP_SYS_ADMIN); then those that inspect images
// and the materialization root, and the formatter's socket, which use
// none. The helper creates, allocates and removes no file: Create's file
// work is its formatter's (helpers/loopext4format).
//
// Both capabilities are OnDemand in the capability table: once the helper
// has restricted itself, neither is effective on any thread, and each
// call below that needs one raises it on its own thread only for that
// call (helperkit.Raised). /dev/loop-control is opened at start, before
// the restriction, with both effective.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/glove-sandbox/glove/helpers/helperkit"
	"golang.org/x/sys/unix"
)

// The capabilities, as masks for helperkit.Raised.
const (
	dacOverride = uint64(1) << unix.CAP_DAC_OVERRIDE
	sysAdmin    = uint64(1) << unix.CAP_SYS_ADMIN
)

// loopMajor is the loop devices' major number. /dev is root's, but a
// node that is not the device it is expected to be is refused rather
// than configured: /dev/loop-control must be 10:237, /dev/loopN 7:N.
const loopMajor = 7

// openLoopControl opens /dev/loop-control (mode 0600 root: this open is
// why the helper holds CAP_DAC_OVERRIDE), at start, unrestricted.
func openLoopControl() (*os.File, error) {
	return checkDevice("/dev/loop-control", unix.S_IFCHR, unix.Mkdev(10, 237), func(p string) (int, error) {
		return unix.Open(p, unix.O_RDWR|unix.O_CLOEXEC, 0)
	})
}

// openLoop opens /dev/loopN (mode 0660 root:disk, hence
// CAP_DAC_OVERRIDE, raised for the open), the whole loop device N.
func openLoop(n int, flags int) (*os.File, error) {
	return checkDevice(fmt.Sprintf("/dev/loop%d", n), unix.S_IFBLK, unix.Mkdev(loopMajor, uint32(n)), func(p string) (fd int, err error) {
		err = helperkit.Raised(dacOverride, func() (err error) {
			fd, err = unix.Open(p, flags|unix.O_CLOEXEC, 0)
			return err
		})
		return fd, err
	})
}

// checkDevice opens device node p with open and checks it is the device
// of type typ and number rdev, not a partition or another device under
// that name.
func checkDevice(p string, typ uint32, rdev uint64, open func(string) (int, error)) (*os.File, error) {
	fd, err := open(p)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != typ || st.Rdev != rdev {
		unix.Close(fd)
		return nil, fmt.Errorf("%s is not device %d:%d (mode %06o, %v)", p, unix.Major(rdev), unix.Minor(rdev), st.Mode, err)
	}
	return os.NewFile(uintptr(fd), p), nil
}

// loopGetFree returns the number of a free loop device, creating one if
// none is free (LOOP_CTL_GET_FREE).
func loopGetFree(ctl *os.File) (int, error) {
	n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
	if err != nil {
		return 0, fmt.Errorf("LOOP_CTL_GET_FREE: %w", err)
	}
	return n, nil
}

// loopConfigure binds img to the loop device in one call
// (LOOP_CONFIGURE), capped at sizeLimit bytes, with LO_FLAGS_AUTOCLEAR:
// the device unbinds itself when its last opener goes, which for an
// attached image is the mount, so nothing has to remember to detach it.
// No LO_FLAGS_PARTSCAN: the image's contents are the service user's to
// write, and the kernel's partition parsers need not read them.
func loopConfigure(dev, img *os.File, sizeLimit uint64, readOnly bool) error {
	cfg := unix.LoopConfig{Fd: uint32(img.Fd()), Info: unix.LoopInfo64{Sizelimit: sizeLimit, Flags: unix.LO_FLAGS_AUTOCLEAR}}
	if readOnly {
		cfg.Info.Flags |= unix.LO_FLAGS_READ_ONLY
	}
	if err := unix.IoctlLoopConfigure(int(dev.Fd()), &cfg); err != nil {
		return fmt.Errorf("LOOP_CONFIGURE %s: %w", dev.Name(), err)
	}
	return nil
}

// loopBacking returns the device and inode numbers of the file bound to
// a loop device (LOOP_GET_STATUS64).
func loopBacking(dev *os.File) (device, inode uint64, err error) {
	info, err := unix.IoctlLoopGetStatus64(int(dev.Fd()))
	if err != nil {
		return 0, 0, fmt.Errorf("LOOP_GET_STATUS64 %s: %w", dev.Name(), err)
	}
	return info.Device, info.Inode, nil
}

// errNotMountable marks an image the kernel refused to mount as ext4.
var errNotMountable = errors.New("not a mountable ext4 file system")

// mountExt4 creates a detached ext4 mount of the block device at source
// (fsopen, fsconfig, fsmount: each checks CAP_SYS_ADMIN) and returns its
// descriptor, close-on-exec, for the caller to send and close. The mount
// is nosuid and nodev; errors=remount-ro overrides whatever the image's
// superblock asks for (threat: the service user writes the image and
// could set errors=panic, turning any corruption into a host panic).
func mountExt4(source string, readOnly bool) (mfd int, err error) {
	err = helperkit.Raised(sysAdmin, func() error {
		fs, err := unix.Fsopen("ext4", unix.FSOPEN_CLOEXEC)
		if err != nil {
			return fmt.Errorf("fsopen ext4: %w", err)
		}
		defer unix.Close(fs)
		fail := func(op string, err error) error {
			return fmt.Errorf("%s %s: %w: %w%s", op, source, errNotMountable, err, fsLog(fs))
		}
		if err := unix.FsconfigSetString(fs, "source", source); err != nil {
			return fail("fsconfig source", err)
		}
		if err := unix.FsconfigSetString(fs, "errors", "remount-ro"); err != nil {
			return fail("fsconfig errors=remount-ro", err)
		}
		attrs := unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
		if readOnly {
			if err := unix.FsconfigSetFlag(fs, "ro"); err != nil {
				return fail("fsconfig ro", err)
			}
			attrs |= unix.MOUNT_ATTR_RDONLY
		}
		if err := unix.FsconfigCreate(fs); err != nil {
			return fail("fsconfig create", err)
		}
		if mfd, err = unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, attrs); err != nil {
			return fmt.Errorf("fsmount %s: %w", source, err)
		}
		return nil
	})
	return mfd, err
}

// fsLog reads the messages the kernel left in a file system context,
// which say why a mount was refused far better than the errno does, as
// " (msg; msg)", or "" when there are none.
func fsLog(fs int) string {
	var msgs []string
	buf := make([]byte, 256)
	for range 4 {
		n, err := unix.Read(fs, buf)
		if err != nil || n <= 0 {
			break
		}
		msgs = append(msgs, string(bytes.TrimSpace(buf[:n])))
	}
	if len(msgs) == 0 {
		return ""
	}
	return " (" + strings.Join(msgs, "; ") + ")"
}

// mountInfo is what Freeze learns about a descriptor from statx.
type mountInfo struct {
	mountID            uint64
	mountRoot          bool
	devMajor, devMinor uint32
}

// statMount reads a descriptor's mount id, whether it is the root of its
// mount, and the device of its file system.
func statMount(fd int) (mountInfo, error) {
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_SYNC_AS_STAT, unix.STATX_MNT_ID, &stx); err != nil {
		return mountInfo{}, fmt.Errorf("statx: %w", err)
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 || stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return mountInfo{}, errors.New("statx: the kernel reports no mount id or mount-root attribute")
	}
	return mountInfo{stx.Mnt_id, stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, stx.Dev_major, stx.Dev_minor}, nil
}

// fsMagic returns the file system type of a descriptor (fstatfs).
func fsMagic(fd int) (int64, error) {
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return 0, fmt.Errorf("fstatfs: %w", err)
	}
	return sfs.Type, nil
}

// setReadOnly makes an image's file system read-only: its superblock,
// reconfigured through fspick on the mount's root (fspick and the
// reconfigure check CAP_SYS_ADMIN), so every mount of it refuses writes
// from then on. Not mount_setattr on the mount: the sandbox moved this
// very mount into its own mount namespace, and when that namespace ended
// the mount was unmounted, which kernels before 6.15 refuse to change
// (EINVAL; seen on 6.1 in the VM lane), while a superblock can always be
// reconfigured. It fails with EBUSY while a file of the image is open for
// writing. The caller has checked the descriptor is the root of a
// detached image mount: with CAP_SYS_ADMIN this could otherwise make any
// file system of the host read-only.
func setReadOnly(fd int) error {
	return helperkit.Raised(sysAdmin, func() error {
		fc, err := unix.Fspick(fd, "", unix.FSPICK_CLOEXEC|unix.FSPICK_EMPTY_PATH)
		if err != nil {
			return fmt.Errorf("fspick: %w", err)
		}
		defer unix.Close(fc)
		if err := unix.FsconfigSetFlag(fc, "ro"); err != nil {
			return fmt.Errorf("fsconfig ro: %w", err)
		}
		if err := unix.FsconfigReconfigure(fc); err != nil {
			return fmt.Errorf("reconfigure read-only: %w", err)
		}
		return nil
	})
}

// The calls that inspect images and the materialization root, and the
// formatter's socket, without a capability.

func fstat(fd int) (st unix.Stat_t, err error) {
	err = unix.Fstat(fd, &st)
	return st, err
}

// lstatAt stats name below dir without following a symbolic link.
func lstatAt(dir int, name string) (st unix.Stat_t, err error) {
	err = unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	return st, err
}

// openDirPath opens directory p as a handle (O_PATH), not through a
// symbolic link as its last component.
func openDirPath(p string) (int, error) {
	return unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// openDirAt opens directory name below dir for reading its entries.
func openDirAt(dir int, name string) (int, error) {
	return unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// openPathAt opens name below dir as a handle (O_PATH), never through a
// symbolic link as its last component.
func openPathAt(dir int, name string) (int, error) {
	return unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// reopen opens the inode of the O_PATH handle pfd for reading or
// writing (flags), through /proc/self/fd.
func reopen(pfd, flags int) (int, error) {
	return unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), flags|unix.O_CLOEXEC, 0)
}

// lockNoWait takes flock lock (LOCK_EX or LOCK_SH) without blocking.
func lockNoWait(fd, lock int) error { return unix.Flock(fd, lock|unix.LOCK_NB) }

func seqpacketPair() ([2]int, error) {
	return unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
}
