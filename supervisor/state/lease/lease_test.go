// SPDX-License-Identifier: Apache-2.0

package lease

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/internal/strictjson"
)

func openStore(t *testing.T) (*Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "leases")
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s, dir
}

func release(t *testing.T, l *Lease) {
	t.Helper()
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseLifecycle: import, reuse with a rotation, re-import when the
// operator replaces the source, and the bytes on disk.
func TestLeaseLifecycle(t *testing.T) {
	s, dir := openStore(t)
	l, err := s.Acquire("codex-token", []byte("token-1"))
	if err != nil {
		t.Fatal(err)
	}
	if !l.Imported || l.Version() != 1 || string(l.Content()) != "token-1" || len(l.ID()) != 32 {
		t.Fatalf("first acquisition: imported %v version %d content %q id %q", l.Imported, l.Version(), l.Content(), l.ID())
	}
	id := l.ID()
	if changed, err := l.Commit([]byte("token-1")); err != nil || changed {
		t.Fatalf("commit of the same content: changed %v, %v", changed, err)
	}
	if changed, err := l.Commit([]byte("token-2")); err != nil || !changed || l.Version() != 2 {
		t.Fatalf("commit of a rotation: changed %v version %d, %v", changed, l.Version(), err)
	}
	release(t, l)
	if _, err := l.Commit([]byte("x")); err == nil {
		t.Fatal("a commit after release was accepted")
	}
	// The same source: the rotation is what the next session gets.
	l, err = s.Acquire("codex-token", []byte("token-1"))
	if err != nil {
		t.Fatal(err)
	}
	if l.Imported || l.Version() != 2 || string(l.Content()) != "token-2" || l.ID() != id {
		t.Fatalf("second acquisition: imported %v version %d content %q id %q", l.Imported, l.Version(), l.Content(), l.ID())
	}
	release(t, l)
	// The operator replaced the source: its content wins, as version 3.
	l, err = s.Acquire("codex-token", []byte("operator-new"))
	if err != nil {
		t.Fatal(err)
	}
	if !l.Imported || l.Version() != 3 || string(l.Content()) != "operator-new" || l.ID() != id {
		t.Fatalf("re-import: imported %v version %d content %q id %q", l.Imported, l.Version(), l.Content(), l.ID())
	}
	release(t, l)
	st, err := os.Stat(filepath.Join(dir, "codex-token.lease"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("lease file mode %v, want 0600", st.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(dir, "codex-token.lease.tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a temporary file was left: %v", err)
	}
}

// TestLeaseBusy: one session at a time; the lock goes with Release.
func TestLeaseBusy(t *testing.T) {
	s, _ := openStore(t)
	l, err := s.Acquire("codex-token", []byte("t"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire("codex-token", []byte("t")); !errors.Is(err, ErrBusy) {
		t.Fatalf("second acquisition while held: %v, want ErrBusy", err)
	}
	other, err := s.Acquire("other", []byte("t"))
	if err != nil {
		t.Fatalf("another handle is not locked by the first: %v", err)
	}
	release(t, other)
	release(t, l)
	l, err = s.Acquire("codex-token", []byte("t"))
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	release(t, l)
}

// TestLeaseRefusals: a store or lease file that is not what this package
// makes is refused, never used or silently replaced.
func TestLeaseRefusals(t *testing.T) {
	s, dir := openStore(t)
	l, err := s.Acquire("codex-token", []byte("t"))
	if err != nil {
		t.Fatal(err)
	}
	release(t, l)
	file := filepath.Join(dir, "codex-token.lease")
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for name, spoil := range map[string]func() error{
		"mode 0644":     func() error { return os.Chmod(file, 0o644) },
		"a second link": func() error { return os.Link(file, filepath.Join(dir, "x")) },
		"a symlink": func() error {
			if err := os.Rename(file, filepath.Join(dir, "real")); err != nil {
				return err
			}
			return os.Symlink(filepath.Join(dir, "real"), file)
		},
		"another handle's file": func() error {
			return os.WriteFile(file, bytes.Replace(good, []byte(`"codex-token"`), []byte(`"other"`), 1), 0o600)
		},
		"torn": func() error { return os.WriteFile(file, good[:len(good)/2], 0o600) },
	} {
		t.Run(name, func(t *testing.T) {
			for _, n := range []string{"x", "real"} {
				if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
					t.Fatal(err)
				}
			}
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, good, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := spoil(); err != nil {
				t.Fatal(err)
			}
			if l, err := s.Acquire("codex-token", []byte("t")); err == nil {
				release(t, l)
				t.Fatal("accepted")
			} else if !errors.Is(err, ErrCorrupt) && !strings.Contains(err.Error(), "symbolic link") && !strings.Contains(err.Error(), "too many levels") {
				t.Fatalf("refused for another reason: %v", err)
			}
			// The lock went with the refusal.
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
			l, err := s.Acquire("codex-token", []byte("t"))
			if err != nil {
				t.Fatalf("after the bad file is gone: %v", err)
			}
			release(t, l)
		})
	}
	if _, err := s.Acquire("../x", []byte("t")); err == nil {
		t.Fatal("a handle that is a path was accepted")
	}
	if _, err := s.Acquire("big", make([]byte, MaxContentBytes+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("an oversized source: %v", err)
	}
	loose := filepath.Join(t.TempDir(), "loose")
	if err := os.Mkdir(loose, 0o755); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(loose); err == nil {
		s.Close()
		t.Fatal("a lease store of mode 0755 was accepted")
	}
}

func goodRecord() record {
	return record{Schema: Schema, Handle: "codex-token", LeaseID: strings.Repeat("ab", 16), Version: 3,
		SourceSHA256: strings.Repeat("0f", 32), Content: base64.StdEncoding.EncodeToString([]byte("secret"))}
}

// TestDecodeBadInputs is the lease file decoder's table of bad inputs.
func TestDecodeBadInputs(t *testing.T) {
	if _, c, err := decode(strictjson.Canonical(goodRecord())); err != nil || string(c) != "secret" {
		t.Fatalf("the good record: %q, %v", c, err)
	}
	mut := func(f func(*record)) []byte {
		r := goodRecord()
		f(&r)
		return strictjson.Canonical(r)
	}
	for name, in := range map[string][]byte{
		"empty":            nil,
		"not an object":    []byte(`[]`),
		"unknown member":   []byte(strings.Replace(string(strictjson.Canonical(goodRecord())), `{`, `{"x":1,`, 1)),
		"duplicate member": []byte(strings.Replace(string(strictjson.Canonical(goodRecord())), `{`, `{"version":1,`, 1)),
		"trailing data":    append(strictjson.Canonical(goodRecord()), '{', '}'),
		"schema":           mut(func(r *record) { r.Schema = "glove.credential-lease-v2" }),
		"handle":           mut(func(r *record) { r.Handle = "../x" }),
		"lease id short":   mut(func(r *record) { r.LeaseID = "ab" }),
		"lease id upper":   mut(func(r *record) { r.LeaseID = strings.Repeat("AB", 16) }),
		"version 0":        mut(func(r *record) { r.Version = 0 }),
		"version huge":     mut(func(r *record) { r.Version = 1 << 60 }),
		"source digest":    mut(func(r *record) { r.SourceSHA256 = "x" }),
		"content base64":   mut(func(r *record) { r.Content = "!!" }),
		"content padding":  mut(func(r *record) { r.Content = "c2VjcmV0" + "=" }),
		"content huge":     mut(func(r *record) { r.Content = base64.StdEncoding.EncodeToString(make([]byte, MaxContentBytes+1)) }),
	} {
		if _, _, err := decode(in); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: the error is not one line: %q", name, err)
		}
	}
}

// FuzzDecode: the decoder never panics, and what it accepts is a record
// it would write again byte for byte.
func FuzzDecode(f *testing.F) {
	f.Add(strictjson.Canonical(goodRecord()))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, content, err := decode(data)
		if err != nil {
			return
		}
		again := *r
		again.Content = base64.StdEncoding.EncodeToString(content)
		if _, c2, err := decode(strictjson.Canonical(again)); err != nil || !bytes.Equal(c2, content) {
			t.Fatalf("an accepted record does not survive its own encoding: %v", err)
		}
	})
}

// TestPrune: the leases of handles the policy no longer maps are removed,
// with their lock files; the kept handles' and foreign names stay.
func TestPrune(t *testing.T) {
	s, dir := openStore(t)
	for _, h := range []string{"keep", "gone"} {
		l, err := s.Acquire(h, []byte("t-"+h))
		if err != nil {
			t.Fatal(err)
		}
		release(t, l)
	}
	if err := os.WriteFile(filepath.Join(dir, "gone.lease.tmp"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	removed, err := s.Prune([]string{"keep"})
	if err != nil || len(removed) != 1 || removed[0] != "gone" {
		t.Fatalf("removed %q, %v; want [gone]", removed, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if strings.Join(left, " ") != "README keep.lease keep.lock" {
		t.Fatalf("left %q", left)
	}
	l, err := s.Acquire("keep", []byte("t-keep"))
	if err != nil || l.Imported || l.Version() != 1 {
		t.Fatalf("the kept lease: %v", err)
	}
	release(t, l)
}
