package wire

import (
	"fmt"
	"reflect"
)

// MsgType identifies a message. Ranges are reserved per helper; see the
// package documentation.
type MsgType uint16

// Common message types (range 0x0001-0x00ff).
const (
	MsgHello      MsgType = 1
	MsgHelloReply MsgType = 2
	MsgError      MsgType = 3
)

// Field limits. They bound what a peer can make us allocate and keep
// strings short enough to log.
const (
	MaxNameLen  = 64
	MaxErrorLen = 512
	// MaxSessionName bounds a session name, which the helpers check
	// against [a-z0-9][a-z0-9-]{0,63}.
	MaxSessionName = 64
)

// HelloRoute is the first request of every protocol, once per connection:
// the helper answers with a HelloReply describing itself.
var HelloRoute = NewRoute[Hello, HelloReply](MsgHello, 0, 0, true)

// errorKind is the negative reply any request may get.
var errorKind = kind{t: MsgError, goT: reflect.TypeFor[*Error](), name: "Error", make: func() Message { return &Error{} }, fields: fieldsOf[Error]}

// Hello is the supervisor's first request.
type Hello struct{ Empty }

// HelloReply identifies the helper, its protocol version and the
// capabilities it actually holds, so the supervisor can detect a helper
// installed without (or with more than) the expected file capabilities.
type HelloReply struct {
	Name         string // at most MaxNameLen bytes
	Protocol     uint16
	CapEffective uint64
	CapPermitted uint64
}

// Encode writes the fields.
func (m *HelloReply) Encode(e *Encoder) {
	e.String(m.Name, MaxNameLen)
	e.U16(m.Protocol)
	e.U64(m.CapEffective)
	e.U64(m.CapPermitted)
}

// Decode reads the fields.
func (m *HelloReply) Decode(d *Decoder) {
	m.Name = d.String(MaxNameLen)
	m.Protocol = d.U16()
	m.CapEffective = d.U64()
	m.CapPermitted = d.U64()
}

// Error is a helper's negative reply. It also implements the error
// interface, so a call returns it directly and handlers can return it.
type Error struct {
	Code    ErrorCode
	Message string // at most MaxErrorLen bytes
}

// Encode writes the fields; a code not in the package doc is refused.
func (m *Error) Encode(e *Encoder) {
	if _, ok := codeNames[m.Code]; !ok {
		e.err = fmt.Errorf("wire: encode error reply: %w: %d", ErrBadCode, m.Code)
		return
	}
	e.U16(uint16(m.Code))
	e.String(m.Message, MaxErrorLen)
}

// Decode reads the fields.
func (m *Error) Decode(d *Decoder) {
	m.Code = ErrorCode(d.U16())
	m.Message = d.String(MaxErrorLen)
	// Only the codes documented in the package doc exist; both sides are
	// built from this package, so anything else is a malformed reply.
	if _, ok := codeNames[m.Code]; !ok {
		d.Fail(fmt.Errorf("%w: %d", ErrBadCode, m.Code))
	}
}

func (m *Error) Error() string {
	return fmt.Sprintf("wire: %s (%d): %s", m.Code, uint16(m.Code), m.Message)
}
