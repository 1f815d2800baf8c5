package session

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/discovery"
)

// discoveryDir makes a root-owned 0755 directory under /var/lib (whose
// ancestors pass the discovery rules; /tmp is world-writable and would
// not) holding an executable named codex.
func discoveryDir(t *testing.T) (dir, exe string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: discovery accepts directories owned by root or the service account, and /tmp is world-writable")
	}
	dir, err := os.MkdirTemp("/var/lib", "glove-session-discovery-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe = filepath.Join(dir, "codex")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\necho one\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, exe
}

// TestRecheckExecutable: a discovered executable is pinned at resolve
// time; the launch fails closed when the file changed in place, was
// replaced, or the mount is of another file.
func TestRecheckExecutable(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, exe string)
		ok     bool
	}{
		{"unchanged", func(*testing.T, string) {}, true},
		{"rewritten in place, same size", func(t *testing.T, exe string) {
			f, err := os.OpenFile(exe, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte("two"), int64(len("#!/bin/sh\necho "))); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"replaced by rename", func(t *testing.T, exe string) {
			tmp := exe + ".new"
			if err := os.WriteFile(tmp, []byte("#!/bin/sh\necho one\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, exe); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"made group-writable", func(t *testing.T, exe string) {
			if err := os.Chmod(exe, 0o775); err != nil {
				t.Fatal(err)
			}
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, exe := discoveryDir(t)
			pin, err := resolveExecutable("codex", []string{filepath.Join(dir, "missing"), dir})
			if err != nil {
				t.Fatal(err)
			}
			if pin.Path != exe {
				t.Fatalf("pinned %s, want %s", pin.Path, exe)
			}
			// The mount stands for what the program would run: the file
			// as it was opened before the change (a bind keeps the inode).
			mnt, err := os.Open(exe)
			if err != nil {
				t.Fatal(err)
			}
			defer mnt.Close()
			c.change(t, exe)
			err = recheckExecutable(pin, mnt)
			if c.ok && err != nil {
				t.Errorf("recheck: %v", err)
			}
			if !c.ok && err == nil {
				t.Error("recheck passed a changed executable")
			}
			if !c.ok && err != nil && c.name != "made group-writable" && !errors.Is(err, discovery.ErrChanged) {
				t.Errorf("recheck: %v, want ErrChanged", err)
			}
		})
	}
	t.Run("mount of another file", func(t *testing.T) {
		dir, _ := discoveryDir(t)
		pin, err := resolveExecutable("codex", []string{dir})
		if err != nil {
			t.Fatal(err)
		}
		other := filepath.Join(dir, "other")
		if err := os.WriteFile(other, []byte("#!/bin/sh\necho one\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		mnt, err := os.Open(other)
		if err != nil {
			t.Fatal(err)
		}
		defer mnt.Close()
		if err := recheckExecutable(pin, mnt); !errors.Is(err, discovery.ErrChanged) {
			t.Errorf("recheck with another file's mount: %v, want ErrChanged", err)
		}
	})
	t.Run("nothing installed", func(t *testing.T) {
		dir, exe := discoveryDir(t)
		os.Remove(exe)
		_, err := resolveExecutable("codex", []string{dir})
		if !errors.Is(err, discovery.ErrNotInstalled) {
			t.Errorf("resolve with nothing installed: %v, want ErrNotInstalled", err)
		}
	})
}

func TestNativeAdapterTable(t *testing.T) {
	for rt, a := range nativeAdapters {
		if !strings.HasPrefix(a.skillDir, HomeDir+"/") {
			t.Errorf("%s: skill directory %s is not beneath %s", rt, a.skillDir, HomeDir)
		}
		if _, ok := cutDir(a.skillDir, HomeDir); !ok {
			t.Errorf("%s: cutDir(%s)", rt, a.skillDir)
		}
		for _, e := range a.env {
			name, val, _ := strings.Cut(e, "=")
			if !strings.HasPrefix(val, HomeDir+"/") || name == "HOME" {
				t.Errorf("%s: managed variable %s", rt, e)
			}
		}
	}
	l := &Launch{}
	if privateHome(l, "cloudflare-os", 1<<20) || l.Skills != nil || len(l.Mounts) != 0 {
		t.Error("a runtime outside the table got a private home")
	}
	if !privateHome(l, "opencode", 1<<20) || l.Skills == nil || l.Skills.SkillDir != "/home/agent/.config/opencode/skills" {
		t.Errorf("opencode: %+v", l.Skills)
	}
	want := []string{"HOME=/home/agent", "XDG_CONFIG_HOME=/home/agent/.config"}
	if strings.Join(l.Env, " ") != strings.Join(want, " ") {
		t.Errorf("opencode env %q, want %q", l.Env, want)
	}
}
