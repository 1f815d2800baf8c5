// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/testenv"
)

// pssKiB is a process's proportional set size (smaps_rollup), 0 when it
// is gone.
func pssKiB(pid int) uint64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
			n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return 0
}

// processes returns the pids of the processes keep accepts, given each
// one's real uid and process group.
func processes(keep func(pid, uid, pgid int) bool) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + d.Name() + "/status")
		if err != nil {
			continue
		}
		uid := -1
		for _, l := range strings.Split(string(st), "\n") {
			if v, ok := strings.CutPrefix(l, "Uid:"); ok {
				if fs := strings.Fields(v); len(fs) > 0 {
					uid, _ = strconv.Atoi(fs[0])
				}
			}
		}
		pgid, err := syscall.Getpgid(pid)
		if err != nil {
			continue
		}
		if keep(pid, uid, pgid) {
			out = append(out, pid)
		}
	}
	return out
}

func sumPSS(pids []int) uint64 {
	var t uint64
	for _, p := range pids {
		t += pssKiB(p)
	}
	return t
}

// BenchmarkSessionPSS measures what a running session costs in memory,
// side by side with bubblewrap in the same run: 16 sessions of the same
// program (coreutils' sleep), each running longer than the time after
// which a session lets its glove-cgroup go (session.cgroupRetireAfter,
// 10 s).
//
//	glove  16 managed sessions through the installed gloved: the
//	       proportional set size (PSS) of every process of the service
//	       user (gloved, its helpers, the shims' stages, the programs)
//	       less idle gloved's own, per session (glove-kib)
//	bwrap  16 `bwrap --ro-bind / / --unshare-all sleep 1000`: the PSS
//	       of their processes, per sandbox (bwrap-kib)
//
// It reports both and their ratio (ratio: issue 33's goal is at most 2).
func BenchmarkSessionPSS(b *testing.B) {
	e := testenv.Get(b)
	e.ConfigureForSessions(b)
	testenv.CheckLeaks(b, e.UID)
	long := tinyProfile
	long.ProfileID, long.WallTimeMs, long.CPUTimeMs = "long", 120000, 60000
	f := newFixture(b, e, map[string][]string{"line": {"line"}}, long)
	// coreutils' sleep, as an agent's shell commands are: a small
	// dynamic executable, whose memory is mostly shared libc pages.
	sleep := testenv.LookPath(b, "sleep")
	f.putTemplate(policy.RuntimeTemplate{RuntimeTemplateID: "sleeper", RuntimeID: "codex", SandboxBackend: policy.BackendLinuxProduction,
		AllowedPathAliases: []string{"workspace"},
		Launch: policy.Launch{ExecutablePath: sleep, Arguments: []string{"1000"},
			ReadOnlyPaths: []string{"/usr/lib", "/usr/lib64"}}})
	if err := policy.Validate(f.pol); err != nil {
		b.Fatalf("test policy: %v", err)
	}
	writeProtected(b, filepath.Join(f.dir, "policy.json"), policy.Canonical(f.pol), e.UID, e.GID)
	g := f.start()
	c, err := dialRaw(g.socket)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	bwrap := testenv.LookPath(b, "bwrap")
	const n = 16
	settle := 13 * time.Second // past cgroupRetireAfter
	var gloveKiB, bwrapKiB float64
	for iter := range b.N {
		// Idle gloved alone (its pooled helpers are the next session's).
		idle := pssKiB(g.cmd.Process.Pid)
		plObj, err := planObject(f.plan("sleeper", "long"))
		if err != nil {
			b.Fatal(err)
		}
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("pss-%d-%d", iter, i)
			var cr struct {
				Token string `json:"start_token"`
			}
			if err := c.call("create_session", createParams(ids[i], plObj), &cr); err != nil {
				b.Fatal(err)
			}
			if err := c.call("start_session", map[string]any{"session_id": ids[i], "start_token": cr.Token}, nil); err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(settle)
		total := sumPSS(processes(func(_, uid, _ int) bool { return uid == e.UID }))
		glove := float64(total-idle) / n
		for _, id := range ids {
			if err := c.call("stop_session", map[string]any{"session_id": id, "grace_ms": 200}, nil); err != nil {
				b.Fatal(err)
			}
		}
		for _, id := range ids {
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				var st struct {
					State string `json:"state"`
				}
				if err := c.call("session_status", map[string]any{"session_id": id}, &st); err != nil {
					b.Fatal(err)
				}
				if st.State == "exited" || st.State == "failed" {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("%s did not end after stop_session", id)
				}
			}
			if err := c.call("cleanup_session", map[string]any{"session_id": id}, nil); err != nil {
				b.Fatal(err)
			}
		}

		// bubblewrap, the same program, as the service user.
		var cmds []*exec.Cmd
		for range n {
			cmd := exec.Command(bwrap, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", sleep, "1000")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: e.Credential()}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			cmds = append(cmds, cmd)
		}
		time.Sleep(2 * time.Second)
		groups := map[int]bool{}
		for _, cmd := range cmds {
			groups[cmd.Process.Pid] = true
		}
		bw := float64(sumPSS(processes(func(_, _, pgid int) bool { return groups[pgid] }))) / n
		for _, cmd := range cmds {
			if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
				b.Errorf("kill bwrap's group: %v", err)
			}
			// Killed is how it ends; any other end is a fault.
			if err := cmd.Wait(); err == nil || cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				b.Errorf("bwrap's end: %v", err)
			}
		}
		gloveKiB += glove
		bwrapKiB += bw
		b.Logf("iteration %d: glove %.0f KiB a session (all %d KiB, idle gloved %d KiB), bwrap %.0f KiB a sandbox", iter, glove, total, idle, bw)
	}
	b.ReportMetric(gloveKiB/float64(b.N), "glove-kib")
	b.ReportMetric(bwrapKiB/float64(b.N), "bwrap-kib")
	b.ReportMetric(gloveKiB/bwrapKiB, "ratio")
	g.stop(b)
}
