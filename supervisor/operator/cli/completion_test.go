// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"flag"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/packaging/bashcomp"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
)

// completionValue is what bash completion offers for a flag's value:
// the names of files (and directories), of directories only, or a
// value of the flag's own. Every flag that takes a value is here, so a
// new one is a decision about its completion; boolean flags take none.
var completionValue = bashcomp.Kinds(map[string][]string{
	"file": {"file", "policy", "plan", "receipt", "receipt-key", "key", "executable", "socket", "source"},
	"dir": {"libexec", "session-store", "config-dir", "workspace", "directory", "search-path", "materialization-root",
		"library-bundle-root", "read-only-path"},
	"own": {"runtime", "template-id", "model-endpoint", "model", "key-env", "arg", "env", "alias",
		"destination", "backend", "receipt-anchor", "anchor", "limit", "inherited-fd", "profile", "user"},
})

// TestCompletion holds packaging/completion/glove to the command table:
// run in bash as a Tab would, it offers exactly glove's commands, each
// group's subcommands (and help), each command's flags; after a flag
// that takes a path, file or directory names (also as --flag=value);
// after --profile, the shipped profiles; after any other flag's value,
// nothing.
func TestCompletion(t *testing.T) {
	tmp := t.TempDir()
	offered, err := bashcomp.PathFixture(tmp)
	if err != nil {
		t.Fatal(err)
	}
	type check struct {
		words []string
		want  func(got []string) string // "" or what is wrong
	}
	exactly := func(want []string) func([]string) string {
		return func(got []string) string {
			g, w := slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
			if !slices.Equal(g, w) {
				return "offers " + strings.Join(g, " ") + "; want " + strings.Join(w, " ")
			}
			return ""
		}
	}
	var profiles []string
	for _, p := range policy.ShippedProfiles() {
		profiles = append(profiles, p.ProfileID)
	}
	byKind := map[string]func([]string) string{
		"file": exactly(offered["file"]),
		"dir":  exactly(offered["dir"]),
		"own":  exactly(offered["own"]),
	}
	checks := []check{{[]string{"glove", ""}, exactly(slices.Collect(maps.Keys(commands)))}}
	used := map[string]bool{}
	var walk func(words []string, c *command)
	walk = func(words []string, c *command) {
		if c.subs != nil {
			checks = append(checks, check{append(slices.Clone(words), ""), exactly(append(slices.Collect(maps.Keys(c.subs)), "help"))})
			for name, sc := range c.subs {
				walk(append(slices.Clone(words), name), sc)
			}
			return
		}
		var flags []string
		if c.flags != nil {
			fs := flag.NewFlagSet("", flag.ContinueOnError)
			c.flags(fs)
			fs.VisitAll(func(f *flag.Flag) {
				flags = append(flags, "--"+f.Name)
				if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
					if _, listed := completionValue[f.Name]; listed {
						t.Errorf("completionValue lists --%s, a boolean flag", f.Name)
					}
					return
				}
				kind, ok := completionValue[f.Name]
				if !ok {
					t.Errorf("%s --%s takes a value: say in completionValue what its completion offers (and offer it in packaging/completion/glove)", strings.Join(words, " "), f.Name)
					return
				}
				used[f.Name] = true
				if f.Name == "profile" {
					checks = append(checks, check{append(slices.Clone(words), "--profile", ""), exactly(profiles)})
					return
				}
				checks = append(checks, check{append(slices.Clone(words), "--"+f.Name, tmp+"/a"), byKind[kind]})
			})
		}
		checks = append(checks, check{append(slices.Clone(words), "-"), exactly(flags)})
	}
	for name, c := range commands {
		walk([]string{"glove", name}, c)
	}
	for name := range completionValue {
		if !used[name] {
			t.Errorf("completionValue lists --%s, which no glove command has", name)
		}
	}
	checks = append(checks,
		check{[]string{"glove", "policy", "validate", "--file", "=", tmp + "/a"}, byKind["file"]},
		check{[]string{"glove", "run", "--", "sh", tmp + "/a"}, byKind["file"]},
	)
	cases := make([][]string, len(checks))
	for i, c := range checks {
		cases[i] = c.words
	}
	answers, err := bashcomp.Complete(bashcomp.Script("glove"), "_glove", cases)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range checks {
		if fault := c.want(answers[i]); fault != "" {
			t.Errorf("completing %q: %s", strings.Join(c.words, " "), fault)
		}
	}
}
