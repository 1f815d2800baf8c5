// SPDX-License-Identifier: Apache-2.0

package wirecall

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/helpers/wire"
	"golang.org/x/sys/unix"
)

// glove-test's protocol: types outside every reserved range.
type testPing struct{ Tag uint32 }
type testPong struct{ Tag uint32 }
type testFD struct{}
type testFDReply struct{}

const tagRefuse = 1

var (
	pingRoute = wire.NewRoute[testPing, testPong](0xfff0, 0, 0, false)
	fdRoute   = wire.NewRoute[testFD, testFDReply](0xfff2, 1, 1, false)
	testProto = wire.NewProtocol("glove-test", pingRoute, fdRoute)
)

// connPair returns a connected pair of Conns, closed at the end of the test.
func connPair(t *testing.T) (*wire.Conn, *wire.Conn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out [2]*wire.Conn
	for i, fd := range fds {
		if out[i], err = wire.FromFile(os.NewFile(uintptr(fd), "test-sock")); err != nil {
			t.Fatal(err)
		}
		if err := out[i].SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		c := out[i]
		t.Cleanup(func() { c.Close() })
	}
	return out[0], out[1]
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func TestClientCall(t *testing.T) {
	a, b := connPair(t)
	s := &wire.Server{Protocol: testProto, Conn: b, Handlers: []wire.Handler{
		wire.HelloRoute.Handle(func(uint32, *wire.Hello, []*os.File) (*wire.HelloReply, []int, error) {
			return &wire.HelloReply{Name: "glove-test", Protocol: wire.Version}, nil, nil
		}),
		pingRoute.Handle(func(_ uint32, m *testPing, _ []*os.File) (*testPong, []int, error) {
			if m.Tag == tagRefuse {
				return nil, nil, &wire.Error{Code: wire.ErrRefused, Message: "outside bounds"}
			}
			return &testPong{Tag: m.Tag + 100}, nil, nil
		}),
		fdRoute.Handle(func(uint32, *testFD, []*os.File) (*testFDReply, []int, error) { return nil, nil, nil }),
	}}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	cl := &Client{Conn: a}
	hr, fds, err := Call(wire.HelloRoute, cl, &wire.Hello{}, nil)
	if err != nil || hr.Name != "glove-test" || len(fds) != 0 {
		t.Fatalf("Hello: %#v, %v", hr, err)
	}
	if pong, _, err := Call(pingRoute, cl, &testPing{Tag: 9}, nil); err != nil || pong.Tag != 109 {
		t.Fatalf("ping: %#v, %v", pong, err)
	}
	_, _, err = Call(pingRoute, cl, &testPing{Tag: tagRefuse}, nil)
	var e *wire.Error
	if !errors.As(err, &e) || e.Code != wire.ErrRefused {
		t.Fatalf("refusal: got %v", err)
	}
	if _, _, err := CallAny(testProto, cl, &testPong{}, nil); !errors.Is(err, wire.ErrInvalidMessage) {
		t.Fatalf("a reply sent as a request: got %v", err)
	}
	// A second Hello is a protocol fault: the client surfaces the helper's
	// explanation, sent with id 0.
	_, _, err = CallAny(testProto, cl, &wire.Hello{}, nil)
	if !errors.Is(err, wire.ErrRequestID) || !errors.As(err, &e) || e.Code != wire.ErrProtocol {
		t.Fatalf("protocol fault: got %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, wire.ErrRepeated) {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
}

func TestClientRejectsWrongReplyID(t *testing.T) {
	a, b := connPair(t)
	cl := &Client{Conn: a}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	go func() {
		if fr, err := b.Recv(func(wire.MsgType) *wire.Kind { return fdRoute.Request() }); err == nil {
			for _, f := range fr.FDs {
				f.Close()
			}
			// Echoes the wrong id, with a descriptor.
			b.Send(fr.ReqID+1, fdRoute.Reply(), &testFDReply{}, []int{p[1]})
		}
	}()
	before := openFDs(t)
	_, _, err := Call(fdRoute, cl, &testFD{}, []int{p[0]})
	var pe *wire.ProtocolError
	if !errors.Is(err, wire.ErrRequestID) || !errors.As(err, &pe) {
		t.Fatalf("got %v, want ErrRequestID", err)
	}
	if after := openFDs(t); after != before {
		t.Errorf("descriptor leak: %d open before, %d after", before, after)
	}
}
