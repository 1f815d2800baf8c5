// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

// throughputSessionsVar lowers (or raises) the number of sessions of
// BenchmarkStartThroughput while iterating; 200 by default.
const throughputSessionsVar = "GLOVE_BENCH_SESSIONS"

// throughputConcurrency is how many sessions run at once.
const throughputConcurrency = 8

// BenchmarkStartThroughput runs N sessions of a trivial program (the
// harness with "line": it prints "ready" and exits 0) at concurrency 8,
// side by side in one iteration:
//
//	glove  through the installed gloved: 8 connections, each creating,
//	       starting, attaching to (until "ended") and cleaning up one
//	       session after the other
//	crun   N `crun run` of the same harness, rootless, 8 at a time, each
//	       forked from a thread without the unified cgroup hierarchy
//	       (testenv.NSThread, as in BenchmarkStartToFirstByte)
//
// Each is timed from the first start to the last end. It reports the
// p50 over the iterations of glove-s and crun-s (wall time of the N
// sessions) and goal-ratio: glove-s / crun-s, whose goal is at most 1.5.
func BenchmarkStartThroughput(b *testing.B) {
	n := 200
	if v := os.Getenv(throughputSessionsVar); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 {
			b.Fatalf("%s=%q: not a positive number", throughputSessionsVar, v)
		}
		n = k
	}
	e := testenv.Get(b)
	testenv.CheckLeaks(b, e.UID)
	e.ConfigureForSessions(b)
	f := newFixture(b, e, map[string][]string{"line": {"line"}})

	harness, err := os.ReadFile(f.exe)
	if err != nil {
		b.Fatal(err)
	}
	bu := e.NewBundle(b)
	p := filepath.Join(bu.Dir, "rootfs", "harness")
	if err := os.WriteFile(p, harness, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.Chown(p, e.UID, e.GID); err != nil {
		b.Fatal(err)
	}
	bu.Spec.Version = "1.0.2" // crun 1.8.1 accepts only ociVersion 1.0.x
	bu.Spec.Process.Args = []string{"/harness", "line"}
	bu.Write(b)
	crunRoot := e.StateRoot(b, "crun")
	crun := testenv.LookPath(b, "crun")
	ns := testenv.NewNSThread(b)
	if r := firstByte(e, ns, []string{crun, "--root", crunRoot, "run", "--bundle", bu.Dir, "probe"}); r.err != nil || r.code != 0 || r.out != "ready\n" {
		testenv.ProbeFailed(b, "crun", fmt.Sprintf("crun cannot run the harness here: exit %d, output %q, %v\nstderr: %s", r.code, r.out, r.err, r.stderr))
	}

	// CPU time: what this process's reaped children used. gloved is one
	// (its helpers, shims and sandboxes are its reaped children, counted
	// with it once it exits), and each crun run another (with its own).
	cpu0 := childrenCPU(b)
	g := f.start()
	var gloveS, crunS, ratios []float64
	var crunCPU atomic.Int64 // nanoseconds
	seq := 0
	b.ResetTimer()
	for range b.N {
		seq++
		gt := runConcurrently(b, n, func(i int) error { return gloveSession(f, g, fmt.Sprintf("tp-%d-%d", seq, i)) })
		ct := runConcurrently(b, n, func(i int) error {
			used, err := crunRun(e, ns, []string{crun, "--root", crunRoot, "run", "--bundle", bu.Dir, fmt.Sprintf("tp-%d-%d", seq, i)})
			crunCPU.Add(int64(used))
			return err
		})
		gloveS, crunS = append(gloveS, gt.Seconds()), append(crunS, ct.Seconds())
		ratios = append(ratios, gt.Seconds()/ct.Seconds())
	}
	b.StopTimer()
	self := processCPU(b, g.cmd.Process.Pid)
	g.stop(b)
	all := childrenCPU(b) - cpu0
	sessions := float64(n * b.N)
	gloveCPU := float64(all-time.Duration(crunCPU.Load())) / float64(time.Millisecond) / sessions
	perCrun := float64(crunCPU.Load()) / float64(time.Millisecond) / sessions
	glovedCPU := float64(self) / float64(time.Millisecond) / sessions
	b.ReportMetric(gloveCPU, "glove-cpu-ms/session")
	b.ReportMetric(glovedCPU, "gloved-cpu-ms/session")
	b.ReportMetric(perCrun, "crun-cpu-ms/session")
	b.Logf("CPU (user+system) per session: glove %.1f ms (gloved itself %.1f ms; its helpers, shims and programs the rest), crun %.1f ms",
		gloveCPU, glovedCPU, perCrun)
	e.Settle(b, crunRoot)
	med := func(v []float64) float64 { slices.Sort(v); return v[(len(v)-1)/2] }
	b.ReportMetric(med(gloveS), "glove-s")
	b.ReportMetric(med(crunS), "crun-s")
	b.ReportMetric(med(ratios), "goal-ratio")
	b.Logf("%d sessions at concurrency %d: glove %.2f s, crun %.2f s, glove/crun %.2f (goal <= 1.5; p50 of %d)",
		n, throughputConcurrency, med(gloveS), med(crunS), med(ratios), len(ratios))
}

// runConcurrently runs one(i) for i in 0..n-1 on throughputConcurrency
// workers and returns the wall time; the first error fails b.
func runConcurrently(b *testing.B, n int, one func(i int) error) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, throughputConcurrency)
	start := time.Now()
	for range throughputConcurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := one(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	return took
}

// gloveSession runs one session through gloved on a connection of its
// own: create, start, attach until "ended", clean up.
func gloveSession(f *fixture, g *gloved, id string) error {
	c, err := dialRaw(g.socket)
	if err != nil {
		return err
	}
	defer c.Close()
	plObj, err := planObject(f.plan("line", "tiny"))
	if err != nil {
		return err
	}
	var cr struct {
		Token string `json:"start_token"`
	}
	if err := c.call("create_session", createParams(id, plObj), &cr); err != nil {
		return fmt.Errorf("%s: %w\nlog: %s", id, err, g.log)
	}
	if err := c.call("start_session", map[string]any{"session_id": id, "start_token": cr.Token}, nil); err != nil {
		return fmt.Errorf("%s: %w\nlog: %s", id, err, g.log)
	}
	end, err := c.attach(id, nil)
	if err != nil {
		return fmt.Errorf("%s: %w\nlog: %s", id, err, g.log)
	}
	if end.State != "exited" || end.Status != 0 || end.output != "ready\r\n" {
		return fmt.Errorf("%s: ended %+v, output %q\nlog: %s", id, end.End, end.output, g.log)
	}
	return c.call("cleanup_session", map[string]any{"session_id": id}, nil)
}

// childrenCPU is the user and system time of this process's reaped
// children.
func childrenCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU is the user and system time of process pid itself (not its
// children), from /proc (clock ticks of 10 ms: USER_HZ is 100 on Linux).
func processCPU(b *testing.B, pid int) time.Duration {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+1:]))
	// After the command: state is field 3, utime 14 and stime 15.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	stm, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", pid, st)
	}
	return time.Duration(ut+stm) * 10 * time.Millisecond
}

// crunRun runs argv (crun run) as the service user, forked from ns's
// thread (only the fork: the waits run concurrently), and checks it
// printed "ready" and exited 0. It returns the CPU time crun and what it
// reaped used.
func crunRun(e *testenv.Env, ns *testenv.NSThread, argv []string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := e.RuntimeCommand(ctx, argv)
	var out, errb bytes.Buffer
	pr, pw, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer pr.Close()
	cmd.Stdout, cmd.Stderr = pw, &errb
	ns.Do(func() { err = cmd.Start() })
	pw.Close()
	if err != nil {
		return 0, err
	}
	_, rerr := io.Copy(&out, pr)
	code, werr := testenv.ExitStatus(cmd.Wait())
	var used time.Duration
	if cmd.ProcessState != nil {
		used = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if werr != nil || rerr != nil || code != 0 || out.String() != "ready\n" {
		return used, fmt.Errorf("%s: exit %d, output %q, %v %v\nstderr: %s", argv[len(argv)-1], code, out.String(), werr, rerr, errb.String())
	}
	return used, nil
}
