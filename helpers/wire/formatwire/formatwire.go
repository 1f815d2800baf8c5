// Package formatwire declares the protocol between glove-loopext4 and its
// formatter, glove-loopext4-format (helpers/loopext4format): one request
// a Create, carrying the new image and the checked mkfs.ext4 (O_PATH).
// Only those two executables link it; the supervisor never speaks it.
package formatwire

import (
	"time"

	"github.com/glove-sandbox/glove/helpers/wire"
)

// Protocol is the formatter's protocol: Hello (once), Format.
var Protocol = wire.NewProtocol("glove-loopext4-format", Format)

// Format carries the image and mkfs.ext4, in that order.
var Format = wire.NewRoute[FormatRequest, FormatReply](0x02f1, 2, 0, false)

// FormatRequest asks for one format; UID and GID own the new file
// system's root directory.
type FormatRequest struct{ UID, GID uint32 }

// FormatReply is mkfs.ext4's outcome: Failed with its diagnostics.
type FormatReply struct {
	Failed bool
	Err    string `wire:"512"`
}

// Timeout bounds one format in the formatter. mkfs.ext4 writes only
// metadata (nodiscard, lazy inode tables), so even a 1 TiB image takes
// seconds; a format that hangs must not wedge the helper for ever.
const Timeout = 10 * time.Minute
