// SPDX-License-Identifier: Apache-2.0

package cgwire

import (
	"testing"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/wiretest"
)

var samples = []wiretest.Sample{
	wiretest.S(Create.Type(), &CreateRequest{Session: "s1", MemoryBytes: 64 << 20, Pids: 32}), wiretest.S(Create.Type()+1, &CreateReply{Inode: 4242, V1: true}),
	wiretest.S(Place.Type(), &PlaceRequest{Session: "s1"}), wiretest.S(Place.Type()+1, &PlaceReply{}),
	wiretest.S(Kill.Type(), &KillRequest{Session: "s1"}), wiretest.S(Kill.Type()+1, &KillReply{Empty: true}),
	wiretest.S(Remove.Type(), &RemoveRequest{Session: "s1"}), wiretest.S(Remove.Type()+1, &RemoveReply{}),
	wiretest.S(Freeze.Type(), &FreezeRequest{Session: "s1", Frozen: true}), wiretest.S(Freeze.Type()+1, &FreezeReply{Settled: true}),
	wiretest.S(RemoveEmpty.Type(), &RemoveEmptyRequest{Session: "s1"}), wiretest.S(RemoveEmpty.Type()+1, &RemoveEmptyReply{}),
	wiretest.S(Stat.Type(), &StatRequest{Session: "s1"}),
	wiretest.S(Join.Type(), &JoinRequest{Session: "s1"}), wiretest.S(Join.Type()+1, &JoinReply{}),
	wiretest.S(Stat.Type()+1, &StatReply{MemoryPeakBytes: 1, OOMKills: 2, PidsCurrent: 3, PidsPeak: 4, CPUTimeNS: 5}),
	wiretest.S(wire.MsgHello, &wire.Hello{}), wiretest.S(wire.MsgHelloReply, &wire.HelloReply{Name: "glove-cgroup", Protocol: wire.Version}),
}

func name(s string, rest ...byte) []byte {
	return append(append([]byte{byte(len(s)), 0}, s...), rest...)
}

var bad = []wiretest.Bad{
	wiretest.B("create with a descriptor", wiretest.Frame(Create.Type(), 1, name("s", make([]byte, 16)...)...), 1, wire.ErrFDCount),
	wiretest.B("create limits truncated", wiretest.Frame(Create.Type(), 0, name("s", make([]byte, 15)...)...), 0, wire.ErrShortPayload),
	wiretest.B("create trailing byte", wiretest.Frame(Create.Type(), 0, name("s", make([]byte, 17)...)...), 0, wire.ErrTrailing),
	wiretest.B("create name too long", wiretest.Frame(Create.Type(), 0, append([]byte{65, 0}, make([]byte, 65+16)...)...), 0, wire.ErrFieldTooLong),
	wiretest.B("create name with NUL", wiretest.Frame(Create.Type(), 0, name("a\x00", make([]byte, 16)...)...), 0, wire.ErrNUL),
	wiretest.B("create reply with one descriptor", wiretest.Frame(Create.Type()+1, 1, make([]byte, 9)...), 1, wire.ErrFDCount),
	wiretest.B("create reply with two descriptors", wiretest.Frame(Create.Type()+1, 2, make([]byte, 9)...), 2, wire.ErrFDCount),
	wiretest.B("create reply without V1", wiretest.Frame(Create.Type()+1, 4, make([]byte, 8)...), 4, wire.ErrShortPayload),
	wiretest.B("create reply V1 2", wiretest.Frame(Create.Type()+1, 4, append(make([]byte, 8), 2)...), 4, wire.ErrBool),
	wiretest.B("join with a descriptor", wiretest.Frame(Join.Type(), 1, name("s")...), 1, wire.ErrFDCount),
	wiretest.B("join reply with one descriptor", wiretest.Frame(Join.Type()+1, 1), 1, wire.ErrFDCount),
	wiretest.B("join reply with a byte", wiretest.Frame(Join.Type()+1, 2, 0), 2, wire.ErrTrailing),
	wiretest.B("place without the pidfd", wiretest.Frame(Place.Type(), 0, name("s")...), 0, wire.ErrFDCount),
	wiretest.B("place with two descriptors", wiretest.Frame(Place.Type(), 2, name("s")...), 2, wire.ErrFDCount),
	wiretest.B("place name past the end", wiretest.Frame(Place.Type(), 1, 9, 0, 's'), 1, wire.ErrShortPayload),
	wiretest.B("kill with a descriptor", wiretest.Frame(Kill.Type(), 1, name("s")...), 1, wire.ErrFDCount),
	wiretest.B("kill reply bool 2", wiretest.Frame(Kill.Type()+1, 0, 2), 0, wire.ErrBool),
	wiretest.B("remove trailing", wiretest.Frame(Remove.Type(), 0, name("s", 0)...), 0, wire.ErrTrailing),
	wiretest.B("stat empty payload", wiretest.Frame(Stat.Type(), 0), 0, wire.ErrShortPayload),
	wiretest.B("freeze bool 2", wiretest.Frame(Freeze.Type(), 0, 1, 0, 'a', 2), 0, wire.ErrBool),
	wiretest.B("freeze without state", wiretest.Frame(Freeze.Type(), 0, 1, 0, 'a'), 0, wire.ErrShortPayload),
	wiretest.B("freeze with a descriptor", wiretest.Frame(Freeze.Type(), 1, 1, 0, 'a', 1), 1, wire.ErrFDCount),
	wiretest.B("stat reply short", wiretest.Frame(Stat.Type()+1, 0, make([]byte, 39)...), 0, wire.ErrShortPayload),
	wiretest.B("glove-streamproxy's Status", wiretest.Frame(0x0403, 0), 0, wire.ErrNotAccepted),
}

func TestRoundTrip(t *testing.T) { wiretest.RoundTrip(t, Protocol, samples) }

// TestRejects is the bad-input table of glove-cgroup's decoders.
func TestRejects(t *testing.T) { wiretest.Rejects(t, Protocol, bad) }

func FuzzDecode(f *testing.F) { wiretest.Fuzz(f, Protocol, samples, bad) }
