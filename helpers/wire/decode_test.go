// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Payload building blocks for forged frames.
func le16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
func str(s string) []byte  { return append(le16(uint16(len(s))), s...) }

// frame builds a frame of type typ declaring nfds descriptors whose payload
// length field matches the concatenated parts.
func frame(typ MsgType, nfds uint16, parts ...[]byte) []byte {
	p := bytes.Join(parts, nil)
	return append(rawHeader(Version, uint16(typ), 1, uint32(len(p)), nfds, 0), p...)
}

// helloReply builds a HelloReply payload with name field nameField.
func helloReply(nameField []byte) []byte {
	return bytes.Join([][]byte{nameField, le16(1), le64(0), le64(0)}, nil)
}

type badFrame struct {
	name string
	buf  []byte
	nfds int   // descriptors received with buf
	want error // from decodeFrame
	// sockWant, if set, is what Recv must report when buf is really sent
	// with nfds descriptors; the kernel sees some faults first.
	sockWant error
}

func badFrames() []badFrame {
	hello := rawHeader(Version, uint16(MsgHello), 1, 0, 0, 0)
	withVersion := func(v uint16) []byte { return rawHeader(v, uint16(MsgHello), 1, 0, 0, 0) }
	oversized := frame(MsgHello, 0, make([]byte, MaxPayload+1))
	return []badFrame{
		{name: "empty", buf: nil, want: ErrShortFrame, sockWant: io.EOF},
		{name: "empty with descriptor", buf: nil, nfds: 1, want: ErrShortFrame},
		{name: "short header", buf: hello[:HeaderSize-1], want: ErrShortFrame},
		{name: "one byte", buf: []byte{1}, want: ErrShortFrame},
		{name: "version 0", buf: withVersion(0), want: ErrVersion},
		{name: "version 2", buf: withVersion(2), want: ErrVersion},
		{name: "nonzero flags", buf: rawHeader(Version, uint16(MsgHello), 1, 0, 0, 0x8000), want: ErrFlags},
		{name: "payload length larger than received", buf: rawHeader(Version, uint16(MsgHello), 1, 4, 0, 0), want: ErrLength},
		{name: "payload length smaller than received", buf: append(rawHeader(Version, uint16(MsgHello), 1, 0, 0, 0), 0), want: ErrLength},
		{name: "payload length over MaxPayload", buf: rawHeader(Version, uint16(MsgHello), 1, MaxPayload+1, 0, 0), want: ErrTooLarge},
		{name: "payload length 0xffffffff", buf: rawHeader(Version, uint16(MsgHello), 1, ^uint32(0), 0, 0), want: ErrTooLarge},
		{name: "frame over MaxMessage", buf: oversized, want: ErrTooLarge, sockWant: ErrTruncated},
		{name: "unaccepted type 0", buf: frame(0, 0), want: ErrNotAccepted},
		{name: "unaccepted type in mounter range", buf: frame(0x0100, 0), want: ErrNotAccepted},
		{name: "unaccepted type 0xffff", buf: frame(0xffff, 0), want: ErrNotAccepted},
		{name: "fd count declared 1 received 0", buf: frame(MsgHello, 1), want: ErrFDCount},
		{name: "fd count declared 0 received 1", buf: frame(MsgHello, 0), nfds: 1, want: ErrFDCount},
		{name: "fd count declared over MaxFDs", buf: frame(MsgHello, MaxFDs+1), want: ErrTooManyFDs},
		{name: "more than MaxFDs received", buf: frame(MsgHello, MaxFDs+1), nfds: MaxFDs + 1, want: ErrTooManyFDs, sockWant: ErrControlTruncated},
		{name: "Hello carrying a descriptor", buf: frame(MsgHello, 1), nfds: 1, want: ErrFDCount},
		{name: "fd message without descriptor", buf: frame(msgTestFD, 0, []byte{0}, le32(0), str("")), want: ErrFDCount},
		{name: "unaccepted type with descriptors", buf: frame(0x0200, 2), nfds: 2, want: ErrNotAccepted},
		{name: "Hello with trailing byte", buf: frame(MsgHello, 0, []byte{0}), want: ErrTrailing},
		{name: "HelloReply with trailing byte", buf: frame(MsgHelloReply, 0, helloReply(str("m")), []byte{0}), want: ErrTrailing},
		{name: "HelloReply string length past end", buf: frame(MsgHelloReply, 0, le16(10), []byte("abc")), want: ErrShortPayload},
		{name: "HelloReply missing capabilities", buf: frame(MsgHelloReply, 0, str("m"), le16(1), le64(0)), want: ErrShortPayload},
		{name: "HelloReply empty payload", buf: frame(MsgHelloReply, 0), want: ErrShortPayload},
		{name: "string with invalid UTF-8", buf: frame(MsgHelloReply, 0, helloReply(str("ab\xffc"))), want: ErrInvalidUTF8},
		{name: "string with surrogate half", buf: frame(MsgHelloReply, 0, helloReply(str("\xed\xa0\x80"))), want: ErrInvalidUTF8},
		{name: "string with NUL", buf: frame(MsgHelloReply, 0, helloReply(str("/tmp\x00/etc"))), want: ErrNUL},
		{name: "string over max length", buf: frame(MsgHelloReply, 0, helloReply(str(strings.Repeat("n", maxNameLen+1)))), want: ErrFieldTooLong},
		{name: "string length 0xffff without data", buf: frame(MsgHelloReply, 0, le16(0xffff)), want: ErrFieldTooLong},
		{name: "bool byte 2", buf: frame(msgTestFD, 1, []byte{2}, le32(0), str("")), nfds: 1, want: ErrBool},
		{name: "bytes field over max", buf: frame(msgTestFD, 1, []byte{1}, le32(0), str(strings.Repeat("b", 33))), nfds: 1, want: ErrFieldTooLong},
		{name: "Error with truncated code", buf: frame(MsgError, 0, []byte{3}), want: ErrShortPayload},
		{name: "Error with code 0", buf: frame(MsgError, 0, le16(0), str("x")), want: ErrBadCode},
		{name: "Error with unknown code", buf: frame(MsgError, 0, le16(99), str("x")), want: ErrBadCode},
		{name: "Error message over max", buf: frame(MsgError, 0, le16(uint16(ErrInternal)), str(strings.Repeat("m", MaxErrorLen+1))), want: ErrFieldTooLong},
	}
}

func TestDecodeFrameRejects(t *testing.T) {
	for _, tc := range badFrames() {
		t.Run(tc.name, func(t *testing.T) {
			fr, err := Decode(tc.buf, tc.nfds, testAll)
			m := fr.Msg
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			var pe *ProtocolError
			if !errors.As(err, &pe) {
				t.Errorf("%v is not a *ProtocolError", err)
			}
			if m != nil {
				t.Errorf("returned a message %#v with the error", m)
			}
		})
	}
}

// TestRecvRejects sends every bad frame through a real socket, with real
// descriptors attached, and checks both the error and that every received
// descriptor was closed.
func TestRecvRejects(t *testing.T) {
	for _, tc := range badFrames() {
		t.Run(tc.name, func(t *testing.T) {
			raw, c := rawAndConn(t, nil)
			var oob []byte
			if tc.nfds > 0 {
				oob = unix.UnixRights(pipes(t, tc.nfds)...)
			}
			before := openFDs(t)
			sendRaw(t, raw, tc.buf, oob)
			want := tc.want
			if tc.sockWant != nil {
				want = tc.sockWant
			}
			fr, err := c.Recv(testAll)
			if !errors.Is(err, want) {
				t.Fatalf("got %v (frame %+v), want %v", err, fr, want)
			}
			var pe *ProtocolError
			if want != io.EOF && !errors.As(err, &pe) {
				t.Errorf("%v is not a *ProtocolError", err)
			}
			checkNoLeak(t, before)
		})
	}
}

// TestRecvRejectsControl covers faults that exist only at the socket
// layer: control messages other than SCM_RIGHTS, which the peer that
// created the socket pair can arrange by enabling options on our end.
func TestRecvRejectsControl(t *testing.T) {
	hello := rawHeader(Version, uint16(MsgHello), 1, 0, 0, 0)
	setopt := func(opt int) func(int) error {
		return func(fd int) error { return unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, 1) }
	}
	cases := []struct {
		name  string
		setup func(int) error
		buf   []byte
		oob   func(t *testing.T) []byte
		want  error
	}{
		{
			name:  "SCM_CREDENTIALS",
			setup: setopt(unix.SO_PASSCRED),
			buf:   hello,
			oob: func(*testing.T) []byte {
				return unix.UnixCredentials(&unix.Ucred{Pid: int32(os.Getpid()), Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())})
			},
			want: ErrControl,
		},
		{
			name:  "SCM_CREDENTIALS with descriptors",
			setup: setopt(unix.SO_PASSCRED),
			buf:   frame(msgTestFD, 1, []byte{0}, le32(0), str("")),
			oob:   func(t *testing.T) []byte { return unix.UnixRights(pipes(t, 1)...) },
			want:  ErrControl,
		},
		{
			// SCM_PIDFD installs a descriptor of its own, which must be
			// closed like any other (kernels >= 6.5).
			name:  "SCM_PIDFD",
			setup: setopt(unix.SO_PASSPIDFD),
			buf:   hello,
			want:  ErrControl,
		},
		{
			name: "oversized datagram with descriptor",
			buf:  frame(msgTestFD, 1, make([]byte, MaxPayload+1)),
			oob:  func(t *testing.T) []byte { return unix.UnixRights(pipes(t, 1)...) },
			want: ErrTruncated,
		},
		{
			name: "eight descriptors",
			buf:  hello,
			oob:  func(t *testing.T) []byte { return unix.UnixRights(pipes(t, 8)...) },
			want: ErrControlTruncated,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw, c := rawAndConn(t, tc.setup)
			var oob []byte
			if tc.oob != nil {
				oob = tc.oob(t)
			}
			before := openFDs(t)
			sendRaw(t, raw, tc.buf, oob)
			_, err := c.Recv(testAll)
			var pe *ProtocolError
			if !errors.Is(err, tc.want) || !errors.As(err, &pe) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			checkNoLeak(t, before)
		})
	}
}

// TestDecodeFrameAccepts checks the positive side of the same rules.
func TestDecodeFrameAccepts(t *testing.T) {
	cases := []struct {
		buf  []byte
		nfds int
		want Message
	}{
		{frame(MsgHello, 0), 0, &Hello{}},
		{frame(MsgHelloReply, 0, helloReply(str(strings.Repeat("n", maxNameLen)))), 0, &HelloReply{Name: strings.Repeat("n", maxNameLen), Protocol: 1}},
		{frame(MsgError, 0, le16(5), str("")), 0, &Error{Code: ErrUnsupported}},
		{frame(msgTestFD, 1, []byte{1}, le32(7), str("ab")), 1, &testFD{Flag: true, Tag: 7, Blob: []byte("ab")}},
	}
	for _, tc := range cases {
		fr, err := Decode(tc.buf, tc.nfds, testAll)
		id, m := fr.ReqID, fr.Msg
		if err != nil || id != 1 {
			t.Errorf("%T: id %d err %v", tc.want, id, err)
			continue
		}
		if !reflect.DeepEqual(m, tc.want) {
			t.Errorf("decoded %#v, want %#v", m, tc.want)
		}
		if got, _ := encodeMsg(id, m); !bytes.Equal(got, tc.buf) {
			t.Errorf("%T: decoded %#v, re-encodes differently", tc.want, m)
		}
	}
}
