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
	MaxNameLen  = 64
	MaxErrorLen = 512
)

// Message is implemented by every message struct (always by pointer). The
// encode/decode methods are unexported so that only this package defines
// messages: the registry, the dispatch table and the documentation stay in
// one place that both sides build from.
type Message interface {
	// Type is the message's type number.
	Type() MsgType
	// FDs is the exact number of descriptors this type carries.
	FDs() int
	encode(*Encoder)
	decode(*Decoder) // errors are recorded in the Decoder
}

// registry maps each known type to a constructor of its zero value.
var registry = map[MsgType]func() Message{
	MsgHello:      func() Message { return &Hello{} },
	MsgHelloReply: func() Message { return &HelloReply{} },
	MsgError:      func() Message { return &Error{} },

	MsgBind:        func() Message { return &Bind{} },
	MsgBindReply:   func() Message { return &BindReply{} },
	MsgTmpfs:       func() Message { return &Tmpfs{} },
	MsgTmpfsReply:  func() Message { return &TmpfsReply{} },
	MsgCreate:      func() Message { return &Create{} },
	MsgCreateReply: func() Message { return &CreateReply{} },
	MsgAttach:      func() Message { return &Attach{} },
	MsgAttachReply: func() Message { return &AttachReply{} },
	MsgFreeze:      func() Message { return &Freeze{} },
	MsgFreezeReply: func() Message { return &FreezeReply{} },

	MsgCgCreate:           func() Message { return &CgCreate{} },
	MsgCgCreateReply:      func() Message { return &CgCreateReply{} },
	MsgCgPlace:            func() Message { return &CgPlace{} },
	MsgCgPlaceReply:       func() Message { return &CgPlaceReply{} },
	MsgCgKill:             func() Message { return &CgKill{} },
	MsgCgKillReply:        func() Message { return &CgKillReply{} },
	MsgCgRemove:           func() Message { return &CgRemove{} },
	MsgCgRemoveReply:      func() Message { return &CgRemoveReply{} },
	MsgCgStat:             func() Message { return &CgStat{} },
	MsgCgStatReply:        func() Message { return &CgStatReply{} },
	MsgCgFreeze:           func() Message { return &CgFreeze{} },
	MsgCgFreezeReply:      func() Message { return &CgFreezeReply{} },
	MsgCgRemoveEmpty:      func() Message { return &CgRemoveEmpty{} },
	MsgCgRemoveEmptyReply: func() Message { return &CgRemoveEmptyReply{} },

	MsgStreamOpen:        func() Message { return &StreamOpen{} },
	MsgStreamOpenReply:   func() Message { return &StreamOpenReply{} },
	MsgStreamStatus:      func() Message { return &StreamStatus{} },
	MsgStreamStatusReply: func() Message { return &StreamStatusReply{} },
	MsgStreamClose:       func() Message { return &StreamClose{} },
	MsgStreamCloseReply:  func() Message { return &StreamCloseReply{} },
}

// New returns a pointer to a zero value of the struct for type t, and false
// if t is not a known type.
func New(t MsgType) (Message, bool) {
	mk, ok := registry[t]
	if !ok {
		return nil, false
	}
	return mk(), true
}

// Hello is the supervisor's first request; the helper answers with a
// HelloReply describing itself.
type Hello struct{}

func (*Hello) Type() MsgType   { return MsgHello }
func (*Hello) FDs() int        { return 0 }
func (*Hello) encode(*Encoder) {}
func (*Hello) decode(*Decoder) {}

// HelloReply identifies the helper, its protocol version and the
// capabilities it actually holds, so the supervisor can detect a helper
// installed without (or with more than) the expected file capabilities.
type HelloReply struct {
	Name         string // at most MaxNameLen bytes
	Protocol     uint16
	CapEffective uint64
	CapPermitted uint64
}

func (*HelloReply) Type() MsgType { return MsgHelloReply }
func (*HelloReply) FDs() int      { return 0 }

func (m *HelloReply) encode(e *Encoder) {
	e.String(m.Name, MaxNameLen)
	e.U16(m.Protocol)
	e.U64(m.CapEffective)
	e.U64(m.CapPermitted)
}

func (m *HelloReply) decode(d *Decoder) {
	m.Name = d.String(MaxNameLen)
	m.Protocol = d.U16()
	m.CapEffective = d.U64()
	m.CapPermitted = d.U64()
}

// Error is a helper's negative reply. It also implements the error
// interface, so Client.Call returns it directly and handlers can return it.
type Error struct {
	Code    ErrorCode
	Message string // at most MaxErrorLen bytes
}

func (*Error) Type() MsgType { return MsgError }
func (*Error) FDs() int      { return 0 }

func (m *Error) encode(e *Encoder) {
	if _, ok := codeNames[m.Code]; !ok {
		e.err = fmt.Errorf("wire: encode error reply: %w: %d", ErrBadCode, m.Code)
		return
	}
	e.U16(uint16(m.Code))
	e.String(m.Message, MaxErrorLen)
}

func (m *Error) decode(d *Decoder) {
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
