// SPDX-License-Identifier: Apache-2.0

// Package userwire declares glove-userns's protocol (types 0x0500-0x05ff).
// One helper process serves one session: Create (once) asks it for an
// empty user namespace owned by the service user, with one-id maps, and
// the reply carries the namespace's descriptor. The helper links this
// package and the wire core, not the other helpers' messages.
package userwire

import "github.com/glove-sandbox/glove/helpers/wire"

// Protocol is glove-userns's protocol: Hello, then Create once.
var Protocol = wire.NewProtocol("glove-userns", Create)

// Create carries no descriptor and is answered with one: the user
// namespace (a /proc/PID/ns/user descriptor, O_RDONLY). Once per
// connection, so one helper process makes at most one namespace.
var Create = wire.NewRoute[CreateRequest, CreateReply](0x0501, 0, 1, true)

// MaxSessionLen bounds a session identifier ([a-z0-9][a-z0-9-]{0,63}).
const MaxSessionLen = 64

// CreateRequest names the session the namespace is for (written into the
// helper's log line, nothing else) and the two maps the namespace is to
// get, each one extent: Inside, Outside, Count as in
// /proc/PID/uid_map. The helper accepts exactly one map each: one id
// inside (the sandbox's user, any id but -1) onto its own uid (gid),
// count 1. The request says the outside id and count anyway so that a
// supervisor that asks for anything else is refused in words, not
// silently given the one map.
type CreateRequest struct {
	Session    string `wire:"64"`
	UIDInside  uint32
	UIDOutside uint32
	UIDCount   uint32
	GIDInside  uint32
	GIDOutside uint32
	GIDCount   uint32
}

// CreateReply carries the namespace's descriptor and its identity as the
// helper saw it (the namespace file's inode), for the supervisor's log and
// its check of the descriptor it received.
type CreateReply struct {
	Inode uint64
}
