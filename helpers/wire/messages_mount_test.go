package wire

import (
	"errors"
	"testing"
)

// TestMountMessagesRoundTrip encodes each mount message and decodes it
// back with the descriptor count its type carries.
func TestMountMessagesRoundTrip(t *testing.T) {
	msgs := []Message{
		&Bind{Flags: BindAll}, &BindReply{},
		&Tmpfs{SizeBytes: 1 << 30, Inodes: 1 << 16, Mode: 0o755, Flags: TmpfsNoExec}, &TmpfsReply{},
		&Create{Name: "x.img", SizeBytes: 1 << 26}, &CreateReply{},
		&Attach{Name: "x.img", ReadOnly: true}, &AttachReply{},
		&Freeze{}, &FreezeReply{},
	}
	roundTrip(t, msgs)
}

// TestMountMessagesRejected is the bad-input table of the mount requests'
// decoders.
func TestMountMessagesRejected(t *testing.T) {
	body := func(typ MsgType, nfds uint16, payload ...byte) []byte {
		return append(EncodeRawHeader(Version, uint16(typ), 1, uint32(len(payload)), nfds, 0), payload...)
	}
	cases := []struct {
		name string
		buf  []byte
		nfds int
		want error
	}{
		{"bind without its source descriptor", body(MsgBind, 0, 1, 0, 0, 0), 0, ErrFDCount},
		{"bind with two descriptors", body(MsgBind, 2, 1, 0, 0, 0), 2, ErrFDCount},
		{"bind flags truncated", body(MsgBind, 1, 1, 0), 1, ErrShortPayload},
		{"bind trailing byte", body(MsgBind, 1, 1, 0, 0, 0, 0), 1, ErrTrailing},
		{"tmpfs with a descriptor", body(MsgTmpfs, 1, make([]byte, 24)...), 1, ErrFDCount},
		{"tmpfs short", body(MsgTmpfs, 0, make([]byte, 23)...), 0, ErrShortPayload},
		{"tmpfs trailing", body(MsgTmpfs, 0, make([]byte, 25)...), 0, ErrTrailing},
		{"create name past the end", body(MsgCreate, 1, 10, 0, 'a'), 1, ErrShortPayload},
		{"create name too long", body(MsgCreate, 1, append([]byte{65, 0}, make([]byte, 65+8)...)...), 1, ErrFieldTooLong},
		{"create name with NUL", body(MsgCreate, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), 1, ErrNUL},
		{"attach bool 2", body(MsgAttach, 1, 1, 0, 'a', 2), 1, ErrBool},
		{"attach without root descriptor", body(MsgAttach, 0, 1, 0, 'a', 0), 0, ErrFDCount},
		{"freeze without mount", body(MsgFreeze, 0), 0, ErrFDCount},
		{"freeze with payload", body(MsgFreeze, 1, 0), 1, ErrTrailing},
	}
	for _, c := range cases {
		if _, _, err := DecodeFrame(c.buf, c.nfds); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// TestEveryTypeHasAName keeps names.go in step with the registry.
func TestEveryTypeHasAName(t *testing.T) {
	for typ := range registry {
		if typ >= 0xff00 {
			continue // test-only types
		}
		if _, ok := msgNames[typ]; !ok {
			t.Errorf("type %#04x has no name in names.go", uint16(typ))
		}
	}
}

// roundTrip encodes each message, decodes it back with the descriptor
// count its type carries, and checks the re-encoding is identical.
func roundTrip(t *testing.T, msgs []Message) {
	t.Helper()
	for _, m := range msgs {
		buf, err := EncodeFrame(9, m)
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		_, got, err := DecodeFrame(buf, m.FDs())
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if again, _ := EncodeFrame(9, got); string(again) != string(buf) {
			t.Errorf("%T: re-encoding differs", m)
		}
	}
}
