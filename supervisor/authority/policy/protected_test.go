// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func TestReadProtectedAccepts(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadProtected(p, 5)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "hello" {
		t.Fatalf("read %q", got)
	}
	// Empty is still a protected file; Decode refuses it as JSON.
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadProtected(p, 5); err != nil || len(got) != 0 {
		t.Fatalf("empty file: %q, %v", got, err)
	}
}

// TestReadProtectedRefuses is the table of files that must not be read
// as a policy. Each case builds its file in a fresh directory.
func TestReadProtectedRefuses(t *testing.T) {
	write := func(t *testing.T, p string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(p, []byte(`{"schema_version":1}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name      string
		rootOnly  string // non-empty: skip unless root, with this reason
		make      func(t *testing.T, p string)
		max       int64
		phrase    string
		errno     error
		protected bool // wraps ErrUnprotected
	}{
		{name: "mode 0644", make: func(t *testing.T, p string) { write(t, p, 0o644) }, phrase: "mode 0644, want exactly 0600", protected: true},
		{name: "mode 0640", make: func(t *testing.T, p string) { write(t, p, 0o640) }, phrase: "mode 0640", protected: true},
		{name: "mode 0400", make: func(t *testing.T, p string) { write(t, p, 0o400) }, phrase: "mode 0400", protected: true},
		{name: "mode 0700", make: func(t *testing.T, p string) { write(t, p, 0o700) }, phrase: "mode 0700", protected: true},
		{name: "setuid bit", make: func(t *testing.T, p string) { write(t, p, 0o600|os.ModeSetuid) }, phrase: "mode 4600", protected: true},
		{name: "symbolic link", make: func(t *testing.T, p string) {
			write(t, p+".real", 0o600)
			if err := os.Symlink(p+".real", p); err != nil {
				t.Fatal(err)
			}
		}, phrase: "symbolic link", errno: syscall.ELOOP, protected: true},
		{name: "two hard links", make: func(t *testing.T, p string) {
			write(t, p, 0o600)
			if err := os.Link(p, p+".second"); err != nil {
				t.Fatal(err)
			}
		}, phrase: "2 hard links", protected: true},
		{name: "directory", make: func(t *testing.T, p string) {
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
		}, phrase: "not a regular file (directory)", protected: true},
		{name: "FIFO", make: func(t *testing.T, p string) {
			if err := unix.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}, phrase: "not a regular file (named pipe (fifo))", protected: true},
		{name: "over max", max: 4, make: func(t *testing.T, p string) { write(t, p, 0o600) }, phrase: "more than the 4 allowed", protected: true},
		{name: "missing", make: func(t *testing.T, p string) {}, phrase: "open", errno: syscall.ENOENT},
		{name: "owned by another uid", rootOnly: "chown to another uid needs root", make: func(t *testing.T, p string) {
			write(t, p, 0o600)
			if err := os.Chown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, phrase: "owned by uid 65534, not the current uid 0", protected: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.rootOnly != "" && os.Geteuid() != 0 {
				t.Skip("not root: " + tc.rootOnly)
			}
			p := filepath.Join(t.TempDir(), "policy.json")
			tc.make(t, p)
			max := tc.max
			if max == 0 {
				max = MaxPolicyBytes
			}
			// A FIFO must be refused without blocking: the test would
			// hang here if the open waited for a writer.
			data, err := ReadProtected(p, max)
			if err == nil {
				t.Fatalf("read %q", data)
			}
			if !strings.Contains(err.Error(), tc.phrase) {
				t.Fatalf("error %q lacks %q", err, tc.phrase)
			}
			if !strings.HasPrefix(err.Error(), "read protected file "+p+": ") {
				t.Fatalf("error %q does not name the operation and file", err)
			}
			if tc.errno != nil && !errors.Is(err, tc.errno) {
				t.Fatalf("error %v does not wrap %v", err, tc.errno)
			}
			if errors.Is(err, ErrUnprotected) != tc.protected {
				t.Fatalf("error %v: wraps ErrUnprotected = %v, want %v", err, !tc.protected, tc.protected)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
		})
	}
}

// TestSameFileDetectsChange checks the before/after comparison itself:
// a rewrite between the two fstat calls (which a test cannot time) shows
// up as a change of size, mtime or ctime; a rename-over as a change of
// inode.
func TestSameFileDetectsChange(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	var a, b unix.Stat_t
	if err := unix.Stat(p, &a); err != nil {
		t.Fatal(err)
	}
	if !sameFile(&a, &a) {
		t.Fatal("a stat differs from itself")
	}
	for name, change := range map[string]func(s *unix.Stat_t){
		"size":  func(s *unix.Stat_t) { s.Size++ },
		"mtime": func(s *unix.Stat_t) { s.Mtim.Nsec++ },
		"ctime": func(s *unix.Stat_t) { s.Ctim.Sec++ },
		"inode": func(s *unix.Stat_t) { s.Ino++ },
		"dev":   func(s *unix.Stat_t) { s.Dev++ },
		"mode":  func(s *unix.Stat_t) { s.Mode |= 0o040 },
		"nlink": func(s *unix.Stat_t) { s.Nlink++ },
	} {
		b = a
		change(&b)
		if sameFile(&a, &b) {
			t.Errorf("a change of %s is not detected", name)
		}
	}
	// A real rewrite through another descriptor changes the metadata.
	if err := os.WriteFile(p, []byte("two!"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(p, &b); err != nil {
		t.Fatal(err)
	}
	if sameFile(&a, &b) {
		t.Fatal("rewrite not detected")
	}
}
