// SPDX-License-Identifier: Apache-2.0

package captable

import (
	"os"
	"strings"
	"testing"
)

func TestRows(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range Table {
		if seen[e.Binary] {
			t.Errorf("%s listed twice", e.Binary)
		}
		seen[e.Binary] = true
		if e.Dir != DirBin && e.Dir != DirLibexec {
			t.Errorf("%s: directory %q", e.Binary, e.Dir)
		}
		if e.Helper != (e.Dir == DirLibexec) {
			t.Errorf("%s: helpers, and only helpers, live in %s", e.Binary, DirLibexec)
		}
		if !e.Helper && len(e.Caps) != 0 {
			t.Errorf("%s: only a helper may hold a capability (the supervisor and the CLI parse untrusted input)", e.Binary)
		}
		if e.Why == "" {
			t.Errorf("%s: no reason given", e.Binary)
		}
	}
}

// TestMakefileBuildsEveryRow keeps `make build` and the table in step.
func TestMakefileBuildsEveryRow(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range Table {
		if !strings.Contains(string(mk), "/cmd/"+e.Binary+" ") && !strings.Contains(string(mk), "/cmd/"+e.Binary+"\n") {
			t.Errorf("Makefile's CMDS does not build %s", e.Binary)
		}
	}
}
