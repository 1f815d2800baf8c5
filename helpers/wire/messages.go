package wire

import "fmt"

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
	MaxNameLen  = 64  // HelloReply.Name
	MaxErrorLen = 512 // Error.Message
	// MaxSessionName bounds a session name, which the helpers check
	// against [a-z0-9][a-z0-9-]{0,63}.
	MaxSessionName = 64
)

// HelloRoute is the first request of every protocol, once per connection:
// the helper answers with a HelloReply describing itself.
var HelloRoute = NewRoute[Hello, HelloReply](MsgHello, 0, 0, true)

// errorKind is the negative reply any request may get.
var errorKind = kindOf[Error](MsgError, 0)

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

// Error is a helper's negative reply. It also implements the error
// interface, so a call returns it directly and handlers can return it.
type Error struct {
	Code    ErrorCode
	Message string `wire:"512"`
}

// check admits only the codes of the package doc: both sides are built
// from this package, so anything else is a malformed reply.
func (m *Error) check() error {
	if _, ok := codeNames[m.Code]; !ok {
		return fmt.Errorf("%w: %d", ErrBadCode, m.Code)
	}
	return nil
}

func (m *Error) Error() string {
	return fmt.Sprintf("wire: %s (%d): %s", m.Code, uint16(m.Code), m.Message)
}
