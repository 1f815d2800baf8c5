// SPDX-License-Identifier: Apache-2.0

// Package wire is the protocol between the unprivileged glove supervisor
// and its privileged helpers: one frame per sendmsg(2) on an AF_UNIX
// SOCK_SEQPACKET socket pair, descriptors in SCM_RIGHTS.
//
// Threat model: a compromised supervisor must not turn a helper into a
// confused deputy, so every decoding path assumes a hostile peer. Lengths
// are checked against the bytes received before anything is sliced or
// allocated; unknown types, flags, control messages and trailing bytes
// are refused, not ignored; a type the receiver does not admit is refused
// from the header, before its payload is decoded; and every descriptor a
// frame brings is handed over as an *os.File or closed before an error
// returns. docs/helpers.md ("The wire format") gives the frame, the field
// encoding, the type ranges and the error codes.
package wire

import (
	"errors"
	"fmt"
)

// MsgType identifies a message; ranges are reserved per helper.
type MsgType uint16

// Common message types, and limits that bound what a peer can make us
// allocate.
const (
	MsgHello      MsgType = 1
	MsgHelloReply MsgType = 2
	MsgError      MsgType = 3

	Version     = 1
	HeaderSize  = 16
	MaxMessage  = 65536 // header + payload
	MaxPayload  = MaxMessage - HeaderSize
	MaxFDs      = 4
	MaxErrorLen = 512 // Error.Message
)

// HelloRoute is the first request of every protocol, once per connection.
var HelloRoute = NewRoute[Hello, HelloReply](MsgHello, 0, 0, true)

var errorKind = kindOf[Error](MsgError, 0) // any request's negative reply

// Hello is the supervisor's first request.
type Hello struct{}

// HelloReply identifies the helper, its protocol version and the
// capabilities it actually holds, so the supervisor can detect a helper
// installed without (or with more than) the expected file capabilities.
type HelloReply struct {
	Name         string `wire:"64"`
	Protocol     uint16
	CapEffective uint64
	CapPermitted uint64
}

// Error is a helper's negative reply, and an error: a call returns it,
// a handler may return it.
type Error struct {
	Code    ErrorCode
	Message string `wire:"512"`
}

// check admits only the documented codes: both sides are built from this
// package, so anything else is a malformed reply.
func (m *Error) check() error {
	if m.Code < ErrProtocol || int(m.Code) >= len(codeNames) {
		return fmt.Errorf("%w: %d", ErrBadCode, m.Code)
	}
	return nil
}

func (m *Error) Error() string {
	return fmt.Sprintf("wire: %s (%d): %s", m.Code, uint16(m.Code), m.Message)
}

// ErrorCode is the stable reason an [Error] carries. Never renumber.
type ErrorCode uint16

// Error codes.
const (
	ErrProtocol    ErrorCode = 1 // malformed or unpermitted frame; the helper exits
	ErrBadRequest  ErrorCode = 2 // well-formed request with invalid fields
	ErrRefused     ErrorCode = 3 // request outside the helper's root-owned bounds
	ErrInternal    ErrorCode = 4 // the helper failed for reasons of its own
	ErrUnsupported ErrorCode = 5 // recognised, not supported by this build
)

var codeNames = [...]string{"", "protocol error", "bad request", "refused", "internal error", "unsupported"}

func (c ErrorCode) String() string {
	if c < ErrProtocol || int(c) >= len(codeNames) {
		return fmt.Sprintf("ErrorCode(%d)", uint16(c))
	}
	return codeNames[c]
}

// Sentinel errors, one per rule, so callers and tests tell with errors.Is
// which check failed. A peer's fault comes wrapped in a *ProtocolError.
var (
	ErrShortFrame       = errors.New("frame shorter than header")
	ErrVersion          = errors.New("unsupported protocol version")
	ErrFlags            = errors.New("reserved flags set")
	ErrLength           = errors.New("payload length does not match bytes received")
	ErrTooLarge         = errors.New("frame larger than MaxMessage")
	ErrTooManyFDs       = errors.New("more than MaxFDs descriptors")
	ErrFDCount          = errors.New("descriptor count mismatch")
	ErrTruncated        = errors.New("message truncated by the kernel (MSG_TRUNC)")
	ErrControlTruncated = errors.New("control data truncated by the kernel (MSG_CTRUNC)")
	ErrControl          = errors.New("unexpected control message")
	ErrTrailing         = errors.New("trailing bytes after payload")
	ErrShortPayload     = errors.New("payload ends inside a field")
	ErrBool             = errors.New("bool byte not 0 or 1")
	ErrFieldTooLong     = errors.New("field longer than its maximum")
	ErrInvalidUTF8      = errors.New("string is not valid UTF-8")
	ErrNUL              = errors.New("string contains NUL")
	ErrBadCode          = errors.New("unknown error code")
	ErrRequestID        = errors.New("request id not strictly increasing or not echoed")
	ErrNotAccepted      = errors.New("message type not accepted by this helper")
	ErrRepeated         = errors.New("once-only request repeated")
	// ErrInvalidMessage is a refusal to send what the peer would refuse:
	// a bug of the sending side, never a peer fault.
	ErrInvalidMessage = errors.New("invalid outgoing message")
)

// ProtocolError is a fault of the peer, fatal to a helper: the peer is
// misbehaving, possibly compromised.
type ProtocolError struct {
	Op  string
	Err error // the rule violated
}

func (e *ProtocolError) Error() string { return "wire: " + e.Op + ": protocol error: " + e.Err.Error() }
func (e *ProtocolError) Unwrap() error { return e.Err }

func protoErr(op string, sentinel error, format string, args ...any) *ProtocolError {
	return &ProtocolError{Op: op, Err: fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)}
}
