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
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/service/daemon"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

// retainedAccess is the workspace's retained_write grant of the image
// tests: a copy into an ext4 image of 16 MiB, kept after the session.
var retainedAccess = policy.AccessTuple{Access: policy.AccessRetainedWrite, Materialization: policy.MaterializationCopy,
	CreatePolicy: policy.CreateMustExist, CleanupPolicy: policy.CleanupRetain, MaxBytes: 16 << 20}

// allowRetained lets the fixture's plans ask for retainedAccess too, and
// points gloved at glove-loopext4's materialization root (testenv's
// images/, which the helper checks by identity).
func allowRetained(t *testing.T, f *fixture) {
	t.Helper()
	f.pol.PathAliases[0].Access = append(f.pol.PathAliases[0].Access, retainedAccess)
	if err := policy.Validate(f.pol); err != nil {
		t.Fatalf("test policy: %v", err)
	}
	writeProtected(t, filepath.Join(f.dir, "policy.json"), policy.Canonical(f.pol), f.e.UID, f.e.GID)
	f.matRoot = filepath.Join(f.e.Base, "images")
	for i, a := range f.args {
		if a == "--materialization-root" {
			f.args[i+1] = f.matRoot
		}
	}
}

// retainedPlan is f.plan with the workspace granted retained_write.
func retainedPlan(f *fixture, template, profile string) *plan.Plan {
	pl := f.plan(template, profile)
	g := &pl.PathGrants[0]
	g.Access, g.Materialization, g.CreatePolicy, g.CleanupPolicy, g.MaxBytes = retainedAccess.Access,
		retainedAccess.Materialization, retainedAccess.CreatePolicy, retainedAccess.CleanupPolicy, retainedAccess.MaxBytes
	return pl
}

// sessionLog is gloved's log lines about session id.
func sessionLog(g *gloved, id string) string {
	var out []string
	for _, line := range strings.Split(g.log.String(), "\n") {
		if strings.Contains(line, `"session_id":"`+id+`"`) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestGlovedImageAndStreamHelperLoss kills glove-loopext4 (retained_write
// sessions) and glove-streamproxy (inherited-stream sessions) with SIGKILL,
// from outside, at the points of a session (issue 16): during the start
// (glove-mounter too),
// while the program runs under its wall limit, and before a stop. Checked
// from outside: the limit or the stop still ends the session within its
// bound; the store reason names the lost helper; a lost glove-loopext4
// still leaves the staged write in a frozen, detached image (a fresh
// helper froze it), and a launch it failed leaves no image; a lost
// glove-streamproxy cuts the program's stream (it reads EOF: nothing
// flows unrelayed or unaudited) and leaves an audit file of whole
// records; the receipts verify; nothing leaks.
func TestGlovedImageAndStreamHelperLoss(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	const wallMs, graceMs = 2000, 500
	wall := tinyProfile
	wall.ProfileID, wall.WallTimeMs = "wall", wallMs
	f := newFixture(t, e, map[string][]string{"retainer": {"retain"}, "waiter": {"streamwait"}}, tinyProfile, wall)
	allowRetained(t, f)
	images := f.matRoot
	var ids []string
	// Runs before the leak check (cleanups run last first).
	t.Cleanup(func() {
		testenv.WaitImagesDetached(t, images)
		for _, id := range ids {
			if err := os.Remove(filepath.Join(images, id+"_workspace.img")); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Error(err)
			}
		}
	})
	sock := startUpstream(t, e, f)
	pause := filepath.Join(f.run, "pause")
	g := startGlovedAt(t, e, buildFaultyGloved(t, e), []string{"GLOVED_TEST_PAUSE=prepare:" + pause},
		withStream(t, e, f, sock)...)
	logOnFailure(t, g)
	c := dial(t, g.socket)
	// arm makes the next start wait at its prepare point; unpause lets it
	// (and every later start) go on.
	arm := func(t *testing.T) {
		t.Helper()
		for _, p := range []string{pause, pause + ".reached"} {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
		}
	}
	unpause := func(t *testing.T) {
		t.Helper()
		if err := os.WriteFile(pause, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	reached := func(t *testing.T) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(pause + ".reached"); err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the start never reached its prepare point\nlog: %s", g.log)
			}
		}
	}
	imageOf := func(id string) string { return id + "_workspace.img" }

	// startLoss starts session id with pl, kills helper at the start's
	// prepare point (before any mount or image; the cgroups are being
	// made meanwhile) and
	// checks that the launch failed naming it.
	startLoss := func(t *testing.T, id string, pl *plan.Plan, helper string) {
		arm(t)
		tok := f.create(c, id, pl)
		c.ok("start_session", map[string]any{"session_id": id, "start_token": tok}, nil)
		reached(t)
		killed := killNamed(t, g, helper)
		unpause(t)
		c.ok("attach", map[string]any{"session_id": id}, nil)
		end := endOf(t, readUntil(t, c, killed.Add(20*time.Second), id+": ended", isEnded))
		t.Logf("%s: %s killed at the start; the launch failed %v after the kill", id, helper, time.Since(killed).Round(time.Millisecond))
		if end.State != "failed" || end.Termination != "failed" {
			t.Errorf("ended %+v, want failed", end)
		}
		if st := status(t, c, id); st.State != "failed" || st.Reason != "helper_lost:"+helper {
			t.Errorf("status %s %s, want failed helper_lost:%s\nlog: %s", st.State, st.Reason, helper, sessionLog(g, id))
		}
		checkCgroupsGone(t, e, id)
	}
	// glove-loopext4 dies before it makes the image: no image is left.
	t.Run("image-start", func(t *testing.T) {
		ids = append(ids, "il-start")
		startLoss(t, "il-start", retainedPlan(f, "retainer", "tiny"), "glove-loopext4")
		if _, err := os.Lstat(filepath.Join(images, imageOf("il-start"))); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("image of a launch that failed: %v, want none", err)
		}
	})
	// glove-mounter dies before it makes the session's mounts.
	t.Run("mounter-start", func(t *testing.T) {
		startLoss(t, "ml-start", f.plan("waiter", "tiny"), "glove-mounter")
	})

	// start, glove-streamproxy: it dies before the program exists. The
	// program finds its stream closed; the wall limit ends it.
	t.Run("stream-start", func(t *testing.T) {
		arm(t)
		id := "sl-start"
		tok := f.create(c, id, f.plan("waiter", "wall"))
		c.ok("start_session", map[string]any{"session_id": id, "start_token": tok}, nil)
		reached(t)
		killed := killNamed(t, g, "glove-streamproxy")
		unpause(t)
		c.ok("attach", map[string]any{"session_id": id}, nil)
		// Everything the program printed, up to its end (the wall limit).
		var out strings.Builder
		m := readUntil(t, c, killed.Add(wallMs*time.Millisecond+30*time.Second), "stream-start: ended", func(m msg) bool {
			var o daemon.Output
			if m.Method == "output" && json.Unmarshal(m.Params, &o) == nil {
				out.Write(o.Data)
			}
			return isEnded(m)
		})
		end := endOf(t, m)
		if !strings.Contains(out.String(), "first reply") || strings.Contains(out.String(), "pong") || strings.Contains(out.String(), "<nil>") {
			t.Errorf("the program's exchange through a dead glove-streamproxy: output %q, want a failed first reply", out.String())
		}
		if end.State != "exited" || end.Termination != "limit:wall_time_ms" {
			t.Errorf("ended %+v, want exited by limit:wall_time_ms", end)
		}
		if st := status(t, c, id); st.Reason != "helper_lost:glove-streamproxy" {
			t.Errorf("status %+v, want reason helper_lost:glove-streamproxy\nlog: %s", st, g.log)
		}
		checkCgroupsGone(t, e, id)
	})

	// running and stopping: the helper dies once the program has done
	// its part (written into the image, exchanged on the stream); the
	// wall limit, or stop_session, ends the session all the same.
	for _, tc := range []struct {
		name, helper, template, profile, ready string
		retained, stop                         bool
		bound                                  time.Duration // from the program's first line (or stop_session)
		termination                            string
		signal                                 unix.Signal
	}{
		{"image-wall", "glove-loopext4", "retainer", "wall", "retain write <nil>", true, false, wallMs * time.Millisecond, "limit:wall_time_ms", unix.SIGKILL},
		{"image-stop", "glove-loopext4", "retainer", "tiny", "retain write <nil>", true, true, graceMs * time.Millisecond, "signaled", unix.SIGKILL},
		{"stream-wall", "glove-streamproxy", "waiter", "wall", "first reply pong:ping <nil>", false, false, wallMs * time.Millisecond, "limit:wall_time_ms", unix.SIGKILL},
		{"stream-stop", "glove-streamproxy", "waiter", "tiny", "first reply pong:ping <nil>", false, true, graceMs * time.Millisecond, "signaled", unix.SIGTERM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			unpause(t)
			id := "hl2-" + tc.name
			pl := f.plan(tc.template, tc.profile)
			if tc.retained {
				ids = append(ids, id)
				pl = retainedPlan(f, tc.template, tc.profile)
			}
			tok := f.create(c, id, pl)
			t0 := time.Now()
			c.ok("start_session", map[string]any{"session_id": id, "start_token": tok}, nil)
			c.ok("attach", map[string]any{"session_id": id}, nil)
			readUntil(t, c, t0.Add(20*time.Second), tc.name+": program ready", outputHas(tc.ready))
			// The limits count from the program's start, which its first
			// line follows: the bound is checked from that line (on an
			// emulated VM-lane guest the launch alone takes a second or
			// more), and the receipt's wall time, from the start, below.
			ready := time.Now()
			if !tc.retained {
				// The program prints its reply once glove-streamproxy has
				// released it, which is before the helper appends the
				// exchange's delivered record (docs/helpers.md, steps 8
				// to 10). A kill in that window rightly leaves the
				// exchange pending; the test kills after the record, so
				// that what it reads back below is decided, not raced.
				waitAuditStatus(t, filepath.Join(f.storeDir, "stream-"+id+".audit"), "delivered", ready.Add(5*time.Second))
			}
			killed := killNamed(t, g, tc.helper)
			if !tc.retained {
				// The stream is cut: the program's read ends at once.
				readUntil(t, c, killed.Add(5*time.Second), tc.name+": stream cut", outputHas("stream cut: EOF"))
			}
			from := ready
			if tc.stop {
				from = time.Now()
				c.sendLine(`{"jsonrpc":"2.0","id":"stop","method":"stop_session","params":{"session_id":"` + id + `","grace_ms":` + strconv.Itoa(graceMs) + `}}`)
			}
			end := endOf(t, readUntil(t, c, from.Add(tc.bound+10*time.Second), tc.name+": ended", isEnded))
			took := time.Since(from)
			t.Logf("%s: bound %v, ended %v after %s with %s dead", tc.name, tc.bound, took.Round(time.Millisecond),
				map[bool]string{false: "its first line", true: "stop_session"}[tc.stop], tc.helper)
			if took > tc.bound+boundSlack {
				t.Errorf("ended %v after %s, bound %v + %v", took, map[bool]string{false: "its first line", true: "stop_session"}[tc.stop], tc.bound, boundSlack)
			}
			if end.State != "exited" || end.Termination != tc.termination || (tc.stop && end.Signal != int(tc.signal)) {
				t.Errorf("ended %+v, want exited with %s (signal %d when stopped)", end, tc.termination, tc.signal)
			}
			if st := status(t, c, id); st.State != "exited" || st.Reason != "helper_lost:"+tc.helper || st.Termination != tc.termination {
				t.Errorf("status %+v, want exited, reason helper_lost:%s, termination %s\nlog: %s", st, tc.helper, tc.termination, g.log)
			}
			checkCgroupsGone(t, e, id)
			if tc.retained {
				// Detached, then its write read back: a fresh
				// glove-loopext4 synced and froze it.
				if calls := replacedCalls(t, g, id); !slices.Contains(calls, "glove-loopext4:freeze") {
					t.Errorf("fresh helper calls %q, want glove-loopext4:freeze\nlog: %s", calls, sessionLog(g, id))
				}
				testenv.WaitImagesDetached(t, images)
				if r := e.ReadImage(t, images, imageOf(id), "out")[0]; r.Err != nil || r.Data != "written" {
					t.Errorf("out in the image: %q, %v; want %q", r.Data, r.Err, "written")
				}
				testenv.WaitImagesDetached(t, images)
				return
			}
			// The audit holds whole records: the exchange pending,
			// then delivered; no payload.
			audit, err := os.ReadFile(filepath.Join(f.storeDir, "stream-"+id+".audit"))
			if err != nil {
				t.Fatal(err)
			}
			var statuses []string
			for _, line := range strings.Split(strings.TrimSuffix(string(audit), "\n"), "\n") {
				var r struct {
					Status string `json:"status"`
				}
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Errorf("audit line %q: %v", line, err)
				}
				if strings.Contains(line, "ping") || strings.Contains(line, "pong") {
					t.Errorf("an audit record holds payload: %s", line)
				}
				statuses = append(statuses, r.Status)
			}
			if got := strings.Join(statuses, " "); !strings.HasPrefix(got, "delivery_pending delivered") {
				t.Errorf("audit statuses %q, want pending then delivered", got)
			}
		})
	}
	if strings.Contains(g.log.String(), `"event":"kill_path_failed"`) {
		t.Errorf("a way of killing a session failed:\n%s", g.log)
	}
	for _, h := range []string{"glove-loopext4", "glove-streamproxy"} {
		if !strings.Contains(g.log.String(), `"helper":"`+h+`"`) {
			t.Errorf("gloved's log does not name the lost %s:\n%s", h, g.log)
		}
	}
	var page struct {
		Envelopes []receipt.Envelope `json:"envelopes"`
	}
	c.ok("receipts_page", map[string]any{"after": 0, "limit": 100}, &page)
	if len(page.Envelopes) != 7 {
		t.Errorf("%d receipts, want 7", len(page.Envelopes))
	}
	if err := receipt.Verify(f.key, testAnchor, page.Envelopes); err != nil {
		t.Errorf("receipts do not verify: %v", err)
	}
	g.stop(t)
}

// waitAuditStatus waits until the stream audit at path holds a record of
// status, or fails the test at deadline.
func waitAuditStatus(t *testing.T, path, status string, deadline time.Time) {
	t.Helper()
	want := `"status":"` + status + `"`
	for {
		data, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		if strings.Contains(string(data), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %s record by the deadline; it holds %q", path, status, data)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
