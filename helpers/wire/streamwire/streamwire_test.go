// SPDX-License-Identifier: Apache-2.0

package streamwire

import (
	"testing"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/wiretest"
)

var samples = []wiretest.Sample{
	wiretest.S(Open.Type(), &OpenRequest{Session: "s-1", Alias: "svc.a_b-c"}), wiretest.S(Open.Type()+1, &OpenReply{}),
	wiretest.S(Status.Type(), &StatusRequest{}), wiretest.S(Status.Type()+1, &StatusReply{Open: true, Exchanges: 3}),
	wiretest.S(Status.Type()+1, &StatusReply{Err: "pipelined"}),
	wiretest.S(Close.Type(), &CloseRequest{}), wiretest.S(Close.Type()+1, &CloseReply{}),
	wiretest.S(wire.MsgHello, &wire.Hello{}), wiretest.S(wire.MsgHelloReply, &wire.HelloReply{Name: "glove-streamproxy", Protocol: wire.Version}),
}

var open = []byte{1, 0, 's', 1, 0, 'a'}

var bad = []wiretest.Bad{
	wiretest.B("open without descriptors", wiretest.Frame(Open.Type(), 0, open...), 0, wire.ErrFDCount),
	wiretest.B("open with two descriptors", wiretest.Frame(Open.Type(), 2, open...), 2, wire.ErrFDCount),
	wiretest.B("open with four descriptors", wiretest.Frame(Open.Type(), 4, open...), 4, wire.ErrFDCount),
	wiretest.B("open without alias", wiretest.Frame(Open.Type(), 3, open[:3]...), 3, wire.ErrShortPayload),
	wiretest.B("open trailing byte", wiretest.Frame(Open.Type(), 3, append(append([]byte{}, open...), 0)...), 3, wire.ErrTrailing),
	wiretest.B("open alias too long", wiretest.Frame(Open.Type(), 3, append([]byte{1, 0, 's', 65, 0}, make([]byte, 65)...)...), 3, wire.ErrFieldTooLong),
	wiretest.B("open reply with a descriptor", wiretest.Frame(Open.Type()+1, 1), 1, wire.ErrFDCount),
	wiretest.B("status with payload", wiretest.Frame(Status.Type(), 0, 0), 0, wire.ErrTrailing),
	wiretest.B("status reply bool 2", wiretest.Frame(Status.Type()+1, 0, append([]byte{2}, make([]byte, 10)...)...), 0, wire.ErrBool),
	wiretest.B("status reply short", wiretest.Frame(Status.Type()+1, 0, 1, 0, 0), 0, wire.ErrShortPayload),
	wiretest.B("status reply err too long", wiretest.Frame(Status.Type()+1, 0, append(append([]byte{0}, make([]byte, 8)...), append([]byte{33, 0}, make([]byte, 33)...)...)...), 0, wire.ErrFieldTooLong),
	wiretest.B("close with a descriptor", wiretest.Frame(Close.Type(), 1), 1, wire.ErrFDCount),
	wiretest.B("glove-cgroup's Kill", wiretest.Frame(0x0305, 0, 1, 0, 's'), 0, wire.ErrNotAccepted),
}

func TestRoundTrip(t *testing.T) { wiretest.RoundTrip(t, Protocol, samples) }

// TestRejects is the bad-input table of glove-streamproxy's decoders.
func TestRejects(t *testing.T) { wiretest.Rejects(t, Protocol, bad) }

func FuzzDecode(f *testing.F) { wiretest.Fuzz(f, Protocol, samples, bad) }
