package wire

// Messages of glove-streamproxy (0x0400-0x04ff). One helper process serves
// one inherited-stream-v1 stream: StreamOpen hands it the three
// descriptors once, StreamStatus and StreamClose then observe and cancel
// that stream.

const (
	MsgStreamOpen        MsgType = 0x0401
	MsgStreamOpenReply   MsgType = 0x0402
	MsgStreamStatus      MsgType = 0x0403
	MsgStreamStatusReply MsgType = 0x0404
	MsgStreamClose       MsgType = 0x0405
	MsgStreamCloseReply  MsgType = 0x0406
)

// Field limits of the stream messages.
const (
	// MaxAliasLen bounds a service alias (an identifier,
	// [a-z0-9][a-z0-9._-]{0,63}).
	MaxAliasLen = 64
	// MaxStreamErrLen bounds the stable error code of a closed stream.
	MaxStreamErrLen = 32
)

// StreamOpen asks glove-streamproxy to serve one stream. It carries
// exactly three descriptors, in this order: the proxy's end of the
// sandbox's AF_UNIX SOCK_STREAM socketpair (the guest end), the connected
// AF_UNIX SOCK_STREAM upstream connection, and the audit file, a regular
// file owned by the service user and opened O_WRONLY|O_APPEND. Session
// ([a-z0-9][a-z0-9-]{0,63}) and Alias (an identifier) are written into
// every audit record.
type StreamOpen struct {
	Session string
	Alias   string
}

func (*StreamOpen) Type() MsgType { return MsgStreamOpen }
func (*StreamOpen) FDs() int      { return 3 }
func (m *StreamOpen) encode(e *Encoder) {
	e.String(m.Session, MaxSessionName)
	e.String(m.Alias, MaxAliasLen)
}
func (m *StreamOpen) decode(d *Decoder) {
	m.Session = d.String(MaxSessionName)
	m.Alias = d.String(MaxAliasLen)
}

// StreamOpenReply says the descriptors passed their checks and the relay
// runs.
type StreamOpenReply struct{}

func (*StreamOpenReply) Type() MsgType   { return MsgStreamOpenReply }
func (*StreamOpenReply) FDs() int        { return 0 }
func (*StreamOpenReply) encode(*Encoder) {}
func (*StreamOpenReply) decode(*Decoder) {}

// StreamStatus asks whether the stream is still open.
type StreamStatus struct{}

func (*StreamStatus) Type() MsgType   { return MsgStreamStatus }
func (*StreamStatus) FDs() int        { return 0 }
func (*StreamStatus) encode(*Encoder) {}
func (*StreamStatus) decode(*Decoder) {}

// StreamStatusReply reports the stream: Open until it closed for good,
// Exchanges the exchanges recorded delivered, and Err, once closed, the
// stable code of the reason (see glove-streamproxy's documentation:
// eof, framing, pipelined, upstream_drift, timeout, canceled, audit,
// transport, internal).
type StreamStatusReply struct {
	Open      bool
	Exchanges uint64
	Err       string
}

func (*StreamStatusReply) Type() MsgType { return MsgStreamStatusReply }
func (*StreamStatusReply) FDs() int      { return 0 }
func (m *StreamStatusReply) encode(e *Encoder) {
	e.Bool(m.Open)
	e.U64(m.Exchanges)
	e.String(m.Err, MaxStreamErrLen)
}
func (m *StreamStatusReply) decode(d *Decoder) {
	m.Open = d.Bool()
	m.Exchanges = d.U64()
	m.Err = d.String(MaxStreamErrLen)
}

// StreamClose cancels the stream. The reply comes once the relay has
// stopped and written its last audit record.
type StreamClose struct{}

func (*StreamClose) Type() MsgType   { return MsgStreamClose }
func (*StreamClose) FDs() int        { return 0 }
func (*StreamClose) encode(*Encoder) {}
func (*StreamClose) decode(*Decoder) {}

// StreamCloseReply says the stream is closed.
type StreamCloseReply struct{}

func (*StreamCloseReply) Type() MsgType   { return MsgStreamCloseReply }
func (*StreamCloseReply) FDs() int        { return 0 }
func (*StreamCloseReply) encode(*Encoder) {}
func (*StreamCloseReply) decode(*Decoder) {}
