// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

// childrenNamed lists gloved's children named name: those running and
// those exited but not reaped (zombies).
func childrenNamed(t *testing.T, g *gloved, name string) (running, zombies []int) {
	t.Helper()
	parent := strconv.Itoa(g.cmd.Process.Pid)
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		c := s[strings.IndexByte(s, '(')+1 : strings.LastIndexByte(s, ')')]
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if c != name || len(f) < 2 || f[1] != parent {
			continue
		}
		if f[0] == "Z" {
			zombies = append(zombies, pid)
		} else {
			running = append(running, pid)
		}
	}
	return running, zombies
}

// waitPool waits until gloved has exactly one idle helper of each pooled
// name, none of them in not, and no zombie helper child; it returns them.
func waitPool(t *testing.T, g *gloved, not []int) map[string]int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := map[string]int{}
		ok := true
		for _, name := range []string{"glove-mounter", "glove-cgroup"} {
			running, zombies := childrenNamed(t, g, name)
			if len(running) != 1 || len(zombies) != 0 || slices.Contains(not, running[0]) {
				ok = false
				if time.Now().After(deadline) {
					t.Fatalf("%s children of gloved: running %v (not %v), zombies %v\nlog: %s", name, running, not, zombies, g.log)
				}
				break
			}
			got[name] = running[0]
		}
		if ok {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestGlovedHelperPool checks the helpers gloved starts ahead of demand:
// one glove-mounter and one glove-cgroup are ready before the first
// session; a session takes them (they exit with it and are reaped, never
// given to another session), and fresh ones are ready after it; an idle
// helper that dies is reaped at once, and the next session starts its own;
// nothing is left running when gloved stops (the leak check), nor while a
// session runs (no idle helper beside the session's glove-cgroup; its
// glove-mounter is retired once its mounts are made).
func TestGlovedHelperPool(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	e.ConfigureForSessions(t)
	// Orphans of gloved become this process's: an idle helper gloved
	// did not end and reap itself at shutdown shows as one (below).
	becomeReaper(t)
	f := newFixture(t, e, map[string][]string{"line": {"line"}, "sleeper": {"sleep"}})
	g := f.start()
	logOnFailure(t, g)

	first := waitPool(t, g, nil)
	if err := gloveSession(f, g, "pool-1"); err != nil {
		t.Fatal(err)
	}
	// The first session's helpers were the pooled ones: gone with it,
	// reaped; the pool holds new ones.
	second := waitPool(t, g, []int{first["glove-mounter"], first["glove-cgroup"]})
	for name, pid := range first {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			t.Errorf("the first session's %s (pid %d) still exists after the session", name, pid)
		}
	}

	// An idle helper killed from outside is reaped by gloved, not handed
	// to the next session. Idle: in the pool, past its Hello (a helper
	// killed while it starts fails its start instead).
	killed := second["glove-cgroup"]
	idleLine := fmt.Sprintf(`"pid":%d,"state":"idle"`, killed)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(g.log.String(), idleLine); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("glove-cgroup %d is not logged idle\nlog: %s", killed, g.log)
		}
	}
	if err := unix.Kill(killed, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat("/proc/" + strconv.Itoa(killed)); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed idle glove-cgroup (pid %d) was not reaped\nlog: %s", killed, g.log)
		}
	}
	if running, _ := childrenNamed(t, g, "glove-cgroup"); len(running) != 0 {
		t.Errorf("glove-cgroup children after the idle one died: %v (none is restarted before a session)", running)
	}
	// Logged once reaped (its exit status: killed).
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(g.log.String(), `"why":"died idle"`); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("the idle helper's death is not logged\nlog: %s", g.log)
			break
		}
	}
	if err := gloveSession(f, g, "pool-2"); err != nil {
		t.Fatal(err)
	}
	waitPool(t, g, []int{second["glove-mounter"], killed})

	// While a session runs, gloved's helpers are the session's: its
	// glove-cgroup (its glove-mounter was retired once the mounts were
	// made), and the pool is not refilled until it ends.
	c := dial(t, g.socket)
	tok := f.create(c, "pool-3", f.plan("sleeper", "tiny"))
	c.ok("start_session", map[string]any{"session_id": "pool-3", "start_token": tok}, nil)
	for name, want := range map[string]int{"glove-mounter": 0, "glove-cgroup": 1} {
		// The retired glove-mounter is reaped off the start path.
		var running []int
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if running, _ = childrenNamed(t, g, name); len(running) == want || time.Now().After(deadline) {
				break
			}
		}
		if len(running) != want {
			t.Errorf("%s children of gloved while one session runs: %v, want %d", name, running, want)
		}
	}
	// SIGTERM, which the sleeper ends on: the session ends as the e2e
	// test's stopped one does.
	c.ok("stop_session", map[string]any{"session_id": "pool-3", "grace_ms": 2000}, nil)
	if end := attach(t, c, "pool-3"); end.State != "exited" || end.Termination != "signaled" {
		t.Errorf("pool-3: ended %+v", end.End)
	}
	idle := waitPool(t, g, nil)
	g.stop(t)
	// gloved ended and reaped its idle helpers itself before it exited:
	// none was left to this process (the service manager, in
	// production), running or exited.
	time.Sleep(100 * time.Millisecond)
	for name, pid := range idle {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		t.Errorf("the idle %s (pid %d) outlived gloved: %s", name, pid, b)
		var ws unix.WaitStatus
		if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil {
			t.Errorf("reap the orphaned %s: %v", name, err)
		}
	}
}
