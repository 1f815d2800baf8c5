// SPDX-License-Identifier: Apache-2.0

package userwire

import (
	"testing"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/wiretest"
)

var samples = []wiretest.Sample{
	wiretest.S(Create.Type(), &CreateRequest{Session: "s-1", UIDOutside: 995, UIDCount: 1, GIDOutside: 993, GIDCount: 1}),
	wiretest.S(Create.Type()+1, &CreateReply{Inode: 4026532845}),
	wiretest.S(wire.MsgHello, &wire.Hello{}), wiretest.S(wire.MsgHelloReply, &wire.HelloReply{Name: "glove-userns", Protocol: wire.Version}),
}

// create is a well-formed Create payload: session "s", then six uint32.
var create = append([]byte{1, 0, 's'}, make([]byte, 24)...)

var bad = []wiretest.Bad{
	wiretest.B("create with a descriptor", wiretest.Frame(Create.Type(), 1, create...), 1, wire.ErrFDCount),
	wiretest.B("create short", wiretest.Frame(Create.Type(), 0, create[:len(create)-1]...), 0, wire.ErrShortPayload),
	wiretest.B("create trailing byte", wiretest.Frame(Create.Type(), 0, append(append([]byte{}, create...), 0)...), 0, wire.ErrTrailing),
	wiretest.B("create session too long", wiretest.Frame(Create.Type(), 0, append([]byte{65, 0}, make([]byte, 65+24)...)...), 0, wire.ErrFieldTooLong),
	wiretest.B("create reply without its descriptor", wiretest.Frame(Create.Type()+1, 0, make([]byte, 8)...), 0, wire.ErrFDCount),
	wiretest.B("create reply with two descriptors", wiretest.Frame(Create.Type()+1, 2, make([]byte, 8)...), 2, wire.ErrFDCount),
	wiretest.B("create reply short", wiretest.Frame(Create.Type()+1, 1, make([]byte, 7)...), 1, wire.ErrShortPayload),
	wiretest.B("glove-streamproxy's Open", wiretest.Frame(0x0401, 3, 1, 0, 's', 1, 0, 'a'), 3, wire.ErrNotAccepted),
}

func TestRoundTrip(t *testing.T) { wiretest.RoundTrip(t, Protocol, samples) }

// TestRejects is the bad-input table of glove-userns's decoders.
func TestRejects(t *testing.T) { wiretest.Rejects(t, Protocol, bad) }

func FuzzDecode(f *testing.F) { wiretest.Fuzz(f, Protocol, samples, bad) }
