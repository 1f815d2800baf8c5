// SPDX-License-Identifier: Apache-2.0

// Package streamwire declares glove-streamproxy's protocol (types
// 0x0400-0x04ff). One helper process serves one inherited-stream-v1
// stream: Open hands it the three descriptors once, Status and Close then
// observe and cancel that stream. The helper links this package and the
// wire core, not the other helpers' messages.
package streamwire

import "github.com/glove-sandbox/glove/helpers/wire"

// Protocol is glove-streamproxy's protocol: Hello (once), Open (once),
// Status, Close.
var Protocol = wire.NewProtocol("glove-streamproxy", Open, Status, Close)

// The routes: each request, its reply and the descriptors they carry.
var (
	// Open carries the guest end, the upstream and the audit file.
	Open   = wire.NewRoute[OpenRequest, OpenReply](0x0401, 3, 0, true)
	Status = wire.NewRoute[StatusRequest, StatusReply](0x0403, 0, 0, false)
	Close  = wire.NewRoute[CloseRequest, CloseReply](0x0405, 0, 0, false)
)

// Field limits of the stream messages.
const (
	// MaxAliasLen bounds a service alias (an identifier,
	// [a-z0-9][a-z0-9._-]{0,63}).
	MaxAliasLen = 64
	// MaxErrLen bounds the stable error code of a closed stream.
	MaxErrLen = 32
)

// OpenRequest asks the helper to serve one stream. It carries exactly
// three descriptors, in this order: the proxy's end of the sandbox's
// AF_UNIX SOCK_STREAM socketpair (the guest end), the connected AF_UNIX
// SOCK_STREAM upstream connection, and the audit file, a regular file
// owned by the service user and opened O_WRONLY|O_APPEND. Session
// ([a-z0-9][a-z0-9-]{0,63}) and Alias (an identifier) are written into
// every audit record.
type OpenRequest struct {
	Session string `wire:"64"`
	Alias   string `wire:"64"`
}

// OpenReply says the descriptors passed their checks and the relay runs.
type OpenReply struct{}

// StatusRequest asks whether the stream is still open.
type StatusRequest struct{}

// StatusReply reports the stream: Open until it closed for good,
// Exchanges the exchanges recorded delivered, and Err, once closed, the
// stable code of the reason (see glove-streamproxy's documentation:
// eof, framing, pipelined, upstream_drift, timeout, canceled, audit,
// transport, internal).
type StatusReply struct {
	Open      bool
	Exchanges uint64
	Err       string `wire:"32"`
}

// CloseRequest cancels the stream. The reply comes once the relay has
// stopped and written its last audit record.
type CloseRequest struct{}

// CloseReply says the stream is closed.
type CloseReply struct{}
