// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/streamproxy"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/streamwire"
	"github.com/glove-sandbox/glove/helpers/wire/wirecall"
	"github.com/glove-sandbox/glove/helpers/wire/wiretest"
	"github.com/glove-sandbox/glove/supervisor/engine/helperproc"
	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

// The upstream of these tests is a real unix-socket server of the test
// process, listening on a path in a directory of the service user. The
// helper requires the upstream's SO_PEERCRED uid to be its own (the
// service user's), and for a connected socket SO_PEERCRED names the
// listener as it was at listen(2): spListen therefore calls listen on a
// locked thread whose effective uid and gid are, for that moment, the
// service user's (credentials are per thread in Linux; the Go runtime
// never clones a new thread from a locked one). A listener made as root
// is the wrong-uid upstream the helper must refuse.

// spMaxFrame is max_frame_bytes in testenv's streamproxy.json.
const spMaxFrame = 16 << 10

// spDir is a directory owned by the service user, mode 0700, removed when
// the test ends.
func spDir(t testing.TB, env *testenv.Env) string {
	t.Helper()
	dir, err := os.MkdirTemp(env.Base, "streamproxy-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, env.UID, env.GID); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// spAsServiceUser runs fn on this goroutine's thread with the service
// user's effective uid and gid, then restores root.
func spAsServiceUser(t testing.TB, env *testenv.Env, fn func()) {
	t.Helper()
	const keep = ^uintptr(0) // -1: leave the id unchanged
	runtime.LockOSThread()
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, keep, uintptr(env.GID), keep); e != 0 {
		runtime.UnlockOSThread()
		t.Fatalf("setresgid: %v", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, keep, uintptr(env.UID), keep); e != 0 {
		_, _, _ = unix.RawSyscall(unix.SYS_SETRESGID, keep, 0, keep)
		runtime.UnlockOSThread()
		t.Fatalf("setresuid: %v", e)
	}
	fn()
	_, _, e1 := unix.RawSyscall(unix.SYS_SETRESUID, keep, 0, keep)
	_, _, e2 := unix.RawSyscall(unix.SYS_SETRESGID, keep, 0, keep)
	if e1 != 0 || e2 != 0 || unix.Geteuid() != 0 || unix.Getegid() != 0 {
		// Leave the thread locked: it dies with this goroutine rather
		// than run other goroutines with the service user's ids.
		t.Fatalf("restore root: %v %v", e1, e2)
	}
	runtime.UnlockOSThread()
}

// spUpstream is the test's upstream server: it accepts one connection
// and answers each request frame with the same frame, after calling
// onRequest (which may delay or withhold the answer by blocking until
// stop is closed, when the test ends; it returns false to close the
// connection instead of answering).
type spUpstream struct {
	ln        *net.UnixListener
	onRequest func(payload []byte, stop <-chan struct{}) bool
	stop      chan struct{}
	wg        sync.WaitGroup
	mu        sync.Mutex
	conns     []net.Conn
	requests  chan []byte
	discard   bool // keep no requests (the benchmark's upstream)
	// rights: each response carries a datagram socket (SCM_RIGHTS), and
	// every control message the upstream receives is counted in oob.
	rights bool
	oob    atomic.Int64
}

// oobReader reads a unix stream with recvmsg, counting the control bytes
// that arrive with the data.
type oobReader struct {
	c   *net.UnixConn
	oob *atomic.Int64
}

func (r oobReader) Read(b []byte) (int, error) {
	oob := make([]byte, 64)
	n, oobn, _, _, err := r.c.ReadMsgUnix(b, oob)
	r.oob.Add(int64(oobn))
	return n, err
}

func spListen(t testing.TB, env *testenv.Env, dir string, asServiceUser bool) *spUpstream {
	t.Helper()
	path := filepath.Join(dir, "upstream.sock")
	u := &spUpstream{requests: make(chan []byte, 16), stop: make(chan struct{})}
	listen := func() {
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err == nil {
			u.ln = ln
		} else {
			t.Errorf("listen %s: %v", path, err)
		}
	}
	if asServiceUser {
		spAsServiceUser(t, env, listen)
	} else {
		listen()
	}
	if u.ln == nil {
		t.FailNow()
	}
	t.Cleanup(func() {
		close(u.stop)
		u.ln.Close()
		u.mu.Lock()
		for _, c := range u.conns {
			c.Close()
		}
		u.mu.Unlock()
		u.wg.Wait()
	})
	return u
}

// connect dials the upstream and serves the accepted end; it returns the
// dialled end as a file (a duplicate, closed when the test ends).
func (u *spUpstream) connect(t testing.TB) *os.File {
	t.Helper()
	c, err := net.DialUnix("unix", nil, u.ln.Addr().(*net.UnixAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := u.ln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	u.mu.Lock()
	u.conns = append(u.conns, s)
	u.mu.Unlock()
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		defer s.Close()
		var in io.Reader = s
		if u.rights {
			in = oobReader{c: s, oob: &u.oob}
		}
		for {
			p, err := spReadFrame(in)
			if err != nil {
				return
			}
			if !u.discard {
				u.requests <- p
			}
			if u.onRequest != nil && !u.onRequest(p, u.stop) {
				return
			}
			if u.rights {
				err = writeWithSocket(s, spEncode(p))
			} else {
				_, err = s.Write(spEncode(p))
			}
			if err != nil {
				return
			}
		}
	}()
	f, err := c.File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// writeWithSocket writes b with an unbound datagram socket attached.
func writeWithSocket(c *net.UnixConn, b []byte) error {
	d, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(d)
	_, _, err = c.WriteMsgUnix(b, unix.UnixRights(d), nil)
	return err
}

// spEncode is one relay frame: big-endian length, then the payload.
func spEncode(p []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(p))), p...)
}

// spHold returns an upstream handler that withholds the response to a
// request for which match is true until release is called (or the test
// ends, when it closes the connection instead), and release.
func spHold(match func(p []byte) bool) (onRequest func([]byte, <-chan struct{}) bool, release func()) {
	gate := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	onRequest = func(p []byte, stop <-chan struct{}) bool {
		if !match(p) {
			return true
		}
		select {
		case <-gate:
			return true
		case <-stop:
			return false
		}
	}
	return onRequest, release
}

func spAny([]byte) bool { return true }

func spReadFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	p := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(r, p); err != nil {
		return nil, err
	}
	return p, nil
}

// spAuditFile creates the audit file as the supervisor would: owned by
// the service user, opened O_WRONLY|O_APPEND.
func spAuditFile(t testing.TB, env *testenv.Env, dir string) (string, *os.File) {
	t.Helper()
	p := filepath.Join(dir, "audit.jsonl")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := f.Chown(env.UID, env.GID); err != nil {
		t.Fatal(err)
	}
	return p, f
}

// spGuestPair is the sandbox's socketpair: the helper's end as a file and
// the sandboxed program's end as a connection (with deadlines).
func spGuestPair(t testing.TB) (*os.File, net.Conn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	helper := os.NewFile(uintptr(fds[0]), "guest-helper")
	t.Cleanup(func() { helper.Close() })
	cf := os.NewFile(uintptr(fds[1]), "guest-client")
	defer cf.Close()
	client, err := net.FileConn(cf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return helper, client
}

type spAuditRecord struct {
	Seq       uint64 `json:"seq"`
	Session   string `json:"session"`
	Alias     string `json:"alias"`
	Phase     string `json:"phase"`
	Status    string `json:"status"`
	LatencyMS uint64 `json:"latency_ms"`
}

// spReadAudit reads the audit file from outside and checks every line
// has exactly the six fields, the session and alias, and consecutive
// sequence numbers; it returns the statuses.
func spReadAudit(t testing.TB, path, session, alias string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var statuses []string
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if line == "" {
			continue
		}
		var keys map[string]any
		if err := json.Unmarshal([]byte(line), &keys); err != nil {
			t.Fatalf("audit line %d %q: %v", i+1, line, err)
		}
		var got []string
		for k := range keys {
			got = append(got, k)
		}
		slices.Sort(got)
		if want := []string{"alias", "latency_ms", "phase", "seq", "session", "status"}; !slices.Equal(got, want) {
			t.Errorf("audit line %d has fields %v, want %v", i+1, got, want)
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		var r spAuditRecord
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("audit line %d: %v", i+1, err)
		}
		if r.Seq != uint64(i+1) || r.Session != session || r.Alias != alias || r.Phase != "exchange" {
			t.Errorf("audit line %d: %+v", i+1, r)
		}
		statuses = append(statuses, r.Status)
	}
	return statuses
}

// spSession is one helper with one open stream.
type spSession struct {
	t         testing.TB
	p         *helperproc.Proc
	log       *testenv.SyncBuffer
	client    net.Conn
	up        *spUpstream
	audit     string
	session   string
	alias     string
	dir       string
	exchanges uint64 // counted by roundTrip
}

// spOpen starts glove-streamproxy and opens a stream whose upstream is
// served with onRequest.
func spOpen(t testing.TB, env *testenv.Env, onRequest func([]byte, <-chan struct{}) bool) *spSession {
	t.Helper()
	return spOpenWith(t, env, func(u *spUpstream) { u.onRequest = onRequest })
}

// spOpenWith is spOpen with the upstream set up by setup before it
// accepts the helper's connection.
func spOpenWith(t testing.TB, env *testenv.Env, setup func(*spUpstream)) *spSession {
	t.Helper()
	dir := spDir(t, env)
	up := spListen(t, env, dir, true)
	setup(up)
	upFile := up.connect(t)
	auditPath, auditFile := spAuditFile(t, env, dir)
	guest, client := spGuestPair(t)
	p, log := env.StartServing(t, streamproxy.Name)
	s := &spSession{t: t, p: p, log: log, client: client, up: up, audit: auditPath, session: "s-1", alias: "svc.echo", dir: dir}
	_, files, err := wirecall.Call(streamwire.Open, p.Client, &streamwire.OpenRequest{Session: s.session, Alias: s.alias},
		[]int{int(guest.Fd()), int(upFile.Fd()), int(auditFile.Fd())})
	closeAll(files)
	if err != nil {
		t.Fatalf("stream open: %v\nhelper log: %s", err, log)
	}
	// The helper holds its own duplicates now; the supervisor keeps none.
	guest.Close()
	upFile.Close()
	auditFile.Close()
	return s
}

func (s *spSession) status() *streamwire.StatusReply {
	s.t.Helper()
	r, files, err := wirecall.Call(streamwire.Status, s.p.Client, &streamwire.StatusRequest{}, nil)
	closeAll(files)
	if err != nil {
		s.t.Fatalf("stream status: %v\nhelper log: %s", err, s.log)
	}
	return r
}

// waitClosed polls streamwire Status until the stream closed.
func (s *spSession) waitClosed() *streamwire.StatusReply {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := s.status()
		if !st.Open {
			return st
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("stream still open after 10s: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// roundTrip sends one request as the sandboxed program, reads the
// response, and waits until the helper counts the exchange delivered:
// a next request sent before its post-send peek would be pipelined
// (docs/helpers.md, "The post-send rule").
func (s *spSession) roundTrip(p []byte) []byte {
	s.t.Helper()
	_ = s.client.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := s.client.Write(spEncode(p)); err != nil {
		s.t.Fatal(err)
	}
	got, err := spReadFrame(s.client)
	if err != nil {
		s.t.Fatalf("read response: %v\nhelper log: %s", err, s.log)
	}
	s.exchanges++
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := s.status()
		if st.Exchanges == s.exchanges {
			break
		}
		if !st.Open || time.Now().After(deadline) {
			s.t.Fatalf("exchange %d not counted: %+v", s.exchanges, st)
		}
		time.Sleep(2 * time.Millisecond)
	}
	return got
}

// upstreamRequest waits for the next request the upstream received.
func (s *spSession) upstreamRequest() []byte {
	s.t.Helper()
	select {
	case p := <-s.up.requests:
		return p
	case <-time.After(10 * time.Second):
		s.t.Fatalf("no request reached the upstream\nhelper log: %s", s.log)
		return nil
	}
}

func (s *spSession) auditStatuses() []string {
	s.t.Helper()
	return spReadAudit(s.t, s.audit, s.session, s.alias)
}

// guestClosed checks the sandboxed program's end sees the stream gone
// (end of stream or a reset) without any further response.
func (s *spSession) guestClosed() {
	s.t.Helper()
	_ = s.client.SetDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(s.client)
	if len(b) != 0 {
		s.t.Errorf("the guest read %d bytes after the stream failed", len(b))
	}
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		s.t.Errorf("guest read: %v, want end of stream or ECONNRESET", err)
	}
}

func TestStreamproxyRoundTrips(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	s := spOpen(t, env, nil)
	var want []string
	for i, p := range [][]byte{[]byte("one"), bytes.Repeat([]byte{'x'}, spMaxFrame), {0}} {
		if got := s.roundTrip(p); !bytes.Equal(got, p) {
			t.Fatalf("exchange %d: response of %d bytes, want %d", i, len(got), len(p))
		}
		// roundTrip waited for the count, which the helper raises only
		// once delivered is recorded.
		want = append(want, "delivery_pending", "delivered")
		if got := s.auditStatuses(); !slices.Equal(got, want) {
			t.Fatalf("after exchange %d the audit says %v, want %v", i, got, want)
		}
	}
	if st := s.status(); !st.Open || st.Exchanges != 3 || st.Err != "" {
		t.Errorf("status %+v, want open with 3 exchanges", st)
	}
	// An idle stream closed by the supervisor: no exchange was under
	// way, so nothing more is recorded.
	if _, _, err := wirecall.Call(streamwire.Close, s.p.Client, &streamwire.CloseRequest{}, nil); err != nil {
		t.Fatalf("stream close: %v", err)
	}
	if st := s.status(); st.Open || st.Err != streamproxy.ErrCanceled.Code || st.Exchanges != 3 {
		t.Errorf("status after close %+v, want closed, canceled", st)
	}
	if got := s.auditStatuses(); !slices.Equal(got, want) {
		t.Errorf("audit after close %v, want %v", got, want)
	}
	s.guestClosed()
	// A second close is harmless.
	if _, _, err := wirecall.Call(streamwire.Close, s.p.Client, &streamwire.CloseRequest{}, nil); err != nil {
		t.Errorf("second stream close: %v", err)
	}
}

func TestStreamproxyGuestEOF(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	s := spOpen(t, env, nil)
	s.roundTrip([]byte("a"))
	s.client.Close()
	if st := s.waitClosed(); st.Err != streamproxy.CodeEOF || st.Exchanges != 1 {
		t.Errorf("status %+v, want closed by eof after 1 exchange", st)
	}
}

func TestStreamproxyPipelined(t *testing.T) {
	env := testenv.Get(t)
	t.Run("two requests in one write", func(t *testing.T) {
		testenv.CheckLeaks(t, env.UID)
		s := spOpen(t, env, nil)
		if _, err := s.client.Write(append(spEncode([]byte("first")), spEncode([]byte("second"))...)); err != nil {
			t.Fatal(err)
		}
		if st := s.waitClosed(); st.Err != streamproxy.ErrPipelined.Code || st.Exchanges != 0 {
			t.Errorf("status %+v, want closed, pipelined", st)
		}
		if got := s.auditStatuses(); !slices.Equal(got, []string{"delivery_failed"}) {
			t.Errorf("audit %v, want only delivery_failed", got)
		}
		s.guestClosed()
	})
	t.Run("second request while the response is pending", func(t *testing.T) {
		testenv.CheckLeaks(t, env.UID)
		hold, release := spHold(spAny)
		s := spOpen(t, env, hold)
		if _, err := s.client.Write(spEncode([]byte("first"))); err != nil {
			t.Fatal(err)
		}
		s.upstreamRequest()
		if _, err := s.client.Write(spEncode([]byte("second"))); err != nil {
			t.Fatal(err)
		}
		release()
		if st := s.waitClosed(); st.Err != streamproxy.ErrPipelined.Code || st.Exchanges != 0 {
			t.Errorf("status %+v, want closed, pipelined", st)
		}
		if got := s.auditStatuses(); !slices.Equal(got, []string{"delivery_pending", "delivery_failed"}) {
			t.Errorf("audit %v, want delivery_pending, delivery_failed", got)
		}
		s.guestClosed()
	})
}

func TestStreamproxyFraming(t *testing.T) {
	env := testenv.Get(t)
	for _, c := range []struct {
		name  string
		frame []byte
	}{
		{"oversized request", binary.BigEndian.AppendUint32(nil, spMaxFrame+1)},
		{"zero-length request", binary.BigEndian.AppendUint32(nil, 0)},
	} {
		t.Run(c.name, func(t *testing.T) {
			testenv.CheckLeaks(t, env.UID)
			s := spOpen(t, env, nil)
			s.roundTrip([]byte("ok"))
			if _, err := s.client.Write(c.frame); err != nil {
				t.Fatal(err)
			}
			if st := s.waitClosed(); st.Err != streamproxy.ErrFraming.Code || st.Exchanges != 1 {
				t.Errorf("status %+v, want closed, framing", st)
			}
			if got := s.auditStatuses(); !slices.Equal(got, []string{"delivery_pending", "delivered"}) {
				t.Errorf("audit %v, want only the first exchange", got)
			}
			select {
			case p := <-s.up.requests:
				if string(p) != "ok" {
					t.Errorf("upstream saw %q", p)
				}
			default:
			}
			if len(s.up.requests) != 0 {
				t.Errorf("the bad frame reached the upstream")
			}
		})
	}
}

// TestStreamproxyCloseMidExchange: streamwire Close while the upstream holds
// the response cancels the exchange; nothing is released or recorded
// delivered.
func TestStreamproxyCloseMidExchange(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	hold, _ := spHold(spAny)
	s := spOpen(t, env, hold)
	if _, err := s.client.Write(spEncode([]byte("held"))); err != nil {
		t.Fatal(err)
	}
	s.upstreamRequest()
	if _, _, err := wirecall.Call(streamwire.Close, s.p.Client, &streamwire.CloseRequest{}, nil); err != nil {
		t.Fatalf("stream close: %v\nhelper log: %s", err, s.log)
	}
	if st := s.status(); st.Open || st.Err != streamproxy.ErrCanceled.Code {
		t.Errorf("status %+v, want closed, canceled", st)
	}
	if got := s.auditStatuses(); !slices.Equal(got, []string{"delivery_failed"}) {
		t.Errorf("audit %v, want only delivery_failed", got)
	}
	s.guestClosed()
}

// TestStreamproxyKilledMidExchange: the helper dies (SIGKILL) after the
// request went upstream and before the response came back; the audit
// never says delivered and the guest never sees the response.
func TestStreamproxyKilledMidExchange(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	hold, release := spHold(func(p []byte) bool { return string(p) == "in flight" })
	s := spOpen(t, env, hold)
	s.roundTrip([]byte("before"))
	s.upstreamRequest()
	if _, err := s.client.Write(spEncode([]byte("in flight"))); err != nil {
		t.Fatal(err)
	}
	s.upstreamRequest()
	if err := s.p.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, sig := testenv.WaitExit(t, s.p, 10*time.Second); sig != syscall.SIGKILL {
		t.Errorf("helper ended by %v, want SIGKILL", sig)
	}
	release() // the upstream answers now, to nobody
	s.guestClosed()
	got := s.auditStatuses()
	if want := []string{"delivery_pending", "delivered"}; !slices.Equal(got, want) {
		t.Errorf("audit %v, want %v (nothing for the killed exchange)", got, want)
	}
}

// TestStreamproxyRefusals: streamwire Open with descriptors of the wrong kind
// or identity is refused with a wire error; the helper keeps answering
// (streamwire Status: no stream) and a second streamwire Open is a protocol error.
func TestStreamproxyRefusals(t *testing.T) {
	env := testenv.Get(t)
	type fds struct{ guest, upstream, audit int }
	cases := []struct {
		name    string
		session string
		alias   string
		mutate  func(t *testing.T, dir string, f *fds)
		code    wire.ErrorCode
		text    string
	}{
		{name: "bad session", session: "S_1", code: wire.ErrBadRequest, text: "session"},
		{name: "bad alias", alias: "-x", code: wire.ErrBadRequest, text: "alias"},
		{name: "guest end is a pipe", mutate: func(t *testing.T, _ string, f *fds) {
			r, _ := spPipe(t)
			f.guest = r
		}, code: wire.ErrRefused, text: "guest end is not a socket"},
		{name: "guest end is a datagram socket", mutate: func(t *testing.T, _ string, f *fds) {
			f.guest = spSocketpair(t, unix.SOCK_DGRAM)
		}, code: wire.ErrRefused, text: "not an AF_UNIX stream socket"},
		{name: "upstream not connected", mutate: func(t *testing.T, _ string, f *fds) {
			fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Close(fd) })
			f.upstream = fd
		}, code: wire.ErrRefused, text: "upstream is not connected"},
		{name: "upstream served by root", mutate: func(t *testing.T, dir string, f *fds) {
			sub := filepath.Join(dir, "root")
			if err := os.Mkdir(sub, 0o700); err != nil {
				t.Fatal(err)
			}
			f.upstream = int(spListen(t, env, sub, false).connect(t).Fd())
		}, code: wire.ErrRefused, text: "upstream peer runs as uid 0"},
		{name: "guest end and upstream the same socket", mutate: func(t *testing.T, _ string, f *fds) {
			f.guest = f.upstream
		}, code: wire.ErrRefused, text: "same socket"},
		{name: "audit opened read-write", mutate: func(t *testing.T, dir string, f *fds) {
			f.audit = spOpenAudit(t, env, dir, os.O_RDWR|os.O_APPEND, true)
		}, code: wire.ErrRefused, text: "O_WRONLY|O_APPEND"},
		{name: "audit without O_APPEND", mutate: func(t *testing.T, dir string, f *fds) {
			f.audit = spOpenAudit(t, env, dir, os.O_WRONLY, true)
		}, code: wire.ErrRefused, text: "O_WRONLY|O_APPEND"},
		{name: "audit owned by root", mutate: func(t *testing.T, dir string, f *fds) {
			f.audit = spOpenAudit(t, env, dir, os.O_WRONLY|os.O_APPEND, false)
		}, code: wire.ErrRefused, text: "owned by uid 0"},
		{name: "audit is a pipe", mutate: func(t *testing.T, _ string, f *fds) {
			_, w := spPipe(t)
			f.audit = w
		}, code: wire.ErrRefused, text: "not a regular file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			testenv.CheckLeaks(t, env.UID)
			dir := spDir(t, env)
			up := spListen(t, env, dir, true)
			guest, _ := spGuestPair(t)
			_, audit := spAuditFile(t, env, dir)
			f := fds{int(guest.Fd()), int(up.connect(t).Fd()), int(audit.Fd())}
			if c.mutate != nil {
				c.mutate(t, dir, &f)
			}
			session, alias := "s-1", "svc"
			if c.session != "" {
				session = c.session
			}
			if c.alias != "" {
				alias = c.alias
			}
			p, log := env.StartHelper(t, streamproxy.Name)
			if _, err := p.Hello(); err != nil {
				t.Fatal(err)
			}
			_, files, err := wirecall.Call(streamwire.Open, p.Client, &streamwire.OpenRequest{Session: session, Alias: alias}, []int{f.guest, f.upstream, f.audit})
			closeAll(files)
			var we *wire.Error
			if !errors.As(err, &we) || we.Code != c.code || !strings.Contains(we.Message, c.text) {
				t.Fatalf("stream open: %v, want code %d naming %q\nhelper log: %s", err, c.code, c.text, log)
			}
			_, _, err = wirecall.Call(streamwire.Status, p.Client, &streamwire.StatusRequest{}, nil)
			if !errors.As(err, &we) || we.Code != wire.ErrBadRequest {
				t.Errorf("status without a stream: %v, want a bad-request error", err)
			}
			// One streamwire Open per helper, refused or not.
			_, files, err = wirecall.Call(streamwire.Open, p.Client, &streamwire.OpenRequest{Session: "s-1", Alias: "svc"}, []int{f.guest, f.upstream, f.audit})
			closeAll(files)
			if !errors.As(err, &we) || we.Code != wire.ErrProtocol {
				t.Errorf("second stream open: %v, want a protocol error", err)
			}
			if code, sig := testenv.WaitExit(t, p, 10*time.Second); code != helperkit.ExitProtocol {
				t.Errorf("exit %d (signal %v), want %d\nhelper log: %s", code, sig, helperkit.ExitProtocol, log)
			}
		})
	}
}

// TestStreamproxyDescriptorCounts: streamwire Open carries exactly three
// descriptors; any other count is a protocol error and the helper exits 2.
func TestStreamproxyDescriptorCounts(t *testing.T) {
	env := testenv.Get(t)
	for _, n := range []int{0, 1, 2, 4} {
		t.Run(fmt.Sprintf("%d descriptors", n), func(t *testing.T) {
			testenv.CheckLeaks(t, env.UID)
			p, log := env.StartHelper(t, streamproxy.Name)
			if _, err := p.Hello(); err != nil {
				t.Fatal(err)
			}
			good, err := wire.Encode(2, streamwire.Open.Request(), &streamwire.OpenRequest{Session: "s-1", Alias: "svc"})
			if err != nil {
				t.Fatal(err)
			}
			frame := append(wiretest.EncodeRawHeader(wire.Version, uint16(streamwire.Open.Type()), 2,
				uint32(len(good)-wire.HeaderSize), uint16(n), 0), good[wire.HeaderSize:]...)
			var fds []int
			for i := 0; i < n; i++ {
				fds = append(fds, spSocketpair(t, unix.SOCK_STREAM))
			}
			if err := p.Conn().SendRaw(frame, fds); err != nil {
				t.Fatal(err)
			}
			if fr, err := p.Conn().Recv(wiretest.OnlyErrors); err == nil {
				closeAll(fr.FDs)
				if e, ok := fr.Msg.(*wire.Error); !ok || e.Code != wire.ErrProtocol {
					t.Errorf("answer %#v, want a protocol error", fr.Msg)
				}
			}
			if code, sig := testenv.WaitExit(t, p, 10*time.Second); code != helperkit.ExitProtocol {
				t.Errorf("exit %d (signal %v), want %d\nhelper log: %s", code, sig, helperkit.ExitProtocol, log)
			}
		})
	}
}

// TestStreamproxyWithoutStream: status and close before any streamwire Open
// are refused and the helper goes on serving.
func TestStreamproxyWithoutStream(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	p, _ := env.StartServing(t, streamproxy.Name)
	for _, m := range []wire.Message{&streamwire.StatusRequest{}, &streamwire.CloseRequest{}} {
		var we *wire.Error
		if _, _, err := wirecall.CallAny(streamwire.Protocol, p.Client, m, nil); !errors.As(err, &we) || we.Code != wire.ErrBadRequest {
			t.Errorf("%T without a stream: %v, want a bad-request error", m, err)
		}
	}
}

func spPipe(t *testing.T) (r, w int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	return p[0], p[1]
}

// spSocketpair returns one end of a new AF_UNIX socketpair of typ.
func spSocketpair(t *testing.T, typ int) int {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fds[0]); unix.Close(fds[1]) })
	return fds[0]
}

// spOpenAudit opens another audit file with flags, owned by the service
// user when owned is set (else by root).
func spOpenAudit(t *testing.T, env *testenv.Env, dir string, flags int, owned bool) int {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "other-audit"), flags|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if owned {
		if err := f.Chown(env.UID, env.GID); err != nil {
			t.Fatal(err)
		}
	}
	return int(f.Fd())
}

// TestStreamproxyCarriesNoDescriptors: a descriptor attached to a request
// by the sandboxed program, or to a response by the upstream, is never
// passed on, and glove-streamproxy keeps none. The inherited stream is
// the sandbox's only socket to the outside, and a socket handed over it
// would reach any path socket the sandbox can see (attack case
// scm-rights-from-peer: no layer of the sandbox stops that, the peer must
// not send one).
func TestStreamproxyCarriesNoDescriptors(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	s := spOpenWith(t, env, func(u *spUpstream) { u.rights = true })
	fds := func() int {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", s.p.Pid()))
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := fds()
	uc := s.client.(*net.UnixConn)
	if err := uc.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := writeWithSocket(uc, spEncode([]byte("hand"))); err != nil {
		t.Fatal(err)
	}
	var got []byte
	oobn, buf, oob := 0, make([]byte, 64), make([]byte, 64)
	for len(got) < 8 {
		n, on, flags, _, err := uc.ReadMsgUnix(buf, oob)
		if err != nil {
			t.Fatalf("read the response: %v (%q so far)\nhelper log: %s", err, got, s.log)
		}
		got, oobn = append(got, buf[:n]...), oobn+on
		if flags&unix.MSG_CTRUNC != 0 {
			t.Error("a control message was cut short: one reached the guest")
		}
	}
	if !bytes.Equal(got, spEncode([]byte("hand"))) {
		t.Errorf("response %q", got)
	}
	if oobn != 0 {
		t.Errorf("the guest received %d bytes of control messages with the response", oobn)
	}
	if p := s.upstreamRequest(); string(p) != "hand" {
		t.Errorf("upstream got %q", p)
	}
	if n := s.up.oob.Load(); n != 0 {
		t.Errorf("the upstream received %d bytes of control messages with the request", n)
	}
	if after := fds(); after != before {
		t.Errorf("glove-streamproxy holds %d descriptors after the exchange, %d before: it kept a passed one", after, before)
	}
}
