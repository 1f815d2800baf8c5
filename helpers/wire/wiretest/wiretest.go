// SPDX-License-Identifier: Apache-2.0

// Package wiretest checks a helper protocol's decoders (a round trip of
// sample messages, a table of bad frames, a fuzz target) and forges
// frames for the tests that play a hostile peer. Only tests import it.
package wiretest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
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
	return append(EncodeRawHeader(wire.Version, uint16(t), 1, uint32(len(payload)), nfds, 0), payload...)
}

// EncodeRawHeader returns a header with arbitrary field values, unchecked
// on purpose, to forge malformed frames.
func EncodeRawHeader(version, typ uint16, reqID, payloadLen uint32, nfds, flags uint16) []byte {
	h := binary.LittleEndian.AppendUint16(nil, version)
	h = binary.LittleEndian.AppendUint16(h, typ)
	h = binary.LittleEndian.AppendUint32(h, reqID)
	h = binary.LittleEndian.AppendUint32(h, payloadLen)
	h = binary.LittleEndian.AppendUint16(h, nfds)
	return binary.LittleEndian.AppendUint16(h, flags)
}

// OnlyErrors admits an Error alone: a helper's protocol-error reply to a
// forged frame.
func OnlyErrors(t wire.MsgType) *wire.Kind {
	if t == wire.MsgError {
		return wire.ErrorKind()
	}
	return nil
}

// kinds is every type of p: its requests, their replies, and Error.
func kinds(p *wire.Protocol) map[wire.MsgType]*wire.Kind {
	all := map[wire.MsgType]*wire.Kind{wire.MsgError: wire.ErrorKind()}
	for _, d := range p.Routes() {
		all[d.Request().Type()], all[d.Reply().Type()] = d.Request(), d.Reply()
	}
	return all
}

// DecodeAny decodes a frame of any type of p, request, reply or Error.
func DecodeAny(p *wire.Protocol, buf []byte, nfds int) (wire.Frame, error) {
	all := kinds(p)
	return wire.Decode(buf, nfds, func(t wire.MsgType) *wire.Kind { return all[t] })
}

// EncodeAny encodes m as type t of p (request, reply or Error).
func EncodeAny(p *wire.Protocol, reqID uint32, t wire.MsgType, m wire.Message) ([]byte, error) {
	k := kinds(p)[t]
	if k == nil {
		return nil, fmt.Errorf("wiretest: %s has no type %#04x: %w", p.Name, uint16(t), wire.ErrInvalidMessage)
	}
	return wire.Encode(reqID, k, m)
}

// FrameOf encodes m, a request or reply of p, as the type its Go type
// declares: for tests that forge variants of a valid frame.
func FrameOf(p *wire.Protocol, reqID uint32, m wire.Message) ([]byte, error) {
	for _, k := range kinds(p) {
		if k.Go() == reflect.TypeOf(m) {
			return wire.Encode(reqID, k, m)
		}
	}
	return nil, fmt.Errorf("wiretest: %T is not a message of %s: %w", m, p.Name, wire.ErrInvalidMessage)
}

// RoundTrip encodes each sample, decodes it back with the descriptors its
// type carries, and checks the re-encoding is identical. Every request
// and reply of p must have a sample.
func RoundTrip(t *testing.T, p *wire.Protocol, samples []Sample) {
	t.Helper()
	seen := map[wire.MsgType]bool{}
	for _, s := range samples {
		buf, err := EncodeAny(p, 9, s.Type, s.Msg)
		if err != nil {
			t.Fatalf("%T: %v", s.Msg, err)
		}
		fr, err := DecodeAny(p, buf, kinds(p)[s.Type].FDs())
		if err != nil || fr.Type != s.Type {
			t.Fatalf("%T: %v (type %#04x)", s.Msg, err, uint16(fr.Type))
		}
		if again, _ := EncodeAny(p, 9, fr.Type, fr.Msg); !bytes.Equal(again, buf) {
			t.Errorf("%T: re-encoding differs", s.Msg)
		}
		seen[s.Type] = true
	}
	for _, d := range p.Routes() {
		rt := d.Type()
		if !seen[rt] || !seen[rt+1] {
			t.Errorf("%s: type %#04x or its reply has no sample", p.Name, uint16(rt))
		}
	}
}

// Rejects checks each bad frame fails with its rule, as a *ProtocolError.
func Rejects(t *testing.T, p *wire.Protocol, bad []Bad) {
	t.Helper()
	for _, b := range bad {
		fr, err := DecodeAny(p, b.Buf, b.FDs)
		var pe *wire.ProtocolError
		if !errors.Is(err, b.Want) || !errors.As(err, &pe) || fr.Msg != nil {
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
		buf, err := EncodeAny(p, uint32(i+1), s.Type, s.Msg)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(buf, uint8(kinds(p)[s.Type].FDs()))
	}
	for _, b := range bad {
		f.Add(b.Buf, uint8(b.FDs))
	}
	f.Fuzz(func(t *testing.T, buf []byte, nfds uint8) {
		fr, err := DecodeAny(p, buf, int(nfds))
		id, typ, m := fr.ReqID, fr.Type, fr.Msg
		if err != nil {
			var pe *wire.ProtocolError
			if !errors.As(err, &pe) || m != nil {
				t.Fatalf("error %v (message %v) is not a bare *ProtocolError", err, m)
			}
			return
		}
		if n := kinds(p)[typ].FDs(); n != int(nfds) || typ != wire.MsgType(binary.LittleEndian.Uint16(buf[2:])) {
			t.Fatalf("accepted %d descriptors for type %#04x carrying %d", nfds, uint16(typ), n)
		}
		out, err := EncodeAny(p, id, typ, m)
		if err != nil {
			t.Fatalf("decoded %#v does not re-encode: %v", m, err)
		}
		if !bytes.Equal(out, buf) {
			t.Fatalf("not canonical:\n in % x\nout % x", buf, out)
		}
	})
}
