// Package wiretest checks a helper protocol's decoders: a round trip of
// sample messages, a table of bad frames, and a fuzz target. Only tests
// import it; no helper links it.
package wiretest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/glove-sandbox/glove/helpers/wire"
)

// Sample is one valid message of a protocol and its type number.
type Sample struct {
	Type wire.MsgType
	Msg  wire.Message
}

// S is a Sample.
func S(t wire.MsgType, m wire.Message) Sample { return Sample{Type: t, Msg: m} }

// Bad is one bad frame of a protocol: the bytes, the descriptors that
// come with them and the rule it must fail.
type Bad struct {
	Name string
	Buf  []byte
	FDs  int
	Want error
}

// B is a Bad.
func B(name string, buf []byte, fds int, want error) Bad {
	return Bad{Name: name, Buf: buf, FDs: fds, Want: want}
}

// Frame builds a frame of type t declaring nfds descriptors around
// payload, with a matching length.
func Frame(t wire.MsgType, nfds uint16, payload ...byte) []byte {
	return append(wire.EncodeRawHeader(wire.Version, uint16(t), 1, uint32(len(payload)), nfds, 0), payload...)
}

// RoundTrip encodes each sample, decodes it back with the descriptors its
// type carries, and checks the re-encoding is identical. Every request
// and reply of p must have a sample.
func RoundTrip(t *testing.T, p *wire.Protocol, samples []Sample) {
	t.Helper()
	seen := map[wire.MsgType]bool{}
	for _, s := range samples {
		buf, err := p.EncodeAny(9, s.Type, s.Msg)
		if err != nil {
			t.Fatalf("%T: %v", s.Msg, err)
		}
		n, _ := p.FDs(s.Type)
		_, typ, got, err := p.DecodeAny(buf, n)
		if err != nil || typ != s.Type {
			t.Fatalf("%T: %v (type %#04x)", s.Msg, err, uint16(typ))
		}
		if again, _ := p.EncodeAny(9, typ, got); !bytes.Equal(again, buf) {
			t.Errorf("%T: re-encoding differs", s.Msg)
		}
		seen[s.Type] = true
	}
	for _, rt := range p.Types() {
		if !seen[rt] || !seen[rt+1] {
			t.Errorf("%s: type %#04x or its reply has no sample", p.Name, uint16(rt))
		}
	}
}

// Rejects checks each bad frame fails with its rule, as a *ProtocolError.
func Rejects(t *testing.T, p *wire.Protocol, bad []Bad) {
	t.Helper()
	for _, b := range bad {
		_, _, m, err := p.DecodeAny(b.Buf, b.FDs)
		var pe *wire.ProtocolError
		if !errors.Is(err, b.Want) || !errors.As(err, &pe) || m != nil {
			t.Errorf("%s: %v, want %v", b.Name, err, b.Want)
		}
	}
}

// Fuzz feeds arbitrary frames and descriptor counts to p's decoders (every
// request and reply type): no panic, every failure a *ProtocolError, and
// every success re-encodes to exactly the input (the encoding is
// canonical).
func Fuzz(f *testing.F, p *wire.Protocol, samples []Sample, bad []Bad) {
	for i, s := range samples {
		buf, err := p.EncodeAny(uint32(i+1), s.Type, s.Msg)
		if err != nil {
			f.Fatal(err)
		}
		n, _ := p.FDs(s.Type)
		f.Add(buf, uint8(n))
	}
	for _, b := range bad {
		f.Add(b.Buf, uint8(b.FDs))
	}
	f.Fuzz(func(t *testing.T, buf []byte, nfds uint8) {
		id, typ, m, err := p.DecodeAny(buf, int(nfds))
		if err != nil {
			var pe *wire.ProtocolError
			if !errors.As(err, &pe) || m != nil {
				t.Fatalf("error %v (message %v) is not a bare *ProtocolError", err, m)
			}
			return
		}
		if n, _ := p.FDs(typ); n != int(nfds) || typ != wire.MsgType(binary.LittleEndian.Uint16(buf[2:])) {
			t.Fatalf("accepted %d descriptors for type %#04x carrying %d", nfds, uint16(typ), n)
		}
		out, err := p.EncodeAny(id, typ, m)
		if err != nil {
			t.Fatalf("decoded %#v does not re-encode: %v", m, err)
		}
		if !bytes.Equal(out, buf) {
			t.Fatalf("not canonical:\n in % x\nout % x", buf, out)
		}
	})
}
