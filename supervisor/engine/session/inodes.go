// SPDX-License-Identifier: Apache-2.0

package session

// The inode limit of every tmpfs the supervisor asks glove-mounter for
// is derived from its byte quota: one inode per BytesPerInode of quota
// (ext4's default inode_ratio), at least MinInodes. glove-mounter's
// max_tmpfs_inodes is InodesFor of its max_tmpfs_bytes in every bounds
// file Glove ships (packaging's TestShippedProfilesFitShippedBounds), so
// any quota within max_tmpfs_bytes gets the inodes it asks for.
//
// Why a limit at all: an inode is kernel memory that tmpfs does not count
// against its size= quota (about 1 KiB with its dentry, measured on 6.18:
// 100,000 empty files took 96 MB), so without nr_inodes a tmpfs of one
// page could hold millions of empty files. Where memory cgroups account
// kernel memory (cgroup v2; the v1 memory cgroup measured here on 6.18)
// it is charged to the cgroup of the process creating the file, a
// sandbox's to its memory limit; the ratio is the bound where it is not
// (a kernel booted with cgroup.memory=nokmem, or files gloved creates
// while filling a copy): at most about 1/16 of the quota again in kernel
// memory. The floor lets a small copy hold a small tree of tiny files.
const (
	BytesPerInode = 16 << 10
	MinInodes     = 4096
)

// InodesFor is the inode limit the supervisor asks for with a tmpfs of
// sizeBytes of quota.
func InodesFor(sizeBytes uint64) uint64 { return max(sizeBytes/BytesPerInode, MinInodes) }
