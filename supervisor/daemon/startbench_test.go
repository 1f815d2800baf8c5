package daemon_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/testenv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// BenchmarkStartToFirstByte measures how long it takes a trivial program
// (the harness with "line": it prints "ready" and exits 0) to put its
// first byte out, side by side in one run:
//
//	glove  gloved (the installed one, as the service user, in the
//	       delegated cgroup parent): from sending start_session for a
//	       created session, then attaching, to the first byte of the first
//	       "output" notification (create_session is not timed)
//	runc   runc run, rootless, on the standard bundle (runcSpec), with the
//	       harness copied into its root: from just before the fork of
//	       runc to the first byte on its stdout pipe
//	crun   crun run, rootless, likewise, forked from a thread without the
//	       unified cgroup hierarchy (nsThread, as in shim/bench_test.go)
//
// gloved's session runs on a terminal and includes what gloved adds
// (plan re-validation, helpers, materialization of the workspace grant,
// cgroups, receipt reservation) and the socket round trips; runc and crun
// run the same program on a pipe. Each iteration must print "ready" and
// end with status 0.
//
// Each sub-benchmark reports p50-ms and p95-ms of the per-iteration
// times and, for runc and crun, x-glove: its p50 divided by glove's
// (glove runs first); the parent logs a summary table (shown with -v).
func BenchmarkStartToFirstByte(b *testing.B) {
	e := testenv.Get(b)
	testenv.CheckLeaks(b, e.UID)
	configure(b, e)
	f := newFixture(b, e, map[string][]string{"line": {"line"}})

	results := map[string]benchStats{}
	order := []string{"glove", "runc", "crun"}
	report := func(b *testing.B, name string, ds []time.Duration) {
		s := stats(ds)
		b.ReportMetric(s.p50, "p50-ms")
		b.ReportMetric(s.p95, "p95-ms")
		if g, ok := results["glove"]; ok && g.p50 > 0 && name != "glove" {
			b.ReportMetric(s.p50/g.p50, "x-glove")
		}
		results[name] = s
	}

	g := f.start()
	seq := 0
	b.Run("glove", func(b *testing.B) {
		c, err := dialRaw(g.socket)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		ds := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			seq++
			id := fmt.Sprintf("bench-%d", seq)
			plObj, err := planObject(f.plan("line", "tiny"))
			if err != nil {
				b.Fatal(err)
			}
			var cr struct {
				Token string `json:"start_token"`
			}
			if err := c.call("create_session", createParams(id, plObj), &cr); err != nil {
				b.Fatalf("%v\nlog: %s", err, g.log)
			}
			b.StartTimer()
			start := time.Now()
			var first time.Duration
			if err := c.call("start_session", map[string]any{"session_id": id, "start_token": cr.Token}, nil); err != nil {
				b.Fatalf("%v\nlog: %s", err, g.log)
			}
			end, err := c.attach(id, func() { first = time.Since(start) })
			if err != nil {
				b.Fatalf("%v\nlog: %s", err, g.log)
			}
			b.StopTimer()
			if end.State != "exited" || end.Status != 0 || end.output != "ready\r\n" || first == 0 {
				b.Fatalf("%s: ended %+v, output %q\nlog: %s", id, end.End, end.output, g.log)
			}
			ds = append(ds, first)
			if err := c.call("cleanup_session", map[string]any{"session_id": id}, nil); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		b.StopTimer()
		report(b, "glove", ds)
	})
	g.stop(b)

	// runc and crun: the same harness, copied into each bundle's root.
	harness, err := os.ReadFile(f.exe)
	if err != nil {
		b.Fatal(err)
	}
	bundle := func(version string, adapt func(*specs.Spec) *specs.Spec) *testenv.Bundle {
		bu := e.NewBundle(b)
		p := filepath.Join(bu.Dir, "rootfs", "harness")
		if err := os.WriteFile(p, harness, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.Chown(p, e.UID, e.GID); err != nil {
			b.Fatal(err)
		}
		if version != "" {
			bu.Spec.Version = version
		}
		if adapt != nil {
			bu.Spec = adapt(bu.Spec)
		}
		bu.Spec.Process.Args = []string{"/harness", "line"}
		bu.Write(b)
		return bu
	}
	// crun 1.8.1 accepts only ociVersion 1.0.x.
	runcBundle := bundle("", func(s *specs.Spec) *specs.Spec { return runcSpec(s, e.UID, e.GID) })
	crunBundle := bundle("1.0.2", nil)
	runcRoot, crunRoot := stateRoot(b, e, "runc"), stateRoot(b, e, "crun")
	cases := map[string]struct {
		argv func(b *testing.B, i int) []string
		ns   bool
		root string
	}{
		"runc": {
			argv: func(b *testing.B, i int) []string {
				return []string{lookPath(b, "runc"), "--root", runcRoot, "run", "--bundle", runcBundle.Dir, fmt.Sprintf("bench-%d", i)}
			},
			root: runcRoot,
		},
		"crun": {
			argv: func(b *testing.B, i int) []string {
				return []string{lookPath(b, "crun"), "--root", crunRoot, "run", "--bundle", crunBundle.Dir, fmt.Sprintf("bench-%d", i)}
			},
			ns:   true,
			root: crunRoot,
		},
	}
	for _, name := range order[1:] {
		rc := cases[name]
		b.Run(name, func(b *testing.B) {
			var ns *nsThread
			if rc.ns {
				var err error
				if ns, err = newNSThread(); err != nil {
					b.Skipf("skipped: no mount namespace without the unified cgroup hierarchy for %s: %v", name, err)
				}
				defer ns.close()
			}
			// The probe: a crun that cannot run here is skipped with
			// its reason; runc must run.
			if r := firstByte(e, ns, rc.argv(b, -1)); r.err != nil || r.code != 0 || r.out != "ready\n" {
				msg := fmt.Sprintf("%s cannot run the harness here: exit %d, output %q, %v\nstderr: %s", name, r.code, r.out, r.err, r.stderr)
				if name == "crun" {
					b.Skip("skipped: " + msg)
				}
				b.Fatal(msg)
			}
			ds := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				r := firstByte(e, ns, rc.argv(b, i))
				if r.err != nil || r.code != 0 || r.out != "ready\n" {
					b.Fatalf("%s: exit %d, output %q, %v\nstderr: %s", name, r.code, r.out, r.err, r.stderr)
				}
				ds = append(ds, r.first)
			}
			b.StopTimer()
			drain(b, e)
			ents, err := os.ReadDir(rc.root)
			if err != nil {
				b.Fatalf("state dir: %v", err)
			}
			for _, ent := range ents {
				// crun keeps a lock file beside the containers' directories.
				if ent.IsDir() {
					b.Fatalf("state left behind in %s: %s", rc.root, ent.Name())
				}
			}
			report(b, name, ds)
		})
	}

	gs, ok := results["glove"]
	var sb strings.Builder
	fmt.Fprintf(&sb, "start to first byte of output (last run of each sub-benchmark):\n")
	fmt.Fprintf(&sb, "%-7s %6s %9s %9s %11s %13s\n", "runtime", "n", "p50 ms", "p95 ms", "p50/glove", "glove/p50")
	for _, name := range order {
		s, have := results[name]
		if !have {
			fmt.Fprintf(&sb, "%-7s skipped\n", name)
			continue
		}
		ratio, inv := "-", "-"
		if ok && gs.p50 > 0 && s.p50 > 0 {
			ratio = fmt.Sprintf("%.2f", s.p50/gs.p50)
			inv = fmt.Sprintf("%.2f", gs.p50/s.p50)
		}
		fmt.Fprintf(&sb, "%-7s %6d %9.2f %9.2f %11s %13s\n", name, s.n, s.p50, s.p95, ratio, inv)
	}
	b.Logf("%s", sb.String())
}

type firstByteResult struct {
	first  time.Duration // from before the fork to the first byte on stdout
	out    string
	code   int
	stderr string
	err    error
}

// firstByte runs argv as the service user (forked from ns's thread when
// ns is not nil), stdin /dev/null, stdout a pipe, and times it from just
// before the fork to the first byte read from the pipe; then it reads
// the rest and reaps the runtime.
func firstByte(e *testenv.Env, ns *nsThread, argv []string) firstByteResult {
	var r firstByteResult
	run := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pr, pw, err := os.Pipe()
		if err != nil {
			r.err = err
			return
		}
		defer pr.Close()
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
		var errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = pw, &errb
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.Credential(), Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		start := time.Now()
		err = cmd.Start()
		pw.Close()
		if err != nil {
			r.err = err
			return
		}
		_ = pr.SetReadDeadline(time.Now().Add(30 * time.Second))
		buf := make([]byte, 4096)
		n, rerr := pr.Read(buf)
		if n > 0 {
			r.first = time.Since(start)
		}
		rest, _ := io.ReadAll(pr)
		r.out = string(buf[:n]) + string(rest)
		err = cmd.Wait()
		r.stderr = errb.String()
		var ee *exec.ExitError
		switch {
		case ctx.Err() != nil:
			r.err = fmt.Errorf("still running after 30s: %w", ctx.Err())
		case err == nil:
		case errors.As(err, &ee):
			ws := ee.Sys().(syscall.WaitStatus)
			if ws.Signaled() {
				r.code = 128 + int(ws.Signal())
			} else {
				r.code = ws.ExitStatus()
			}
		default:
			r.err = err
		}
		if r.err == nil && n == 0 {
			r.err = fmt.Errorf("no output: %v", rerr)
		}
	}
	if ns == nil {
		run()
	} else {
		ns.do(run)
	}
	return r
}

// The helpers below are copied from shim/bench_test.go (package
// shim_test, which cannot be imported).

// runcSpec adapts the standard spec to rootless runc 1.1.5: runc refuses a
// user namespace without a mapping for root, so the service user is mapped
// to root of the sandbox instead of to the sandbox user, and the program
// runs as that root, with no capability and no_new_privs as before.
func runcSpec(s *specs.Spec, uid, gid int) *specs.Spec {
	s.Process.User = specs.User{UID: 0, GID: 0}
	s.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: uint32(uid), Size: 1}}
	s.Linux.GIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: uint32(gid), Size: 1}}
	return s
}

func lookPath(b *testing.B, name string) string {
	b.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		b.Skipf("skipped: %s not installed (%v)", name, err)
	}
	return p
}

// stateRoot is a runtime's --root: a directory of the service user's,
// empty again after each iteration, removed when the benchmark ends.
func stateRoot(b *testing.B, e *testenv.Env, name string) string {
	b.Helper()
	dir, err := os.MkdirTemp(e.Base, name+"-state-")
	if err != nil {
		b.Fatalf("state dir: %v", err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chown(dir, e.UID, e.GID); err != nil {
		b.Fatalf("state dir: %v", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		b.Fatalf("state dir: %v", err)
	}
	return dir
}

type benchStats struct {
	n        int
	p50, p95 float64 // milliseconds
}

func stats(ds []time.Duration) benchStats {
	slices.Sort(ds)
	pct := func(p float64) float64 {
		// nearest rank
		k := int(p*float64(len(ds))+0.999999) - 1
		k = max(0, min(k, len(ds)-1))
		return float64(ds[k]) / float64(time.Millisecond)
	}
	return benchStats{n: len(ds), p50: pct(0.50), p95: pct(0.95)}
}

// drain waits until no process of the service user is left; anything
// alive after 10 s is a leak.
func drain(b *testing.B, e *testenv.Env) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := testenv.Take(e.UID)
		if err != nil {
			b.Fatalf("process list: %v", err)
		}
		if len(s["process"]) == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("processes of the service user left after 10 s: %v", s["process"])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// nsThread is an OS thread in a mount namespace of its own, private, with
// the cgroup v2 hierarchy of a hybrid layout unmounted, so that what it
// forks sees pure cgroup v1 (which crun 1.8.1 accepts). Only that thread
// is in the namespace: the goroutine that owns it never unlocks it, so Go
// destroys the thread when it exits, and it is never the main thread, so
// /proc/self/mountinfo (the leak check) still shows the host's mounts.
type nsThread struct {
	work chan func()
	done chan struct{}
}

const unifiedCgroup = "/sys/fs/cgroup/unified"

func newNSThread() (*nsThread, error) {
	t := &nsThread{work: make(chan func()), done: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// The main thread: serve from another goroutine, which
			// cannot be scheduled on this locked thread.
			go t.serve(ready)
			<-t.done
			runtime.UnlockOSThread()
			return
		}
		t.serve(ready)
	}()
	if err := <-ready; err != nil {
		<-t.done
		return nil, err
	}
	return t, nil
}

// serve runs on its own locked thread, which it never unlocks.
func (t *nsThread) serve(ready chan<- error) {
	defer close(t.done)
	runtime.LockOSThread()
	if err := nsSetup(); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for f := range t.work {
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

func (t *nsThread) do(f func()) {
	done := make(chan struct{})
	t.work <- func() { f(); close(done) }
	<-done
}

func (t *nsThread) close() {
	close(t.work)
	<-t.done
}
