package mounter

import (
	"github.com/glove-sandbox/glove/seccomp/bpf"
	"golang.org/x/sys/unix"
)

// This file is data: glove-mounter's additions to helperkit.BaseSyscalls,
// each call made only from syscalls_unsafe.go with the flags named there.
// A condition is set wherever the argument is a plain integer, so the
// exact flags are enforced by the kernel even in a helper subverted
// through a request. Pointer arguments (names, strings, struct
// mount_attr) cannot be read by a seccomp filter; what that leaves open
// is said at each rule and in SECURITY.md's known limits.
//
// Not allowed, on purpose: mount, umount2, move_mount, pivot_root,
// unshare, setns, and mount_setattr where open_tree_attr exists. Nothing this helper creates is ever
// attached to a mount table, and no mount that is attached can be changed:
// mount_setattr would accept a descriptor of any mount in the helper's
// namespace (a source root, say) and could clear its read-only or nosuid
// flags; open_tree_attr applies the same attributes, but only to a fresh
// clone.

// exact matches all 64 bits of an argument.
const exact = ^uint64(0)

// Syscalls is glove-mounter's addition to helperkit.BaseSyscalls.
var Syscalls = []bpf.Rule{
	// helperkit.Raised: CAP_SYS_ADMIN is permitted but effective only
	// around the three calls of syscalls_unsafe.go that use it, raised
	// and lowered on one thread with capset (the structure is a pointer,
	// so the filter cannot pin the sets; the permitted set bounds them).
	{Name: "capset", Nr: unix.SYS_CAPSET},
	// Bind: the identity walk. openat only ever makes O_PATH directory
	// handles (nothing readable or writable); the path is a pointer, so a
	// subverted helper could name any directory the service user can
	// search, and get a handle no more capable than the supervisor's own.
	{Name: "openat", Nr: unix.SYS_OPENAT, Conds: []bpf.Cond{{Arg: 2, Mask: exact, Value: walkOpenFlags}}},
	// statx of a descriptor itself, or of a name in a directory, never
	// following a final symbolic link.
	{Name: "statx", Nr: unix.SYS_STATX, Conds: []bpf.Cond{{Arg: 2, Mask: exact, Value: statFDFlags}}},
	{Name: "statx", Nr: unix.SYS_STATX, Conds: []bpf.Cond{{Arg: 2, Mask: exact, Value: statAtFlags}}},
	// The kernel's name of a regular-file source, through /proc/self/fd.
	// Its arguments are a descriptor and pointers: nothing to restrict;
	// reading a link's text grants no access.
	{Name: "readlinkat", Nr: unix.SYS_READLINKAT},
	// Tmpfs. fsopen's file system name is a pointer and cannot be
	// checked here: a subverted helper could open another file system
	// type (see SECURITY.md). Only the close-on-exec flag is allowed.
	{Name: "fsopen", Nr: unix.SYS_FSOPEN, Conds: []bpf.Cond{{Arg: 1, Mask: exact, Value: fsopenFlags}}},
	// fsconfig: string options and the create command only; no
	// FSCONFIG_SET_FD or FSCONFIG_SET_PATH (which would resolve a path or
	// take a descriptor as a source), no reconfiguration.
	{Name: "fsconfig", Nr: unix.SYS_FSCONFIG, Conds: []bpf.Cond{{Arg: 1, Mask: exact, Value: unix.FSCONFIG_SET_STRING}}},
	{Name: "fsconfig", Nr: unix.SYS_FSCONFIG, Conds: []bpf.Cond{{Arg: 1, Mask: exact, Value: unix.FSCONFIG_CMD_CREATE}}},
	// fsmount: close-on-exec, and nosuid,nodev always with nothing else
	// but noexec (no read-write toggling, no idmapping flag).
	{Name: "fsmount", Nr: unix.SYS_FSMOUNT, Conds: []bpf.Cond{
		{Arg: 1, Mask: exact, Value: fsmountFlags},
		{Arg: 2, Mask: exact &^ unix.MOUNT_ATTR_NOEXEC, Value: alwaysAttrs},
	}},
}

// AttrSyscalls clone a bind source where the kernel has open_tree_attr
// (Linux 6.15). OPEN_TREE_CLONE is required (the kernel refuses
// attributes without it), so only a new detached copy is ever made or
// changed; the size pins struct mount_attr's first version.
var AttrSyscalls = []bpf.Rule{
	{Name: "open_tree_attr", Nr: unix.SYS_OPEN_TREE_ATTR, Conds: []bpf.Cond{
		{Arg: 2, Mask: exact, Value: openTreeFlags},
		{Arg: 4, Mask: exact, Value: uint64(mountAttrSize)},
	}},
}

// FallbackSyscalls clone a bind source on older kernels: open_tree with
// OPEN_TREE_CLONE only (a handle of an attached mount is never made),
// then mount_setattr on the clone, recursive, with the first struct
// mount_attr. mount_setattr's descriptor is a plain integer the filter
// cannot tie to the clone: what keeps it off every mount that matters
// is that the helper runs in private copies of the supervisor's mount
// namespace (enterPrivateMountNS in syscalls_unsafe.go), where the
// kernel refuses attached mounts of any other namespace. openat with
// fileOpenFlags finds a regular-file source again in that copy.
var FallbackSyscalls = []bpf.Rule{
	{Name: "open_tree", Nr: unix.SYS_OPEN_TREE, Conds: []bpf.Cond{{Arg: 2, Mask: exact, Value: openTreeFlags}}},
	{Name: "mount_setattr", Nr: unix.SYS_MOUNT_SETATTR, Conds: []bpf.Cond{
		{Arg: 2, Mask: exact, Value: setattrFlags},
		{Arg: 4, Mask: exact, Value: uint64(mountAttrSize)},
	}},
	{Name: "openat", Nr: unix.SYS_OPENAT, Conds: []bpf.Cond{{Arg: 2, Mask: exact, Value: fileOpenFlags}}},
}
