// SPDX-License-Identifier: Apache-2.0

package shim_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/testenv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestShimStage2 checks stage 2 (shim/cstage/stage2.c) through the
// installed glove-shim: the program's lookup in the sandbox's own PATH,
// the working directory resolved inside the root, umask and rlimits, and
// that each failure ends the run with status 125 and one line naming the
// step, before anything is executed.
func TestShimStage2(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	b := e.NewBundle(t)
	rootfs := filepath.Join(b.Dir, "rootfs")
	// Candidates for "prog" in the sandbox's root, each printing its
	// directory: only /yes/prog qualifies (a regular file with an x bit,
	// under an absolute PATH entry).
	script := func(dir string, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(rootfs, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(rootfs, dir, "prog")
		if err := os.WriteFile(p, []byte("#!/bin/sh\necho found in "+dir+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	script("rel", 0o755) // reached only through a relative entry
	script("nox", 0o644) // no x bit
	script("yes", 0o755)
	if err := os.MkdirAll(filepath.Join(rootfs, "dir", "prog"), 0o755); err != nil { // not a regular file
		t.Fatal(err)
	}
	// A symbolic link that would leave the root if resolved on the host.
	if err := os.Symlink("../../../..", filepath.Join(rootfs, "up")); err != nil {
		t.Fatal(err)
	}
	std := *b.Spec.Process
	cases := []struct {
		name   string
		edit   func(p *specs.Process)
		code   int
		stdout string // exact, when code is 0
		stderr string // contained, when code is 125
	}{
		{"path lookup", func(p *specs.Process) {
			p.Cwd = "/"
			p.Args = []string{"prog"}
			p.Env = []string{"PATH=rel:/nox:/dir:/yes:/bin"}
		}, 0, "found in yes\n", ""},
		{"not in path", func(p *specs.Process) {
			p.Args = []string{"prog"}
			p.Env = []string{"PATH=/nox:/dir:rel"}
		}, 125, "", `stage 2: process.args[0] "prog": not found in PATH "/nox:/dir:rel"`},
		{"default path", func(p *specs.Process) {
			p.Args = []string{"sh", "-c", "echo default"}
			p.Env = nil
		}, 0, "default\n", ""},
		{"name with a slash", func(p *specs.Process) {
			p.Args = []string{"/nox/prog"}
		}, 125, "", "stage 2: execve /nox/prog: permission denied"},
		{"cwd missing", func(p *specs.Process) { p.Cwd = "/no-such-dir" },
			125, "", "stage 2: process.cwd /no-such-dir: no such file or directory"},
		{"cwd through a link, kept inside", func(p *specs.Process) {
			p.Cwd = "/up"
			p.Args = []string{"/bin/sh", "-c", "pwd; ls -d /workspace"}
		}, 0, "/\n/workspace\n", ""},
		{"cwd through a magic link", func(p *specs.Process) { p.Cwd = "/proc/self/root" },
			125, "", "stage 2: process.cwd /proc/self/root: too many levels of symbolic links"},
		{"umask and rlimits", func(p *specs.Process) {
			u := uint32(0o027)
			p.User.Umask = &u
			p.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 100, Hard: 200}}
			p.Args = []string{"/bin/sh", "-c", "umask; ulimit -Sn; ulimit -Hn"}
		}, 0, "0027\n100\n200\n", ""},
		{"rlimit above the hard limit", func(p *specs.Process) {
			p.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 1 << 40, Hard: 1 << 40}}
		}, 125, "", "stage 2: process.rlimits: setrlimit 7 1099511627776/1099511627776: operation not permitted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := std
			p.Env = append([]string(nil), std.Env...)
			c.edit(&p)
			b.Spec.Process = &p
			b.Write(t)
			r := runShim(t, e, testenv.ShimRun{Shim: e.HelperPath("glove-shim"), Args: []string{"run", "--bundle", b.Dir, "t"}})
			switch {
			case r.Code != c.code:
				t.Errorf("exit %d, want %d\nstdout %q\nstderr %q", r.Code, c.code, r.Stdout, r.Stderr)
			case c.code == 0 && r.Stdout != c.stdout:
				t.Errorf("stdout %q, want %q\nstderr %q", r.Stdout, c.stdout, r.Stderr)
			case c.code != 0 && (!strings.Contains(r.Stderr, c.stderr) || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0):
				t.Errorf("stderr %q, want one line containing %q", r.Stderr, c.stderr)
			}
		})
	}
}
