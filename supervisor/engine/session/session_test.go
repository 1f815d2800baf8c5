// SPDX-License-Identifier: Apache-2.0

package session_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// gloveRun runs the installed `glove run` as the service user, started in
// the delegated cgroup parent (where a supervisor lives), in workspace.
func gloveRun(t *testing.T, e *testenv.Env, workspace string, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	attr := e.InDelegatedCgroup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.HelperPath("glove"), append([]string{"run"}, args...)...)
	cmd.Dir = workspace
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.SysProcAttr = attr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("glove run %v: still running after 60 s\nstdout: %s\nstderr: %s", args, &out, &errb)
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("glove run: %v", err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// workspace creates a host workspace owned by the service user.
func workspace(t *testing.T, e *testenv.Env, files map[string]string) string {
	t.Helper()
	dir, err := os.MkdirTemp(e.Base, "ws-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, e.UID, e.GID)
	}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestGloveRun(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	ws := workspace(t, e, map[string]string{"in": "from the host\n"})
	cases := []struct {
		name       string
		args       []string
		stdin      string
		code       int
		stdout     string // exact, unless contains is set
		contains   string // in stdout
		stderrHas  string
		outputSize int // exact stdout length when > 0
		pidsBelow  int // stdout is a count that must be at most this (and above 1)
	}{
		{name: "output and status", args: []string{"--", "sh", "-c", "echo hello; exit 3"}, code: 3, stdout: "hello\n"},
		{name: "input", args: []string{"--", "cat"}, stdin: "typed\n", code: 0, stdout: "typed\n"},
		{name: "killed by a signal", args: []string{"--", "sh", "-c", "kill -TERM $$"}, code: 128 + 15, stdout: ""},
		{name: "identity and place", args: []string{"--", "sh", "-c", "id -u; pwd; hostname; cat /workspace/in"}, code: 0,
			stdout: "1000\n/workspace\nglove\nfrom the host\n"},
		{name: "read-only host", args: []string{"--", "sh", "-c", "touch /usr/x || touch /etc/x || echo refused"}, code: 0, contains: "refused"},
		{name: "no network", args: []string{"--", "sh", "-c", "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '"}, code: 0, stdout: "lo\n"},
		{name: "wall time", args: []string{"--limit", "wall_time_ms=400", "--", "sleep", "30"}, code: 137, stderrHas: "limit:wall_time_ms"},
		{name: "cpu time", args: []string{"--limit", "cpu_time_ms=300", "--", "sh", "-c", "while :; do :; done"}, code: 137, stderrHas: "limit:cpu_time_ms"},
		{name: "output bytes", args: []string{"--limit", "terminal_output_bytes=10000", "--", "yes"}, code: 137, stderrHas: "limit:terminal_output_bytes", outputSize: 10000},
		{name: "memory", args: []string{"--limit", "memory_bytes=33554432", "--", "sh", "-c", "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo survived"},
			code: 137, stderrHas: "limit:memory_bytes"},
		// The program's tasks are bounded by the profile's pids plus the
		// shim's allowance (ShimTasks, of which the shim uses about 14):
		// of 60 forks, at most 8+32 succeed; the rest fail with EAGAIN.
		{name: "pids", args: []string{"--limit", "pids=8", "--", "python3", "-c",
			"import os, time\nn = 0\nfor i in range(60):\n  try:\n    if os.fork() == 0:\n      time.sleep(3); os._exit(0)\n    n += 1\n  except OSError:\n    pass\nprint(n)"},
			code: 0, pidsBelow: 8 + 32},
		{name: "disk quota inside", args: []string{"--limit", "disk_bytes=1048576", "--", "sh", "-c", "head -c 2000000 /dev/zero > /workspace/big || echo full"}, code: 0, contains: "full"},
		{name: "workspace larger than the quota", args: []string{"--limit", "disk_bytes=4096", "--", "true"}, code: 125, stderrHas: "limit:disk_bytes"},
		{name: "no such program", args: []string{"--", "no-such-program"}, code: 125, stderrHas: "not found"},
		{name: "no command", args: []string{}, code: 2, stderrHas: "no command"},
		{name: "bad limit", args: []string{"--limit", "pids=0", "--", "true"}, code: 2, stderrHas: "--limit"},
		{name: "unknown profile", args: []string{"--profile", "huge", "--", "true"}, code: 2, stderrHas: "unknown profile"},
	}
	big := filepath.Join(ws, "pad")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chown(big, e.UID, e.GID)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errs, code := gloveRun(t, e, ws, c.stdin, c.args...)
			if code != c.code {
				t.Errorf("exit %d, want %d\nstdout: %q\nstderr: %s", code, c.code, out, errs)
			}
			switch {
			case c.pidsBelow > 0:
				n, err := strconv.Atoi(strings.TrimSpace(out))
				if err != nil || n > c.pidsBelow || n < 2 {
					t.Errorf("%q processes in the sandbox, want 2..%d (stderr %s)", out, c.pidsBelow, errs)
				}
			case c.outputSize > 0:
				if len(out) != c.outputSize {
					t.Errorf("stdout has %d bytes, want %d", len(out), c.outputSize)
				}
			case c.contains != "":
				if !strings.Contains(out, c.contains) {
					t.Errorf("stdout %q lacks %q (stderr %s)", out, c.contains, errs)
				}
			case c.code != 125 && c.code != 2 && c.code != 137:
				if out != c.stdout {
					t.Errorf("stdout %q, want %q (stderr %s)", out, c.stdout, errs)
				}
			}
			if c.stderrHas != "" && !strings.Contains(errs, c.stderrHas) {
				t.Errorf("stderr %q lacks %q", errs, c.stderrHas)
			}
		})
	}
	// The copy was ephemeral: nothing the sandbox wrote reached the host.
	for _, name := range []string{"big", "out"} {
		if _, err := os.Stat(filepath.Join(ws, name)); err == nil {
			t.Errorf("the sandbox's write %s reached the host workspace", name)
		}
	}
}
