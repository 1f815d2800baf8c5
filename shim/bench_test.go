package shim_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/testenv"
)

// BenchmarkStartTrue measures the wall time of starting /bin/true, as the
// service user, directly and in each sandbox runtime, side by side in one
// run so that the numbers are comparable:
//
//	plain       /bin/true
//	glove-shim  the installed glove-shim on the standard bundle
//	bwrap       bwrap --ro-bind / / --unshare-all /bin/true
//	runc        runc run, rootless, on the same spec (see testenv's RuncSpec)
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
// removed there (testenv.NSThread), so crun pays no wrapper (unshare, sh, setpriv)
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
	runcBundle.Spec = e.RuncSpec(runcBundle.Spec)

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
	runcRoot, crunRoot := e.StateRoot(b, "runc"), e.StateRoot(b, "crun")
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
				return append([]string{testenv.LookPath(b, "bwrap"), "--ro-bind", "/", "/", "--unshare-all"}, bwrapArgs...)
			},
			program: func(_ *testing.B, args []string) { bwrapArgs = args },
		},
		"runc": {
			argv: func(b *testing.B, i int) []string {
				return []string{testenv.LookPath(b, "runc"), "--root", runcRoot, "run", "--bundle", runcBundle.Dir, fmt.Sprintf("bench-%d", i)}
			},
			program: inBundle(runcBundle),
			state:   []string{runcRoot},
		},
		"crun": {
			argv: func(b *testing.B, i int) []string {
				return []string{testenv.LookPath(b, "crun"), "--root", crunRoot, "run", "--bundle", crunBundle.Dir, fmt.Sprintf("bench-%d", i)}
			},
			program: inBundle(crunBundle),
			ns:      true,
			state:   []string{crunRoot},
		},
	}

	results := &testenv.Results{Baseline: "glove-shim", Order: []string{"glove-shim", "plain", "bwrap", "runc", "crun"}}
	for _, name := range results.Order {
		c := cases[name]
		b.Run(name, func(b *testing.B) {
			var ns *testenv.NSThread
			if c.ns {
				ns = testenv.NewNSThread(b)
			}
			// The probe: the runtime must really run the program and
			// return its status. A crun that cannot start here is
			// skipped with its reason; any other runtime fails.
			c.program(b, []string{"/bin/sh", "-c", fmt.Sprintf("exit %d", probeExit)})
			if r := runOnce(e, ns, c.argv(b, -1)); r.err != nil || r.code != probeExit {
				testenv.ProbeFailed(b, name, fmt.Sprintf("%s cannot run a program here: exit %d (want %d), %v\nstderr: %s", name, r.code, probeExit, r.err, r.stderr))
			}
			c.program(b, []string{"/bin/true"})
			results.Report(b, name, benchLoop(b, e, ns, func(i int) []string { return c.argv(b, i) }, c.state...))
		})
	}
	b.Logf("%s", results.Table("start-up of /bin/true as the service user (last run of each sub-benchmark):"))
}

type runResult struct {
	d      time.Duration
	code   int
	stderr string
	err    error
}

// benchLoop runs argv(i) b.N times as the service user (on ns's thread
// when ns is not nil), fails on a non-zero exit, and returns the wall
// times. Each of stateDirs must be empty after every iteration.
func benchLoop(b *testing.B, e *testenv.Env, ns *testenv.NSThread, argv func(i int) []string, stateDirs ...string) []time.Duration {
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
	e.Settle(b, stateDirs...)
	return ds
}

// probeExit is the status the probe program exits with.
const probeExit = 3

// runOnce runs argv as the service user and times it from before the fork
// to the reaping.
func runOnce(e *testenv.Env, ns *testenv.NSThread, argv []string) runResult {
	var r runResult
	ns.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := e.RuntimeCommand(ctx, argv)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		start := time.Now()
		err := cmd.Run()
		r.d = time.Since(start)
		r.stderr = errb.String() + out.String()
		if ctx.Err() != nil {
			r.err = fmt.Errorf("still running after 30s: %w", ctx.Err())
		} else {
			r.code, r.err = testenv.ExitStatus(err)
		}
	})
	return r
}
