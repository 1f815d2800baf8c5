// SPDX-License-Identifier: Apache-2.0

package mounter

import (
	"github.com/glove-sandbox/glove/seccomp/bpf"
	"golang.org/x/sys/unix"
)

// Data only: glove-mounter's additions to helperkit.BaseSyscalls, each
// made only from syscalls_unsafe.go with the flags named there. Integer
// arguments are pinned, so the kernel enforces the flags even in a helper
// subverted through a request; what pointer arguments (names, struct
// mount_attr) leave open is said at each rule and in SECURITY.md.
//
// Not allowed, on purpose: mount, umount2, move_mount, pivot_root,
// unshare, setns, and mount_setattr where open_tree_attr exists: nothing
// this helper creates is ever attached, and no attached mount can be
// changed (mount_setattr would take a descriptor of any mount, a source
// root say, and could clear its read-only or nosuid; open_tree_attr
// applies attributes only to a fresh clone).

// exact matches all 64 bits of an argument.
const exact = ^uint64(0)

// Syscalls is glove-mounter's addition to helperkit.BaseSyscalls.
var Syscalls = []bpf.Rule{
	// helperkit.Raised, around the three calls using CAP_SYS_ADMIN: the
	// sets are behind a pointer, the permitted set bounds them.
	{Name: "capset", Nr: unix.SYS_CAPSET},
	// The identity walk: O_PATH directory handles only. The path is a
	// pointer: a subverted helper could open any directory the service
	// user can search, as a handle no more capable than the supervisor's.
	{Name: "openat", Nr: unix.SYS_OPENAT, Conds: []bpf.Cond{{Arg: 2, Mask: exact, Value: walkOpenFlags}}},
	// statx of a descriptor or of a name, never following a final link.
	{Name: "statx", Nr: unix.SYS_STATX, Conds: []bpf.Cond{{Arg: 2, Mask: exact, Value: statFDFlags}}},
	{Name: "statx", Nr: unix.SYS_STATX, Conds: []bpf.Cond{{Arg: 2, Mask: exact, Value: statAtFlags}}},
	// A source's kernel name through /proc/self/fd: reading a link's text
	// grants no access.
	{Name: "readlinkat", Nr: unix.SYS_READLINKAT},
	// Tmpfs. fsopen's file system name is a pointer: a subverted helper
	// could open another type (SECURITY.md, known limits).
	{Name: "fsopen", Nr: unix.SYS_FSOPEN, Conds: []bpf.Cond{{Arg: 1, Mask: exact, Value: fsopenFlags}}},
	// String options and create only: no FSCONFIG_SET_FD or _SET_PATH (a
	// descriptor or path as a source), no reconfiguration.
	{Name: "fsconfig", Nr: unix.SYS_FSCONFIG, Conds: []bpf.Cond{{Arg: 1, Mask: exact, Value: unix.FSCONFIG_SET_STRING}}},
	{Name: "fsconfig", Nr: unix.SYS_FSCONFIG, Conds: []bpf.Cond{{Arg: 1, Mask: exact, Value: unix.FSCONFIG_CMD_CREATE}}},
	// nosuid,nodev always, noexec optional, nothing else (no read-write
	// toggling, no idmapping).
	{Name: "fsmount", Nr: unix.SYS_FSMOUNT, Conds: []bpf.Cond{
		{Arg: 1, Mask: exact, Value: fsmountFlags},
		{Arg: 2, Mask: exact &^ unix.MOUNT_ATTR_NOEXEC, Value: alwaysAttrs},
	}},
}

// AttrSyscalls clone a bind source where the kernel has open_tree_attr
// (Linux 6.15): OPEN_TREE_CLONE is required (the kernel refuses
// attributes without it), so only a new detached copy is ever made or
// changed; the size pins struct mount_attr's first version.
var AttrSyscalls = []bpf.Rule{
	{Name: "open_tree_attr", Nr: unix.SYS_OPEN_TREE_ATTR, Conds: []bpf.Cond{
		{Arg: 2, Mask: exact, Value: openTreeFlags},
		{Arg: 4, Mask: exact, Value: uint64(mountAttrSize)},
	}},
}

// FallbackSyscalls clone a bind source on older kernels: open_tree of a
// clone only, mount_setattr recursive with the first struct mount_attr,
// and openat of a regular file to find a source again in the helper's
// copy of the mount namespace. mount_setattr's descriptor cannot be tied
// to the clone by the filter: the private copies keep it off every mount
// that matters (syscalls_unsafe.go).
var FallbackSyscalls = []bpf.Rule{
	{Name: "open_tree", Nr: unix.SYS_OPEN_TREE, Conds: []bpf.Cond{{Arg: 2, Mask: exact, Value: openTreeFlags}}},
	{Name: "mount_setattr", Nr: unix.SYS_MOUNT_SETATTR, Conds: []bpf.Cond{
		{Arg: 2, Mask: exact, Value: setattrFlags},
		{Arg: 4, Mask: exact, Value: uint64(mountAttrSize)},
	}},
	{Name: "openat", Nr: unix.SYS_OPENAT, Conds: []bpf.Cond{{Arg: 2, Mask: exact, Value: fileOpenFlags}}},
}
