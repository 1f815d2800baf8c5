// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/service/daemon"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

// buildFaultyGloved builds gloved with the glove_testfaults tag: with
// GLOVED_TEST_FAULT=POINT it kills itself with SIGKILL at that point of a
// session's start path. It is never installed.
func buildFaultyGloved(t testing.TB, e *testenv.Env) string {
	t.Helper()
	return e.Tool(t, testenv.ToolFaultyGloved)
}

// becomeReaper makes this test process the reaper of the orphans of a
// gloved it kills (its helpers, the shim), as a service manager would be,
// until the test ends; reapOrphans reaps them.
func becomeReaper(t *testing.T) {
	t.Helper()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0); err != nil {
			t.Errorf("stop being a subreaper: %v", err)
		}
	})
}

// reapOrphans waits for, and reaps, every child of this process that a
// killed gloved left (helpers exit on their socket's EOF, the shim on its
// parent-death signal).
func reapOrphans(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		left := 0
		ents, _ := os.ReadDir("/proc")
		for _, d := range ents {
			pid, err := strconv.Atoi(d.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
			if err != nil {
				continue
			}
			f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
			if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) {
				continue
			}
			comm := string(b[strings.IndexByte(string(b), '(')+1 : strings.LastIndexByte(string(b), ')')])
			// "gloved": a helper the killed gloved had forked but not
			// yet executed (its pool refills while sessions end) still
			// bears gloved's name; it executes, finds its socket's peer
			// gone and exits, so it is waited for like the others.
			if !strings.HasPrefix(comm, "glove-") && comm != "exe" && comm != "gloved" {
				continue
			}
			left++
			var ws unix.WaitStatus
			if p, _ := unix.Wait4(pid, &ws, unix.WNOHANG, nil); p == pid {
				left--
			}
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d processes of the killed gloved still running", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestGlovedRecovery kills gloved with SIGKILL at each point of a
// session's start path, restarts it, and checks that the restarted gloved
// finishes the session as failed, with a durable failed receipt, and that
// nothing is left: no process, mount, loop device, cgroup (the leak
// check) and no bundle directory.
func TestGlovedRecovery(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	// This test process is the init of the gloved it kills: the killed
	// gloved's children (its helpers, the shim) are re-parented here and
	// reaped by reapOrphans, as a service manager would reap them.
	becomeReaper(t)
	testenv.CheckLeaks(t, e.UID)
	f := newFixture(t, e, map[string][]string{"sleeper": {"sleep"}})
	faulty := buildFaultyGloved(t, e)
	key, args, mat := f.key, f.args, f.matRoot
	pl := f.plan("sleeper", "tiny")

	// reserved, prepare, cgroup, mounts, bundle, spawned: the store says preparing
	// (starting has no record); recorded, placed, released: running, with
	// the runtime its one record carries.
	points := []string{"reserved", "prepare", "cgroup", "mounts", "bundle", "spawned", "recorded", "placed", "released"}
	for _, point := range points {
		id := "r-" + point
		g := startGlovedAt(t, e, faulty, []string{"GLOVED_TEST_FAULT=" + point}, args...)
		c := dial(t, g.socket)
		tok := f.create(c, id, pl)
		// gloved may die at its fault point before it answers: the
		// answer is not waited for, only the death below.
		line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 99, "method": "start_session",
			"params": map[string]any{"session_id": id, "start_token": tok}})
		if err != nil {
			t.Fatal(err)
		}
		c.sendLine(string(line))
		_, _ = c.read()
		done := make(chan error, 1)
		go func() { done <- g.cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: gloved was not killed at its fault point\nlog: %s", point, g.log)
		}
		if ws, ok := g.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("%s: gloved ended with %v, want SIGKILL at the fault point\nlog: %s", point, g.cmd.ProcessState, g.log)
		}
		reapOrphans(t)

		// The restarted gloved finishes the session.
		g2 := startGloved(t, e, args...)
		c2 := dial(t, g2.socket)
		var st struct {
			State  string `json:"state"`
			Reason string `json:"reason"`
		}
		c2.ok("session_status", map[string]any{"session_id": id}, &st)
		if st.State != "failed" || (st.Reason != daemon.RecoveredGone && st.Reason != daemon.RecoveredKilled) {
			t.Errorf("%s: after restart %+v, want failed and recovered:*\nlog: %s", point, st, g2.log)
		}
		if strings.Contains(g2.log.String(), `"level":"error"`) {
			t.Errorf("%s: errors in the restarted gloved's log: %s", point, g2.log)
		}
		g2.stop(t)
		if m, _ := filepath.Glob(filepath.Join(mat, "bundle-*")); len(m) != 0 {
			t.Errorf("%s: bundles left: %v", point, m)
		}
	}

	// Every recovered session has its failed receipt, in one chain.
	g := startGloved(t, e, args...)
	c := dial(t, g.socket)
	var page struct {
		Envelopes []receipt.Envelope `json:"envelopes"`
	}
	c.ok("receipts_page", map[string]any{"after": 0, "limit": 100}, &page)
	g.stop(t)
	if len(page.Envelopes) != len(points) {
		t.Fatalf("%d receipts, want %d", len(page.Envelopes), len(points))
	}
	if err := receipt.Verify(key, testAnchor, page.Envelopes); err != nil {
		t.Errorf("receipts do not verify: %v", err)
	}
	for i, env := range page.Envelopes {
		if env.Body.SessionID != "r-"+points[i] || env.Body.Termination != "failed" {
			t.Errorf("receipt %d: %s %s", i, env.Body.SessionID, env.Body.Termination)
		}
	}
}

// TestGlovedRecoveryPolicyRevision: gloved is killed with a session
// running, the operator replaces the policy (a new revision) and
// restarts it: the recovered session's receipt names the revision it ran
// under, not the new one.
func TestGlovedRecoveryPolicyRevision(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	becomeReaper(t)
	testenv.CheckLeaks(t, e.UID)
	f := newFixture(t, e, map[string][]string{"sleeper": {"sleep"}})
	g := startGlovedAt(t, e, buildFaultyGloved(t, e), []string{"GLOVED_TEST_FAULT=released"}, f.args...)
	c := dial(t, g.socket)
	tok := f.create(c, "rev-old", f.plan("sleeper", "tiny"))
	line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 99, "method": "start_session",
		"params": map[string]any{"session_id": "rev-old", "start_token": tok}})
	if err != nil {
		t.Fatal(err)
	}
	c.sendLine(string(line))
	if err := g.cmd.Wait(); err == nil {
		t.Fatalf("gloved was not killed at its fault point\nlog: %s", g.log)
	}
	reapOrphans(t)
	next := *f.pol
	next.Revision = fixtureRevision + 1
	writeProtected(t, filepath.Join(f.dir, "policy.json"), policy.Canonical(&next), e.UID, e.GID)
	g2 := startGloved(t, e, f.args...)
	c2 := dial(t, g2.socket)
	var page struct {
		Envelopes []receipt.Envelope `json:"envelopes"`
	}
	c2.ok("receipts_page", map[string]any{"after": 0, "limit": 100}, &page)
	g2.stop(t)
	if len(page.Envelopes) != 1 || page.Envelopes[0].Body.SessionID != "rev-old" || page.Envelopes[0].Body.Termination != "failed" {
		t.Fatalf("receipts after recovery: %+v", page.Envelopes)
	}
	if got := page.Envelopes[0].Body.PolicyRevision; got != fixtureRevision {
		t.Fatalf("the recovered receipt names policy revision %d, want %d (the one it ran under; the policy is now %d)", got, fixtureRevision, next.Revision)
	}
}
