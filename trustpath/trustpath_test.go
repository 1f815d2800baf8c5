// SPDX-License-Identifier: Apache-2.0

package trustpath

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// tree is a private root: /etc/app/conf (0644), /etc/link -> app, /w
// (group-writable) holding /w/conf.
func tree(t *testing.T) *os.File {
	t.Helper()
	dir := t.TempDir()
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{"", 0o755}, {"etc", 0o755}, {"etc/app", 0o755}, {"w", 0o775}} {
		p := filepath.Join(dir, c.path)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, c.mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"etc/app/conf", "w/conf"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x=1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("app", filepath.Join(dir, "etc/link")); err != nil {
		t.Fatal(err)
	}
	root, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

// TestWalk is the table of walks: what is found, and every refusal with
// its rule.
func TestWalk(t *testing.T) {
	me := uint32(os.Geteuid())
	cases := []struct {
		name   string
		path   string
		follow bool
		owner  uint32
		want   string // resolved path, or "" for an error
		err    error
		msg    string
	}{
		{name: "plain", path: "/etc/app/conf", owner: me, want: "/etc/app/conf"},
		{name: "dot and dot-dot above the root", path: "/../etc/./app/conf", owner: me, want: "/etc/app/conf"},
		{name: "a link followed", path: "/etc/link/conf", follow: true, owner: me, want: "/etc/app/conf"},
		{name: "a link not followed", path: "/etc/link/conf", owner: me, err: ErrUntrusted, msg: "/etc/link is a symbolic link"},
		{name: "group-writable directory", path: "/w/conf", owner: me, err: ErrUntrusted, msg: "/w has mode 0775"},
		{name: "another owner", path: "/etc/app/conf", owner: me + 1, err: ErrUntrusted, msg: "/ is owned by uid"},
		{name: "a directory", path: "/etc/app", owner: me, err: unix.EISDIR},
		{name: "a file as a directory", path: "/etc/app/conf/x", owner: me, err: unix.ENOTDIR},
		{name: "missing", path: "/etc/none", owner: me, err: unix.ENOENT},
		{name: "relative", path: "etc/app/conf", owner: me, msg: "not an absolute path"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, got, _, err := Walk(tree(t), c.path, c.owner, c.follow)
			if c.want != "" {
				if err != nil || got != c.want {
					t.Fatalf("got %q, %v; want %q", got, err, c.want)
				}
				f.Close()
				return
			}
			if err == nil {
				f.Close()
				t.Fatalf("walked to %q, want an error", got)
			}
			if (c.err != nil && !errors.Is(err, c.err)) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %v, want %v containing %q", err, c.err, c.msg)
			}
		})
	}
}

// TestReadFile reads the object Walk finds through its descriptor.
func TestReadFile(t *testing.T) {
	if b, err := ReadFile(tree(t), "/etc/app/conf", uint32(os.Geteuid()), 4); err != nil || string(b) != "x=1\n" {
		t.Fatalf("read %q, %v", b, err)
	}
}
