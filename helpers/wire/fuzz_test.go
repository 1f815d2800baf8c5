// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// FuzzDecodeFrame feeds arbitrary frames and descriptor counts to the
// frame decoder with every test type admitted. It must never panic, every
// failure must be a *ProtocolError, and every success must re-encode to
// exactly the input: the encoding is canonical, so two peers can never
// read different messages out of the same bytes. The helpers' own
// messages are fuzzed in their packages (wiretest.Fuzz).
func FuzzDecodeFrame(f *testing.F) {
	valid := []Message{
		&Hello{},
		&HelloReply{Name: "glove-cgroup", Protocol: Version, CapEffective: 1<<21 | 1<<12, CapPermitted: 1 << 21},
		&HelloReply{},
		&Error{Code: ErrProtocol, Message: "bad frame"},
		&Error{Code: ErrUnsupported},
		&testPing{Tag: 3}, &testPong{Tag: 4},
		&testFD{Flag: true, Tag: 1, Blob: []byte("blob")}, &testFDReply{Tag: 2},
		&testOther{Session: "s1"}, &testOtherReply{},
	}
	for i, m := range valid {
		buf, err := encodeMsg(uint32(i+1), m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(buf, uint8(kindOfMsg(m).fds))
	}
	for _, bf := range badFrames() {
		if len(bf.buf) <= 4096 {
			f.Add(bf.buf, uint8(bf.nfds))
		}
	}
	f.Fuzz(func(t *testing.T, buf []byte, nfds uint8) {
		fr, err := Decode(buf, int(nfds), testAll)
		id, m := fr.ReqID, fr.Msg
		if err != nil {
			var pe *ProtocolError
			if !errors.As(err, &pe) || m != nil {
				t.Fatalf("error %v (message %v) is not a bare *ProtocolError", err, m)
			}
			return
		}
		k := testAll(MsgType(binary.LittleEndian.Uint16(buf[2:])))
		if k.fds != int(nfds) {
			t.Fatalf("accepted %d descriptors for %s carrying %d", nfds, k, k.fds)
		}
		out, err := Encode(id, k, m)
		if err != nil {
			t.Fatalf("decoded %#v does not re-encode: %v", m, err)
		}
		if !bytes.Equal(out, buf) {
			t.Fatalf("not canonical:\n in % x\nout % x", buf, out)
		}
	})
}
