// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/testenv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// BenchmarkStartToFirstByte measures how long it takes a trivial program
// (the harness with "line": it prints "ready" and exits 0) to put its
// first byte out, side by side in one run:
//
//	glove  gloved (the installed one, as the service user, in the
//	       delegated cgroup parent): from sending start_session for a
//	       created session, then attaching, to the first byte of the first
//	       "output" notification (create_session is not timed)
//	runc   runc run, rootless, on the standard bundle (testenv's RuncSpec), with the
//	       harness copied into its root: from just before the fork of
//	       runc to the first byte on its stdout pipe
//	crun   crun run, rootless, likewise, forked from a thread without the
//	       unified cgroup hierarchy (testenv.NSThread, as in shim/bench_test.go)
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
	e.ConfigureForSessions(b)
	f := newFixture(b, e, map[string][]string{"line": {"line"}})

	results := &testenv.Results{Baseline: "glove", Order: []string{"glove", "runc", "crun"}}

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
		results.Report(b, "glove", ds)
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
	runcBundle := bundle("", func(s *specs.Spec) *specs.Spec { return e.RuncSpec(s) })
	crunBundle := bundle("1.0.2", nil)
	runcRoot, crunRoot := e.StateRoot(b, "runc"), e.StateRoot(b, "crun")
	cases := map[string]struct {
		argv func(b *testing.B, i int) []string
		ns   bool
		root string
	}{
		"runc": {
			argv: func(b *testing.B, i int) []string {
				return []string{testenv.LookPath(b, "runc"), "--root", runcRoot, "run", "--bundle", runcBundle.Dir, fmt.Sprintf("bench-%d", i)}
			},
			root: runcRoot,
		},
		"crun": {
			argv: func(b *testing.B, i int) []string {
				return []string{testenv.LookPath(b, "crun"), "--root", crunRoot, "run", "--bundle", crunBundle.Dir, fmt.Sprintf("bench-%d", i)}
			},
			ns:   true,
			root: crunRoot,
		},
	}
	for _, name := range results.Order[1:] {
		rc := cases[name]
		b.Run(name, func(b *testing.B) {
			var ns *testenv.NSThread
			if rc.ns {
				ns = testenv.NewNSThread(b)
			}
			// The probe: a crun that cannot run here is skipped with
			// its reason; runc must run.
			if r := firstByte(e, ns, rc.argv(b, -1)); r.err != nil || r.code != 0 || r.out != "ready\n" {
				testenv.ProbeFailed(b, name, fmt.Sprintf("%s cannot run the harness here: exit %d, output %q, %v\nstderr: %s", name, r.code, r.out, r.err, r.stderr))
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
			e.Settle(b, rc.root)
			results.Report(b, name, ds)
		})
	}
	b.Logf("%s", results.Table("start to first byte of output (last run of each sub-benchmark):"))
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
func firstByte(e *testenv.Env, ns *testenv.NSThread, argv []string) firstByteResult {
	var r firstByteResult
	ns.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pr, pw, err := os.Pipe()
		if err != nil {
			r.err = err
			return
		}
		defer pr.Close()
		cmd := e.RuntimeCommand(ctx, argv)
		var errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = pw, &errb
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
		if ctx.Err() != nil {
			r.err = fmt.Errorf("still running after 30s: %w", ctx.Err())
		} else {
			r.code, r.err = testenv.ExitStatus(err)
		}
		if r.err == nil && n == 0 {
			r.err = fmt.Errorf("no output: %v", rerr)
		}
	})
	return r
}
