// SPDX-License-Identifier: Apache-2.0

package formatwire

import (
	"testing"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/wiretest"
)

var samples = []wiretest.Sample{
	wiretest.S(Format.Type(), &FormatRequest{Name: "x.img", SizeBytes: 1 << 26, UID: 1000, GID: 1001}),
	wiretest.S(Format.Type()+1, &FormatReply{}),
	wiretest.S(wire.MsgHello, &wire.Hello{}), wiretest.S(wire.MsgHelloReply, &wire.HelloReply{Name: "glove-loopext4-format", Protocol: wire.Version}),
}

// request is a Format payload: name "a", size 4096, UID 1000, GID 1001.
var request = []byte{1, 0, 'a', 0, 16, 0, 0, 0, 0, 0, 0, 0xe8, 3, 0, 0, 0xe9, 3, 0, 0}

var bad = []wiretest.Bad{
	wiretest.B("format with the root only", wiretest.Frame(Format.Type(), 1, request...), 1, wire.ErrFDCount),
	wiretest.B("format with three descriptors", wiretest.Frame(Format.Type(), 3, request...), 3, wire.ErrFDCount),
	wiretest.B("format name past the end", wiretest.Frame(Format.Type(), 2, 10, 0, 'a'), 2, wire.ErrShortPayload),
	wiretest.B("format name too long", wiretest.Frame(Format.Type(), 2, append([]byte{65, 0}, make([]byte, 65+16)...)...), 2, wire.ErrFieldTooLong),
	wiretest.B("format name with NUL", wiretest.Frame(Format.Type(), 2, append([]byte{1, 0, 0}, request[3:]...)...), 2, wire.ErrNUL),
	wiretest.B("format size cut short", wiretest.Frame(Format.Type(), 2, request[:7]...), 2, wire.ErrShortPayload),
	wiretest.B("format without the owner's gid", wiretest.Frame(Format.Type(), 2, request[:15]...), 2, wire.ErrShortPayload),
	wiretest.B("format with payload past the owner", wiretest.Frame(Format.Type(), 2, append(request[:len(request):len(request)], 9)...), 2, wire.ErrTrailing),
	wiretest.B("reply without the image", wiretest.Frame(Format.Type()+1, 0), 0, wire.ErrFDCount),
	wiretest.B("reply with payload", wiretest.Frame(Format.Type()+1, 1, 0), 1, wire.ErrTrailing),
	wiretest.B("glove-loopext4's Create", wiretest.Frame(0x0201, 1, 1, 0, 'a', 0, 0, 0, 0, 0, 0, 0, 0), 1, wire.ErrNotAccepted),
}

func TestRoundTrip(t *testing.T) { wiretest.RoundTrip(t, Protocol, samples) }

// TestRejects is the bad-input table of the formatter's decoders.
func TestRejects(t *testing.T) { wiretest.Rejects(t, Protocol, bad) }

func FuzzDecode(f *testing.F) { wiretest.Fuzz(f, Protocol, samples, bad) }
