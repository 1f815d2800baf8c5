// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"slices"
	"testing"

	"github.com/glove-sandbox/glove/packaging/manpage"
	"github.com/glove-sandbox/glove/supervisor/service/daemon"
)

// flagNames is every flag gloved parses, sorted.
func flagNames() []string {
	var cfg daemon.Config
	var uids uidList
	var names []string
	flagSet(&cfg, &uids).VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// TestManPageFlags holds docs/man/gloved.8 to gloved's flag set: its
// OPTIONS list (.TP tags \fB\-\-NAME\fR) exactly the flags flagSet
// defines, and no flag gloved lacks is named anywhere on the page.
func TestManPageFlags(t *testing.T) {
	page, src, err := manpage.Read("gloved.8")
	if err != nil {
		t.Fatal(err)
	}
	sec := page.Section("OPTIONS")
	if sec == nil {
		t.Fatal("gloved.8 has no OPTIONS section")
	}
	got, err := manpage.Flags(sec.Tags())
	if err != nil {
		t.Fatalf("gloved.8, OPTIONS: %v", err)
	}
	slices.Sort(got)
	want := flagNames()
	if !slices.Equal(got, want) {
		t.Errorf("gloved.8 lists flags %v; gloved has %v", got, want)
	}
	for _, f := range manpage.FlagMentions(src) {
		// --version is run's own, before the flag set parses.
		if f != "version" && !slices.Contains(want, f) {
			t.Errorf("gloved.8 names --%s, which gloved does not have", f)
		}
	}
}
