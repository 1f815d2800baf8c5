// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"flag"
	"maps"
	"slices"
	"testing"

	"github.com/glove-sandbox/glove/packaging/manpage"
)

// leafCommands is every command glove runs, by its full name ("glove
// policy validate"), with the flags its flag set defines, sorted.
func leafCommands() map[string][]string {
	out := map[string][]string{}
	var walk func(name string, c *command)
	walk = func(name string, c *command) {
		if c.subs != nil {
			for sub, sc := range c.subs {
				walk(name+" "+sub, sc)
			}
			return
		}
		out[name] = commandFlags(c)
	}
	for name, c := range commands {
		walk("glove "+name, c)
	}
	return out
}

// commandFlags is the names of c's flags, sorted.
func commandFlags(c *command) []string {
	names := []string{}
	if c.flags == nil {
		return names
	}
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	c.flags(fs)
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// TestManPageCommands holds docs/man/glove.1 to the command table: each
// command has its section (.SS "glove policy validate") under COMMANDS,
// and the flags its section lists (.TP tags \fB\-\-NAME\fR) are exactly
// the ones its flag set defines; a section naming no command, a flag the
// command lacks, or a flag named anywhere on the page that no command
// has, fails too.
func TestManPageCommands(t *testing.T) {
	page, src, err := manpage.Read("glove.1")
	if err != nil {
		t.Fatal(err)
	}
	sec := page.Section("COMMANDS")
	if sec == nil {
		t.Fatal("glove.1 has no COMMANDS section")
	}
	want := leafCommands()
	documented := map[string]bool{}
	for _, sub := range sec.Subs {
		if sub.Name == "" {
			continue
		}
		if documented[sub.Name] {
			t.Errorf("glove.1: %q has two sections", sub.Name)
		}
		documented[sub.Name] = true
		flags, ok := want[sub.Name]
		if !ok {
			t.Errorf("glove.1 documents %q, which is not a glove command", sub.Name)
			continue
		}
		got, err := manpage.Flags(sub.Tags)
		if err != nil {
			t.Errorf("glove.1, %s: %v", sub.Name, err)
			continue
		}
		slices.Sort(got)
		if !slices.Equal(got, flags) {
			t.Errorf("glove.1, %s: the page lists flags %v, the command has %v", sub.Name, got, flags)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if !documented[name] {
			t.Errorf("glove.1 has no section for %q (a .SS under COMMANDS, each flag a .TP)", name)
		}
	}
	// Prose names flags too ("with --receipt-anchor"): each must be one.
	// --help and --version are Run's own, outside every flag set.
	known := map[string]bool{"help": true, "version": true}
	for _, flags := range want {
		for _, f := range flags {
			known[f] = true
		}
	}
	for _, f := range manpage.FlagMentions(src) {
		if !known[f] {
			t.Errorf("glove.1 names --%s, which no glove command has", f)
		}
	}
}
