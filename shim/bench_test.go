// SPDX-License-Identifier: Apache-2.0

package shim_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

// BenchmarkStartTrue measures the wall time of starting /bin/true, as the
// service user, directly and in each sandbox runtime, side by side in one
// run so that the numbers are comparable:
//
//	plain       /bin/true
//	glove-shim  the installed glove-shim on the standard bundle, with a
//	            warm seccomp cache (--seccomp-cache-fd): gloved always
//	            passes one, and the probe's start fills it (the key is
//	            the profile's, not the program's), so every timed start
//	            reads the compiled filter instead of compiling it
//	glove-shim-cold  the same without the cache (glove run's case):
//	            every start compiles the profile with libseccomp
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
	cacheFile := seccompCacheDir(b, e)

	// Each runtime: how to start iteration i, and how to make it run
	// args instead of /bin/true (for the probe, see probeExit).
	type runtimeCase struct {
		argv    func(b *testing.B, i int) []string
		program func(b *testing.B, args []string)
		ns      bool       // fork from the mount namespace crun needs
		state   []string   // --root directories, empty between iterations
		extra   []*os.File // descriptors 3, 4, ... of every start
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
				return []string{e.HelperPath("glove-shim"), "run", "--bundle", shimBundle.Dir, "--seccomp-cache-fd", "3", fmt.Sprintf("bench-%d", i)}
			},
			program: inBundle(shimBundle),
			extra:   []*os.File{cacheFile},
		},
		"glove-shim-cold": {
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

	results := &testenv.Results{Baseline: "glove-shim", Order: []string{"glove-shim", "glove-shim-cold", "plain", "bwrap", "runc", "crun"}}
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
			if r := runOnce(e, ns, c.extra, c.argv(b, -1)); r.err != nil || r.code != probeExit {
				testenv.ProbeFailed(b, name, fmt.Sprintf("%s cannot run a program here: exit %d (want %d), %v\nstderr: %s", name, r.code, probeExit, r.err, r.stderr))
			}
			if name == "glove-shim" {
				// The probe's start must have filled the cache, or the
				// timed starts would measure a cold one.
				if ents, err := os.ReadDir(cacheFile.Name()); err != nil || len(ents) != 1 {
					b.Fatalf("seccomp cache after the probe: %d entries, %v; want 1", len(ents), err)
				}
			}
			c.program(b, []string{"/bin/true"})
			results.Report(b, name, benchLoop(b, e, ns, c.extra, func(i int) []string { return c.argv(b, i) }, c.state...))
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
// when ns is not nil, with extra from descriptor 3 on), fails on a
// non-zero exit, and returns the wall times. Each of stateDirs must be
// empty after every iteration.
func benchLoop(b *testing.B, e *testenv.Env, ns *testenv.NSThread, extra []*os.File, argv func(i int) []string, stateDirs ...string) []time.Duration {
	b.Helper()
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := runOnce(e, ns, extra, argv(i))
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

// runOnce runs argv as the service user, with extra from descriptor 3
// on, and times it from before the fork to the reaping.
func runOnce(e *testenv.Env, ns *testenv.NSThread, extra []*os.File, argv []string) runResult {
	var r runResult
	ns.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := e.RuntimeCommand(ctx, argv)
		cmd.ExtraFiles = extra
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

// seccompCacheDir makes a seccomp cache directory as gloved does (the
// service user's, mode 0700) and returns it open O_PATH, closed when b
// ends.
func seccompCacheDir(b *testing.B, e *testenv.Env) *os.File {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "seccomp-cache")
	if err := os.Mkdir(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	if err := os.Chown(dir, e.UID, e.GID); err != nil {
		b.Fatal(err)
	}
	f, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		b.Fatalf("open the seccomp cache: %v", err)
	}
	b.Cleanup(func() { f.Close() })
	return f
}
