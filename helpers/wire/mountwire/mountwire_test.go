// SPDX-License-Identifier: Apache-2.0

package mountwire

import (
	"testing"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/wiretest"
)

var samples = []wiretest.Sample{
	wiretest.S(Bind.Type(), &BindRequest{Flags: BindAll}), wiretest.S(Bind.Type()+1, &BindReply{}),
	wiretest.S(Tmpfs.Type(), &TmpfsRequest{SizeBytes: 1 << 30, Inodes: 1 << 16, Mode: 0o755, Flags: TmpfsNoExec}),
	wiretest.S(Tmpfs.Type()+1, &TmpfsReply{}),
	wiretest.S(wire.MsgHello, &wire.Hello{}), wiretest.S(wire.MsgHelloReply, &wire.HelloReply{Name: "glove-mounter", Protocol: wire.Version}),
}

var bad = []wiretest.Bad{
	wiretest.B("bind without its source descriptor", wiretest.Frame(Bind.Type(), 0, 1, 0, 0, 0), 0, wire.ErrFDCount),
	wiretest.B("bind with two descriptors", wiretest.Frame(Bind.Type(), 2, 1, 0, 0, 0), 2, wire.ErrFDCount),
	wiretest.B("bind flags truncated", wiretest.Frame(Bind.Type(), 1, 1, 0), 1, wire.ErrShortPayload),
	wiretest.B("bind trailing byte", wiretest.Frame(Bind.Type(), 1, 1, 0, 0, 0, 0), 1, wire.ErrTrailing),
	wiretest.B("bind reply without the mount", wiretest.Frame(Bind.Type()+1, 0), 0, wire.ErrFDCount),
	wiretest.B("tmpfs with a descriptor", wiretest.Frame(Tmpfs.Type(), 1, make([]byte, 24)...), 1, wire.ErrFDCount),
	wiretest.B("tmpfs short", wiretest.Frame(Tmpfs.Type(), 0, make([]byte, 23)...), 0, wire.ErrShortPayload),
	wiretest.B("tmpfs trailing", wiretest.Frame(Tmpfs.Type(), 0, make([]byte, 25)...), 0, wire.ErrTrailing),
	wiretest.B("tmpfs reply with payload", wiretest.Frame(Tmpfs.Type()+1, 1, 0), 1, wire.ErrTrailing),
	wiretest.B("glove-loopext4's Create", wiretest.Frame(0x0201, 1, 1, 0, 'a', 0, 0, 0, 0, 0, 0, 0, 0), 1, wire.ErrNotAccepted),
}

func TestRoundTrip(t *testing.T) { wiretest.RoundTrip(t, Protocol, samples) }

// TestRejects is the bad-input table of glove-mounter's decoders.
func TestRejects(t *testing.T) { wiretest.Rejects(t, Protocol, bad) }

func FuzzDecode(f *testing.F) { wiretest.Fuzz(f, Protocol, samples, bad) }
