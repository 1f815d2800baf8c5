// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/service/daemon"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/testenv"
	"github.com/glove-sandbox/glove/testenv/programs"
	"golang.org/x/sys/unix"
)

// buildHarness builds the harness beneath the mounter's source root.
func buildHarness(t testing.TB, e *testenv.Env) string {
	t.Helper()
	return testenv.BuildStatic(t, e, "harness", programs.Harness)
}

// ownedDir creates a directory of the service user, mode 0700.
func ownedDir(t testing.TB, e *testenv.Env, path string) string {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, e.UID, e.GID); err != nil {
		t.Fatal(err)
	}
	return path
}

type gloved struct {
	cmd    *exec.Cmd
	socket string
	log    *testenv.SyncBuffer
}

// startGloved starts the installed gloved as the service user inside the
// delegated cgroup parent, and waits for its socket.
func startGloved(t testing.TB, e *testenv.Env, args ...string) *gloved {
	t.Helper()
	return startGlovedAt(t, e, e.HelperPath("gloved"), nil, args...)
}

// startGlovedAt starts the gloved at path, with env, as the service user
// in the delegated cgroup parent, and waits for its socket.
func startGlovedAt(t testing.TB, e *testenv.Env, path string, env []string, args ...string) *gloved {
	t.Helper()
	attr := e.InDelegatedCgroup(t)
	g := &gloved{log: &testenv.SyncBuffer{}}
	for i, a := range args {
		if a == "--runtime-dir" {
			g.socket = filepath.Join(args[i+1], "gloved.sock")
		}
	}
	g.cmd = exec.Command(path, args...)
	g.cmd.Env = append([]string{}, env...)
	g.cmd.Stderr = g.log
	g.cmd.SysProcAttr = attr
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if g.cmd.ProcessState == nil {
			_ = g.cmd.Process.Kill()
			_ = g.cmd.Wait()
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		// Accepting, not merely present: a killed gloved leaves a stale
		// socket that the next one replaces.
		if conn, err := net.Dial("unix", g.socket); err == nil {
			conn.Close()
			return g
		}
		if time.Now().After(deadline) {
			t.Fatalf("gloved did not create its socket\nlog: %s", g.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// refusedStart runs gloved with args (as the service user, in the
// delegated cgroup parent) expecting it to refuse to start: it returns
// everything gloved wrote on stderr and the exit error, and fails the
// test if gloved is still running after 20 s (it started: the refusal
// the caller expects did not happen).
func refusedStart(t testing.TB, e *testenv.Env, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(e.HelperPath("gloved"), args...)
	if env != nil {
		cmd.Env = env
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = e.InDelegatedCgroup(t)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return stderr.String(), err
	case <-time.After(20 * time.Second):
		if err := cmd.Process.Kill(); err != nil {
			t.Error(err)
		}
		<-done
		t.Fatalf("gloved started where it must refuse to\nlog: %s", stderr.String())
	}
	return "", nil
}

// mountOver binds dir over the existing directory path (root) and returns
// its unmount, which runs once: when called, or at the test's end.
func mountOver(t testing.TB, dir, path string) (unmount func()) {
	t.Helper()
	if err := unix.Mount(dir, path, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s over %s: %v", dir, path, err)
	}
	mounted := true
	unmount = func() {
		if mounted {
			mounted = false
			if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", path, err)
			}
		}
	}
	t.Cleanup(unmount)
	return unmount
}

// stop sends SIGTERM and checks gloved exits 0 and removed its socket.
func (g *gloved) stop(t testing.TB) {
	t.Helper()
	if err := g.cmd.Process.Signal(unix.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("gloved exit: %v\nlog: %s", err, g.log)
		}
	case <-time.After(30 * time.Second):
		_ = g.cmd.Process.Kill()
		<-done
		t.Fatalf("gloved still running 30 s after SIGTERM\nlog: %s", g.log)
	}
	if _, err := os.Lstat(g.socket); err == nil {
		t.Error("gloved left its socket behind")
	}
}

type ended struct {
	daemon.End
	output string
}

// attach attaches and collects the output until "ended".
func attach(t *testing.T, c *client, id string) ended {
	t.Helper()
	var a struct {
		Attached bool `json:"attached"`
	}
	c.ok("attach", map[string]any{"session_id": id}, &a)
	if !a.Attached {
		t.Fatal("not attached")
	}
	var out strings.Builder
	next := uint64(0)
	for {
		m, err := c.read()
		if err != nil {
			t.Fatalf("attach %s: %v (output so far %q)", id, err, out.String())
		}
		switch m.Method {
		case "output":
			var o daemon.Output
			if err := json.Unmarshal(m.Params, &o); err != nil || o.SessionID != id {
				t.Fatalf("output %s: %v", m.Params, err)
			}
			if o.Offset != next {
				t.Errorf("output at offset %d, want %d", o.Offset, next)
			}
			next = o.Offset + uint64(len(o.Data))
			out.Write(o.Data)
		case "ended":
			var e daemon.End
			if err := json.Unmarshal(m.Params, &e); err != nil {
				t.Fatal(err)
			}
			return ended{End: e, output: out.String()}
		default:
			t.Fatalf("unexpected line %+v", m)
		}
	}
}

func TestGlovedEndToEnd(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	short := tinyProfile
	short.ProfileID, short.WallTimeMs = "short", 700
	f := newFixture(t, e, map[string][]string{"harness": {"--flag", "x"}, "sleeper": {"sleep"}}, short, tinyProfile)
	key, args := f.key, f.args

	g := startGloved(t, e, args...)
	st, err := os.Lstat(g.socket)
	if err != nil || st.Mode().Perm() != 0o600 || st.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket %v %v", st.Mode(), err)
	}
	c := dial(t, g.socket)

	var caps struct {
		Methods []string `json:"methods"`
	}
	c.ok("capabilities", nil, &caps)
	want := "capabilities supervisor_status receipts_page receipts_ack validate_plan create_session session_status " +
		"start_session attach write_stdin resize signal detach stop_session cleanup_session"
	if got := strings.Join(caps.Methods, " "); got != want {
		t.Fatalf("capabilities %s\nwant %s\nlog: %s", got, want, g.log)
	}

	// create, start, attach: one session that exits 7.
	exitPlan := f.plan("harness", "tiny")
	tok := f.create(c, "s-exit", exitPlan)
	c.fails("start_session", map[string]any{"session_id": "s-exit", "start_token": tok + "0"}, daemon.CodeUnauthorized)
	c.fails("start_session", map[string]any{"session_id": "nobody", "start_token": tok}, daemon.CodeNotFound)
	var started struct {
		State string `json:"state"`
	}
	c.ok("start_session", map[string]any{"session_id": "s-exit", "start_token": tok}, &started)
	if started.State != "starting" {
		t.Fatalf("start: %+v", started)
	}
	c.fails("start_session", map[string]any{"session_id": "s-exit", "start_token": tok}, daemon.CodeConflict)
	end := attach(t, c, "s-exit")
	if end.Termination != "exited" || end.ExitCode != 7 || end.Status != 7 || end.State != "exited" {
		t.Errorf("ended %+v\nlog: %s", end.End, g.log)
	}
	if !strings.Contains(end.output, `args=["--flag" "x"] home=/home/agent cwd=/workspace`) ||
		!strings.Contains(end.output, `in="granted tree" err=<nil>`) {
		t.Errorf("output %q", end.output)
	}
	var status daemon.Status
	c.ok("session_status", map[string]any{"session_id": "s-exit"}, &status)
	if status.State != "exited" || status.Termination != "exited" || status.ExitCode == nil || *status.ExitCode != 7 {
		t.Errorf("status %+v", status)
	}
	// A late attacher gets the transcript, then "ended".
	c2 := dial(t, g.socket)
	if late := attach(t, c2, "s-exit"); late.output != end.output || late.ExitCode != 7 {
		t.Errorf("late attach: %q %+v", late.output, late.End)
	}
	c.fails("write_stdin", map[string]any{"session_id": "s-exit", "data": "aGk="}, daemon.CodeConflict)
	// glove call: attach replays the output and exits with the status.
	call := exec.Command(e.HelperPath("glove"), "call", "--socket", g.socket, "attach", `{"session_id":"s-exit"}`)
	var callOut strings.Builder
	call.Stdout = &callOut
	if err := call.Run(); call.ProcessState.ExitCode() != 7 || callOut.String() != end.output {
		t.Errorf("glove call attach: %v, output %q", err, callOut.String())
	}

	// gloved passed its seccomp cache to the shim: the session's start
	// left one entry there, the service user's, in a 0700 directory.
	cacheDir := filepath.Join(f.storeDir, daemon.SeccompCacheDir)
	firstEntry := seccompCacheEntries(t, e, cacheDir)
	if len(firstEntry) != 1 {
		t.Errorf("seccomp cache after one session: %v, want one entry", firstEntry)
	}

	// A session ended by its wall time.
	tok = f.create(c, "s-wall", f.plan("sleeper", "short"))
	c.ok("start_session", map[string]any{"session_id": "s-wall", "start_token": tok}, nil)
	end = attach(t, c, "s-wall")
	// The first entry was not written again (a start with that profile
	// reads it; TestShimSeccompCache proves the shim uses what it reads).
	for name, ino := range firstEntry {
		if again := seccompCacheEntries(t, e, cacheDir); again[name] != ino {
			t.Errorf("seccomp cache entry %s: inode %d, then %d", name, ino, again[name])
		}
	}
	if end.Termination != "limit:wall_time_ms" || end.State != "exited" {
		t.Errorf("wall: ended %+v output %q\nlog: %s", end.End, end.output, g.log)
	}
	c.ok("session_status", map[string]any{"session_id": "s-wall"}, &status)
	if status.State != "exited" || status.Reason != "limit:wall_time_ms" || status.Termination != "limit:wall_time_ms" {
		t.Errorf("wall: status %+v", status)
	}

	// A session stopped by stop_session: SIGTERM, then killed.
	tok = f.create(c, "s-stop", f.plan("sleeper", "tiny"))
	c.ok("start_session", map[string]any{"session_id": "s-stop", "start_token": tok}, nil)
	c.fails("cleanup_session", map[string]any{"session_id": "s-stop"}, daemon.CodeConflict)
	c.ok("resize", map[string]any{"session_id": "s-stop", "rows": 40, "cols": 100}, nil)
	c.ok("write_stdin", map[string]any{"session_id": "s-stop", "data": "aGkK"}, nil)
	c.fails("signal", map[string]any{"session_id": "s-stop", "signal": "KILL"}, daemon.CodeInvalidParams)
	var stopped struct {
		State string `json:"state"`
	}
	c.ok("stop_session", map[string]any{"session_id": "s-stop", "grace_ms": 200}, &stopped)
	if stopped.State != "stopping" {
		t.Errorf("stop: %+v", stopped)
	}
	end = attach(t, c, "s-stop")
	if end.State != "exited" || end.Termination != "signaled" || end.Signal != 15 || end.Status != 143 {
		t.Errorf("stop: ended %+v", end.End)
	}
	c.ok("cleanup_session", map[string]any{"session_id": "s-stop"}, nil)

	// Receipts: one per session, chained to the anchor.
	var page struct {
		Envelopes []receipt.Envelope `json:"envelopes"`
		HeadSeq   uint64             `json:"head_seq"`
		HeadMAC   string             `json:"head_mac"`
	}
	c.ok("receipts_page", map[string]any{"after": 0, "limit": 100}, &page)
	if len(page.Envelopes) != 3 || page.HeadSeq != 3 {
		t.Fatalf("page: %d envelopes, head %d", len(page.Envelopes), page.HeadSeq)
	}
	if err := receipt.Verify(key, testAnchor, page.Envelopes); err != nil {
		t.Errorf("receipts do not verify: %v", err)
	}
	b := page.Envelopes[0].Body
	if b.SessionID != "s-exit" || b.Termination != "exited" || b.ExitCode != 7 || b.PolicyRevision != 3 ||
		b.PlanContentDigest != plan.ContentDigest(exitPlan) || b.Usage.TerminalOutputBytes == 0 {
		t.Errorf("receipt 1: %+v", b)
	}
	if b := page.Envelopes[1].Body; b.SessionID != "s-wall" || b.Termination != "limit:wall_time_ms" {
		t.Errorf("receipt 2: %+v", b)
	}
	var ack struct {
		Acked uint64 `json:"acked"`
	}
	ackedMAC := page.Envelopes[1].EnvelopeMAC
	c.ok("receipts_ack", map[string]any{"seq": 2, "envelope_mac": ackedMAC}, &ack)
	if ack.Acked != 2 {
		t.Errorf("ack %+v", ack)
	}
	c.fails("receipts_ack", map[string]any{"seq": 2, "envelope_mac": page.Envelopes[1].EnvelopeMAC}, daemon.CodeConflict)
	c.fails("receipts_ack", map[string]any{"seq": 3, "envelope_mac": page.Envelopes[1].EnvelopeMAC}, daemon.CodeConflict)
	// Acknowledged receipts are not served again, and the refusal says
	// so (not "beyond the head", which would send a controller looking
	// for receipts that were never written).
	if _, e := c.call("receipts_page", map[string]any{"after": 0, "limit": 100}); e == nil || e.Code != daemon.CodeInvalidParams || !strings.Contains(e.Message, "acknowledged and have left the journal") {
		t.Errorf("receipts_page below the acknowledged head: %+v, want %d naming the acknowledged receipts", e, daemon.CodeInvalidParams)
	}

	// SIGTERM with a session running: gloved stops it, seals its
	// receipt, removes its socket and exits 0.
	tok = f.create(c, "s-shutdown", f.plan("sleeper", "tiny"))
	c.ok("start_session", map[string]any{"session_id": "s-shutdown", "start_token": tok}, nil)
	g.stop(t)
	for _, secret := range []string{tok, f.ws, string(key)} {
		if strings.Contains(g.log.String(), secret) {
			t.Errorf("the log holds a start token, a key or a host path:\n%s", g.log)
		}
	}

	// A restarted gloved replays both journals.
	g = startGloved(t, e, args...)
	c = dial(t, g.socket)
	c.ok("session_status", map[string]any{"session_id": "s-shutdown"}, &status)
	if status.State != "exited" || status.Reason != "signaled" {
		t.Errorf("after shutdown: status %+v", status)
	}
	c.ok("receipts_page", map[string]any{"after": 2, "limit": 100}, &page)
	if len(page.Envelopes) != 2 || page.HeadSeq != 4 || page.Envelopes[1].Body.SessionID != "s-shutdown" {
		t.Fatalf("page after restart: %+v", page)
	}
	if err := receipt.Verify(key, ackedMAC, page.Envelopes); err != nil {
		t.Errorf("receipts after restart do not verify: %v", err)
	}
	g.stop(t)
}

// TestGlovedCopyOverQuota: a workspace larger than its grant's max_bytes
// fails the launch before the program exists, and the session's reason,
// termination and receipt name the disk limit (docs/sessions.md), not a
// bare "failed" (seen in the VM lane).
func TestGlovedCopyOverQuota(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	f := newFixture(t, e, map[string][]string{"harness": {"--flag", "x"}})
	big := filepath.Join(f.ws, "big")
	if err := os.WriteFile(big, make([]byte, fixtureAccess.MaxBytes+1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(big, e.UID, e.GID); err != nil {
		t.Fatal(err)
	}
	g := f.start()
	c := dial(t, g.socket)
	tok := f.create(c, "s-quota", f.plan("harness", "tiny"))
	c.ok("start_session", map[string]any{"session_id": "s-quota", "start_token": tok}, nil)
	end := attach(t, c, "s-quota")
	if end.Termination != "limit:disk_bytes" || end.State != "failed" || end.output != "" {
		t.Errorf("ended %+v, output %q; want failed with limit:disk_bytes before any output\nlog: %s", end.End, end.output, g.log)
	}
	var status daemon.Status
	c.ok("session_status", map[string]any{"session_id": "s-quota"}, &status)
	if status.State != "failed" || status.Reason != "limit:disk_bytes" {
		t.Errorf("status %+v, want failed with reason limit:disk_bytes", status)
	}
	var page struct {
		Envelopes []receipt.Envelope `json:"envelopes"`
	}
	c.ok("receipts_page", map[string]any{"after": 0, "limit": 10}, &page)
	if len(page.Envelopes) != 1 || page.Envelopes[0].Body.Termination != "limit:disk_bytes" {
		t.Errorf("receipts %+v, want one with termination limit:disk_bytes", page.Envelopes)
	}
	g.stop(t)
}

// seccompCacheEntries checks gloved's seccomp cache directory (the
// service user's, mode 0700) and its entries (the service user's, mode
// 0600) and returns each entry's inode by name.
func seccompCacheEntries(t *testing.T, e *testenv.Env, dir string) map[string]uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		t.Fatalf("seccomp cache: %v", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != e.UID || st.Mode&0o7777 != 0o700 {
		t.Errorf("seccomp cache: mode %o uid %d, want a 0700 directory of uid %d", st.Mode, st.Uid, e.UID)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, ent := range ents {
		if err := unix.Lstat(filepath.Join(dir, ent.Name()), &st); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(ent.Name(), ".bpf") || int(st.Uid) != e.UID || st.Mode&0o7777 != 0o600 {
			t.Errorf("seccomp cache: %s mode %o uid %d, want NAME.bpf, 0600, uid %d", ent.Name(), st.Mode, st.Uid, e.UID)
		}
		out[ent.Name()] = st.Ino
	}
	return out
}
