// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/service/daemon"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

// lostReason is the store reason of a session that lost glove-cgroup.
const lostReason = "helper_lost:glove-cgroup"

// boundSlack is how much later than its bound a session may end: the
// kill, the shim's exit, the clean-up and the notification (issue 16
// asks for 1 s).
//
// On the VM lane's guests (a prebuilt run), emulated by TCG some five to
// ten times slower than a host, the kill, the shim's exit and the
// clean-up take longer: the slack there is 3 s (the figures are logged;
// the 1 s bound is checked on every host CI runs on).
var boundSlack = func() time.Duration {
	if os.Getenv(testenv.PrebuiltEnv) != "" {
		return 3 * time.Second
	}
	return time.Second
}()

// logOnFailure prints gloved's whole log when the test fails: a failure
// in the VM lane leaves nothing else to read.
func logOnFailure(t *testing.T, g *gloved) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gloved's log:\n%s", g.log)
		}
	})
}

// helperChild returns the pid of the running child of gloved named name
// (one per session: the test runs one session at a time).
func helperChild(t *testing.T, g *gloved, name string) int {
	t.Helper()
	pids := helperChildren(t, g, name)
	switch len(pids) {
	case 0:
		t.Fatalf("no %s child of gloved %d", name, g.cmd.Process.Pid)
	case 1:
	default:
		t.Fatalf("%d %s children of gloved: %v", len(pids), name, pids)
	}
	return pids[0]
}

// helperChildren returns the pids of gloved's running (not zombie)
// children named name.
func helperChildren(t *testing.T, g *gloved, name string) []int {
	t.Helper()
	if len(name) > 15 {
		name = name[:15] // the kernel keeps 15 bytes of a command name
	}
	running, _ := childrenNamed(t, g, name)
	return running
}

// killHelper kills gloved's glove-cgroup with SIGKILL, from outside, and
// waits until it is dead (a zombie until gloved reaps it).
func killHelper(t *testing.T, g *gloved) time.Time {
	t.Helper()
	return killNamed(t, g, "glove-cgroup")
}

// killNamed kills gloved's helper name as killHelper does.
func killNamed(t *testing.T, g *gloved, name string) time.Time {
	t.Helper()
	pid := helperChild(t, g, name)
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	if n, err := unix.Poll(pfd, 5000); err != nil || n != 1 {
		t.Fatalf("%s %d not dead 5 s after SIGKILL: %v", name, pid, err)
	}
	return at
}

// readUntil reads gloved's lines until one satisfies done, or fails the
// test at the deadline.
func readUntil(t *testing.T, c *client, deadline time.Time, what string, done func(msg) bool) msg {
	t.Helper()
	for {
		_ = c.c.SetReadDeadline(deadline)
		line, err := c.r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("%s: %v (at %s)", what, err, time.Now().Format(time.StampMilli))
		}
		var m msg
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%s: bad line %q", what, line)
		}
		if done(m) {
			return m
		}
	}
}

// outputHas is a readUntil predicate: an output notification holding s.
func outputHas(s string) func(msg) bool {
	return func(m msg) bool {
		var o daemon.Output
		return m.Method == "output" && json.Unmarshal(m.Params, &o) == nil && strings.Contains(string(o.Data), s)
	}
}

// isEnded is a readUntil predicate: the "ended" notification.
func isEnded(m msg) bool { return m.Method == "ended" }

// endOf decodes an "ended" notification.
func endOf(t *testing.T, m msg) daemon.End {
	t.Helper()
	var e daemon.End
	if err := json.Unmarshal(m.Params, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// checkCgroupsGone checks, from the host, that session id has no cgroup
// directory left in any hierarchy (a cgroup directory cannot be removed
// while a process is in it, so none of the session's processes is left
// either).
func checkCgroupsGone(t *testing.T, e *testenv.Env, id string) {
	t.Helper()
	mounts, err := testenv.CgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		dir := filepath.Join(m, testenv.CgroupParent(e.Base), id)
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			t.Errorf("%s: cgroup %s left (%v), processes %q", id, dir, err, strings.Fields(string(procs)))
		}
	}
}

// replacedCalls are the clean-up calls gloved's log says a fresh helper
// answered for session id (its helper_replaced event).
func replacedCalls(t *testing.T, g *gloved, id string) []string {
	t.Helper()
	var calls []string
	for _, line := range strings.Split(g.log.String(), "\n") {
		var ev struct {
			Event   string   `json:"event"`
			Session string   `json:"session_id"`
			Calls   []string `json:"calls"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Event == "helper_replaced" && ev.Session == id {
			calls = append(calls, ev.Calls...)
		}
	}
	return calls
}

// status is session_status's state and reason.
func status(t *testing.T, c *client, id string) daemon.Status {
	t.Helper()
	var st daemon.Status
	c.ok("session_status", map[string]any{"session_id": id}, &st)
	return st
}

// TestGlovedHelperLoss kills glove-cgroup (SIGKILL, from outside) at each
// point of a session (issue 16) and checks from outside that the session
// still ends within its bound, that its store reason names the lost
// helper while its termination says what ended the program, that its
// cgroups are removed all the same, that the next session is not
// affected, and that nothing leaks; and that the helpers a running
// session no longer needs are retired, not lost.
func TestGlovedHelperLoss(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	// gloved's exit (the shutdown case) hands whatever child it has not
	// reaped to its reaper, as systemd is for the unit: this test, which
	// reaps them (reapOrphans) and so tells a zombie handed over (reaped
	// here) from a process left running (a failure).
	becomeReaper(t)
	testenv.CheckLeaks(t, e.UID)
	const wallMs, cpuMs, graceMs = 2000, 1000, 500
	wall, cpu, out, mem := tinyProfile, tinyProfile, tinyProfile, tinyProfile
	wall.ProfileID, wall.WallTimeMs = "wall", wallMs
	cpu.ProfileID, cpu.CPUTimeMs = "cpu", cpuMs
	out.ProfileID, out.TerminalOutputBytes = "out", 64<<10
	mem.ProfileID, mem.MemoryBytes = "mem", 96<<20
	f := newFixture(t, e, map[string][]string{"sleeper": {"sleep"}, "spinner": {"spin"}, "stubborn": {"stubborn"},
		"flooder": {"flood"}, "hogger": {"hog"}, "harness": {"--flag", "x"}}, cpu, mem, out, tinyProfile, wall)
	pause := filepath.Join(f.run, "pause") // gloved creates pause.reached: the service user's directory
	g := startGlovedAt(t, e, buildFaultyGloved(t, e), []string{"GLOVED_TEST_PAUSE=cgroup:" + pause}, f.args...)
	logOnFailure(t, g)
	c := dial(t, g.socket)
	// Only the first session pauses at its cgroup point; the others (and
	// each subtest run on its own) pass once the file exists.
	unpause := func(t *testing.T) {
		t.Helper()
		if err := os.WriteFile(pause, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// start: glove-cgroup dies once the session's cgroups exist, before
	// the shim is placed. The launch fails, naming the helper, and a
	// fresh glove-cgroup removes the cgroups.
	t.Run("start", func(t *testing.T) {
		tok := f.create(c, "hl-start", f.plan("sleeper", "tiny"))
		c.ok("start_session", map[string]any{"session_id": "hl-start", "start_token": tok}, nil)
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(pause + ".reached"); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the start never reached its cgroup point\nlog: %s", g.log)
			}
		}
		killed := killHelper(t, g)
		unpause(t)
		c.ok("attach", map[string]any{"session_id": "hl-start"}, nil)
		end := endOf(t, readUntil(t, c, killed.Add(10*time.Second), "start: ended", isEnded))
		t.Logf("start: glove-cgroup killed after the cgroups were made; the launch failed %v after the kill", time.Since(killed).Round(time.Millisecond))
		if end.State != "failed" || end.Termination != "failed" {
			t.Errorf("start: ended %+v, want failed", end)
		}
		if st := status(t, c, "hl-start"); st.State != "failed" || st.Reason != lostReason {
			t.Errorf("start: status %s %s, want failed %s\nlog: %s", st.State, st.Reason, lostReason, g.log)
		}
		checkCgroupsGone(t, e, "hl-start")
	})

	// running: glove-cgroup dies while the program runs; each limit, and
	// stop_session, still ends the session within its bound.
	for _, tc := range []struct {
		name, template, profile, ready string
		bound                          time.Duration // from the program's first line (or stop_session)
		termination                    string
		stop                           bool
		helper                         string // the helper killed
		during                         bool   // killed in the stop's grace, not before the stop
	}{
		{"wall", "sleeper", "wall", "sleeping", wallMs * time.Millisecond, "limit:wall_time_ms", false, "glove-cgroup", false},
		{"cpu", "spinner", "cpu", "spinning", cpuMs * time.Millisecond, "limit:cpu_time_ms", false, "glove-cgroup", false},
		{"stop", "stubborn", "tiny", "ignoring", graceMs * time.Millisecond, "signaled", true, "glove-cgroup", false},
		// stopping: the session is stopping (SIGTERM sent, in its
		// grace) when glove-cgroup dies; the grace's kill still comes.
		{"stopping", "stubborn", "tiny", "ignoring", graceMs * time.Millisecond, "signaled", true, "glove-cgroup", true},
		// The output limit is gloved's own count; the memory limit the
		// kernel's (the OOM kill), read back through the held
		// memory.events. Each program starts a second after its line.
		{"output", "flooder", "out", "flooding soon", time.Second, "limit:terminal_output_bytes", false, "glove-cgroup", false},
		{"memory", "hogger", "mem", "hogging soon", time.Second, "limit:memory_bytes", false, "glove-cgroup", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			unpause(t)
			id := "hl-" + tc.name
			tok := f.create(c, id, f.plan(tc.template, tc.profile))
			t0 := time.Now()
			c.ok("start_session", map[string]any{"session_id": id, "start_token": tok}, nil)
			c.ok("attach", map[string]any{"session_id": id}, nil)
			readUntil(t, c, t0.Add(20*time.Second), tc.name+": program running", outputHas(tc.ready))
			// The limits count from the program's start, which its first
			// line follows: the bound is checked from that line (on an
			// emulated VM-lane guest the launch alone takes a second or
			// more), and the receipt's wall time, from the start, below.
			ready := time.Now()
			var killed time.Time
			if !tc.during {
				killed = killNamed(t, g, tc.helper)
			}
			from := ready
			if tc.stop {
				from = time.Now()
				c.sendLine(`{"jsonrpc":"2.0","id":"stop","method":"stop_session","params":{"session_id":"` + id + `","grace_ms":` + strconv.Itoa(graceMs) + `}}`)
			}
			if tc.during {
				time.Sleep(graceMs * time.Millisecond / 5)
				killed = killNamed(t, g, tc.helper)
			}
			m := readUntil(t, c, from.Add(tc.bound+10*time.Second), tc.name+": ended", isEnded)
			took := time.Since(from)
			end := endOf(t, m)
			t.Logf("%s: bound %v, session ended %v after %s with %s dead (killed %v after start_session)",
				tc.name, tc.bound, took.Round(time.Millisecond), map[bool]string{false: "its first line", true: "stop_session"}[tc.stop],
				tc.helper, killed.Sub(t0).Round(time.Millisecond))
			if took > tc.bound+boundSlack {
				t.Errorf("%s: ended %v after its first line (or the stop), bound %v + %v", tc.name, took, tc.bound, boundSlack)
			}
			if end.State != "exited" || end.Termination != tc.termination || (tc.stop && end.Signal != int(unix.SIGKILL)) {
				t.Errorf("%s: ended %+v, want exited with %s", tc.name, end, tc.termination)
			}
			if st := status(t, c, id); st.State != "exited" || st.Reason != "helper_lost:"+tc.helper || st.Termination != tc.termination {
				t.Errorf("%s: status %+v, want exited, reason helper_lost:%s, termination %s\nlog: %s", tc.name, st, tc.helper, tc.termination, g.log)
			}
			checkCgroupsGone(t, e, id)
			// The cgroups were removed by a fresh glove-cgroup.
			if calls := replacedCalls(t, g, id); tc.helper == "glove-cgroup" && !slices.Contains(calls, "glove-cgroup:remove") {
				t.Errorf("%s: fresh helper calls %q, want glove-cgroup:remove", tc.name, calls)
			}
		})
	}

	// The helpers a running session no longer needs are retired, not
	// lost: glove-mounter once the mounts are made, glove-cgroup once the
	// program has run 10 s (session.cgroupRetireAfter). The session's
	// end then gets its usage and removal from a fresh glove-cgroup:
	// nothing missing, nothing replaced, nothing left.
	t.Run("retired", func(t *testing.T) {
		unpause(t)
		id := "hl-retired"
		tok := f.create(c, id, f.plan("sleeper", "tiny"))
		t0 := time.Now()
		c.ok("start_session", map[string]any{"session_id": id, "start_token": tok}, nil)
		c.ok("attach", map[string]any{"session_id": id}, nil)
		readUntil(t, c, t0.Add(20*time.Second), "retired: program running", outputHas("sleeping"))
		running := time.Now()
		gone := func(name string, within time.Duration) bool {
			for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if len(helperChildren(t, g, name)) == 0 {
					return true
				}
			}
			return false
		}
		if !gone("glove-mounter", 5*time.Second) {
			t.Errorf("retired: glove-mounter still a child of gloved while the session runs")
		}
		if n := len(helperChildren(t, g, "glove-cgroup")); n != 1 && time.Since(running) < 8*time.Second {
			t.Errorf("retired: %d glove-cgroup children in the program's first seconds, want its 1", n)
		}
		if !gone("glove-cgroup", 15*time.Second) {
			t.Errorf("retired: glove-cgroup still a child of gloved %v after the program started", time.Since(running))
		}
		c.sendLine(`{"jsonrpc":"2.0","id":"stop","method":"stop_session","params":{"session_id":"` + id + `","grace_ms":500}}`)
		end := endOf(t, readUntil(t, c, time.Now().Add(20*time.Second), "retired: ended", isEnded))
		if end.State != "exited" || end.Termination != "signaled" {
			t.Errorf("retired: ended %+v, want exited, signaled", end)
		}
		if st := status(t, c, id); st.Reason != "signaled" {
			t.Errorf("retired: status %+v, want reason signaled (no helper lost)", st)
		}
		if calls := replacedCalls(t, g, id); len(calls) != 0 {
			t.Errorf("retired: calls %q logged as replacements", calls)
		}
		for _, bad := range []string{`"event":"usage_missing"`, `"helper":"glove-mounter","level":"warning"`, `"helper":"glove-cgroup","level":"warning"`} {
			for _, line := range strings.Split(g.log.String(), "\n") {
				if strings.Contains(line, bad) && strings.Contains(line, `"session_id":"`+id+`"`) {
					t.Errorf("retired: gloved logged %s:\n%s", bad, line)
				}
			}
		}
		checkCgroupsGone(t, e, id)
	})

	// A dead helper of one session does not affect the next: it gets
	// its own helpers, and ends as it would have.
	t.Run("next", func(t *testing.T) {
		unpause(t)
		tok := f.create(c, "hl-next", f.plan("harness", "tiny"))
		c.ok("start_session", map[string]any{"session_id": "hl-next", "start_token": tok}, nil)
		if end := attach(t, c, "hl-next"); end.State != "exited" || end.Termination != "exited" || end.ExitCode != 7 {
			t.Errorf("next: ended %+v", end.End)
		}
		if st := status(t, c, "hl-next"); st.Reason != "exited" {
			t.Errorf("next: status %+v, want reason exited", st)
		}
		checkCgroupsGone(t, e, "hl-next")
	})

	// shutdown: SIGTERM to gloved with glove-cgroup dead ends the session
	// (SIGTERM, which it ignores, then after gloved's grace a kill), and
	// gloved exits.
	t.Run("shutdown", func(t *testing.T) {
		const shutdownGrace = 5 * time.Second // cmd/gloved's
		unpause(t)
		tok := f.create(c, "hl-shutdown", f.plan("stubborn", "tiny"))
		c.ok("start_session", map[string]any{"session_id": "hl-shutdown", "start_token": tok}, nil)
		c.ok("attach", map[string]any{"session_id": "hl-shutdown"}, nil)
		readUntil(t, c, time.Now().Add(20*time.Second), "shutdown: program running", outputHas("ignoring"))
		killHelper(t, g)
		t0 := time.Now()
		if err := g.cmd.Process.Signal(unix.SIGTERM); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- g.cmd.Wait() }()
		select {
		case err := <-done:
			took := time.Since(t0)
			t.Logf("shutdown: grace %v, gloved exited %v after SIGTERM with glove-cgroup dead", shutdownGrace, took.Round(time.Millisecond))
			if err != nil {
				t.Errorf("gloved exit: %v\nlog: %s", err, g.log)
			}
			if took > shutdownGrace+boundSlack {
				t.Errorf("shutdown: gloved exited %v after SIGTERM, bound %v + %v", took, shutdownGrace, boundSlack)
			}
		case <-time.After(shutdownGrace + 20*time.Second):
			_ = g.cmd.Process.Kill()
			<-done
			t.Fatalf("gloved still running %v after SIGTERM with glove-cgroup dead\nlog: %s", shutdownGrace+20*time.Second, g.log)
		}
		reapOrphans(t)
		checkCgroupsGone(t, e, "hl-shutdown")
	})
	for _, want := range []string{`"event":"helper_lost"`, `"helper":"glove-cgroup"`} {
		if !strings.Contains(g.log.String(), want) {
			t.Errorf("gloved's log has no %s:\n%s", want, g.log)
		}
	}
	// Every kill went through the session's cgroup descriptor (the
	// first way): the service user may write the session's cgroup.kill.
	if strings.Contains(g.log.String(), `"event":"kill_path_failed"`) {
		t.Errorf("a way of killing a session failed:\n%s", g.log)
	}

	// A restarted gloved has each outcome: the reason names the lost
	// helper, the receipts keep the termination vocabulary.
	g2 := f.start()
	c2 := dial(t, g2.socket)
	if st := status(t, c2, "hl-shutdown"); st.State != "exited" || st.Reason != lostReason {
		t.Errorf("after shutdown: status %+v, want exited with %s", st, lostReason)
	}
	var page struct {
		Envelopes []receipt.Envelope `json:"envelopes"`
	}
	c2.ok("receipts_page", map[string]any{"after": 0, "limit": 100}, &page)
	terms := map[string]string{}
	for _, env := range page.Envelopes {
		terms[env.Body.SessionID] = env.Body.Termination
		if env.Body.SessionID == "hl-wall" || env.Body.SessionID == "hl-cpu" || env.Body.SessionID == "hl-retired" {
			u := env.Body.Usage
			t.Logf("receipt %s: %s, wall %d ms, cpu %d ms, memory peak %d, pids peak %d", env.Body.SessionID,
				env.Body.Termination, u.WallTimeMS, u.CPUTimeMS, u.MemoryPeakBytes, u.PidsPeak)
			if u.MemoryPeakBytes == 0 || u.CPUTimeMS == 0 {
				t.Errorf("receipt %s: usage %+v: the fresh glove-cgroup's figures are missing", env.Body.SessionID, u)
			}
			// Measured by gloved from the program's start: the limit's
			// bound plus the kill latency.
			if env.Body.SessionID == "hl-wall" && u.WallTimeMS > wallMs+uint64(boundSlack.Milliseconds()) {
				t.Errorf("receipt hl-wall: wall time %d ms, bound %d ms + %v", u.WallTimeMS, wallMs, boundSlack)
			}
		}
	}
	want := map[string]string{"hl-start": "failed", "hl-wall": "limit:wall_time_ms", "hl-cpu": "limit:cpu_time_ms",
		"hl-stop": "signaled", "hl-stopping": "signaled", "hl-retired": "signaled", "hl-next": "exited", "hl-shutdown": "signaled"}
	for id, term := range want {
		if terms[id] != term {
			t.Errorf("receipt of %s: termination %q, want %q", id, terms[id], term)
		}
	}
	if err := receipt.Verify(f.key, testAnchor, page.Envelopes); err != nil {
		t.Errorf("receipts do not verify: %v", err)
	}
	g2.stop(t)
}

// TestGlovedSweepsLeftCgroups: a starting gloved removes the empty
// session cgroups a dead helper left (those of terminal sessions, and
// those no session of the store's names), in every hierarchy, and leaves
// alone a cgroup that holds a process (it may be another supervisor's
// session being started) and its own leaf.
func TestGlovedSweepsLeftCgroups(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	f := newFixture(t, e, map[string][]string{"harness": {"--flag", "x"}})
	g := f.start()
	c := dial(t, g.socket)
	tok := f.create(c, "sw-done", f.plan("harness", "tiny"))
	c.ok("start_session", map[string]any{"session_id": "sw-done", "start_token": tok}, nil)
	if end := attach(t, c, "sw-done"); end.Termination != "exited" {
		t.Fatalf("ended %+v", end.End)
	}
	g.stop(t)

	// What a dead glove-cgroup leaves: the session's directories, made
	// here as the helper makes them (the service user's).
	mounts, err := testenv.CgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	parent := testenv.CgroupParent(e.Base)
	v2 := testenv.V2Root(t)
	var made []string
	mk := func(dir string) {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		made = append(made, dir)
		if err := os.Chown(dir, e.UID, e.GID); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for i := len(made) - 1; i >= 0; i-- {
			if err := testenv.RmdirKilling(made[i]); err != nil {
				t.Error(err)
			}
		}
	})
	// The hierarchies glove-cgroup makes sessions in: v2, and v1 memory
	// and pids where those are v1's (a hybrid host such as this one).
	for _, m := range mounts {
		if m != v2 && filepath.Base(m) != "memory" && filepath.Base(m) != "pids" {
			continue
		}
		mk(filepath.Join(m, parent, "sw-done"))
	}
	mk(filepath.Join(v2, parent, "sw-unknown"))
	mk(filepath.Join(v2, parent, "sw-busy"))
	// A process in sw-busy: a child of this test, moved there as root.
	busy := &syscall.ProcAttr{}
	pid, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "60"}, busy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, 0, nil)
	})
	if err := os.WriteFile(filepath.Join(v2, parent, "sw-busy", "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		t.Fatal(err)
	}

	g = f.start()
	checkCgroupsGone(t, e, "sw-done")
	checkCgroupsGone(t, e, "sw-unknown")
	for _, keep := range []string{"sw-busy", "supervisor"} {
		if _, err := os.Stat(filepath.Join(v2, parent, keep)); err != nil {
			t.Errorf("%s removed by the sweep: %v", keep, err)
		}
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Errorf("the process in sw-busy was killed by the sweep: %v", err)
	}
	if !strings.Contains(g.log.String(), `"cgroup":"sw-unknown"`) || !strings.Contains(g.log.String(), `"cgroup":"sw-busy"`) ||
		!strings.Contains(g.log.String(), `"cgroup":"sw-done"`) {
		t.Errorf("the sweep's log does not name what it removed and what it left:\n%s", g.log)
	}
	g.stop(t)
}
