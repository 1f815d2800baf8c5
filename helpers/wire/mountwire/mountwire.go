// SPDX-License-Identifier: Apache-2.0

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
