// SPDX-License-Identifier: Apache-2.0

package loopwire

import (
	"testing"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/wiretest"
)

var samples = []wiretest.Sample{
	wiretest.S(Create.Type(), &CreateRequest{Name: "x.img", SizeBytes: 1 << 26}), wiretest.S(Create.Type()+1, &CreateReply{}),
	wiretest.S(Attach.Type(), &AttachRequest{Name: "x.img", ReadOnly: true}), wiretest.S(Attach.Type()+1, &AttachReply{}),
	wiretest.S(Freeze.Type(), &FreezeRequest{}), wiretest.S(Freeze.Type()+1, &FreezeReply{}),
	wiretest.S(wire.MsgHello, &wire.Hello{}), wiretest.S(wire.MsgHelloReply, &wire.HelloReply{Name: "glove-loopext4", Protocol: wire.Version}),
}

var bad = []wiretest.Bad{
	wiretest.B("create name past the end", wiretest.Frame(Create.Type(), 1, 10, 0, 'a'), 1, wire.ErrShortPayload),
	wiretest.B("create name too long", wiretest.Frame(Create.Type(), 1, append([]byte{65, 0}, make([]byte, 65+8)...)...), 1, wire.ErrFieldTooLong),
	wiretest.B("create name with NUL", wiretest.Frame(Create.Type(), 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), 1, wire.ErrNUL),
	wiretest.B("create without the root", wiretest.Frame(Create.Type(), 0, 1, 0, 'a', 0, 0, 0, 0, 0, 0, 0, 0), 0, wire.ErrFDCount),
	wiretest.B("attach bool 2", wiretest.Frame(Attach.Type(), 1, 1, 0, 'a', 2), 1, wire.ErrBool),
	wiretest.B("attach without root descriptor", wiretest.Frame(Attach.Type(), 0, 1, 0, 'a', 0), 0, wire.ErrFDCount),
	wiretest.B("attach reply without the mount", wiretest.Frame(Attach.Type()+1, 0), 0, wire.ErrFDCount),
	wiretest.B("freeze without mount", wiretest.Frame(Freeze.Type(), 0), 0, wire.ErrFDCount),
	wiretest.B("freeze with payload", wiretest.Frame(Freeze.Type(), 1, 0), 1, wire.ErrTrailing),
	wiretest.B("glove-mounter's Bind", wiretest.Frame(0x0101, 1, 1, 0, 0, 0), 1, wire.ErrNotAccepted),
}

func TestRoundTrip(t *testing.T) { wiretest.RoundTrip(t, Protocol, samples) }

// TestRejects is the bad-input table of glove-loopext4's decoders.
func TestRejects(t *testing.T) { wiretest.Rejects(t, Protocol, bad) }

func FuzzDecode(f *testing.F) { wiretest.Fuzz(f, Protocol, samples, bad) }
