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
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The test protocols. Their types lie outside every reserved range, so
// no helper accepts them; testProto has messages with descriptors, bools
// and byte fields, and otherProto stands for another helper's protocol.
const (
	msgTestPing  MsgType = 0xfff0
	msgTestFD    MsgType = 0xfff2
	msgTestOther MsgType = 0x0f01
)

var (
	pingRoute  = NewRoute[testPing, testPong](msgTestPing, 0, 0, false)
	fdRoute    = NewRoute[testFD, testFDReply](msgTestFD, 1, 1, false)
	testProto  = NewProtocol("glove-test", pingRoute, fdRoute)
	otherRoute = NewRoute[testOther, testOtherReply](msgTestOther, 0, 0, false)
	otherProto = NewProtocol("glove-other", otherRoute)
)

type testPing struct{ Tag uint32 }

type testPong struct{ Tag uint32 }

type testFD struct {
	Flag bool
	Tag  uint32
	Blob []byte `wire:"32"`
}

type testFDReply struct{ Tag uint32 }

type testOther struct {
	Session string `wire:"64"`
}

type testOtherReply struct{}

// testKinds holds every type of both test protocols, requests and
// replies, and Error; testAll admits them all, so the frame rules can be
// tested apart from which end admits what.
var testKinds = func() map[MsgType]*Kind {
	a := map[MsgType]*Kind{MsgError: &errorKind}
	for _, p := range []*Protocol{testProto, otherProto} {
		for _, d := range p.routes {
			a[d.req.t], a[d.reply.t] = &d.req, &d.reply
		}
	}
	return a
}()

func testAll(t MsgType) *Kind { return testKinds[t] }

// maxNameLen is HelloReply.Name's maximum.
const maxNameLen = 64

// kindOfMsg finds a test message's kind by its Go type (each is unique).
func kindOfMsg(m Message) *Kind {
	for _, k := range testKinds {
		if k.goT == reflect.TypeOf(m) {
			return k
		}
	}
	return &errorKind
}

// sendMsg sends m as its kind.
func sendMsg(c *Conn, id uint32, m Message, fds []int) error { return c.Send(id, kindOfMsg(m), m, fds) }

// encodeMsg encodes m as its kind.
func encodeMsg(id uint32, m Message) ([]byte, error) { return Encode(id, kindOfMsg(m), m) }

// rawHeader returns a header with arbitrary field values, unchecked, to
// forge malformed frames.
func rawHeader(version, typ uint16, reqID, payloadLen uint32, nfds, flags uint16) []byte {
	h, err := binary.Append(nil, binary.LittleEndian, struct {
		V, T    uint16
		ID, Len uint32
		N, F    uint16
	}{version, typ, reqID, payloadLen, nfds, flags})
	if err != nil {
		panic(err)
	}
	return h
}

// rawPair returns a SOCK_SEQPACKET pair as raw descriptors, closed at the
// end of the test unless the caller takes them.
func rawPair(t *testing.T) (int, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("socketpair: %v", err)
	}
	return fds[0], fds[1]
}

// connOf wraps raw descriptor fd with FromFile (which consumes it).
func connOf(t *testing.T, fd int) *Conn {
	t.Helper()
	c, err := FromFile(os.NewFile(uintptr(fd), "test-sock"))
	if err != nil {
		t.Fatalf("FromFile: %v", err)
	}
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func connPair(t *testing.T) (*Conn, *Conn) {
	a, b := rawPair(t)
	return connOf(t, a), connOf(t, b)
}

// rawAndConn returns a raw sending end and a receiving Conn; setup, if not
// nil, runs on the receiving descriptor before it is wrapped.
func rawAndConn(t *testing.T, setup func(fd int) error) (int, *Conn) {
	t.Helper()
	a, b := rawPair(t)
	t.Cleanup(func() { unix.Close(a) })
	if setup != nil {
		if err := setup(b); err != nil {
			unix.Close(b)
			t.Skipf("receiver setup: %v", err)
		}
	}
	return a, connOf(t, b)
}

// sendRaw sends p with control data oob in one sendmsg(2). It bypasses
// unix.Sendmsg, which adds a dummy byte when p is empty and oob is not, so
// that a genuinely empty datagram carrying descriptors can be forged.
func sendRaw(t *testing.T, fd int, p, oob []byte) {
	t.Helper()
	var msg unix.Msghdr
	var iov unix.Iovec
	if len(p) > 0 {
		iov.Base = &p[0]
		iov.SetLen(len(p))
		msg.Iov = &iov
		msg.Iovlen = 1
	}
	if len(oob) > 0 {
		msg.Control = &oob[0]
		msg.SetControllen(len(oob))
	}
	if _, _, e := unix.Syscall(unix.SYS_SENDMSG, uintptr(fd), uintptr(unsafe.Pointer(&msg)), 0); e != 0 {
		t.Fatalf("sendmsg: %v", e)
	}
}

// pipes returns the write ends of n fresh pipes, all closed at test end.
func pipes(t *testing.T, n int) []int {
	t.Helper()
	var out []int
	for range n {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
		out = append(out, p[1])
	}
	return out
}

// openFDs lists this process's open descriptors.
func openFDs(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func checkNoLeak(t *testing.T, before []string) {
	t.Helper()
	if after := openFDs(t); len(after) != len(before) {
		t.Errorf("descriptor leak: before %v, after %v", before, after)
	}
}

func cloexec(t *testing.T, fd int) bool {
	t.Helper()
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		t.Fatalf("F_GETFD %d: %v", fd, err)
	}
	return fl&unix.FD_CLOEXEC != 0
}

func TestRoundTrip(t *testing.T) {
	a, b := connPair(t)
	msgs := []Message{
		&Hello{},
		&HelloReply{Name: "glove-mounter", Protocol: Version, CapEffective: 1 << 21, CapPermitted: 1<<21 | 1},
		&HelloReply{},
		&Error{Code: ErrRefused, Message: "path outside /var/lib/glove: ünïcode ok"},
		&testPing{Tag: 0xdeadbeef}, &testPong{Tag: 7},
	}
	for i, m := range msgs {
		id := uint32(i + 1)
		if err := sendMsg(a, id, m, nil); err != nil {
			t.Fatalf("send %T: %v", m, err)
		}
		fr, err := b.Recv(testAll)
		if err != nil {
			t.Fatalf("recv %T: %v", m, err)
		}
		if fr.ReqID != id || len(fr.FDs) != 0 || !reflect.DeepEqual(fr.Msg, m) {
			t.Errorf("got id %d fds %d msg %#v, want id %d msg %#v", fr.ReqID, len(fr.FDs), fr.Msg, id, m)
		}
	}
}

func TestPassDescriptors(t *testing.T) {
	a, b := connPair(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sent := &testFD{Flag: true, Tag: 42, Blob: []byte{1, 2, 3}}
	if err := sendMsg(a, 9, sent, []int{int(w.Fd())}); err != nil {
		t.Fatal(err)
	}
	// Send must not close the caller's descriptor.
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatalf("sender's descriptor unusable after Send: %v", err)
	}
	w.Close()

	fr, err := b.Recv(testAll)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fr.Msg, sent) || fr.ReqID != 9 || len(fr.FDs) != 1 {
		t.Fatalf("got %#v id %d fds %d", fr.Msg, fr.ReqID, len(fr.FDs))
	}
	got := fr.FDs[0]
	if got.Name() != "wire-fd" {
		t.Errorf("name %q, want wire-fd", got.Name())
	}
	if !cloexec(t, int(got.Fd())) {
		t.Error("received descriptor lacks FD_CLOEXEC")
	}
	if _, err := got.Write([]byte("y")); err != nil {
		t.Fatalf("received descriptor unusable: %v", err)
	}
	got.Close()
	data, err := io.ReadAll(r)
	if err != nil || string(data) != "xy" {
		t.Errorf("pipe read %q, %v; want \"xy\"", data, err)
	}
}

func TestEnsureCloexec(t *testing.T) {
	fd, err := unix.Dup(0) // dup(2) never sets FD_CLOEXEC
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if cloexec(t, fd) {
		t.Fatal("dup unexpectedly set FD_CLOEXEC")
	}
	if err := ensureCloexec(fd); err != nil {
		t.Fatal(err)
	}
	if !cloexec(t, fd) {
		t.Error("FD_CLOEXEC not set")
	}
}

func TestRejectedDescriptorsClosed(t *testing.T) {
	raw, c := rawAndConn(t, nil)
	fds := pipes(t, 3)
	before := openFDs(t)
	// A Hello that declares no descriptors but carries three.
	sendRaw(t, raw, rawHeader(Version, uint16(MsgHello), 1, 0, 0, 0), unix.UnixRights(fds...))
	_, err := c.Recv(testAll)
	if !errors.Is(err, ErrFDCount) {
		t.Fatalf("got %v, want ErrFDCount", err)
	}
	checkNoLeak(t, before)
	// The connection stays usable; a valid frame still decodes.
	sendRaw(t, raw, rawHeader(Version, uint16(MsgHello), 2, 0, 0, 0), nil)
	if fr, err := c.Recv(testAll); err != nil || fr.ReqID != 2 {
		t.Fatalf("valid frame after rejection: %v", err)
	}
}

func TestRecvEOF(t *testing.T) {
	a, b := connPair(t)
	a.Close()
	if _, err := b.Recv(testAll); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
}

func TestSendWrongFDCount(t *testing.T) {
	a, b := connPair(t)
	fds := pipes(t, 2)
	cases := []struct {
		m   Message
		fds []int
	}{
		{&Hello{}, fds[:1]},
		{&testFD{}, nil},
		{&testFD{}, fds},
	}
	for _, tc := range cases {
		if err := sendMsg(a, 1, tc.m, tc.fds); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("%T with %d fds: got %v, want ErrInvalidMessage", tc.m, len(tc.fds), err)
		}
	}
	for _, fd := range fds {
		cloexec(t, fd) // fails the test if Send closed it
	}
	// Nothing may have been sent.
	b.SetDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := b.Recv(testAll); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("peer received something: %v", err)
	}
}

func TestSendInvalidFields(t *testing.T) {
	a, _ := connPair(t)
	cases := []struct {
		m    Message
		want error
	}{
		{&HelloReply{Name: strings.Repeat("n", maxNameLen+1)}, ErrFieldTooLong},
		{&HelloReply{Name: "a\x00b"}, ErrNUL},
		{&HelloReply{Name: "\xff"}, ErrInvalidUTF8},
		{&Error{Code: 0, Message: "x"}, ErrBadCode},
		{&Error{Code: ErrInternal, Message: strings.Repeat("m", MaxErrorLen+1)}, ErrFieldTooLong},
		{nil, ErrInvalidMessage},
	}
	for _, tc := range cases {
		err := sendMsg(a, 1, tc.m, nil)
		if !errors.Is(err, tc.want) || !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("%#v: got %v, want %v", tc.m, err, tc.want)
		}
	}
}

func TestFromFileRejectsWrongSockets(t *testing.T) {
	stream, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(stream[1])
	dgram, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dgram[1])
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, f := range []*os.File{
		os.NewFile(uintptr(stream[0]), "stream"),
		os.NewFile(uintptr(dgram[0]), "dgram"),
		r,
	} {
		if c, err := FromFile(f); err == nil {
			c.Close()
			t.Errorf("%s: FromFile accepted it", f.Name())
		}
		if err := f.Close(); !errors.Is(err, os.ErrClosed) {
			t.Errorf("%s: FromFile did not close the file: %v", f.Name(), err)
		}
	}
}

func TestEncodeFrameLayout(t *testing.T) {
	buf, err := encodeMsg(0x01020304, &Error{Code: ErrRefused, Message: "no"})
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{
		1, 0, 3, 0, 4, 3, 2, 1, 6, 0, 0, 0, 0, 0, 0, 0, // header
		3, 0, 2, 0, 'n', 'o', // code, string length, string
	}
	if !bytes.Equal(buf, want) {
		t.Errorf("got % x\nwant % x", buf, want)
	}
}

func TestErrorString(t *testing.T) {
	var err error = &Error{Code: ErrRefused, Message: "outside bounds"}
	if got := err.Error(); got != "wire: refused (3): outside bounds" {
		t.Errorf("got %q", got)
	}
	if got := ErrorCode(77).String(); got != "ErrorCode(77)" {
		t.Errorf("got %q", got)
	}
}

// TestDecodeFieldsBounds: the codec stops at the first fault and returns
// no message with it, and checks a declared length against the maximum,
// then against the bytes remaining, before anything is sliced.
func TestDecodeFieldsBounds(t *testing.T) {
	type msg struct {
		Flag bool
		A    uint8
		B    uint16
		C    uint32
		D    uint64
		S    string `wire:"10"`
		Blob []byte `wire:"100"`
	}
	all := kindOf[msg](0, 0)
	m, err := decodeMsg([]byte{2, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, &all)
	if !errors.Is(err, ErrBool) {
		t.Fatalf("bool byte 2 accepted: %v", err)
	}
	// Nothing is returned with the fault, even with data left.
	if m != nil {
		t.Errorf("returned %#v with the error", m)
	}

	// one decodes field i alone.
	one := func(i int, p []byte) (*msg, error) {
		k := all
		k.fields = all.fields[i : i+1]
		m, err := decodeMsg(p, &k)
		got, _ := m.(*msg)
		return got, err
	}
	if m, err := one(6, []byte{0xff, 0xff}); m != nil || !errors.Is(err, ErrFieldTooLong) {
		t.Errorf("over-max length: got %v, %v", m, err)
	}
	if m, err := one(5, []byte{5, 0, 'a'}); m != nil || !errors.Is(err, ErrShortPayload) {
		t.Errorf("length past end: got %v, %v", m, err)
	}
	if _, err := one(1, []byte{1}); err != nil {
		t.Errorf("clean finish: %v", err)
	}
	if m, err := one(6, []byte{0, 0, 7}); !errors.Is(err, ErrTrailing) {
		t.Errorf("empty field then trailing byte: got %v, %v", m, err)
	}
	if m, err := one(6, []byte{0, 0}); err != nil || m.Blob == nil || len(m.Blob) != 0 {
		t.Errorf("empty field: got %v, %v", m, err)
	}
}
