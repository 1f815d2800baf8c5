// SPDX-License-Identifier: Apache-2.0

package egress

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestCheckUpstream(t *testing.T) {
	good := []Upstream{{"unix", "/run/gw.sock"}, {"tcp", "127.0.0.1:4000"}, {"tcp", "127.1.2.3:1"}, {"tcp", "[::1]:443"}}
	for _, u := range good {
		if err := CheckUpstream(u); err != nil {
			t.Errorf("CheckUpstream(%v): %v", u, err)
		}
	}
	bad := []Upstream{{"unix", "run/gw.sock"}, {"unix", "/run/../gw.sock"}, {"unix", "/" + strings.Repeat("a", 107)},
		{"tcp", "10.0.0.1:443"}, {"tcp", "0.0.0.0:443"}, {"tcp", "localhost:443"}, {"tcp", "127.0.0.1"}, {"tcp", "127.0.0.1:0"},
		{"tcp", "[fe80::1%lo]:443"}, {"tcp", "[::ffff:10.0.0.1]:443"}, {"udp", "127.0.0.1:53"}, {"", ""}}
	for _, u := range bad {
		if err := CheckUpstream(u); err == nil {
			t.Errorf("CheckUpstream(%v) accepted", u)
		}
	}
}

// sendFDs sends b with fds on s, as stage 1 does.
func sendFDs(t *testing.T, s *os.File, b []byte, fds ...int) {
	t.Helper()
	if err := unix.Sendmsg(int(s.Fd()), b, unix.UnixRights(fds...), nil, 0); err != nil {
		t.Fatal(err)
	}
}

// handoff is a hand-off socket as the session makes it: the shim's end
// blocking, the supervisor's non-blocking.
func handoff() (shim, sup *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := unix.SetNonblock(fds[1], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "shim"), os.NewFile(uintptr(fds[1]), "sup"), nil
}

func TestReceive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	lf, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	cases := []struct {
		name   string
		send   func(t *testing.T, shim *os.File)
		want   int
		phrase string
	}{
		{"one", func(t *testing.T, s *os.File) { sendFDs(t, s, []byte{0}, int(lf.Fd())) }, 1, ""},
		{"two", func(t *testing.T, s *os.File) { sendFDs(t, s, []byte{0, 0}, int(lf.Fd()), int(lf.Fd())) }, 2, ""},
		{"end of file", func(t *testing.T, s *os.File) { s.Close() }, 1, "sent no egress listeners"},
		{"fewer descriptors", func(t *testing.T, s *os.File) { sendFDs(t, s, []byte{0, 0}, int(lf.Fd())) }, 2, "want 2 of each"},
		{"more descriptors", func(t *testing.T, s *os.File) { sendFDs(t, s, []byte{0}, int(lf.Fd()), int(lf.Fd())) }, 1, "want 1 of each"},
		{"bytes alone", func(t *testing.T, s *os.File) {
			if _, err := s.Write([]byte{0}); err != nil {
				t.Fatal(err)
			}
		}, 1, "want 1 of each"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			shim, sup, err := handoff()
			if err != nil {
				t.Fatal(err)
			}
			defer sup.Close()
			defer shim.Close()
			tc.send(t, shim)
			files, err := Receive(sup, tc.want, time.Now().Add(5*time.Second))
			if tc.phrase != "" {
				if err == nil || !strings.Contains(err.Error(), tc.phrase) {
					t.Fatalf("Receive: %v, want an error with %q", err, tc.phrase)
				}
				return
			}
			if err != nil || len(files) != tc.want {
				t.Fatalf("Receive: %d files, %v", len(files), err)
			}
			for _, f := range files {
				fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0)
				if err != nil || fl&unix.FD_CLOEXEC == 0 {
					t.Errorf("received descriptor not close-on-exec: %#x %v", fl, err)
				}
				f.Close()
			}
		})
	}
	t.Run("deadline", func(t *testing.T) {
		shim, sup, err := handoff()
		if err != nil {
			t.Fatal(err)
		}
		defer sup.Close()
		defer shim.Close()
		if _, err := Receive(sup, 1, time.Now().Add(50*time.Millisecond)); err == nil || !strings.Contains(err.Error(), "timeout") {
			t.Fatalf("Receive with nothing sent: %v, want a timeout", err)
		}
	})
}

// TestCheckListenerOwnNamespace: a listener of the caller's own network
// namespace is refused (as root, SIOCGSKNS answers and names it; without
// CAP_NET_ADMIN over the host's namespace it is refused with EPERM).
func TestCheckListenerOwnNamespace(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	if err := CheckListener(f, port); err == nil {
		t.Fatal("a listener of the supervisor's own namespace was accepted")
	}
	if err := CheckListener(f, port+1); err == nil || !strings.Contains(err.Error(), "want 127.0.0.1:") {
		t.Errorf("wrong port: %v", err)
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cf, err := c.(*net.TCPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Close()
	if err := CheckListener(cf, port); err == nil || !strings.Contains(err.Error(), "listening") {
		t.Errorf("a connected socket: %v", err)
	}
}

// upstream is a unix socket server that answers each connection with
// "pong:" and what it read to end of file.
func upstream(t testing.TB) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "up.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c)
				if string(b) == "hang" {
					time.Sleep(time.Hour)
				}
				c.Write(append([]byte("pong:"), b...))
			}()
		}
	}()
	return sock
}

func records(t *testing.T, path string) []Record {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []Record
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("record %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// relay starts a relay of one endpoint whose listener lives in the test's
// namespace, with the bounds b, and returns the address to dial and the
// audit file's path.
func relay(t testing.TB, up Upstream, b Bounds) (*Relay, string, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	auditPath := filepath.Join(t.TempDir(), "audit")
	af, err := os.OpenFile(auditPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { af.Close() })
	r, err := start("s1", []Endpoint{{PolicyID: "gw", Port: port, Upstream: up}}, []*os.File{f}, NewAudit(af), b, func(*os.File, uint16) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return r, ln.Addr().String(), auditPath
}

func exchange(t *testing.T, addr, msg string) (string, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return "", err
	}
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}

func TestRelay(t *testing.T) {
	sock := upstream(t)
	r, addr, audit := relay(t, Upstream{"unix", sock}, DefaultBounds)
	for _, msg := range []string{"ping", strings.Repeat("x", 1<<20)} {
		got, err := exchange(t, addr, msg)
		if err != nil || got != "pong:"+msg {
			t.Fatalf("exchange of %d bytes: %d bytes back, %v", len(msg), len(got), err)
		}
	}
	if err := r.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	recs := records(t, audit)
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4: %+v", len(recs), recs)
	}
	for i, r := range recs {
		if r.Seq != uint64(i+1) || r.Session != "s1" || r.Policy != "gw" {
			t.Errorf("record %d: %+v", i, r)
		}
	}
	// Each connection: its open record, then its close record with its
	// byte counts. The first's close may follow the second's open: the
	// program has its reply before the relay records the end.
	byConn := map[uint64][]Record{}
	for _, r := range recs {
		byConn[r.Conn] = append(byConn[r.Conn], r)
	}
	for conn, want := range map[uint64][2]uint64{1: {4, 9}, 2: {1 << 20, 1<<20 + 5}} {
		rs := byConn[conn]
		if len(rs) != 2 || rs[0].Event != "open" || rs[1].Event != "close" || rs[1].Status != StatusOK ||
			rs[1].BytesUp != want[0] || rs[1].BytesDown != want[1] {
			t.Errorf("connection %d: records %+v, want open then close ok with %d bytes up and %d down", conn, rs, want[0], want[1])
		}
	}
	if _, err := exchange(t, addr, "late"); err == nil {
		t.Error("a connection after Stop was relayed")
	}
}

func TestRelayBounds(t *testing.T) {
	sock := upstream(t)
	t.Run("upstream down", func(t *testing.T) {
		r, addr, audit := relay(t, Upstream{"unix", filepath.Join(t.TempDir(), "none.sock")}, DefaultBounds)
		if got, _ := exchange(t, addr, "ping"); got != "" {
			t.Errorf("got %q from no upstream", got)
		}
		if err := r.Stop(); err != nil {
			t.Fatal(err)
		}
		if recs := records(t, audit); len(recs) != 2 || recs[1].Status != StatusDialFailed {
			t.Errorf("records %+v, want open, close upstream_unreachable", recs)
		}
	})
	t.Run("idle", func(t *testing.T) {
		b := DefaultBounds
		b.Idle = 200 * time.Millisecond
		r, addr, audit := relay(t, Upstream{"unix", sock}, b)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("an idle connection was not closed")
		}
		if err := r.Stop(); err != nil {
			t.Fatal(err)
		}
		if recs := records(t, audit); len(recs) != 2 || recs[1].Status != StatusIdle {
			t.Errorf("records %+v, want open, close idle", recs)
		}
	})
	t.Run("max connections", func(t *testing.T) {
		b := DefaultBounds
		b.MaxConns = 1
		r, addr, audit := relay(t, Upstream{"unix", sock}, b)
		held, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := held.Write([]byte("hang")); err != nil {
			t.Fatal(err)
		}
		if err := held.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for len(records(t, audit)) < 1 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if got, _ := exchange(t, addr, "ping"); got != "" {
			t.Errorf("a connection over the bound got %q", got)
		}
		held.Close()
		if err := r.Stop(); err != nil {
			t.Fatal(err)
		}
		recs := records(t, audit)
		var refused, stopped int
		for _, rec := range recs {
			if rec.Event == "refused" && rec.Status == StatusRefused {
				refused++
			}
			if rec.Event == "close" {
				stopped++
			}
		}
		if refused != 1 || stopped != 1 {
			t.Errorf("records %+v, want one refused and one close", recs)
		}
	})
	t.Run("audit fails closed", func(t *testing.T) {
		r, addr, _ := relay(t, Upstream{"unix", sock}, DefaultBounds)
		// The audit's descriptor refuses writes from here on.
		r.audit.f.Close()
		if got, _ := exchange(t, addr, "ping"); got != "" {
			t.Errorf("a connection whose open record failed got %q", got)
		}
		if err := r.Stop(); err == nil || !strings.Contains(err.Error(), "egress audit") {
			t.Errorf("Stop: %v, want the audit's failure", err)
		}
		if _, err := exchange(t, addr, "ping"); err == nil {
			t.Error("the relay accepted after its audit failed")
		}
	})
}
