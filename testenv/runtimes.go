// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// This file is what the start-up benchmarks (shim/bench_test.go and
// supervisor/service/daemon/startbench_test.go) need to run other OCI runtimes
// (runc, crun) beside Glove on the same host and to report the results
// the same way.

// RuncSpec adapts the standard spec to rootless runc 1.1.5: runc refuses a
// user namespace without a mapping for root ("User namespaces enabled,
// but no user mapping found."), so the service user is mapped to root of
// the sandbox instead of to the sandbox user, and the program runs as that
// root, with no capability and no_new_privs as before. Everything else
// (mounts, masked and read-only paths, namespaces, rlimits, seccomp) is
// unchanged.
func (e *Env) RuncSpec(s *specs.Spec) *specs.Spec {
	s.Process.User = specs.User{UID: 0, GID: 0}
	s.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: uint32(e.UID), Size: 1}}
	s.Linux.GIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: uint32(e.GID), Size: 1}}
	return s
}

// LookPath is the path of an installed program; it skips the test (or
// benchmark) when the program is not installed.
func LookPath(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("skipped: %s not installed (%v)", name, err)
	}
	return p
}

// StateRoot is a runtime's --root: a directory of the service user's
// (mode 0700), so that rootless runc and crun keep their state there. It
// must be empty again after each iteration (run deletes the container;
// see Settle) and is removed when the test ends.
func (e *Env) StateRoot(t testing.TB, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp(e.Base, name+"-state-")
	if err != nil {
		t.Fatalf("state dir: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chown(dir, e.UID, e.GID); err != nil {
		t.Fatalf("state dir: %v", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatalf("state dir: %v", err)
	}
	return dir
}

// Settle waits until no process of the service user is left and checks
// that each state root holds no container's directory. bwrap's outer
// process exits as soon as its pid-namespace init has reported the
// program's status, before that init has exited and been reaped (by PID 1
// of the host, as it is orphaned), so such processes outlive an iteration
// by a moment; anything alive after 10 s is a leak.
func (e *Env) Settle(t testing.TB, stateRoots ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := Take(e.UID)
		if err != nil {
			t.Fatalf("process list: %v", err)
		}
		if len(s["process"]) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the service user left after 10 s: %v", s["process"])
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, dir := range stateRoots {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatalf("state dir: %v", err)
		}
		for _, ent := range ents {
			// crun keeps a lock file beside the containers' directories.
			if ent.IsDir() {
				t.Fatalf("state left behind in %s: %s", dir, filepath.Join(dir, ent.Name()))
			}
		}
	}
}

// RuntimeCommand is argv run as the service user in a process group of
// its own (killed as a whole when ctx ends), with only PATH in its
// environment: how the benchmarks start every runtime alike.
func (e *Env) RuntimeCommand(ctx context.Context, argv []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.Credential(), Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return cmd
}

// ExitStatus turns what exec.Cmd's Run or Wait returned into an exit
// status (128+N for signal N); err is set only when the command did not
// run to an exit at all.
func ExitStatus(runErr error) (code int, err error) {
	var ee *exec.ExitError
	switch {
	case runErr == nil:
		return 0, nil
	case errors.As(runErr, &ee):
		ws := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ws.ExitStatus(), nil
	default:
		return 0, runErr
	}
}

// ProbeFailed reports that a runtime could not run the probe program: crun
// is skipped with the reason (a host may not suit it, see NSThread), any
// other runtime fails the benchmark.
func ProbeFailed(t testing.TB, runtime, msg string) {
	t.Helper()
	if runtime == "crun" {
		t.Skip("skipped: " + msg)
	}
	t.Fatal(msg)
}

// Stats are the percentiles of a run's per-iteration times.
type Stats struct {
	N        int
	P50, P95 float64 // milliseconds
}

// Results collects each runtime's Stats, compared with Baseline's (which
// must run first), in the order of Order.
type Results struct {
	Baseline string
	Order    []string
	stats    map[string]Stats
}

// Report computes the nearest-rank percentiles of ds, reports them as
// p50-ms and p95-ms (and x-glove, the p50 divided by the baseline's) and
// keeps them for Table.
func (r *Results) Report(b *testing.B, name string, ds []time.Duration) Stats {
	slices.Sort(ds)
	pct := func(p float64) float64 {
		k := int(p*float64(len(ds))+0.999999) - 1
		k = max(0, min(k, len(ds)-1))
		return float64(ds[k]) / float64(time.Millisecond)
	}
	s := Stats{N: len(ds), P50: pct(0.50), P95: pct(0.95)}
	b.ReportMetric(s.P50, "p50-ms")
	b.ReportMetric(s.P95, "p95-ms")
	if g, ok := r.stats[r.Baseline]; ok && g.P50 > 0 && name != r.Baseline {
		b.ReportMetric(s.P50/g.P50, "x-glove")
	}
	if r.stats == nil {
		r.stats = map[string]Stats{}
	}
	r.stats[name] = s
	return s
}

// Table is the summary the benchmark logs: one row a runtime, skipped
// ones marked so, with the ratios to the baseline both ways.
func (r *Results) Table(title string) string {
	w := len("runtime")
	for _, name := range r.Order {
		w = max(w, len(name)+1)
	}
	g, ok := r.stats[r.Baseline]
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s\n", title)
	fmt.Fprintf(&sb, "%-*s %6s %9s %9s %11s %13s\n", w, "runtime", "n", "p50 ms", "p95 ms", "p50/glove", "glove/p50")
	for _, name := range r.Order {
		s, have := r.stats[name]
		if !have {
			fmt.Fprintf(&sb, "%-*s skipped\n", w, name)
			continue
		}
		ratio, inv := "-", "-"
		if ok && g.P50 > 0 && s.P50 > 0 {
			ratio = fmt.Sprintf("%.2f", s.P50/g.P50)
			inv = fmt.Sprintf("%.2f", g.P50/s.P50)
		}
		fmt.Fprintf(&sb, "%-*s %6d %9.2f %9.2f %11s %13s\n", w, name, s.N, s.P50, s.P95, ratio, inv)
	}
	return sb.String()
}

// NSThread is an OS thread in a mount namespace of its own, private, with
// the cgroup v2 hierarchy of a hybrid layout (mounted at
// /sys/fs/cgroup/unified beside the v1 controllers) unmounted, so that
// what it forks sees pure cgroup v1. crun 1.8.1 refuses hybrid cgroups;
// forking it from this thread, rather than through a wrapper (unshare,
// sh, setpriv), keeps its start-up comparable with the other runtimes'.
//
// Only that thread is in the namespace: the goroutine that owns it never
// unlocks it, so Go destroys the thread when it exits, and it is never the
// main thread, so /proc/self/mountinfo (the leak check) still shows the
// host's mounts.
type NSThread struct {
	work chan func()
	done chan struct{}
}

const unifiedCgroup = "/sys/fs/cgroup/unified"

// NewNSThread starts the thread, or skips the benchmark when the mount
// namespace cannot be made; the thread ends when the benchmark does.
func NewNSThread(t testing.TB) *NSThread {
	t.Helper()
	n := &NSThread{work: make(chan func()), done: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// The main thread: serve from another goroutine, which
			// cannot be scheduled on this locked thread.
			go n.serve(ready)
			<-n.done
			runtime.UnlockOSThread()
			return
		}
		n.serve(ready)
	}()
	if err := <-ready; err != nil {
		<-n.done
		t.Skipf("skipped: no mount namespace without the unified cgroup hierarchy: %v", err)
	}
	t.Cleanup(func() {
		close(n.work)
		<-n.done
	})
	return n
}

// serve runs on its own locked thread, which it never unlocks.
func (n *NSThread) serve(ready chan<- error) {
	defer close(n.done)
	runtime.LockOSThread()
	if err := nsSetup(); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for f := range n.work {
		f()
	}
}

func nsSetup() error {
	if unix.Gettid() == unix.Getpid() {
		return errors.New("on the main thread")
	}
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare mount namespace: %w", err)
	}
	// Private first: the unmount must not propagate to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(unifiedCgroup, &st); err == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		if err := unix.Unmount(unifiedCgroup, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: %w", unifiedCgroup, err)
		}
	}
	return nil
}

// Do runs f on the thread (so that what f forks is in its namespace) and
// waits for it; on a nil NSThread it runs f on the caller's thread.
func (n *NSThread) Do(f func()) {
	if n == nil {
		f()
		return
	}
	done := make(chan struct{})
	n.work <- func() { f(); close(done) }
	<-done
}
