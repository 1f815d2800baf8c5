package formatwire

import (
	"testing"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/wiretest"
)

var samples = []wiretest.Sample{
	wiretest.S(Format.Type(), &FormatRequest{UID: 1000, GID: 1001}),
	wiretest.S(Format.Type()+1, &FormatReply{Failed: true, Err: "mkfs.ext4: exit status 1"}),
	wiretest.S(wire.MsgHello, &wire.Hello{}), wiretest.S(wire.MsgHelloReply, &wire.HelloReply{Name: "glove-loopext4-format", Protocol: wire.Version}),
}

var bad = []wiretest.Bad{
	wiretest.B("format with the image only", wiretest.Frame(Format.Type(), 1, 0, 0, 0, 0, 0, 0, 0, 0), 1, wire.ErrFDCount),
	wiretest.B("format with payload past the owner", wiretest.Frame(Format.Type(), 2, 0, 0, 0, 0, 0, 0, 0, 0, 9), 2, wire.ErrTrailing),
	wiretest.B("reply bool 2", wiretest.Frame(Format.Type()+1, 0, 2, 0, 0), 0, wire.ErrBool),
	wiretest.B("glove-loopext4's Create", wiretest.Frame(0x0201, 1, 1, 0, 'a', 0, 0, 0, 0, 0, 0, 0, 0), 1, wire.ErrNotAccepted),
}

func TestRoundTrip(t *testing.T) { wiretest.RoundTrip(t, Protocol, samples) }

// TestRejects is the bad-input table of the formatter's decoders.
func TestRejects(t *testing.T) { wiretest.Rejects(t, Protocol, bad) }

func FuzzDecode(f *testing.F) { wiretest.Fuzz(f, Protocol, samples, bad) }
