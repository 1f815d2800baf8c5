// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"slices"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/packaging/bashcomp"
	"github.com/glove-sandbox/glove/supervisor/service/daemon"
)

// completionValue is what bash completion offers for each flag's value:
// file names, directory names, or nothing (a value of the flag's own).
// Every flag is here, so a new one is a decision about its completion.
var completionValue = bashcomp.Kinds(map[string][]string{
	"file": {"session-policy", "receipt-key", "local-services", "socket"},
	"dir":  {"session-store", "materialization-root", "runtime-dir", "libexec", "library-bundle-root"},
	"own":  {"receipt-anchor", "allow-uid", "idempotency-retention", "idle-timeout", "line-timeout"},
})

// TestCompletion holds packaging/completion/gloved to gloved's flag set:
// run in bash as a Tab would, it offers exactly gloved's flags and
// --version, and after a flag that takes a path, file or directory names.
func TestCompletion(t *testing.T) {
	tmp := t.TempDir()
	offered, err := bashcomp.PathFixture(tmp)
	if err != nil {
		t.Fatal(err)
	}
	want := offered
	cases := [][]string{{"gloved", "-"}}
	wants := [][]string{{"--version"}}
	var cfg daemon.Config
	var uids uidList
	flagSet(&cfg, &uids).VisitAll(func(f *flag.Flag) {
		wants[0] = append(wants[0], "--"+f.Name)
		kind, ok := completionValue[f.Name]
		if !ok {
			t.Errorf("gloved --%s: say in completionValue what its completion offers (and offer it in packaging/completion/gloved)", f.Name)
			return
		}
		cases = append(cases, []string{"gloved", "--" + f.Name, tmp + "/a"})
		wants = append(wants, want[kind])
	})
	if len(cases)-1 != len(completionValue) {
		t.Errorf("completionValue lists %d flags, gloved has %d", len(completionValue), len(cases)-1)
	}
	answers, err := bashcomp.Complete(bashcomp.Script("gloved"), "_gloved", cases)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cases {
		got, w := slices.Sorted(slices.Values(answers[i])), slices.Sorted(slices.Values(wants[i]))
		if !slices.Equal(got, w) {
			t.Errorf("completing %q: offers %v; want %v", strings.Join(cases[i], " "), got, w)
		}
	}
}
