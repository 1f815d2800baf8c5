// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/service/daemon"
	"github.com/glove-sandbox/glove/testenv"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// otherUID is the second peer uid of the connection tests: a uid with
// no account is enough, since only SO_PEERCRED is checked.
const otherUID = 65534

// connUnit is an in-process gloved (policy, store, receipts; no session
// runtime) whose socket any uid can reach, so that a test can connect as
// another uid and gloved's own SO_PEERCRED check decides; its JSON log is
// kept for the test.
type connUnit struct {
	socket string
	d      *daemon.Daemon
	log    *testenv.SyncBuffer
	done   chan error

	fds, goroutines int // before the daemon started
	stopped         bool
}

// startConnUnit starts the daemon with cfg's timeouts and allowed uids.
func startConnUnit(t *testing.T, cfg daemon.Config) *connUnit {
	t.Helper()
	u := &connUnit{log: &testenv.SyncBuffer{}, fds: countFDs(t), goroutines: runtime.NumGoroutine()}
	dir, err := os.MkdirTemp("", "glove-conn-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	pol, err := os.ReadFile("../../authority/policy/testdata/example-policy.json")
	if err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "store")
	if err := os.Mkdir(store, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "policy.json"), pol, os.Getuid(), os.Getgid())
	writeFile(t, filepath.Join(dir, "key"), []byte(strings.Repeat("k", 32)), os.Getuid(), os.Getgid())
	log := logrus.New()
	log.SetFormatter(&logrus.JSONFormatter{})
	log.SetOutput(u.log)
	cfg.PolicyFile, cfg.StoreDir, cfg.KeyFile, cfg.Anchor = filepath.Join(dir, "policy.json"), store, filepath.Join(dir, "key"), testAnchor
	cfg.Socket, cfg.Log = filepath.Join(dir, "gloved.sock"), log
	u.socket = cfg.Socket
	if u.d, err = daemon.New(cfg); err != nil {
		t.Fatal(err)
	}
	ln, err := daemon.Listen(u.socket)
	if err != nil {
		t.Fatal(err)
	}
	// Reachable by the test's other uid; the peer check is gloved's.
	if err := os.Chmod(u.socket, 0o666); err != nil {
		t.Fatal(err)
	}
	u.done = make(chan error, 1)
	go func() { u.done <- u.d.Serve(ln) }()
	t.Cleanup(func() {
		if !u.stopped {
			u.stop(t)
		}
	})
	return u
}

// stop shuts the daemon down and checks it held no connection and left
// no descriptor or goroutine behind (every client must be closed first).
func (u *connUnit) stop(t *testing.T) {
	t.Helper()
	u.stopped = true
	if err := u.d.Shutdown(time.Second); err != nil {
		t.Error(err)
	}
	if err := <-u.done; err != nil {
		t.Error(err)
	}
	if n := u.d.OpenConns(); n != 0 {
		t.Errorf("%d connections still in gloved's table after shutdown", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		fds, gs := countFDs(t), runtime.NumGoroutine()
		if fds <= u.fds && gs <= u.goroutines {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Errorf("leak: %d descriptors (%d before), %d goroutines (%d before)\n%s",
				fds, u.fds, gs, u.goroutines, buf[:runtime.Stack(buf, true)])
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// events counts the log lines whose "event" is ev.
func (u *connUnit) events(t *testing.T, ev string) int {
	t.Helper()
	n := 0
	for _, l := range strings.Split(u.log.String(), "\n") {
		var m map[string]any
		if l == "" {
			continue
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line not JSON: %q", l)
		}
		if m["event"] == ev {
			n++
		}
	}
	return n
}

// waitEvents waits until the log has n lines of the event.
func (u *connUnit) waitEvents(t *testing.T, ev string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for u.events(t, ev) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d %q events logged, want %d\nlog: %s", u.events(t, ev), ev, n, u.log)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitConns waits until gloved holds n connections.
func (u *connUnit) waitConns(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for u.d.OpenConns() != n {
		if time.Now().After(deadline) {
			t.Fatalf("gloved holds %d connections, want %d", u.d.OpenConns(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// dialAs connects to path with uid as the effective uid of the calling
// thread only, so that gloved's SO_PEERCRED sees uid. Needs root.
func dialAs(path string, uid int) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// Locked while its credentials differ. The effective uid goes
		// back to root before the thread is released: a thread left with
		// the test user's uid (a cgo binary may keep an exiting locked
		// thread) makes testenv's userdel refuse at teardown ("user is
		// currently used by process" this test binary).
		runtime.LockOSThread()
		euid := os.Geteuid()
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(uid), ^uintptr(0)); e != 0 {
			runtime.UnlockOSThread()
			ch <- result{nil, fmt.Errorf("setresuid: %w", e)}
			return
		}
		c, err := net.Dial("unix", path)
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(euid), ^uintptr(0)); e != 0 {
			// Still the test user's: never unlocked, so the thread ends
			// with this goroutine rather than serve others.
			ch <- result{c, errors.Join(err, fmt.Errorf("restore the effective uid: %w", e))}
			return
		}
		runtime.UnlockOSThread()
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// dialN opens n connections as uid (-1: the test's own), closed at the
// test's end, and waits until gloved has admitted them (held counts the
// connections gloved should then hold).
func dialN(t *testing.T, u *connUnit, n, uid, held int) []net.Conn {
	t.Helper()
	cs := make([]net.Conn, n)
	for i := range cs {
		var c net.Conn
		var err error
		if uid < 0 {
			c, err = net.Dial("unix", u.socket)
		} else {
			c, err = dialAs(u.socket, uid)
		}
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		cs[i] = c
		t.Cleanup(func() { c.Close() })
	}
	u.waitConns(t, held)
	return cs
}

// closedByGloved reports whether gloved closed c: a read returns EOF
// (gloved consumed everything and closed) or ECONNRESET (it closed with
// bytes unread), rather than waiting for wait.
func closedByGloved(c net.Conn, wait time.Duration) (bool, error) {
	if err := c.SetReadDeadline(time.Now().Add(wait)); err != nil {
		return false, err
	}
	var b [512]byte
	n, err := c.Read(b[:])
	switch {
	case n > 0:
		return false, fmt.Errorf("unexpected line %q", b[:n])
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		return true, nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return false, nil
	}
	return false, err
}

// served dials a new client as uid (-1: own) and checks a real request
// is answered; it returns how long that took from the dial.
func served(t *testing.T, u *connUnit, uid int) (time.Duration, net.Conn) {
	t.Helper()
	start := time.Now()
	var c net.Conn
	var err error
	if uid < 0 {
		c, err = net.Dial("unix", u.socket)
	} else {
		c, err = dialAs(u.socket, uid)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	rc := &rawClient{c: c, r: bufio.NewReader(c)}
	var caps struct {
		Methods []string `json:"methods"`
	}
	if err := rc.call("capabilities", nil, &caps); err != nil {
		t.Fatalf("the new client is not served: %v\nlog: %s", err, u.log)
	}
	if len(caps.Methods) == 0 {
		t.Fatalf("capabilities: %+v", caps)
	}
	return time.Since(start), c
}

// TestConnIdleFlood is issue 16's first case: a peer holding 64 idle
// connections no longer locks a new client out. One uid holds at most
// MaxConnsPerUID, so its 33rd connection onwards each closed its
// longest-idle one; the new client is served at once, closing one more.
func TestConnIdleFlood(t *testing.T) {
	u := startConnUnit(t, daemon.Config{})
	idle := dialN(t, u, daemon.MaxConns, -1, daemon.MaxConnsPerUID)
	u.waitEvents(t, "evicted", daemon.MaxConns-daemon.MaxConnsPerUID) // all 64 accepted
	took, c := served(t, u, -1)
	t.Logf("new client served in %v with %d idle connections opened by its uid", took.Round(time.Microsecond), len(idle))
	evicted := daemon.MaxConns - daemon.MaxConnsPerUID + 1
	for i, ic := range idle {
		closed, err := closedByGloved(ic, 100*time.Millisecond)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		// The earliest accepted are the longest idle: they made room.
		if closed != (i < evicted) {
			t.Errorf("connection %d: closed %v, want %v", i, closed, i < evicted)
		}
	}
	if n := u.events(t, "evicted"); n != evicted {
		t.Errorf("%d evictions logged, want %d", n, evicted)
	}
	if !strings.Contains(u.log.String(), `"peer_uid":`+fmt.Sprint(os.Getuid())) {
		t.Errorf("evictions logged without the peer uid: %s", u.log)
	}
	for _, ic := range idle {
		ic.Close()
	}
	c.Close()
	u.waitConns(t, 0)
	u.stop(t)
}

// TestConnSlowDrip is issue 16's second case: 64 connections (32 of
// each of two uids, so that no eviction happens while they are opened)
// each send a request one byte a second; each is closed once its line
// has not completed within the line timeout (2 s here), and a new client
// is served meanwhile (its uid at its share: one slow connection makes
// room). Needs root (the second uid).
func TestConnSlowDrip(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root to connect as a second uid")
	}
	const lineTimeout = 2 * time.Second
	u := startConnUnit(t, daemon.Config{LineTimeout: lineTimeout, AllowUIDs: []int{0, otherUID}})
	slow := append(dialN(t, u, daemon.MaxConnsPerUID, -1, daemon.MaxConnsPerUID),
		dialN(t, u, daemon.MaxConnsPerUID, otherUID, daemon.MaxConns)...)
	line := []byte(`{"jsonrpc":"2.0","id":1,"method":"capabilities"}` + "\n")
	type outcome struct {
		closed bool
		after  time.Duration // from the first byte
		sent   int
		err    error
	}
	results := make([]outcome, len(slow))
	var wg sync.WaitGroup
	for i, c := range slow {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := &results[i]
			first := time.Now()
			for res.sent < len(line) && time.Since(first) < 10*lineTimeout {
				if _, err := c.Write(line[res.sent : res.sent+1]); err != nil {
					// EPIPE: gloved closed it between two bytes; the
					// read below tells.
					break
				}
				res.sent++
				closed, err := closedByGloved(c, time.Second) // the drip's pace
				if err != nil {
					res.err = err
					return
				}
				if closed {
					res.closed, res.after = true, time.Since(first)
					return
				}
			}
			res.closed, res.err = closedByGloved(c, time.Second)
			res.after = time.Since(first)
		}()
	}
	time.Sleep(1500 * time.Millisecond) // every slow line has begun
	took, c := served(t, u, -1)
	t.Logf("new client served in %v while %d connections dripped a byte a second", took.Round(time.Microsecond), len(slow))
	wg.Wait()
	early := 0
	for i, r := range results {
		switch {
		case r.err != nil:
			t.Errorf("slow connection %d: %v", i, r.err)
		case !r.closed:
			t.Errorf("slow connection %d: still open after %v (%d bytes sent)", i, r.after, r.sent)
		case r.after < lineTimeout-200*time.Millisecond:
			early++ // the one closed to make room for the new client
		case r.after > lineTimeout+1500*time.Millisecond:
			t.Errorf("slow connection %d: closed %v after its first byte, line timeout %v", i, r.after, lineTimeout)
		}
	}
	if early != 1 {
		t.Errorf("%d slow connections closed before the line timeout, want the 1 evicted", early)
	}
	if n, want := u.events(t, "line_timeout"), len(slow)-1; n != want {
		t.Errorf("%d line timeouts logged, want %d", n, want)
	}
	if strings.Contains(u.log.String(), "capabilities\"}") || strings.Contains(u.log.String(), `{\"jsonrpc`) {
		t.Errorf("the log holds request content: %s", u.log)
	}
	// Every closed slow connection left gloved's table: the new client
	// alone remains.
	u.waitConns(t, 1)
	for _, sc := range slow {
		sc.Close()
	}
	c.Close()
	u.waitConns(t, 0)
	u.stop(t)
}

// TestConnUIDShares fills both bounds with two uids: 32 idle connections
// of root, then 32 of another uid. A new root client closes root's
// longest-idle (its share); a third uid's client, the total reached,
// closes the globally longest-idle (root's next); the other uid's new
// client closes its own longest-idle; the other uid's connections are
// never closed for root's clients. Needs root.
func TestConnUIDShares(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root to connect as other uids")
	}
	const thirdUID = otherUID - 1
	u := startConnUnit(t, daemon.Config{AllowUIDs: []int{0, otherUID, thirdUID}})
	root := dialN(t, u, daemon.MaxConnsPerUID, -1, daemon.MaxConnsPerUID)
	other := dialN(t, u, daemon.MaxConnsPerUID, otherUID, daemon.MaxConns)
	var clients []net.Conn
	for _, uid := range []int{-1, thirdUID, otherUID} {
		took, c := served(t, u, uid)
		t.Logf("uid %d (-1: the test's own): new client served in %v with %d connections open", uid, took.Round(time.Microsecond), daemon.MaxConns)
		clients = append(clients, c)
	}
	check := func(name string, cs []net.Conn, closedFirst int) {
		for i, c := range cs {
			closed, err := closedByGloved(c, 100*time.Millisecond)
			if err != nil {
				t.Fatalf("%s %d: %v", name, i, err)
			}
			if closed != (i < closedFirst) {
				t.Errorf("%s connection %d: closed %v, want %v", name, i, closed, i < closedFirst)
			}
		}
	}
	check("root", root, 2)
	check("other uid", other, 1)
	log := u.log.String()
	if n := u.events(t, "evicted"); n != 3 {
		t.Errorf("%d evictions logged, want 3\n%s", n, log)
	}
	if !strings.Contains(log, `"reason":"connection limit reached"`) || !strings.Contains(log, `"reason":"peer uid at its share of connections"`) {
		t.Errorf("eviction reasons not logged: %s", log)
	}
	for _, c := range append(append(root, other...), clients...) {
		c.Close()
	}
	u.waitConns(t, 0)
	u.stop(t)
}

// TestConnIdleTimeout: with a 1 s idle timeout, a silent connection and
// one sending only empty lines are closed after about 1 s; one sending a
// request every 300 ms stays open.
func TestConnIdleTimeout(t *testing.T) {
	const idleTimeout = time.Second
	u := startConnUnit(t, daemon.Config{IdleTimeout: idleTimeout})
	cs := dialN(t, u, 3, -1, 3)
	silent, blanks, busy := cs[0], cs[1], cs[2]
	start := time.Now()
	rc := &rawClient{c: busy, r: bufio.NewReader(busy)}
	blanksOpen := true
	for time.Since(start) < 2*idleTimeout+500*time.Millisecond {
		if blanksOpen {
			if _, err := blanks.Write([]byte("\n")); err != nil {
				blanksOpen = false // closed (EPIPE): checked below
			}
		}
		if err := rc.call("capabilities", nil, nil); err != nil {
			t.Fatalf("a connection sending requests: %v", err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	for name, c := range map[string]net.Conn{"silent": silent, "blank lines only": blanks} {
		closed, err := closedByGloved(c, 100*time.Millisecond)
		if err != nil || !closed {
			t.Errorf("%s connection: closed %v (%v) after %v, idle timeout %v", name, closed, err, time.Since(start), idleTimeout)
		}
	}
	if n := u.events(t, "idle_timeout"); n != 2 {
		t.Errorf("%d idle timeouts logged, want 2", n)
	}
	if err := rc.call("capabilities", nil, nil); err != nil {
		t.Errorf("the busy connection: %v", err)
	}
	u.waitConns(t, 1)
	for _, c := range cs {
		c.Close()
	}
	u.waitConns(t, 0)
	u.stop(t)
}

// TestConnTimeoutBounds: the timeouts cannot be disabled or set absurd.
func TestConnTimeoutBounds(t *testing.T) {
	for _, cfg := range []daemon.Config{
		{IdleTimeout: -time.Second}, {IdleTimeout: time.Millisecond}, {IdleTimeout: 2 * time.Hour},
		{LineTimeout: -1}, {LineTimeout: 10 * time.Millisecond}, {LineTimeout: 2 * time.Minute},
	} {
		if d, err := daemon.New(cfg); err == nil {
			t.Errorf("New accepted idle %v line %v", cfg.IdleTimeout, cfg.LineTimeout)
			if err := d.Shutdown(0); err != nil {
				t.Error(err)
			}
		}
	}
}
