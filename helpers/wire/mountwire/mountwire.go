// Package mountwire declares glove-mounter's protocol (types
// 0x0100-0x01ff): its requests, their replies and descriptors. The helper
// links this package and the wire core, not the other helpers' messages.
package mountwire

import "github.com/glove-sandbox/glove/helpers/wire"

// Protocol is glove-mounter's protocol: Hello (once), Bind, Tmpfs.
var Protocol = wire.NewProtocol("glove-mounter", Bind, Tmpfs)

// The routes: each request, its reply and the descriptors they carry.
var (
	// Bind carries the source descriptor; its reply the detached mount.
	Bind = wire.NewRoute[BindRequest, BindReply](0x0101, 1, 1, false)
	// Tmpfs's reply carries the detached tmpfs.
	Tmpfs = wire.NewRoute[TmpfsRequest, TmpfsReply](0x0103, 0, 1, false)
)

// Bind flags. Undefined bits are refused by the helper, not ignored.
const (
	BindReadOnly uint32 = 1 << 0
	BindNoExec   uint32 = 1 << 1
	BindAll             = BindReadOnly | BindNoExec
)

// Tmpfs flags.
const (
	TmpfsNoExec uint32 = 1 << 0
	TmpfsAll           = TmpfsNoExec
)

// BindRequest asks for a detached recursive clone of the source
// descriptor it carries (a directory or regular file the supervisor
// opened with openat2). The clone is always nosuid,nodev and private.
type BindRequest struct{ Flags uint32 }

// BindReply carries the detached mount.
type BindReply struct{}

// TmpfsRequest asks for a detached tmpfs of SizeBytes (the byte quota), at
// most Inodes inodes, root directory Mode, owned by the requesting peer.
type TmpfsRequest struct {
	SizeBytes uint64
	Inodes    uint64
	Mode      uint32
	Flags     uint32
}

// TmpfsReply carries the detached tmpfs.
type TmpfsReply struct{}

// The inode limit of a tmpfs, derived from its byte quota: one inode per
// BytesPerInode of quota (ext4's default inode_ratio), at least
// MinInodes. glove-mounter's max_tmpfs_inodes is InodesFor of its
// max_tmpfs_bytes in every bounds file Glove ships, so any quota within
// max_tmpfs_bytes gets the inodes it asks for.
//
// Why a ratio at all: an inode is kernel memory that tmpfs does not count
// against its size= quota (about 1 KiB with its dentry, measured on 6.18:
// 100,000 empty files took 96 MB), so without nr_inodes a tmpfs of one
// page could hold millions of empty files. On kernels with memory cgroup
// kernel-memory accounting (cgroup v2; v1 since 4.6 unless booted with
// cgroup.memory=nokmem) that memory is charged to the cgroup of the
// process creating the file, a sandbox's to its memory limit; the ratio
// is the bound where it is not (such a boot, or files gloved creates
// while filling a copy): at most about 1/16 of the quota again in kernel
// memory. The floor lets a small copy hold a small tree of tiny files.
const (
	BytesPerInode = 16 << 10
	MinInodes     = 4096
)

// InodesFor is the inode limit the supervisor asks for with a tmpfs of
// sizeBytes of quota.
func InodesFor(sizeBytes uint64) uint64 { return max(sizeBytes/BytesPerInode, MinInodes) }
