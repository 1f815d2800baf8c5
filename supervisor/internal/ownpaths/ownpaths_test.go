// SPDX-License-Identifier: Apache-2.0

package ownpaths

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCheck: each way a host tree can be, hold or lie in Glove's state is
// refused, by identity; trees beside it are not.
func TestCheck(t *testing.T) {
	base := t.TempDir()
	mk := func(p string) string {
		p = filepath.Join(base, p)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	store := mk("var/lib/glove/store")
	mk("var/lib/glove/store/sessions.d")
	mk("var/lib/other")
	etc := mk("etc/glove")
	mk("etc/ssl")
	key := filepath.Join(etc, "receipt.key")
	for _, f := range []string{key, filepath.Join(store, "sessions"), filepath.Join(base, "etc/ssl/cert.pem")} {
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(store, filepath.Join(base, "link-to-store")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(key, filepath.Join(base, "etc/ssl/hardlink.key")); err != nil {
		t.Fatal(err)
	}
	s, err := Open([]Named{{"the session store", store}, {"the receipt key", key}, {"unset", ""}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range []struct {
		path, want string // want: "" (allowed) or the refusal's end
	}{
		{"var/lib/glove/store", "the tree is the session store"},
		{"var/lib/glove/store/sessions.d", "the tree lies in the session store"},
		{"var/lib/glove/store/sessions", "the tree lies in the session store"},
		{"var/lib/glove", "the tree contains the session store"},
		{"var/lib", "the tree contains the session store"},
		{"var", "the tree contains the session store"},
		{"link-to-store", "the tree is the session store"},
		{"var/lib/glove/store/../store/sessions.d", "the tree lies in the session store"},
		{"etc/glove/receipt.key", "the tree is the receipt key"},
		{"etc/ssl/hardlink.key", "the tree is the receipt key"},
		{"etc/glove", "the tree contains the receipt key"},
		{"etc", "the tree contains the receipt key"},
		{"var/lib/other", ""},
		{"etc/ssl", ""},
		{"etc/ssl/cert.pem", ""},
		{"does/not/exist", ""},
	} {
		err := s.CheckPath(filepath.Join(base, tc.path))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.path, err)
		case tc.want != "" && (!errors.Is(err, ErrOwn) || err.Error() != ErrOwn.Error()+": "+tc.want):
			t.Errorf("%s: %v, want %q", tc.path, err, tc.want)
		}
	}
	// The base's parent holds everything: refused as containing.
	if err := s.CheckPath(filepath.Dir(base)); !errors.Is(err, ErrOwn) {
		t.Errorf("an ancestor of everything: %v", err)
	}
	// A nil or empty set refuses nothing.
	var none *Set
	if err := none.CheckPath(store); err != nil {
		t.Errorf("nil set: %v", err)
	}
}

// TestCheckBindMount: another mount of the store (root only) is the store.
func TestCheckBindMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: makes a bind mount (CI runs as root)")
	}
	base := t.TempDir()
	store := filepath.Join(base, "store")
	elsewhere := filepath.Join(base, "elsewhere")
	for _, d := range []string{store, filepath.Join(store, "sub"), elsewhere} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount(store, elsewhere, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind the store: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(elsewhere, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	s, err := Open([]Named{{"the session store", store}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for path, want := range map[string]string{elsewhere: "the tree is the session store", filepath.Join(elsewhere, "sub"): "the tree lies in the session store"} {
		if err := s.CheckPath(path); err == nil || err.Error() != ErrOwn.Error()+": "+want {
			t.Errorf("%s: %v, want %q", path, err, want)
		}
	}
}

// BenchmarkCheck is the check of one mount's tree at a launch: a copied
// directory beside gloved's state, which holds five paths, all of it
// some levels below the root.
func BenchmarkCheck(b *testing.B) {
	base := filepath.Join(b.TempDir(), "srv", "glove", "test")
	var named []Named
	for _, p := range []string{"store", "run", "mat", "policy.json", "key"} {
		full := filepath.Join(base, "gloved", p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			b.Fatal(err)
		}
		var err error
		if filepath.Ext(p) == "" && p != "key" {
			err = os.Mkdir(full, 0o700)
		} else {
			err = os.WriteFile(full, []byte("x"), 0o600)
		}
		if err != nil {
			b.Fatal(err)
		}
		named = append(named, Named{What: p, Path: full})
	}
	ws := filepath.Join(base, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		b.Fatal(err)
	}
	s, err := Open(named)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	fd, err := unix.Open(ws, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fd)
	for b.Loop() {
		if err := s.Check(fd); err != nil {
			b.Fatal(err)
		}
	}
}
