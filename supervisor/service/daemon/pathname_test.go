// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

// pathnameConfig is a --local-services file without a transport (the
// pathname compatibility transport): alias model at model for codex and
// alias other at other for pi only.
func pathnameConfig(model, other string) string {
	return `{"schema_version":1,"services":[` +
		`{"alias":"model","socket":` + strconv.Quote(model) + `,"runtime_ids":["codex"]},` +
		`{"alias":"other","socket":` + strconv.Quote(other) + `,"runtime_ids":["pi"]}]}`
}

// TestGlovedPathnameTransport runs a codex session under the pathname
// transport: it gets only GLOVE_LOCAL_SERVICE_DIR, a read-only directory
// (mode 0700) with one socket (mode 0600) for the one alias its runtime
// is allowed (model, not pi's other), and reaches the upstream through
// it twice, each connection with one exchange relayed and audited by a
// glove-streamproxy of its own. Judged from outside: the upstreams'
// own counts of accepted connections (two for model, none for other),
// the audit file's records, capabilities advertising 0 for both
// versions, and nothing left behind (CheckLeaks).
func TestGlovedPathnameTransport(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	f := newFixture(t, e, map[string][]string{"services": {"services"}})
	model := startUpstream(t, e, f)
	other := startUpstreamIn(t, e, filepath.Join(f.dir, "other"))
	g := startGloved(t, e, append(append([]string{}, f.args...), localServices(t, e, f, pathnameConfig(model, other))...)...)
	c := dial(t, g.socket)
	var caps struct {
		Stream  int `json:"inherited_stream_version"`
		Channel int `json:"guest_channel_schema_version"`
	}
	c.ok("capabilities", nil, &caps)
	if caps.Stream != 0 || caps.Channel != 0 {
		t.Errorf("inherited_stream_version %d, guest_channel_schema_version %d; the pathname transport advertises 0 and 0", caps.Stream, caps.Channel)
	}
	tok := f.create(c, "s-path", f.plan("services", "tiny"))
	c.ok("start_session", map[string]any{"session_id": "s-path", "start_token": tok}, nil)
	end := attach(t, c, "s-path")
	g.stop(t)
	out := strings.ReplaceAll(end.output, "\r\n", "\n")
	for _, want := range []string{
		"service vars [GLOVE_LOCAL_SERVICE_DIR=/run/glove-services/local]", "fd3 bad file descriptor",
		"dir 1 <nil>", "alias model Srw-------", "reply model pong:ping model <nil>",
		"dir mode drwx------", "dir write true",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("sandbox output lacks %q:\n%s\nlog: %s", want, out, g.log)
		}
	}
	if n := strings.Count(out, "reply model pong:ping model <nil>\n"); n != 2 {
		t.Errorf("%d exchanges through the alias, want 2:\n%s", n, out)
	}
	if end.Status != 0 {
		t.Errorf("session status %d, want 0\n%s", end.Status, out)
	}
	// Two exchanges, so at least two connections to model's upstream.
	// Three were seen once, in the bookworm guest under load, with both
	// exchanges right: most likely a connect(2) that a signal
	// interrupted after gloved had connected for it (its notification
	// then no longer valid, that connection closed unused, the call
	// restarted); not reproduced here. None ever reaches other.
	if n, m := accepts(t, model), accepts(t, other); n < 2 || n > 3 || m != 0 {
		t.Errorf("upstream accepts: model %d, other %d; want 2 (3 with an interrupted connect) and 0", n, m)
	}
	audit, err := os.ReadFile(filepath.Join(f.storeDir, "stream-s-path.audit"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(audit), `"status":"delivered"`); n != 2 || strings.Contains(string(audit), "ping") || strings.Contains(string(audit), model) {
		t.Errorf("audit: %d delivered records, want 2, and no payload or host path:\n%s", n, audit)
	}
}

// decoy listens on a unix socket at path, mode 0666 (any uid may
// connect, as D-Bus's or journald's), and counts the connections it
// accepts.
func decoy(t *testing.T, e *testenv.Env, path string) *atomic.Int32 {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	if !strings.HasPrefix(path, "@") { // an abstract socket has no file
		if err := os.Chmod(path, 0o666); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(path, e.UID, e.GID); err != nil {
			t.Fatal(err)
		}
	}
	return &n
}

// dgramDecoy binds a datagram socket at path, mode 0666 (as /dev/log),
// and returns what it has received when called.
func dgramDecoy(t *testing.T, e *testenv.Env, path string) func() string {
	t.Helper()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(path, e.UID, e.GID); err != nil {
		t.Fatal(err)
	}
	return func() string {
		var buf [64]byte
		n, _, err := unix.Recvfrom(fd, buf[:], 0)
		if err != nil {
			return ""
		}
		return string(buf[:n])
	}
}

// TestGlovedPathnameAttacks: a session under the pathname transport may
// create an AF_UNIX stream socket and call connect, and nothing it can
// name but its aliases is reached. The program tries a world-writable
// host socket it sees in its workspace (a read-only bind), an abstract socket, the
// other runtime's alias, the alias by other names (through "..", /proc,
// a relative name, a trailing slash), the directory itself, and the
// upstreams' host paths; then a datagram socket, to send to a
// world-writable datagram socket beside the decoy. Judged from outside:
// every connect fails with EACCES, the datagram socket is refused
// (EPERM), and the decoys and the upstreams count no connection and no
// datagram.
func TestGlovedPathnameAttacks(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	const dir = "/run/glove-services/local"
	base, err := os.MkdirTemp(e.Base, "svc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	model := startUpstreamIn(t, e, filepath.Join(base, "model"))
	other := startUpstreamIn(t, e, filepath.Join(base, "other"))
	abstract := "@glove-test-decoy-" + strconv.Itoa(os.Getpid())
	abs := decoy(t, e, abstract)
	paths := []string{"/workspace/dgram.sock", "/workspace/decoy.sock", abstract, dir + "/other", dir + "/../local/model",
		"/proc/self/root" + dir + "/model", "/proc/1/root" + dir + "/model", "model", dir + "/model/", dir, model, other}
	f := newFixture(t, e, map[string][]string{"attack": append([]string{"connects"}, paths...)})
	// The workspace is a read-only bind of a host tree holding the
	// decoy (beneath glove-mounter's source roots, which it requires),
	// so that the program sees a socket any uid may connect to.
	tree, err := os.MkdirTemp(filepath.Join(e.Base, "sources"), "decoy-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(tree); err != nil {
			t.Errorf("remove %s: %v", tree, err)
		}
	})
	if err := os.Chown(tree, e.UID, e.GID); err != nil {
		t.Fatal(err)
	}
	ws := decoy(t, e, filepath.Join(tree, "decoy.sock"))
	dgram := dgramDecoy(t, e, filepath.Join(tree, "dgram.sock"))
	grantPolicy(t, f, tree, roBind, true)
	g := startGloved(t, e, append(append([]string{}, f.args...), localServices(t, e, f, pathnameConfig(model, other))...)...)
	c := dial(t, g.socket)
	tok := f.create(c, "s-attack", grantPlan(f, "attack", roBind))
	c.ok("start_session", map[string]any{"session_id": "s-attack", "start_token": tok}, nil)
	end := attach(t, c, "s-attack")
	g.stop(t)
	out := strings.ReplaceAll(end.output, "\r\n", "\n")
	if !strings.HasPrefix(out, "ran\n") {
		t.Fatalf("the program did not run:\n%s\nlog: %s", out, g.log)
	}
	for _, p := range paths {
		if want := "connect " + p + " permission denied\n"; !strings.Contains(out, want) {
			t.Errorf("connect to %s not refused with EACCES:\n%s", p, out)
		}
	}
	if strings.Contains(out, "reply ") {
		t.Errorf("a connection got through:\n%s", out)
	}
	if !strings.Contains(out, "dgram socket operation not permitted\n") {
		t.Errorf("a datagram socket was made:\n%s", out)
	}
	if got := dgram(); got != "" {
		t.Errorf("the datagram decoy received %q", got)
	}
	if n, m, w, a := accepts(t, model), accepts(t, other), ws.Load(), abs.Load(); n+m != 0 || w != 0 || a != 0 {
		t.Errorf("reached from the sandbox: model %d, other %d, workspace decoy %d, abstract decoy %d connections", n, m, w, a)
	}
}

// TestGlovedCredentialPathname is the credential lease's end-to-end test
// through the pathname transport: the stand-in agent reads its token
// from its lease's copy, authenticates with it to the stand-in model
// service by connecting to its alias in GLOVE_LOCAL_SERVICE_DIR, and
// rotates it; the next session sees the rotated token and
// authenticates with that. The operator's source is unchanged, and no
// token is in gloved's log, the store (the stream's audit included), a
// status or the receipts.
func TestGlovedCredentialPathname(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	f, src, tok := credentialFixture(t, e)
	before, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	model := startUpstream(t, e, f)
	other := startUpstreamIn(t, e, filepath.Join(f.dir, "other"))
	g := startGloved(t, e, append(append([]string{}, f.args...), localServices(t, e, f, pathnameConfig(model, other))...)...)
	c := dial(t, g.socket)
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	rot1 := append(append([]byte(nil), tok...), "+rotated"...)
	rot2 := append(append([]byte(nil), rot1...), "+rotated"...)
	var statuses []string
	for i, want := range [][2][]byte{{tok, rot1}, {rot1, rot2}} {
		id := "s-credpath-" + strconv.Itoa(i)
		st := f.create(c, id, withHandles(f.plan("agent", "tiny"), "codex-token"))
		c.ok("start_session", map[string]any{"session_id": id, "start_token": st}, nil)
		out := strings.ReplaceAll(attach(t, c, id).output, "\r\n", "\n")
		raw, serr := c.call("session_status", map[string]any{"session_id": id})
		if serr != nil {
			t.Fatalf("session_status %s: %v", id, serr)
		}
		statuses = append(statuses, string(raw))
		for _, w := range []string{"credential sha256 " + sum(want[0]), "model authenticated true", "rotated to sha256 " + sum(want[1])} {
			if !strings.Contains(out, w+"\n") {
				t.Errorf("%s: the agent's output lacks %q:\n%s\nlog: %s", id, w, out, g.log)
			}
		}
		if strings.Contains(out, "source reached") || strings.Contains(out, "token found at") {
			t.Errorf("%s: the sandbox reached the operator's source or a copy of the token:\n%s", id, out)
		}
	}
	receipts, rerr := c.call("receipts_page", map[string]any{"after": 0, "limit": 10})
	if rerr != nil {
		t.Fatalf("receipts_page: %v", rerr)
	}
	g.stop(t)
	if n := accepts(t, model); n != 2 {
		t.Errorf("the model service accepted %d connections, want 2", n)
	}
	after, err := os.ReadFile(src)
	if err != nil || string(after) != string(before) {
		t.Errorf("the operator's source changed: %v", err)
	}
	// The session's stream audit file is in the store too.
	if _, err := os.Stat(filepath.Join(f.storeDir, "stream-s-credpath-0.audit")); err != nil {
		t.Errorf("no stream audit file: %v", err)
	}
	checkNoSecret(t, f, map[string]string{"gloved's log": g.log.String(), "statuses": strings.Join(statuses, "\n"), "receipts": string(receipts)},
		[][]byte{tok, rot1, rot2}, src)
}

// TestGlovedPathnameYama: gloved reads a connect's address from the
// program's memory, which Yama's ptrace_scope restricts. At 1 and 2
// (Ubuntu's default, and "admin only") the transport still works:
// Yama asks for CAP_SYS_PTRACE in the target's user namespace, and
// gloved, unprivileged on the host, owns the sandbox's (a first run of
// this test expected 2 to refuse, and the VM lane's Debian 12 guest
// showed it does not). Only 3 forbids it, and 3 holds until reboot, so
// no test sets it: connects then fail closed (EACCES), which glove
// status reports. The host's setting is restored afterwards. A kernel
// without Yama (this test's reason to skip) has no such setting.
func TestGlovedPathnameYama(t *testing.T) {
	const knob = "/proc/sys/kernel/yama/ptrace_scope"
	orig, err := os.ReadFile(knob)
	if err != nil {
		t.Skipf("skipped: no Yama on this kernel (%v): the VM lane's guests have it", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("skipped: not root: setting Yama's ptrace_scope needs CAP_SYS_PTRACE (CI runs as root)")
	}
	if strings.TrimSpace(string(orig)) == "3" {
		t.Skip("skipped: ptrace_scope is 3, which holds until reboot")
	}
	t.Cleanup(func() {
		if err := os.WriteFile(knob, orig, 0o644); err != nil {
			t.Errorf("restore %s: %v", knob, err)
		}
	})
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	f := newFixture(t, e, map[string][]string{"services": {"services"}})
	model := startUpstream(t, e, f)
	other := startUpstreamIn(t, e, filepath.Join(f.dir, "other"))
	g := startGloved(t, e, append(append([]string{}, f.args...), localServices(t, e, f, pathnameConfig(model, other))...)...)
	c := dial(t, g.socket)
	for _, scope := range []string{"1", "2"} {
		if err := os.WriteFile(knob, []byte(scope), 0o644); err != nil {
			t.Fatal(err)
		}
		before := accepts(t, model)
		id := "s-yama-" + scope
		tok := f.create(c, id, f.plan("services", "tiny"))
		c.ok("start_session", map[string]any{"session_id": id, "start_token": tok}, nil)
		out := strings.ReplaceAll(attach(t, c, id).output, "\r\n", "\n")
		got := accepts(t, model) - before
		if got != 2 || strings.Count(out, "reply model pong:ping model <nil>\n") != 2 {
			t.Errorf("ptrace_scope %s: %d connections, want 2:\n%s\nlog: %s", scope, got, out, g.log)
		}
	}
	g.stop(t)
}
