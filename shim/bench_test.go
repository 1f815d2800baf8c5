package shim_test

import (
	"bytes"
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

	"github.com/glove-sandbox/glove/testenv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// BenchmarkStartTrue measures the wall time of starting /bin/true, as the
// service user, directly and in each sandbox runtime, side by side in one
// run so that the numbers are comparable:
//
//	plain       /bin/true
//	glove-shim  the installed glove-shim on the standard bundle
//	bwrap       bwrap --ro-bind / / --unshare-all /bin/true
//	runc        runc run, rootless, on the same spec (see runcSpec)
//	crun        crun run, rootless, on the same spec as glove-shim
//
// Every runtime is started the same way: fork and exec from this process
// with the service user's credentials, stdin /dev/null, stdout and stderr
// into pipes, and the time is from just before the fork to the reaping of
// the runtime. Each iteration must exit 0.
//
// crun 1.8.1 refuses hybrid cgroups (the unified hierarchy mounted at
// /sys/fs/cgroup/unified beside v1 controllers). Its iterations are forked
// from one OS thread that has its own mount namespace, with that mount
// removed there (nsThread), so crun pays no wrapper (unshare, sh, setpriv)
// that the others do not pay: the fork and exec are the same.
//
// Each sub-benchmark reports p50-ms and p95-ms of the per-iteration wall
// times and x-glove, its p50 divided by glove-shim's (glove-shim runs
// first); the parent logs a summary table (shown with -v).
func BenchmarkStartTrue(b *testing.B) {
	e := testenv.Get(b)
	testenv.CheckLeaks(b, e.UID)

	shimBundle := e.NewBundle(b)
	crunBundle := e.NewBundle(b)
	// crun 1.8.1 accepts only ociVersion 1.0.x ("unknown version
	// specified"); the spec's content is the same.
	crunBundle.Spec.Version = "1.0.2"
	runcBundle := e.NewBundle(b)
	runcBundle.Spec = runcSpec(runcBundle.Spec, e.UID, e.GID)

	// Each runtime: how to start iteration i, and how to make it run
	// args instead of /bin/true (for the probe, see probeExit).
	type runtimeCase struct {
		argv    func(b *testing.B, i int) []string
		program func(b *testing.B, args []string)
		ns      bool     // fork from the mount namespace crun needs
		state   []string // --root directories, empty between iterations
	}
	inBundle := func(bu *testenv.Bundle) func(*testing.B, []string) {
		return func(b *testing.B, args []string) {
			bu.Spec.Process.Args = args
			bu.Write(b)
		}
	}
	var plainArgs, bwrapArgs []string
	runcRoot, crunRoot := stateRoot(b, e, "runc"), stateRoot(b, e, "crun")
	cases := map[string]runtimeCase{
		"plain": {
			argv:    func(*testing.B, int) []string { return plainArgs },
			program: func(_ *testing.B, args []string) { plainArgs = args },
		},
		"glove-shim": {
			argv: func(_ *testing.B, i int) []string {
				return []string{e.HelperPath("glove-shim"), "run", "--bundle", shimBundle.Dir, fmt.Sprintf("bench-%d", i)}
			},
			program: inBundle(shimBundle),
		},
		"bwrap": {
			argv: func(b *testing.B, _ int) []string {
				return append([]string{lookPath(b, "bwrap"), "--ro-bind", "/", "/", "--unshare-all"}, bwrapArgs...)
			},
			program: func(_ *testing.B, args []string) { bwrapArgs = args },
		},
		"runc": {
			argv: func(b *testing.B, i int) []string {
				return []string{lookPath(b, "runc"), "--root", runcRoot, "run", "--bundle", runcBundle.Dir, fmt.Sprintf("bench-%d", i)}
			},
			program: inBundle(runcBundle),
			state:   []string{runcRoot},
		},
		"crun": {
			argv: func(b *testing.B, i int) []string {
				return []string{lookPath(b, "crun"), "--root", crunRoot, "run", "--bundle", crunBundle.Dir, fmt.Sprintf("bench-%d", i)}
			},
			program: inBundle(crunBundle),
			ns:      true,
			state:   []string{crunRoot},
		},
	}

	results := map[string]benchStats{}
	order := []string{"glove-shim", "plain", "bwrap", "runc", "crun"}
	for _, name := range order {
		c := cases[name]
		b.Run(name, func(b *testing.B) {
			var ns *nsThread
			if c.ns {
				var err error
				if ns, err = newNSThread(); err != nil {
					b.Skipf("skipped: no mount namespace without the unified cgroup hierarchy for %s: %v", name, err)
				}
				defer ns.close()
			}
			// The probe: the runtime must really run the program and
			// return its status. A crun that cannot start here is
			// skipped with its reason; any other runtime fails.
			c.program(b, []string{"/bin/sh", "-c", fmt.Sprintf("exit %d", probeExit)})
			if r := runOnce(e, ns, c.argv(b, -1)); r.err != nil || r.code != probeExit {
				msg := fmt.Sprintf("%s cannot run a program here: exit %d (want %d), %v\nstderr: %s", name, r.code, probeExit, r.err, r.stderr)
				if name == "crun" {
					b.Skip("skipped: " + msg)
				}
				b.Fatal(msg)
			}
			c.program(b, []string{"/bin/true"})
			s := benchLoop(b, e, ns, func(i int) []string { return c.argv(b, i) }, c.state...)
			b.ReportMetric(s.p50, "p50-ms")
			b.ReportMetric(s.p95, "p95-ms")
			if g, ok := results["glove-shim"]; ok && g.p50 > 0 && name != "glove-shim" {
				b.ReportMetric(s.p50/g.p50, "x-glove")
			}
			results[name] = s
		})
	}

	g, ok := results["glove-shim"]
	var sb strings.Builder
	fmt.Fprintf(&sb, "start-up of /bin/true as the service user (last run of each sub-benchmark):\n")
	fmt.Fprintf(&sb, "%-11s %6s %9s %9s %11s %13s\n", "runtime", "n", "p50 ms", "p95 ms", "p50/glove", "glove/p50")
	for _, name := range order {
		s, have := results[name]
		if !have {
			fmt.Fprintf(&sb, "%-11s skipped\n", name)
			continue
		}
		ratio, inv := "-", "-"
		if ok && g.p50 > 0 && s.p50 > 0 {
			ratio = fmt.Sprintf("%.2f", s.p50/g.p50)
			inv = fmt.Sprintf("%.2f", g.p50/s.p50)
		}
		fmt.Fprintf(&sb, "%-11s %6d %9.2f %9.2f %11s %13s\n", name, s.n, s.p50, s.p95, ratio, inv)
	}
	b.Logf("%s", sb.String())
}

// runcSpec adapts the standard spec to rootless runc 1.1.5: runc refuses a
// user namespace without a mapping for root ("User namespaces enabled,
// but no user mapping found."), so the service user is mapped to root of
// the sandbox instead of to the sandbox user, and the program runs as that
// root, with no capability and no_new_privs as before. Everything else (mounts, masked and read-only
// paths, namespaces, rlimits, seccomp) is unchanged.
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

// stateRoot is a runtime's --root: a directory of the service user's, so
// that rootless runc and crun keep their state there. It must be empty
// again after each iteration (run deletes the container) and is removed
// when the benchmark ends.
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

type runResult struct {
	d      time.Duration
	code   int
	stderr string
	err    error
}

// benchLoop runs argv(i) b.N times as the service user (on ns's thread
// when ns is not nil), fails on a non-zero exit, and returns the
// percentiles of the wall times. Each of stateDirs must be empty after
// every iteration.
func benchLoop(b *testing.B, e *testenv.Env, ns *nsThread, argv func(i int) []string, stateDirs ...string) benchStats {
	b.Helper()
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := runOnce(e, ns, argv(i))
		if r.err != nil || r.code != 0 {
			b.Fatalf("%v: exit %d, %v\nstderr: %s", argv(i), r.code, r.err, r.stderr)
		}
		ds = append(ds, r.d)
	}
	b.StopTimer()
	drain(b, e)
	for _, dir := range stateDirs {
		ents, err := os.ReadDir(dir)
		if err != nil {
			b.Fatalf("state dir: %v", err)
		}
		for _, ent := range ents {
			// crun keeps a lock file beside the containers' directories.
			if ent.IsDir() {
				b.Fatalf("state left behind in %s: %s", dir, filepath.Join(dir, ent.Name()))
			}
		}
	}
	return stats(ds)
}

// probeExit is the status the probe program exits with.
const probeExit = 3

// drain waits until no process of the service user is left. bwrap's outer
// process exits as soon as its pid-namespace init has reported the
// program's status, before that init has exited and been reaped (by PID 1
// of the host, as it is orphaned), so such processes outlive the
// iteration by a moment; anything alive after 10 s is a leak.
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

// runOnce runs argv as the service user and times it from before the fork
// to the reaping.
func runOnce(e *testenv.Env, ns *nsThread, argv []string) runResult {
	var r runResult
	f := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.Credential(), Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		start := time.Now()
		err := cmd.Run()
		r.d = time.Since(start)
		r.stderr = errb.String() + out.String()
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
	}
	if ns == nil {
		f()
	} else {
		ns.do(f)
	}
	return r
}

// nsThread is an OS thread in a mount namespace of its own, private, with
// the cgroup v2 hierarchy of a hybrid layout unmounted, so that what it
// forks sees pure cgroup v1 (which crun accepts). Only that thread is in
// the namespace: the goroutine that owns it never unlocks it, so Go
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
