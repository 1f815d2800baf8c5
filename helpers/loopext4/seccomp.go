// SPDX-License-Identifier: Apache-2.0

package loopext4

import (
	"github.com/glove-sandbox/glove/seccomp/bpf"
	"golang.org/x/sys/unix"
)

// This file is data: Syscalls, glove-loopext4's addition to
// helperkit.BaseSyscalls: only the calls the helper makes. Create's file
// work (creating, allocating, syncing and removing an image), mkfs.ext4
// and what starts it run in the formatter, glove-loopext4-format, under
// lists of their own (helpers/loopext4format/seccomp.go): the helper
// creates, allocates, syncs and removes no file.
//
// Arguments are pinned wherever the call's effect lives in a scalar
// argument (flags, modes, request numbers); path and structure arguments
// are pointers that a seccomp filter cannot read.

// openForbidden are open flags no open of the helper uses: creating,
// truncating, or making an unnamed file.
const openForbidden = unix.O_CREAT | unix.O_TRUNC | (unix.O_TMPFILE &^ unix.O_DIRECTORY)

func eq(arg uint8, v uint64) []bpf.Cond {
	return []bpf.Cond{{Arg: arg, Mask: ^uint64(0), Value: v}}
}

// Syscalls is glove-loopext4's addition to helperkit.BaseSyscalls.
var Syscalls = []bpf.Rule{
	// helperkit.Raised: its capabilities are permitted but effective only
	// around the calls of syscalls_linux.go that use them, raised and
	// lowered on one thread with capset (the structure is a pointer, so
	// the filter cannot pin the sets; the permitted set bounds them).
	{Name: "capset", Nr: unix.SYS_CAPSET},
	// Images, relative to the materialization root, inspected, never
	// created: openat without O_CREAT, O_TRUNC or O_TMPFILE (image
	// check and reopen through /proc/self/fd, /dev/loopN,
	// /proc/self/mountinfo, the root's entries for Freeze); fstat and
	// newfstatat (an image, the one the formatter made among them);
	// getdents64 (Freeze's search of the root).
	{Name: "openat", Nr: unix.SYS_OPENAT, Conds: []bpf.Cond{{Arg: 2, Mask: openForbidden, Value: 0}}},
	{Name: "fstat", Nr: unix.SYS_FSTAT},
	{Name: "newfstatat", Nr: unix.SYS_NEWFSTATAT},
	{Name: "getdents64", Nr: unix.SYS_GETDENTS64},
	// The attachment lock of Attach, never blocking.
	{Name: "flock", Nr: unix.SYS_FLOCK, Conds: eq(1, unix.LOCK_EX|unix.LOCK_NB)},
	{Name: "flock", Nr: unix.SYS_FLOCK, Conds: eq(1, unix.LOCK_SH|unix.LOCK_NB)},

	// Loop devices: only these three requests of the helper.
	{Name: "ioctl", Nr: unix.SYS_IOCTL, Conds: eq(1, unix.LOOP_CTL_GET_FREE)},
	{Name: "ioctl", Nr: unix.SYS_IOCTL, Conds: eq(1, unix.LOOP_CONFIGURE)},
	{Name: "ioctl", Nr: unix.SYS_IOCTL, Conds: eq(1, unix.LOOP_GET_STATUS64)},

	// Mounts: a detached ext4 mount (fsconfig with only a string, a flag
	// or the create command: no descriptor or path parameters) and the
	// read-only switch of Freeze: fspick of a descriptor (FSPICK_EMPTY_PATH,
	// never a path), the "ro" flag and the reconfigure command.
	{Name: "fsopen", Nr: unix.SYS_FSOPEN, Conds: eq(1, unix.FSOPEN_CLOEXEC)},
	{Name: "fsconfig", Nr: unix.SYS_FSCONFIG, Conds: eq(1, unix.FSCONFIG_SET_FLAG)},
	{Name: "fsconfig", Nr: unix.SYS_FSCONFIG, Conds: eq(1, unix.FSCONFIG_SET_STRING)},
	{Name: "fsconfig", Nr: unix.SYS_FSCONFIG, Conds: eq(1, unix.FSCONFIG_CMD_CREATE)},
	{Name: "fsmount", Nr: unix.SYS_FSMOUNT, Conds: eq(1, unix.FSMOUNT_CLOEXEC)},
	{Name: "fsconfig", Nr: unix.SYS_FSCONFIG, Conds: eq(1, unix.FSCONFIG_CMD_RECONFIGURE)},
	{Name: "fspick", Nr: unix.SYS_FSPICK, Conds: eq(2, unix.FSPICK_CLOEXEC|unix.FSPICK_EMPTY_PATH)},
	// Freeze's checks of the descriptor it is given.
	{Name: "statx", Nr: unix.SYS_STATX},
	{Name: "fstatfs", Nr: unix.SYS_FSTATFS},
	// Reaping its formatter when serving ends (format.go), through the
	// pidfd Go's os/exec keeps.
	{Name: "waitid", Nr: unix.SYS_WAITID, Conds: eq(0, unix.P_PIDFD)},
}
