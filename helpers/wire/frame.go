package wire

import (
	"encoding/binary"
	"fmt"
	"reflect"
)

// Frame limits.
const (
	Version    = 1
	HeaderSize = 16
	MaxMessage = 65536 // header + payload
	MaxPayload = MaxMessage - HeaderSize
	MaxFDs     = 4
)

// Header field offsets.
const (
	offVersion = 0
	offType    = 2
	offReqID   = 4
	offLength  = 8
	offFDs     = 12
	offFlags   = 14
)

// EncodeRawHeader returns a 16-byte header with arbitrary field values. It
// performs no validation on purpose: it exists so tests (here and in the
// helpers' integration tests) can forge malformed frames.
func EncodeRawHeader(version, typ uint16, reqID, payloadLen uint32, nfds, flags uint16) []byte {
	h := make([]byte, HeaderSize)
	binary.LittleEndian.PutUint16(h[offVersion:], version)
	binary.LittleEndian.PutUint16(h[offType:], typ)
	binary.LittleEndian.PutUint32(h[offReqID:], reqID)
	binary.LittleEndian.PutUint32(h[offLength:], payloadLen)
	binary.LittleEndian.PutUint16(h[offFDs:], nfds)
	binary.LittleEndian.PutUint16(h[offFlags:], flags)
	return h
}

// encodeFrame encodes m, of kind k, as a complete frame (header and
// payload) with request id reqID. Errors wrap [ErrInvalidMessage].
func encodeFrame(reqID uint32, k *kind, m Message) ([]byte, error) {
	v := reflect.ValueOf(m)
	if m == nil || v.Type() != k.goT || v.IsNil() {
		return nil, fmt.Errorf("wire: encode frame %s: %w: message %T", k, ErrInvalidMessage, m)
	}
	e := NewEncoder(EncodeRawHeader(Version, uint16(k.t), reqID, 0, uint16(k.fds), 0))
	if c, ok := m.(checker); ok {
		if err := c.check(); err != nil {
			return nil, fmt.Errorf("wire: encode frame %s: %w: %w", k, ErrInvalidMessage, err)
		}
	}
	encodeFields(e, v.Elem(), k.fields)
	if err := e.Err(); err != nil {
		return nil, fmt.Errorf("wire: encode frame %s: %w: %w", k, ErrInvalidMessage, err)
	}
	buf := e.Encoded()
	if len(buf) > MaxMessage {
		return nil, fmt.Errorf("wire: encode frame %s: %w: %d bytes exceeds %d", k, ErrInvalidMessage, len(buf), MaxMessage)
	}
	binary.LittleEndian.PutUint32(buf[offLength:], uint32(len(buf)-HeaderSize))
	return buf, nil
}

// testHookDecode, when set by a test, is called with each type whose
// payload is about to be decoded.
var testHookDecode func(MsgType)

// decodeFrame validates one received frame and decodes its message, given
// the number of descriptors that arrived with it and the types this end
// Admits: any other type is refused with ErrNotAccepted from the header
// alone, its payload never decoded (threat: a compromised supervisor
// reaching the decoder of a message the helper does not accept). It is
// the pure part of [Conn.Recv]: it touches no descriptors. Every failure
// is a *ProtocolError wrapping the sentinel of the rule that failed.
// Checks run cheapest-first and nothing is allocated for the payload
// until the header has been fully validated.
func decodeFrame(buf []byte, nfds int, a Admits) (reqID uint32, m Message, err error) {
	const op = "decode frame"
	if len(buf) < HeaderSize {
		return 0, nil, protoErr(op, ErrShortFrame, "%d bytes", len(buf))
	}
	version := binary.LittleEndian.Uint16(buf[offVersion:])
	typ := MsgType(binary.LittleEndian.Uint16(buf[offType:]))
	reqID = binary.LittleEndian.Uint32(buf[offReqID:])
	plen := binary.LittleEndian.Uint32(buf[offLength:])
	declFDs := int(binary.LittleEndian.Uint16(buf[offFDs:]))
	flags := binary.LittleEndian.Uint16(buf[offFlags:])

	switch {
	case version != Version:
		return 0, nil, protoErr(op, ErrVersion, "got %d, want %d", version, Version)
	case flags != 0:
		return 0, nil, protoErr(op, ErrFlags, "%#04x", flags)
	case plen > MaxPayload:
		return 0, nil, protoErr(op, ErrTooLarge, "declared payload %d bytes", plen)
	case len(buf) > MaxMessage:
		return 0, nil, protoErr(op, ErrTooLarge, "frame %d bytes", len(buf))
	case int(plen) != len(buf)-HeaderSize:
		return 0, nil, protoErr(op, ErrLength, "declared %d, received %d", plen, len(buf)-HeaderSize)
	case declFDs > MaxFDs || nfds > MaxFDs:
		return 0, nil, protoErr(op, ErrTooManyFDs, "declared %d, received %d", declFDs, nfds)
	case declFDs != nfds:
		return 0, nil, protoErr(op, ErrFDCount, "declared %d, received %d", declFDs, nfds)
	}
	k, ok := a.kind(typ)
	if !ok {
		return 0, nil, protoErr(op, ErrNotAccepted, "type %#04x", uint16(typ))
	}
	if k.fds != declFDs {
		return 0, nil, protoErr(op, ErrFDCount, "%s carries %d, frame has %d", k, k.fds, declFDs)
	}
	if testHookDecode != nil {
		testHookDecode(typ)
	}
	m = k.zero()
	d := NewDecoder(buf[HeaderSize:])
	decodeFields(d, reflect.ValueOf(m).Elem(), k.fields)
	if c, ok := m.(checker); ok && d.Err() == nil {
		if err := c.check(); err != nil {
			d.Fail(err)
		}
	}
	if err := d.Finish(); err != nil {
		return 0, nil, &ProtocolError{Op: fmt.Sprintf("%s %s", op, k), Err: err}
	}
	return reqID, m, nil
}
