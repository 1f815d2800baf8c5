// SPDX-License-Identifier: Apache-2.0

package harnesses

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/glove-sandbox/glove/testenv"
)

// Ensure installs h into the default cache if needed and returns its
// binary, for a test. Without npm or without the registry the test is
// skipped with the reason, unless GLOVE_REQUIRE_HARNESSES=1 (CI) makes
// that a failure. In testenv's prebuilt mode (the VM lane's guests: no
// npm, no registry) it returns the binary the host carried in
// (PrebuiltPath) and never runs npm; without that binary the test fails,
// since the lane brings it to exactly the cells whose tests need it.
func Ensure(t testing.TB, h Harness) string {
	t.Helper()
	if !Supported() {
		t.Skipf("%s: the pinned packages have no binary for this platform", h.Name)
	}
	if path, ok, err := h.prebuilt(); ok {
		if err != nil {
			t.Fatalf("%v: a prebuilt run (%s) has no npm; list the test in vmlane/tests with the harnesses option so make lane-tests carries the binary in", err, testenv.PrebuiltEnv)
		}
		return path
	}
	cache, err := DefaultCache()
	if err != nil {
		t.Fatal(err)
	}
	r, err := h.Install(context.Background(), cache)
	if errors.Is(err, ErrNoNPM) || errors.Is(err, ErrNoNetwork) {
		if os.Getenv("GLOVE_REQUIRE_HARNESSES") == "1" {
			t.Fatalf("%s: %v (GLOVE_REQUIRE_HARNESSES=1)", h.Name, err)
		}
		t.Skipf("%s not installable: %v", h.Name, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if r.Installed {
		t.Logf("%s installed into %s in %v", h.Name, cache, r.Took)
	}
	return r.Path
}

// EnsurePrefix is Ensure for a test that needs the whole installed
// package (its npm prefix, holding node_modules), not only the binary.
func EnsurePrefix(t testing.TB, h Harness) string {
	t.Helper()
	// A prebuilt run has the native binary alone (PrebuiltPath), never
	// the package's tree: the cache's prefix does not exist there.
	if _, ok, _ := h.prebuilt(); ok {
		t.Fatalf("%s: a prebuilt run (%s) carries only the native binary, not the npm prefix this test needs", h.Name, testenv.PrebuiltEnv)
	}
	Ensure(t, h)
	cache, err := DefaultCache()
	if err != nil {
		t.Fatal(err)
	}
	return h.Prefix(cache)
}

// EnsureCommand is Ensure for a document's npm install command line
// (InstallCommand): it returns the prefix holding every pinned harness,
// installed by that command line. A prebuilt run has no npm: the test
// fails there.
func EnsureCommand(t testing.TB, name string, argv []string) string {
	t.Helper()
	if !Supported() {
		t.Skip("the pinned packages have no binary for this platform")
	}
	if _, ok, _ := Codex.prebuilt(); ok {
		t.Fatalf("a prebuilt run (%s) has no npm to run %q", testenv.PrebuiltEnv, argv)
	}
	cache, err := DefaultCache()
	if err != nil {
		t.Fatal(err)
	}
	prefix, installed, err := InstallCommand(context.Background(), cache, name, argv)
	if errors.Is(err, ErrNoNPM) || errors.Is(err, ErrNoNetwork) {
		if os.Getenv("GLOVE_REQUIRE_HARNESSES") == "1" {
			t.Fatalf("%q: %v (GLOVE_REQUIRE_HARNESSES=1)", argv, err)
		}
		t.Skipf("%q: %v", argv, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if installed {
		t.Logf("%q installed into %s", argv, prefix)
	}
	return prefix
}
