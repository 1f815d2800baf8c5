// SPDX-License-Identifier: Apache-2.0

package shim

import (
	"slices"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/packaging/manpage"
)

// TestManPageFlags holds docs/man/glove-shim.8 to glove-shim's command
// line: its OPTIONS list (.TP tags \fB\-\-NAME\fR) exactly --cgroup-join,
// run's flags and --version, the page names no other flag, and parseRun
// takes each documented run flag with a value.
func TestManPageFlags(t *testing.T) {
	page, src, err := manpage.Read("glove-shim.8")
	if err != nil {
		t.Fatal(err)
	}
	sec := page.Section("OPTIONS")
	if sec == nil {
		t.Fatal("glove-shim.8 has no OPTIONS section")
	}
	got, err := manpage.Flags(sec.Tags())
	if err != nil {
		t.Fatalf("glove-shim.8, OPTIONS: %v", err)
	}
	want := []string{strings.TrimPrefix(argJoin, "--"), "version"}
	for _, f := range runFlags {
		if name, ok := strings.CutPrefix(f, "--"); ok {
			want = append(want, name)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("glove-shim.8 lists flags %v; glove-shim has %v", got, want)
	}
	for _, f := range manpage.FlagMentions(src) {
		if !slices.Contains(want, f) {
			t.Errorf("glove-shim.8 names --%s, which glove-shim does not have", f)
		}
	}
	for _, f := range runFlags {
		if _, err := parseRun([]string{f, "9", "id"}); err != nil {
			t.Errorf("parseRun(%s 9 id): %v", f, err)
		}
	}
	if _, err := parseRun([]string{"--not-a-flag", "9", "id"}); err == nil {
		t.Error("parseRun takes a flag it does not have")
	}
}
