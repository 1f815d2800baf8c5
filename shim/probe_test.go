// SPDX-License-Identifier: Apache-2.0

package shim_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

// probeAllOK is what `glove-shim probe` prints when every step passed.
const probeAllOK = "userns ok\nmaps ok\nmount ok\nnested ok\n"

// probeRefused is what it prints where the kernel refuses the caller a
// user namespace (Debian's kernel.unprivileged_userns_clone=0).
const probeRefused = "userns FAIL: EPERM: Operation not permitted\n"

// probeResult is one run of the probe.
type probeResult struct {
	stdout, stderr string
	code           int
}

// runProbe runs argv as the service user (with CAP_SYS_ADMIN in its
// ambient set when adminCap: what glove-userns holds, for a namespace
// made for the probe on a host that refuses the service user one) in an
// environment of env alone, and fails t after 30 s.
func runProbe(t *testing.T, e *testenv.Env, argv, env []string, adminCap bool) probeResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.Credential(), Setpgid: true}
	if adminCap {
		cmd.SysProcAttr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN}
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%q: still running after 30 s\nstdout: %s\nstderr: %s", argv, &stdout, &stderr)
	}
	code, err := testenv.ExitStatus(err)
	if err != nil {
		t.Fatalf("%q: %v", argv, err)
	}
	return probeResult{stdout.String(), stderr.String(), code}
}

// probeMounts is what of this (the host's) mount table the probe could
// have left: the tmpfs mounts, and every mount at /proc.
func probeMounts(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		i := slices.Index(f, "-")
		if len(f) > 4 && i > 0 && i+1 < len(f) && (f[4] == "/proc" || f[i+1] == "tmpfs") {
			out = append(out, l)
		}
	}
	return out
}

// TestShimProbe: `glove-shim probe`, run as the service user, passes
// each user-namespace step of a start on this host (its four lines, exit
// 0, nothing on standard error) and leaves nothing behind: no process of
// the service user (the leak check) and no mount in the host's table.
// Where the host refuses the service user a user namespace (noUserns),
// the first step fails with EPERM, its line alone and exit 1.
func TestShimProbe(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	before := probeMounts(t)
	argv, env, want, code := []string{e.HelperPath("glove-shim"), "probe"}, []string{}, probeAllOK, 0
	if noUserns(t) {
		argv, env = refusedArgv(t, argv)
		want, code = probeRefused, 1
	}
	r := runProbe(t, e, argv, env, false)
	if r.code != code || r.stdout != want || r.stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want %d, %q and nothing", r.code, r.stdout, r.stderr, code, want)
	}
	if after := probeMounts(t); !slices.Equal(before, after) {
		t.Errorf("the host's tmpfs and /proc mounts changed:\nbefore %q\nafter  %q", before, after)
	}
}

// TestShimProbeFails: each step of the probe fails where a real refusal
// can be made for the service user here, and the probe prints the
// steps that passed, then the failing one's line with the errno's name,
// and stops with exit 1:
//   - userns: in a user namespace of its own whose max_user_namespaces
//     is 0, the probe's clone fails with ENOSPC (the count of every
//     ancestor is checked);
//   - nested: with max_user_namespaces 1 there, the probe's first
//     namespace takes the one, and its nested clone fails with ENOSPC;
//   - userns again, under a seccomp filter answering EPERM to
//     CLONE_NEWUSER, as Debian's unprivileged_userns_clone=0 does;
//   - mount, under a filter answering EPERM to every mount call, as an
//     AppArmor profile without mount rules does.
//
// Where the kernel itself refuses the service user's and every nested
// user namespace (hostUserns.kernel), each case fails at its first step
// with EPERM instead. A probe given an argument is a usage error (2).
func TestShimProbeFails(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	shimPath := e.HelperPath("glove-shim")
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux) is needed to make a user namespace: %v", err)
	}
	// Run in a user namespace of the service user whose own count of
	// user namespaces is max: its root may set it there. (CAP_SYS_ADMIN,
	// as glove-userns holds it, lets a host that refuses the service
	// user a user namespace make this one; the probe in it gets nothing
	// of the capability.)
	inNamespace := func(max string) ([]string, []string, bool) {
		return []string{unshare, "--user", "--map-root-user", "/bin/sh", "-c",
			`echo "$1" > /proc/sys/user/max_user_namespaces && exec "$0" probe`, shimPath, max}, []string{}, true
	}
	wrapped := func(mode string) ([]string, []string, bool) {
		return []string{testenv.CopyTestBinary(t), shimPath, "probe"}, []string{wrapEnv + "=" + mode}, false
	}
	for _, c := range []struct {
		name string
		cmd  func() ([]string, []string, bool)
		want string
	}{
		{"no user namespace left", func() ([]string, []string, bool) { return inNamespace("0") }, "userns FAIL: ENOSPC: No space left on device\n"},
		{"no nested namespace left", func() ([]string, []string, bool) { return inNamespace("1") },
			"userns ok\nmaps ok\nmount ok\nnested FAIL: ENOSPC: No space left on device\n"},
		{"user namespaces refused", func() ([]string, []string, bool) { return wrapped(wrapNoUserns) }, probeRefused},
		{"mounts refused", func() ([]string, []string, bool) { return wrapped(wrapNoMount) },
			"userns ok\nmaps ok\nmount FAIL: EPERM: Operation not permitted\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			want := c.want
			if hostUserns.kernel {
				want = probeRefused
			}
			argv, env, adminCap := c.cmd()
			r := runProbe(t, e, argv, env, adminCap)
			if r.code != 1 || r.stdout != want || r.stderr != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want 1, %q and nothing", r.code, r.stdout, r.stderr, want)
			}
		})
	}
	t.Run("usage", func(t *testing.T) {
		r := runProbe(t, e, []string{shimPath, "probe", "x"}, []string{}, false)
		if r.code != 2 || r.stdout != "" || !strings.HasPrefix(r.stderr, "glove-shim: probe takes no argument\nusage: glove-shim ") ||
			!strings.Contains(r.stderr, "| glove-shim probe |") {
			t.Errorf("exit %d, stdout %q, stderr %q; want 2, nothing, the reason and the usage line", r.code, r.stdout, r.stderr)
		}
	})
}
