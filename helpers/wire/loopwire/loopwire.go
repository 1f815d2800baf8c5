// SPDX-License-Identifier: Apache-2.0

// Package loopwire declares glove-loopext4's protocol (types
// 0x0200-0x02ff): its requests, their replies and descriptors. The helper
// links this package and the wire core, not the other helpers' messages.
package loopwire

import "github.com/glove-sandbox/glove/helpers/wire"

// Protocol is glove-loopext4's protocol: Hello (once), Create, Attach,
// Freeze.
var Protocol = wire.NewProtocol("glove-loopext4", Create, Attach, Freeze)

// The routes: each request, its reply and the descriptors they carry.
var (
	// Create carries the materialization root.
	Create = wire.NewRoute[CreateRequest, CreateReply](0x0201, 1, 0, false)
	// Attach carries the materialization root; its reply the detached
	// ext4 mount.
	Attach = wire.NewRoute[AttachRequest, AttachReply](0x0203, 1, 1, false)
	// Freeze carries the image mount.
	Freeze = wire.NewRoute[FreezeRequest, FreezeReply](0x0205, 1, 0, false)
)

// MaxImageName bounds an image file name.
const MaxImageName = 64

// CreateRequest asks for image Name of exactly SizeBytes, allocated and
// formatted ext4, in the materialization root whose directory descriptor
// the request carries.
type CreateRequest struct {
	Name      string `wire:"64"`
	SizeBytes uint64
}

// CreateReply says the image exists and is formatted.
type CreateReply struct{}

// AttachRequest asks to attach image Name of the materialization root
// (the carried directory descriptor) to a free autoclear loop device and
// return a detached ext4 mount of it.
type AttachRequest struct {
	Name     string `wire:"64"`
	ReadOnly bool
}

// AttachReply carries the detached mount.
type AttachReply struct{}

// FreezeRequest asks to make the carried detached image mount read-only
// before cleanup.
type FreezeRequest struct{}

// FreezeReply says the mount is read-only.
type FreezeReply struct{}
