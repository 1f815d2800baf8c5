// SPDX-License-Identifier: Apache-2.0

package harnesses

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/glove-sandbox/glove/testenv"
)

// fakeTB records what Ensure reports instead of ending the test.
type fakeTB struct {
	testing.TB
	fatal, skip string
}

func (f *fakeTB) Helper()                           {}
func (f *fakeTB) Fatal(args ...any)                 { f.fatal = fmt.Sprint(args...) }
func (f *fakeTB) Fatalf(format string, args ...any) { f.fatal = fmt.Sprintf(format, args...) }
func (f *fakeTB) Skipf(format string, args ...any)  { f.skip = fmt.Sprintf(format, args...) }
func (f *fakeTB) Logf(format string, args ...any)   {}

// fakeCache makes cache hold every harness as Install leaves it (the
// binary and the mark), so that Install finds it without npm.
func fakeCache(t *testing.T, cache string) {
	t.Helper()
	for _, h := range All {
		bin := h.Path(cache)
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, []byte("#!/bin/sh\necho "+h.Name+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(h.Prefix(cache), markName), []byte(h.VersionOut+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPrebuildLayout: Prebuild copies each cached binary to its
// PrebuiltPath, and refuses a directory that already has harnesses.
func TestPrebuildLayout(t *testing.T) {
	if !Supported() {
		t.Skip("no pinned binary for this platform")
	}
	cache, dir := t.TempDir(), filepath.Join(t.TempDir(), "prebuilt")
	fakeCache(t, cache)
	res, err := Prebuild(context.Background(), cache, dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(All) {
		t.Fatalf("Prebuild returned %d results, want %d", len(res), len(All))
	}
	for _, h := range All {
		got, err := os.ReadFile(h.PrebuiltPath(dir))
		if err != nil {
			t.Fatal(err)
		}
		if want := "#!/bin/sh\necho " + h.Name + "\n"; string(got) != want {
			t.Errorf("%s: prebuilt binary holds %q, want %q", h.Name, got, want)
		}
	}
	if _, err := Prebuild(context.Background(), cache, dir); err == nil {
		t.Error("a second Prebuild into the same directory succeeded")
	}
}

// TestEnsurePrebuilt: in a prebuilt run Ensure returns the carried binary
// without looking at the cache or npm, and fails (never skips) when the
// binary is missing or not executable.
func TestEnsurePrebuilt(t *testing.T) {
	if !Supported() {
		t.Skip("no pinned binary for this platform")
	}
	// No npm on PATH and an empty cache: any install attempt would show
	// up as a skip (ErrNoNPM).
	t.Setenv("PATH", t.TempDir())
	t.Setenv("GLOVE_HARNESS_CACHE", t.TempDir())
	t.Setenv("GLOVE_REQUIRE_HARNESSES", "")
	pre := t.TempDir()
	t.Setenv(testenv.PrebuiltEnv, pre)

	for _, h := range All {
		f := &fakeTB{TB: t}
		Ensure(f, h)
		if f.fatal == "" || f.skip != "" {
			t.Errorf("%s missing: fatal %q skip %q, want a failure and no skip", h.Name, f.fatal, f.skip)
		}
	}

	cache := t.TempDir()
	fakeCache(t, cache)
	if _, err := Prebuild(context.Background(), cache, pre); err != nil {
		t.Fatal(err)
	}
	for _, h := range All {
		f := &fakeTB{TB: t}
		if got := Ensure(f, h); got != h.PrebuiltPath(pre) || f.fatal != "" || f.skip != "" {
			t.Errorf("%s: Ensure = %q (fatal %q skip %q), want %q", h.Name, got, f.fatal, f.skip, h.PrebuiltPath(pre))
		}
	}

	f := &fakeTB{TB: t}
	EnsurePrefix(f, Codex)
	if f.fatal == "" {
		t.Error("EnsurePrefix in a prebuilt run did not fail")
	}

	if err := os.Chmod(Codex.PrebuiltPath(pre), 0o644); err != nil {
		t.Fatal(err)
	}
	f = &fakeTB{TB: t}
	Ensure(f, Codex)
	if f.fatal == "" {
		t.Error("a prebuilt binary without execute permission was accepted")
	}
}
