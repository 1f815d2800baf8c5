package wire

import (
	"errors"
	"fmt"
)

// Sentinel errors, one per rule, so tests and callers can tell exactly which
// check a frame failed with errors.Is. Peer faults reach callers wrapped in
// a *ProtocolError.
var (
	// Frame (header and transport) rules.
	ErrShortFrame       = errors.New("frame shorter than header")
	ErrVersion          = errors.New("unsupported protocol version")
	ErrFlags            = errors.New("reserved flags set")
	ErrLength           = errors.New("payload length does not match bytes received")
	ErrTooLarge         = errors.New("frame larger than MaxMessage")
	ErrTooManyFDs       = errors.New("more than MaxFDs descriptors")
	ErrFDCount          = errors.New("descriptor count mismatch")
	ErrUnknownType      = errors.New("unknown message type")
	ErrTruncated        = errors.New("message truncated by the kernel (MSG_TRUNC)")
	ErrControlTruncated = errors.New("control data truncated by the kernel (MSG_CTRUNC)")
	ErrControl          = errors.New("unexpected control message")

	// Payload rules.
	ErrTrailing     = errors.New("trailing bytes after payload")
	ErrShortPayload = errors.New("payload ends inside a field")
	ErrBool         = errors.New("bool byte not 0 or 1")
	ErrFieldTooLong = errors.New("field longer than its maximum")
	ErrInvalidUTF8  = errors.New("string is not valid UTF-8")
	ErrNUL          = errors.New("string contains NUL")
	ErrBadCode      = errors.New("unknown error code")

	// Conversation rules (Server and Client).
	ErrRequestID   = errors.New("request id not strictly increasing or not echoed")
	ErrNotAccepted = errors.New("message type not accepted by this helper")
	ErrRepeated    = errors.New("once-only request repeated")

	// ErrInvalidMessage marks a local refusal to send: the message or its
	// descriptors do not satisfy the rules the peer would enforce. It is a
	// bug on the sending side, never a peer fault.
	ErrInvalidMessage = errors.New("invalid outgoing message")
)

// ProtocolError reports a fault of the peer: a frame or conversation that
// breaks the protocol. Helpers treat it as fatal (the peer is misbehaving,
// possibly compromised), unlike I/O errors or request-level *Error replies.
type ProtocolError struct {
	Op  string
	Err error
}

func (e *ProtocolError) Error() string { return "wire: " + e.Op + ": protocol error: " + e.Err.Error() }

// Unwrap returns the underlying rule violation.
func (e *ProtocolError) Unwrap() error { return e.Err }

func protoErr(op string, sentinel error, format string, args ...any) *ProtocolError {
	if format == "" {
		return &ProtocolError{Op: op, Err: sentinel}
	}
	return &ProtocolError{Op: op, Err: fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)}
}

// ErrorCode is the stable numeric reason carried by an [Error] reply. The
// numbers are part of the protocol and are documented in the package doc.
type ErrorCode uint16

// Error codes. Never renumber these.
const (
	ErrProtocol    ErrorCode = 1
	ErrBadRequest  ErrorCode = 2
	ErrRefused     ErrorCode = 3
	ErrInternal    ErrorCode = 4
	ErrUnsupported ErrorCode = 5
)

var codeNames = map[ErrorCode]string{
	ErrProtocol:    "protocol error",
	ErrBadRequest:  "bad request",
	ErrRefused:     "refused",
	ErrInternal:    "internal error",
	ErrUnsupported: "unsupported",
}

func (c ErrorCode) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("ErrorCode(%d)", uint16(c))
}
