package wire

import (
	"errors"
	"testing"
)

// TestCgroupMessagesRoundTrip encodes each cgroup message and decodes it
// back with the descriptor count its type carries.
func TestCgroupMessagesRoundTrip(t *testing.T) {
	msgs := []Message{
		&CgCreate{Session: "s-1", MemoryBytes: 1 << 30, Pids: 64}, &CgCreateReply{Inode: 7},
		&CgPlace{Session: "s-1"}, &CgPlaceReply{},
		&CgKill{Session: "s-1"}, &CgKillReply{Empty: true},
		&CgRemove{Session: "s-1"}, &CgRemoveReply{},
		&CgRemoveEmpty{Session: "s-1"}, &CgRemoveEmptyReply{},
		&CgFreeze{Session: "s-1", Frozen: true}, &CgFreezeReply{Settled: true},
		&CgStat{Session: "s-1"}, &CgStatReply{MemoryPeakBytes: 1, OOMKills: 2, PidsCurrent: 3, PidsPeak: 4, CPUTimeNS: 5},
	}
	roundTrip(t, msgs)
}

// TestCgroupMessagesRejected is the bad-input table of the cgroup
// messages' decoders.
func TestCgroupMessagesRejected(t *testing.T) {
	body := func(typ MsgType, nfds uint16, payload ...byte) []byte {
		return append(EncodeRawHeader(Version, uint16(typ), 1, uint32(len(payload)), nfds, 0), payload...)
	}
	name := func(s string, rest ...byte) []byte {
		return append(append([]byte{byte(len(s)), 0}, s...), rest...)
	}
	cases := []struct {
		name string
		buf  []byte
		nfds int
		want error
	}{
		{"create with a descriptor", body(MsgCgCreate, 1, name("s", make([]byte, 16)...)...), 1, ErrFDCount},
		{"create limits truncated", body(MsgCgCreate, 0, name("s", make([]byte, 15)...)...), 0, ErrShortPayload},
		{"create trailing byte", body(MsgCgCreate, 0, name("s", make([]byte, 17)...)...), 0, ErrTrailing},
		{"create name too long", body(MsgCgCreate, 0, append([]byte{65, 0}, make([]byte, 65+16)...)...), 0, ErrFieldTooLong},
		{"create name with NUL", body(MsgCgCreate, 0, name("a\x00", make([]byte, 16)...)...), 0, ErrNUL},
		{"create reply with one descriptor", body(MsgCgCreateReply, 1, make([]byte, 8)...), 1, ErrFDCount},
		{"create reply with two descriptors", body(MsgCgCreateReply, 2, make([]byte, 8)...), 2, ErrFDCount},
		{"place without the pidfd", body(MsgCgPlace, 0, name("s")...), 0, ErrFDCount},
		{"place with two descriptors", body(MsgCgPlace, 2, name("s")...), 2, ErrFDCount},
		{"place name past the end", body(MsgCgPlace, 1, 9, 0, 's'), 1, ErrShortPayload},
		{"kill with a descriptor", body(MsgCgKill, 1, name("s")...), 1, ErrFDCount},
		{"kill reply bool 2", body(MsgCgKillReply, 0, 2), 0, ErrBool},
		{"remove trailing", body(MsgCgRemove, 0, name("s", 0)...), 0, ErrTrailing},
		{"stat empty payload", body(MsgCgStat, 0), 0, ErrShortPayload},
		{"freeze bool 2", body(MsgCgFreeze, 0, 1, 0, 'a', 2), 0, ErrBool},
		{"freeze without state", body(MsgCgFreeze, 0, 1, 0, 'a'), 0, ErrShortPayload},
		{"freeze with a descriptor", body(MsgCgFreeze, 1, 1, 0, 'a', 1), 1, ErrFDCount},
		{"stat reply short", body(MsgCgStatReply, 0, make([]byte, 39)...), 0, ErrShortPayload},
	}
	for _, c := range cases {
		if _, _, err := DecodeFrame(c.buf, c.nfds); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}
