package wire

import (
	"errors"
	"testing"
)

// TestStreamMessagesRoundTrip encodes each glove-streamproxy message and
// decodes it back with the descriptor count its type carries.
func TestStreamMessagesRoundTrip(t *testing.T) {
	roundTrip(t, []Message{
		&StreamOpen{Session: "s-1", Alias: "svc.a_b-c"}, &StreamOpenReply{},
		&StreamStatus{}, &StreamStatusReply{Open: true, Exchanges: 3},
		&StreamStatusReply{Err: "pipelined"},
		&StreamClose{}, &StreamCloseReply{},
	})
}

// TestStreamMessagesRejected is the bad-input table of the stream
// messages' decoders.
func TestStreamMessagesRejected(t *testing.T) {
	body := func(typ MsgType, nfds uint16, payload ...byte) []byte {
		return append(EncodeRawHeader(Version, uint16(typ), 1, uint32(len(payload)), nfds, 0), payload...)
	}
	open := []byte{1, 0, 's', 1, 0, 'a'}
	cases := []struct {
		name string
		buf  []byte
		nfds int
		want error
	}{
		{"open without descriptors", body(MsgStreamOpen, 0, open...), 0, ErrFDCount},
		{"open with two descriptors", body(MsgStreamOpen, 2, open...), 2, ErrFDCount},
		{"open with four descriptors", body(MsgStreamOpen, 4, open...), 4, ErrFDCount},
		{"open without alias", body(MsgStreamOpen, 3, open[:3]...), 3, ErrShortPayload},
		{"open trailing byte", body(MsgStreamOpen, 3, append(open, 0)...), 3, ErrTrailing},
		{"open alias too long", body(MsgStreamOpen, 3, append([]byte{1, 0, 's', 65, 0}, make([]byte, 65)...)...), 3, ErrFieldTooLong},
		{"open reply with a descriptor", body(MsgStreamOpenReply, 1), 1, ErrFDCount},
		{"status with payload", body(MsgStreamStatus, 0, 0), 0, ErrTrailing},
		{"status reply bool 2", body(MsgStreamStatusReply, 0, append([]byte{2}, make([]byte, 10)...)...), 0, ErrBool},
		{"status reply short", body(MsgStreamStatusReply, 0, 1, 0, 0), 0, ErrShortPayload},
		{"status reply err too long", body(MsgStreamStatusReply, 0, append(append([]byte{0}, make([]byte, 8)...), append([]byte{33, 0}, make([]byte, 33)...)...)...), 0, ErrFieldTooLong},
		{"close with a descriptor", body(MsgStreamClose, 1), 1, ErrFDCount},
	}
	for _, c := range cases {
		if _, _, err := DecodeFrame(c.buf, c.nfds); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}
