// SPDX-License-Identifier: Apache-2.0

package streamproxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	// Start the runtime poller (its epoll and wakeup descriptors stay
	// open for the life of the process) before any descriptor count.
	a, b, err := socketpair()
	if err != nil {
		panic(err)
	}
	_ = a.Close()
	_ = b.Close()
	os.Exit(m.Run())
}

func fdCount(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// checkFDs must be called first in a test: its cleanup runs last.
func checkFDs(t testing.TB) {
	t.Helper()
	before := fdCount(t)
	t.Cleanup(func() {
		if after := fdCount(t); after != before {
			t.Errorf("descriptor leak: %d open before, %d after", before, after)
		}
	})
}

func socketpair() (Conn, Conn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	a, err := FromFD(fds[0])
	if err != nil {
		_ = unix.Close(fds[1])
		return nil, nil, err
	}
	b, err := FromFD(fds[1])
	if err != nil {
		_ = a.Close()
		return nil, nil, err
	}
	return a, b, nil
}

func pair(t testing.TB) (Conn, Conn) {
	t.Helper()
	a, b, err := socketpair()
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

// recAudit records statuses; hook, if set, runs before a record is kept
// and may fail it.
type recAudit struct {
	mu       sync.Mutex
	statuses []string
	hook     func(Record) error
}

func (a *recAudit) Record(r Record) error {
	if r.Phase != PhaseExchange {
		return errors.New("bad phase")
	}
	if a.hook != nil {
		if err := a.hook(r); err != nil {
			return err
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.statuses = append(a.statuses, r.Status)
	return nil
}

func (a *recAudit) got() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.statuses)
}

// env is a relay over two real socketpairs: guest is the sandbox's end,
// up the upstream server's end.
type env struct {
	t     *testing.T
	relay *Relay
	guest Conn
	up    Conn
	audit *recAudit
	done  chan struct{}
	seen  [][]byte // requests the upstream server read
}

const testMax = 1024

func newEnv(t *testing.T, maxExchange time.Duration, check func() error) *env {
	t.Helper()
	g0, g1 := pair(t)
	u0, u1 := pair(t)
	e := &env{t: t, guest: g1, up: u1, audit: &recAudit{}, done: make(chan struct{})}
	r, err := NewRelay(RelayConfig{Guest: g0, Upstream: u0, MaxFrame: testMax, MaxExchange: maxExchange, Audit: e.audit, CheckUpstream: check})
	if err != nil {
		t.Fatal(err)
	}
	e.relay = r
	t.Cleanup(func() {
		_ = r.Close()
		_ = g1.Close()
		_ = u1.Close()
	})
	return e
}

// serve runs an upstream server: for each request it calls respond and
// writes the returned raw bytes; it stops at EOF or any error.
func (e *env) serve(respond func(req []byte) []byte) {
	go func() {
		defer close(e.done)
		for {
			req, err := ReadFrame(e.up, HardMaxFrameBytes, time.Time{})
			if err != nil {
				return
			}
			e.seen = append(e.seen, req)
			if _, err := e.up.Write(respond(req)); err != nil {
				return
			}
		}
	}()
}

func echo(req []byte) []byte { return frameOf(append([]byte("re:"), req...)) }

// finish closes the relay and waits for the upstream server.
func (e *env) finish() {
	_ = e.relay.Close()
	<-e.done
}

// guestRest reads everything the guest end receives until EOF.
func (e *env) guestRest() []byte {
	e.t.Helper()
	if err := e.guest.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		e.t.Fatal(err)
	}
	// Closing a unix stream socket with unread input resets the peer
	// after it has read what was already queued to it.
	b, err := io.ReadAll(e.guest)
	if err != nil && !errors.Is(err, unix.ECONNRESET) {
		e.t.Fatalf("guest read: %v", err)
	}
	return b
}

func (e *env) want(err, wantErr error, statuses ...string) {
	e.t.Helper()
	if !errors.Is(err, wantErr) {
		e.t.Fatalf("Exchange = %v, want %v", err, wantErr)
	}
	if got := e.audit.got(); !slices.Equal(got, statuses) {
		e.t.Fatalf("audit = %q, want %q", got, statuses)
	}
	if err := e.relay.Exchange(context.Background()); err != ErrClosed {
		e.t.Fatalf("Exchange after failure = %v, want ErrClosed", err)
	}
}

func (e *env) send(b []byte) {
	e.t.Helper()
	if _, err := e.guest.Write(b); err != nil {
		e.t.Fatal(err)
	}
}

func TestRoundTrip(t *testing.T) {
	checkFDs(t)
	e := newEnv(t, 5*time.Second, nil)
	e.serve(echo)
	ctx := context.Background()
	for _, req := range [][]byte{[]byte("a"), filled(testMax-len("re:"), 'b'), []byte("ccc")} {
		e.send(frameOf(req))
		if err := e.relay.Exchange(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFrame(e.guest, HardMaxFrameBytes, time.Now().Add(5*time.Second))
		if err != nil || !bytes.Equal(got, append([]byte("re:"), req...)) {
			t.Fatalf("response %q, %v", got, err)
		}
	}
	want := []string{StatusDeliveryPending, StatusDelivered, StatusDeliveryPending, StatusDelivered, StatusDeliveryPending, StatusDelivered}
	if got := e.audit.got(); !slices.Equal(got, want) {
		t.Fatalf("audit = %q", got)
	}
	// The guest closing between exchanges is a clean end.
	_ = e.guest.Close()
	e.want(e.relay.Exchange(ctx), io.EOF, want...)
	e.finish()
	if len(e.seen) != 3 {
		t.Fatalf("upstream saw %d requests", len(e.seen))
	}
}

func TestServe(t *testing.T) {
	checkFDs(t)
	e := newEnv(t, 5*time.Second, nil)
	e.serve(echo)
	// A guest that sends its next request as soon as it has read a
	// response can race the post-send peek and lose its stream (docs/helpers.md,
	// "The post-send rule"); this one waits until delivered is recorded.
	delivered := make(chan struct{}, 1)
	e.audit.hook = func(r Record) error {
		if r.Status == StatusDelivered {
			defer func() { delivered <- struct{}{} }()
		}
		return nil
	}
	errc := make(chan error, 1)
	go func() { errc <- e.relay.Serve(context.Background()) }()
	for range 5 {
		e.send(frameOf([]byte("ping")))
		got, err := ReadFrame(e.guest, HardMaxFrameBytes, time.Now().Add(5*time.Second))
		if err != nil || string(got) != "re:ping" {
			t.Fatalf("response %q, %v", got, err)
		}
		<-delivered
	}
	_ = e.guest.Close()
	if err := <-errc; err != io.EOF {
		t.Fatalf("Serve = %v", err)
	}
	e.finish()
	if n := len(e.audit.got()); n != 10 {
		t.Fatalf("%d records", n)
	}
}

func TestPipelinedAtRequestBoundary(t *testing.T) {
	checkFDs(t)
	e := newEnv(t, 5*time.Second, nil)
	e.serve(echo)
	e.send(concat(frameOf([]byte("one")), frameOf([]byte("two"))))
	err := e.relay.Exchange(context.Background())
	e.want(err, ErrPipelined, StatusDeliveryFailed)
	// Both were queued: the request's first read took them together.
	if !strings.Contains(err.Error(), "0 bytes queued at the request boundary, 7 read past the request") {
		t.Fatalf("Exchange = %v, want bytes read past the request", err)
	}
	e.finish()
	if len(e.seen) != 0 {
		t.Fatal("a pipelined request was forwarded upstream")
	}
	if b := e.guestRest(); len(b) != 0 {
		t.Fatalf("guest received %d bytes", len(b))
	}
}

// afterRead wraps the relay's guest end to inject input once its first
// read returned.
type afterRead struct {
	Conn
	fn func()
}

func (c *afterRead) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if fn := c.fn; fn != nil {
		c.fn = nil
		fn()
	}
	return n, err
}

// TestPipelinedAfterSplitRequest: a request whose first read took only
// its header, and whose payload came with the next request; the relay
// reads exactly the payload, and the queue check at the request boundary
// refuses the rest (the first read took nothing past the frame).
func TestPipelinedAfterSplitRequest(t *testing.T) {
	checkFDs(t)
	e := newEnv(t, 5*time.Second, nil)
	e.serve(echo)
	one := frameOf([]byte("one"))
	e.relay.cfg.Guest = &afterRead{Conn: e.relay.cfg.Guest, fn: func() { e.send(concat(one[HeaderSize:], frameOf([]byte("two")))) }}
	e.send(one[:HeaderSize])
	err := e.relay.Exchange(context.Background())
	e.want(err, ErrPipelined, StatusDeliveryFailed)
	if !strings.Contains(err.Error(), "7 bytes queued at the request boundary, 0 read past the request") {
		t.Fatalf("Exchange = %v, want the queue check's refusal", err)
	}
	e.finish()
	if len(e.seen) != 0 {
		t.Fatal("a pipelined request was forwarded upstream")
	}
}

func TestPipelinedDuringAudit(t *testing.T) {
	checkFDs(t)
	e := newEnv(t, 5*time.Second, nil)
	e.serve(echo)
	e.audit.hook = func(r Record) error {
		if r.Status == StatusDeliveryPending {
			e.send(frameOf([]byte("next")))
		}
		return nil
	}
	e.send(frameOf([]byte("one")))
	err := e.relay.Exchange(context.Background())
	e.want(err, ErrPipelined, StatusDeliveryPending, StatusDeliveryFailed)
	e.finish()
	if b := e.guestRest(); len(b) != 0 {
		t.Fatalf("suppressed response leaked: %d bytes", len(b))
	}
}

// afterWrite wraps the relay's guest end to inject input right after the
// response is sent, before the post-send peek.
type afterWrite struct {
	Conn
	fn func()
}

func (c *afterWrite) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if c.fn != nil {
		c.fn()
	}
	return n, err
}

func TestPipelinedAfterRelease(t *testing.T) {
	checkFDs(t)
	e := newEnv(t, 5*time.Second, nil)
	e.serve(echo)
	e.relay.cfg.Guest = &afterWrite{Conn: e.relay.cfg.Guest, fn: func() { e.send(frameOf([]byte("next"))) }}
	e.send(frameOf([]byte("one")))
	err := e.relay.Exchange(context.Background())
	// Sent, but not claimed delivered: pending stays, failed is added.
	e.want(err, ErrPipelined, StatusDeliveryPending, StatusDeliveryFailed)
	e.finish()
	if b := e.guestRest(); !bytes.Equal(b, frameOf([]byte("re:one"))) {
		t.Fatalf("guest received %q", b)
	}
}

func TestOversizedResponse(t *testing.T) {
	checkFDs(t)
	e := newEnv(t, 5*time.Second, nil)
	e.serve(func([]byte) []byte { return frameOf(filled(testMax+1, 'x')) })
	e.send(frameOf([]byte("one")))
	err := e.relay.Exchange(context.Background())
	e.want(err, ErrFraming, StatusDeliveryFailed)
	e.finish()
	if b := e.guestRest(); len(b) != 0 {
		t.Fatalf("guest received %d bytes", len(b))
	}
}

func TestBadRequestFrames(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"zero length", hdr(0)},
		{"over max", concat(hdr(testMax+1), filled(testMax+1, 'x'))},
		{"truncated", []byte{0, 0}},
		{"truncated payload", concat(hdr(10), []byte("abc"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkFDs(t)
			e := newEnv(t, 5*time.Second, nil)
			e.serve(echo)
			e.send(tc.in)
			if strings.HasPrefix(tc.name, "truncated") {
				if err := unix.Shutdown(fdOf(t, e.guest), unix.SHUT_WR); err != nil {
					t.Fatal(err)
				}
			}
			// No complete request: no record at all.
			e.want(e.relay.Exchange(context.Background()), ErrFraming)
			e.finish()
			if len(e.seen) != 0 {
				t.Fatal("forwarded")
			}
		})
	}
}

func fdOf(t *testing.T, c Conn) int {
	t.Helper()
	var fd int
	if err := control(func(f []int) error { fd = f[0]; return nil }, c.(unixConn)); err != nil {
		t.Fatal(err)
	}
	return fd
}

func TestLateResponse(t *testing.T) {
	checkFDs(t)
	e := newEnv(t, 100*time.Millisecond, nil)
	e.serve(func(req []byte) []byte {
		time.Sleep(300 * time.Millisecond)
		return echo(req)
	})
	e.send(frameOf([]byte("one")))
	start := time.Now()
	err := e.relay.Exchange(context.Background())
	if d := time.Since(start); d > 250*time.Millisecond {
		t.Fatalf("timeout took %v", d)
	}
	// It never got as far as the pending record.
	e.want(err, ErrTimeout, StatusDeliveryFailed)
	e.finish()
	if b := e.guestRest(); len(b) != 0 {
		t.Fatalf("guest received %d bytes", len(b))
	}
}

func TestSlowPendingAudit(t *testing.T) {
	checkFDs(t)
	e := newEnv(t, 100*time.Millisecond, nil)
	e.serve(echo)
	e.audit.hook = func(r Record) error {
		if r.Status == StatusDeliveryPending {
			time.Sleep(200 * time.Millisecond) // a kernel-blocked fsync
		}
		return nil
	}
	e.send(frameOf([]byte("one")))
	err := e.relay.Exchange(context.Background())
	// The late pending record remains; the response is suppressed.
	e.want(err, ErrTimeout, StatusDeliveryPending, StatusDeliveryFailed)
	e.finish()
	if b := e.guestRest(); len(b) != 0 {
		t.Fatalf("guest received %d bytes", len(b))
	}
}

func TestAuditFailure(t *testing.T) {
	for _, failing := range []string{StatusDeliveryPending, StatusDelivered} {
		t.Run(failing, func(t *testing.T) {
			checkFDs(t)
			e := newEnv(t, 5*time.Second, nil)
			e.serve(echo)
			e.audit.hook = func(r Record) error {
				if r.Status == failing {
					return errors.New("disk full")
				}
				return nil
			}
			e.send(frameOf([]byte("one")))
			err := e.relay.Exchange(context.Background())
			e.finish()
			if failing == StatusDeliveryPending {
				e.want(err, ErrAudit, StatusDeliveryFailed)
				if b := e.guestRest(); len(b) != 0 {
					t.Fatalf("guest received %d bytes", len(b))
				}
				return
			}
			// Released, but never recorded delivered.
			e.want(err, ErrAudit, StatusDeliveryPending, StatusDeliveryFailed)
			if b := e.guestRest(); !bytes.Equal(b, frameOf([]byte("re:one"))) {
				t.Fatalf("guest received %q", b)
			}
		})
	}
}

func TestUpstreamDrift(t *testing.T) {
	for _, failAt := range []int{1, 2} {
		t.Run([]string{"", "before send", "after receive"}[failAt], func(t *testing.T) {
			checkFDs(t)
			calls := 0
			e := newEnv(t, 5*time.Second, func() error {
				calls++
				if calls == failAt {
					return errors.New("peer uid changed")
				}
				return nil
			})
			e.serve(echo)
			e.send(frameOf([]byte("one")))
			err := e.relay.Exchange(context.Background())
			e.want(err, ErrUpstreamDrift, StatusDeliveryFailed)
			e.finish()
			if want := failAt - 1; len(e.seen) != want {
				t.Fatalf("upstream saw %d requests, want %d", len(e.seen), want)
			}
			if b := e.guestRest(); len(b) != 0 {
				t.Fatalf("guest received %d bytes", len(b))
			}
		})
	}
}

func TestCancel(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		checkFDs(t)
		e := newEnv(t, 5*time.Second, nil)
		e.serve(echo)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		e.want(e.relay.Exchange(ctx), ErrCanceled)
		e.finish()
	})
	t.Run("waiting upstream", func(t *testing.T) {
		checkFDs(t)
		e := newEnv(t, 5*time.Second, nil)
		release := make(chan struct{})
		e.serve(func(req []byte) []byte {
			<-release
			return echo(req)
		})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		e.send(frameOf([]byte("one")))
		err := e.relay.Exchange(ctx)
		close(release)
		e.want(err, ErrCanceled, StatusDeliveryFailed)
		e.finish()
		if b := e.guestRest(); len(b) != 0 {
			t.Fatalf("guest received %d bytes", len(b))
		}
	})
	t.Run("already canceled", func(t *testing.T) {
		checkFDs(t)
		e := newEnv(t, 5*time.Second, nil)
		e.serve(echo)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		e.send(frameOf([]byte("one")))
		e.want(e.relay.Exchange(ctx), ErrCanceled)
		e.finish()
		if len(e.seen) != 0 {
			t.Fatal("forwarded")
		}
	})
}

func TestNewAndFromFD(t *testing.T) {
	checkFDs(t)
	a, b := pair(t)
	defer a.Close()
	defer b.Close()
	for _, cfg := range []RelayConfig{
		{Guest: a, Upstream: b, MaxFrame: 0, MaxExchange: time.Second, Audit: &recAudit{}},
		{Guest: a, Upstream: b, MaxFrame: HardMaxFrameBytes + 1, MaxExchange: time.Second, Audit: &recAudit{}},
		{Guest: a, Upstream: b, MaxFrame: 10, MaxExchange: 0, Audit: &recAudit{}},
		{Guest: a, Upstream: b, MaxFrame: 10, MaxExchange: time.Second},
		{Upstream: b, MaxFrame: 10, MaxExchange: time.Second, Audit: &recAudit{}},
	} {
		if _, err := NewRelay(cfg); !errors.Is(err, ErrBound) {
			t.Fatalf("NewRelay(%+v) = %v", cfg, err)
		}
	}
	// A datagram socket and a pipe are refused, and FromFD closes them.
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		if _, err := FromFD(fd); err == nil {
			t.Fatal("datagram socket accepted")
		}
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	for _, fd := range p {
		if _, err := FromFD(fd); err == nil {
			t.Fatal("pipe accepted")
		}
	}
	// Queued counts unread bytes.
	if _, err := b.Write([]byte("12345")); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Queued(); err != nil || n != 5 {
		t.Fatalf("Queued = %d, %v", n, err)
	}
}

// TestOnlyDeliveredDeferred: of an exchange's records only delivered may
// be appended without being made durable (docs/helpers.md, "What is
// durable when"); delivery_pending, before the release, and delivery_failed
// are durable when Record returns.
func TestOnlyDeliveredDeferred(t *testing.T) {
	checkFDs(t)
	e := newEnv(t, 5*time.Second, nil)
	e.serve(echo)
	e.audit.hook = func(r Record) error {
		if r.Deferred != (r.Status == StatusDelivered) {
			t.Errorf("%s record deferred: %v", r.Status, r.Deferred)
		}
		return nil
	}
	e.send(frameOf([]byte("one")))
	if err := e.relay.Exchange(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFrame(e.guest, HardMaxFrameBytes, time.Now().Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	e.send(concat(frameOf([]byte("two")), frameOf([]byte("three"))))
	e.want(e.relay.Exchange(context.Background()), ErrPipelined, StatusDeliveryPending, StatusDelivered, StatusDeliveryFailed)
	e.finish()
}
