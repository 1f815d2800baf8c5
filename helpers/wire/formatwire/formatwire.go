// SPDX-License-Identifier: Apache-2.0

// Package formatwire declares the protocol between glove-loopext4 and its
// formatter (helpers/loopext4format): one request, a Create's file work.
// Only those two executables link it; the supervisor never speaks it.
package formatwire

import (
	"time"

	"github.com/glove-sandbox/glove/helpers/wire"
)

// Protocol is the formatter's protocol: Hello (once), Format.
var Protocol = wire.NewProtocol("glove-loopext4-format", Format)

// Format carries the root and mkfs.ext4 (O_PATH); its reply the new image.
var Format = wire.NewRoute[FormatRequest, FormatReply](0x02f1, 2, 1, false)

// FormatRequest asks for image Name of exactly SizeBytes in the root,
// allocated, mode 0600, formatted ext4 with its root directory UID:GID's.
type FormatRequest struct {
	Name      string `wire:"64"`
	SizeBytes uint64
	UID, GID  uint32
}

// FormatReply carries the image (O_PATH). A failure is an Error instead:
// ErrRefused if the name exists, else nothing made is left.
type FormatReply struct{}

// Timeout bounds one format in the formatter: mkfs.ext4 writes metadata only
// (seconds for 1 TiB); a format that hangs must not wedge the helper for ever.
const Timeout = 10 * time.Minute
