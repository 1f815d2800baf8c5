// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"errors"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// peer is the supervisor side in server tests: raw forges frames, c sends
// valid ones and receives replies (both use the same socket).
type peer struct {
	raw    int
	c      *Conn
	closed *bool
}

// close closes both descriptors of the peer's socket, so the server sees EOF.
func (p peer) close() {
	if !*p.closed {
		*p.closed = true
		unix.Close(p.raw)
		p.c.Close()
	}
}

// Ping tags that make the fake handler misbehave in specific ways.
const (
	tagRefuse        = 1
	tagFail          = 2
	tagBadReply      = 3
	tagProtocolError = 4
)

// fakeHandlers are glove-test's handlers.
func fakeHandlers() []Handler {
	return []Handler{
		HelloRoute.Handle(func(uint32, *Hello, []*os.File) (*HelloReply, []int, error) {
			return &HelloReply{Name: "glove-test", Protocol: Version}, nil, nil
		}),
		pingRoute.Handle(func(_ uint32, m *testPing, _ []*os.File) (*testPong, []int, error) {
			switch m.Tag {
			case tagRefuse:
				return nil, nil, &Error{Code: ErrRefused, Message: "outside bounds"}
			case tagFail:
				return nil, nil, errors.New("mount /\xff\x00: " + strings.Repeat("x", 600))
			case tagBadReply:
				// A descriptor the reply type does not carry.
				fd, err := unix.Dup(0)
				if err != nil {
					return nil, nil, err
				}
				return &testPong{}, []int{fd}, nil
			case tagProtocolError:
				return nil, nil, &Error{Code: ErrProtocol, Message: "handler says stop"}
			default:
				return &testPong{Tag: m.Tag + 100}, nil, nil
			}
		}),
		// Writes to the received descriptor and replies with the write end
		// of a fresh pipe whose read end is published in replyPipeRead.
		fdRoute.Handle(func(_ uint32, m *testFD, fds []*os.File) (*testFDReply, []int, error) {
			if _, err := fds[0].Write([]byte("from handler")); err != nil {
				return nil, nil, err
			}
			var p [2]int
			// Non-blocking so the test can put a deadline on the read end.
			if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
				return nil, nil, err
			}
			replyPipeRead <- os.NewFile(uintptr(p[0]), "reply-pipe-read")
			return &testFDReply{Tag: m.Tag}, []int{p[1]}, nil
		}),
	}
}

// otherHandlers are glove-other's: it answers its one request with an
// Error.
func otherHandlers() []Handler {
	return []Handler{
		HelloRoute.Handle(func(uint32, *Hello, []*os.File) (*HelloReply, []int, error) {
			return &HelloReply{Name: "glove-other", Protocol: Version}, nil, nil
		}),
		otherRoute.Handle(func(uint32, *testOther, []*os.File) (*testOtherReply, []int, error) {
			return nil, nil, &Error{Code: ErrUnsupported, Message: "test"}
		}),
	}
}

var replyPipeRead = make(chan *os.File, 1)

// startServer runs Serve for helper name (glove-test or glove-other) on
// one end of a socket pair and returns the other end and Serve's result.
func startServer(t *testing.T, name string) (peer, <-chan error) {
	t.Helper()
	a, b := rawPair(t)
	dup, err := unix.FcntlInt(uintptr(a), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	proto, handlers := testProto, fakeHandlers()
	if name == "glove-other" {
		proto, handlers = otherProto, otherHandlers()
	}
	logf := func(msg string, kv ...any) { t.Log(append([]any{"server:", msg}, kv...)...) }
	s := &Server{Protocol: proto, Conn: connOf(t, b), Handlers: handlers, Log: logf}
	done := make(chan error, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		done <- s.Serve()
	}()
	p := peer{raw: a, c: connOf(t, dup), closed: new(bool)}
	// Registered last so it runs first: stop the server before the test
	// ends, so it never logs to a finished test.
	t.Cleanup(func() {
		p.close()
		<-finished
	})
	return p, done
}

func wait(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
		return nil
	}
}

// call sends m with id and returns the reply frame.
func (p peer) call(t *testing.T, id uint32, m Message) Frame {
	t.Helper()
	if err := sendMsg(p.c, id, m, nil); err != nil {
		t.Fatal(err)
	}
	fr, err := p.c.Recv(testAll)
	if err != nil {
		t.Fatalf("reply to %d: %v", id, err)
	}
	return fr
}

// expectProtocolFault checks that Serve failed with sentinel want and that
// the peer received an ErrProtocol reply with request id 0.
func expectProtocolFault(t *testing.T, p peer, done <-chan error, want error) {
	t.Helper()
	err := wait(t, done)
	var pe *ProtocolError
	if !errors.As(err, &pe) || !errors.Is(err, want) {
		t.Fatalf("Serve returned %v, want *ProtocolError wrapping %v", err, want)
	}
	fr, err := p.c.Recv(testAll)
	if err != nil {
		t.Fatalf("no protocol error reply: %v", err)
	}
	e, ok := fr.Msg.(*Error)
	if !ok || fr.ReqID != 0 || e.Code != ErrProtocol {
		t.Fatalf("got reply %#v id %d, want Error{ErrProtocol} id 0", fr.Msg, fr.ReqID)
	}
}

func TestServeEOF(t *testing.T) {
	p, done := startServer(t, "glove-test")
	p.call(t, 1, &Hello{})
	p.close()
	if err := wait(t, done); err != nil {
		t.Fatalf("Serve after EOF: %v", err)
	}
}

func TestServeUnknownType(t *testing.T) {
	p, done := startServer(t, "glove-test")
	sendRaw(t, p.raw, frame(0x0999, 0), nil)
	expectProtocolFault(t, p, done, ErrNotAccepted)
}

func TestServeMalformedFrame(t *testing.T) {
	p, done := startServer(t, "glove-test")
	sendRaw(t, p.raw, rawHeader(2, uint16(MsgHello), 1, 0, 0, 0), nil)
	expectProtocolFault(t, p, done, ErrVersion)
}

func TestServeKnownTypeNotAccepted(t *testing.T) {
	// testPing is glove-test's request; glove-other does not accept it.
	p, done := startServer(t, "glove-other")
	if err := sendMsg(p.c, 1, &testPing{}, nil); err != nil {
		t.Fatal(err)
	}
	expectProtocolFault(t, p, done, ErrNotAccepted)
}

func TestServeReplayedID(t *testing.T) {
	p, done := startServer(t, "glove-test")
	p.call(t, 5, &Hello{})
	if err := sendMsg(p.c, 5, &testPing{}, nil); err != nil {
		t.Fatal(err)
	}
	expectProtocolFault(t, p, done, ErrRequestID)
}

func TestServeDecreasingID(t *testing.T) {
	p, done := startServer(t, "glove-test")
	p.call(t, 7, &testPing{})
	if err := sendMsg(p.c, 3, &testPing{}, nil); err != nil {
		t.Fatal(err)
	}
	expectProtocolFault(t, p, done, ErrRequestID)
}

func TestServeZeroID(t *testing.T) {
	p, done := startServer(t, "glove-test")
	if err := sendMsg(p.c, 0, &Hello{}, nil); err != nil {
		t.Fatal(err)
	}
	expectProtocolFault(t, p, done, ErrRequestID)
}

func TestServeOnceTwice(t *testing.T) {
	p, done := startServer(t, "glove-test")
	p.call(t, 1, &Hello{})
	if err := sendMsg(p.c, 2, &Hello{}, nil); err != nil {
		t.Fatal(err)
	}
	expectProtocolFault(t, p, done, ErrRepeated)
}

func TestServeReplyTypeFromPeer(t *testing.T) {
	for _, m := range []Message{&HelloReply{Name: "x"}, &Error{Code: ErrRefused}} {
		t.Run(reflect.TypeOf(m).Elem().Name(), func(t *testing.T) {
			p, done := startServer(t, "glove-test")
			if err := sendMsg(p.c, 1, m, nil); err != nil {
				t.Fatal(err)
			}
			expectProtocolFault(t, p, done, ErrNotAccepted)
		})
	}
}

func TestServeHandlerErrorKeepsServing(t *testing.T) {
	p, done := startServer(t, "glove-test")
	checkErr := func(fr Frame, id uint32, code ErrorCode) *Error {
		t.Helper()
		e, ok := fr.Msg.(*Error)
		if !ok || fr.ReqID != id || e.Code != code {
			t.Fatalf("got %#v id %d, want Error code %v id %d", fr.Msg, fr.ReqID, code, id)
		}
		return e
	}
	e := checkErr(p.call(t, 1, &testPing{Tag: tagRefuse}), 1, ErrRefused)
	if e.Message != "outside bounds" {
		t.Errorf("message %q", e.Message)
	}
	// A plain error becomes ErrInternal; its text is made encodable.
	e = checkErr(p.call(t, 2, &testPing{Tag: tagFail}), 2, ErrInternal)
	if !strings.HasPrefix(e.Message, "mount /\uFFFD\\0: ") || len(e.Message) > MaxErrorLen {
		t.Errorf("message %q", e.Message)
	}
	// A reply the handler got wrong is reported, not sent half-valid.
	checkErr(p.call(t, 3, &testPing{Tag: tagBadReply}), 3, ErrInternal)
	if fr := p.call(t, 4, &testPing{Tag: 9}); fr.ReqID != 4 || fr.Msg.(*testPong).Tag != 109 {
		t.Fatalf("got %#v id %d after errors", fr.Msg, fr.ReqID)
	}
	p.close()
	if err := wait(t, done); err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

func TestServeHandlerProtocolErrorStops(t *testing.T) {
	p, done := startServer(t, "glove-test")
	fr := p.call(t, 1, &testPing{Tag: tagProtocolError})
	if e, ok := fr.Msg.(*Error); !ok || e.Code != ErrProtocol || fr.ReqID != 1 {
		t.Fatalf("got %#v id %d", fr.Msg, fr.ReqID)
	}
	var e *Error
	if err := wait(t, done); !errors.As(err, &e) {
		t.Fatalf("Serve returned %v, want the handler's *Error", err)
	}
}

// TestServeDescriptorOwnership checks that the server closes both the
// descriptors it received and the reply descriptors it sent: each pipe's
// reader sees EOF only once every copy of the write end is closed.
func TestServeDescriptorOwnership(t *testing.T) {
	p, done := startServer(t, "glove-test")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := sendMsg(p.c, 1, &testFD{Tag: 5}, []int{int(w.Fd())}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	fr, err := p.c.Recv(testAll)
	if err != nil {
		t.Fatal(err)
	}
	if fr.Msg.(*testFDReply).Tag != 5 || len(fr.FDs) != 1 {
		t.Fatalf("got %#v with %d fds", fr.Msg, len(fr.FDs))
	}
	fr.FDs[0].Close()
	replyRead := <-replyPipeRead
	defer replyRead.Close()
	p.close()
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	// A deadline, because a leaked *os.File would eventually be closed by
	// its finalizer and the read would pass, just much later.
	readAll := func(f *os.File) (string, error) {
		if err := f.SetReadDeadline(time.Now().Add(2 * time.Second)); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(f)
		return string(b), err
	}
	if got, err := readAll(r); err != nil || got != "from handler" {
		t.Errorf("request pipe: %q, %v (server kept the received descriptor?)", got, err)
	}
	if got, err := readAll(replyRead); err != nil || got != "" {
		t.Errorf("reply pipe: %q, %v (server kept the reply descriptor?)", got, err)
	}
}

func TestServeRefusesHandlerMismatch(t *testing.T) {
	a, _ := connPair(t)
	all := fakeHandlers()
	missing := slices.DeleteFunc(fakeHandlers(), func(h Handler) bool { return h.Type() == msgTestPing })
	cases := []struct {
		name     string
		proto    *Protocol
		handlers []Handler
	}{
		{"no protocol", nil, all},
		{"extra handler", otherProto, append(otherHandlers(), all[1])},
		{"another protocol's handlers", otherProto, all},
		{"missing handler", testProto, missing},
		{"zero handler", testProto, append(missing, Handler{})},
		{"two handlers of a type", testProto, append(fakeHandlers(), all[1])},
		{"no handlers", testProto, nil},
	}
	for _, tc := range cases {
		s := &Server{Protocol: tc.proto, Conn: a, Handlers: tc.handlers}
		if err := s.Serve(); err == nil || errors.As(err, new(*ProtocolError)) {
			t.Errorf("%s: Serve returned %v, want a configuration error", tc.name, err)
		}
	}
}

// TestServeRefusesBeforeDecoding: a helper refuses a type it does not
// accept from the frame's header, without entering that type's decoder:
// another protocol's request sent to glove-test, well formed or not, is
// refused as not accepted (a malformed one would otherwise fail in the
// decoder), and the decoder hook never sees the type. (A helper links
// only its own protocol's messages, so it has no such decoder at all;
// this shows the server would not reach one.)
func TestServeRefusesBeforeDecoding(t *testing.T) {
	var mu sync.Mutex
	var decoded []MsgType
	testHookDecode = func(typ MsgType) {
		mu.Lock()
		decoded = append(decoded, typ)
		mu.Unlock()
	}
	t.Cleanup(func() { testHookDecode = nil })
	for name, payload := range map[string][]byte{
		"well formed": nil,
		"malformed":   {0xff, 0xff, 0xff},
	} {
		t.Run(name, func(t *testing.T) {
			p, done := startServer(t, "glove-test")
			if payload == nil {
				var err error
				if payload, err = Encode(1, otherRoute.Request(), &testOther{Session: "s-1"}); err != nil {
					t.Fatal(err)
				}
				payload = payload[HeaderSize:]
			}
			sendRaw(t, p.raw, frame(msgTestOther, 0, payload), nil)
			expectProtocolFault(t, p, done, ErrNotAccepted)
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if slices.Contains(decoded, msgTestOther) {
		t.Errorf("glove-test entered another protocol's decoder (decoded %v)", decoded)
	}
	if !slices.Contains(decoded, MsgError) {
		t.Errorf("the hook saw no decode at all (%v): it does not measure anything", decoded)
	}
}
