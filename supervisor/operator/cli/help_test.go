// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelp: -h, -help and --help after glove's every command, group and
// subcommand (and "help" after a group) print that command's usage on
// stdout and exit 0, nothing on stderr; `glove policy --help` answered
// "unknown subcommand" with status 2. Help among a command's flags
// answers the same; after a command's own arguments it is not Glove's.
func TestHelp(t *testing.T) {
	type call struct {
		args []string
		want string // the first line of stdout starts with it
	}
	var calls []call
	for name, c := range commands {
		for _, h := range []string{"-h", "-help", "--help"} {
			calls = append(calls, call{[]string{name, h}, "usage: glove " + name})
			for sub := range c.subs {
				calls = append(calls, call{[]string{name, sub, h}, "usage: glove " + name + " " + sub})
			}
		}
		if c.subs != nil {
			calls = append(calls, call{[]string{name, "help"}, "usage: glove " + name})
		}
	}
	calls = append(calls,
		call{[]string{"--help"}, "usage:"},
		call{[]string{"policy", "validate", "--file", "x", "--help"}, "usage: glove policy validate"},
		call{[]string{"run", "--profile", "harness", "-h"}, "usage: glove run"},
		call{[]string{"call", "--socket", "/x", "--help"}, "usage: glove call"},
		call{[]string{"status", "--json", "-h"}, "usage: glove status"},
		call{[]string{"receipt", "verify", "--key", "k", "--help"}, "usage: glove receipt verify"},
	)
	for _, c := range calls {
		var out, errb bytes.Buffer
		code := Run(c.args, &out, &errb)
		if code != ExitOK || !strings.HasPrefix(out.String(), c.want) || errb.Len() != 0 {
			t.Errorf("glove %s: exit %d, stdout %q, stderr %q; want 0 and stdout starting %q", strings.Join(c.args, " "), code, out.String(), errb.String(), c.want)
		}
	}
	// A group's help lists each of its subcommands.
	var out bytes.Buffer
	Run([]string{"policy", "--help"}, &out, &bytes.Buffer{})
	for _, sub := range []string{"validate", "explain", "detect", "stage", "generate"} {
		if !strings.Contains(out.String(), "usage: glove policy "+sub) {
			t.Errorf("glove policy --help: %q lacks %s", out.String(), sub)
		}
	}
	// Not help: an unknown subcommand, and --help as a program's argument.
	for _, args := range [][]string{{"policy", "nope"}, {"policy", "nope", "--help"}} {
		var o, e bytes.Buffer
		if code := Run(args, &o, &e); code != ExitUsage || o.Len() != 0 {
			t.Errorf("glove %s: exit %d, stdout %q; want 2 and nothing on stdout", strings.Join(args, " "), code, o.String())
		}
	}
	if u, ok := helpAsked([]string{"run", "--", "sh", "--help"}); ok {
		t.Errorf("glove run -- sh --help is taken as glove's help (%q)", u)
	}
	if u, ok := helpAsked([]string{"run", "sh", "--help"}); ok {
		t.Errorf("glove run sh --help is taken as glove's help (%q)", u)
	}
}

// TestHelpListsCommands: `glove help` lists every command the table
// has, by its full name, and nothing else; each command's own usage
// (its -h) names every flag it has.
func TestHelpListsCommands(t *testing.T) {
	listed := map[string]bool{}
	for _, l := range strings.Split(usage, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "glove" || strings.HasPrefix(f[1], "-") || f[1] == "COMMAND" {
			continue
		}
		name := "glove " + f[1]
		if c, ok := commands[f[1]]; ok && c.subs != nil && len(f) > 2 {
			name += " " + f[2]
		}
		listed[name] = true
	}
	leaves := leafCommands()
	for name := range leaves {
		if !listed[name] {
			t.Errorf("glove help does not list %q", name)
		}
	}
	for name := range listed {
		if _, ok := leaves[name]; !ok {
			t.Errorf("glove help lists %q, which is not a glove command", name)
		}
	}
	var walk func(name string, c *command)
	walk = func(name string, c *command) {
		for sub, sc := range c.subs {
			walk(name+" "+sub, sc)
		}
		for _, f := range commandFlags(c) {
			if !strings.Contains(c.usage, "--"+f) {
				t.Errorf("%s: its usage %q does not name --%s", name, c.usage, f)
			}
		}
	}
	for name, c := range commands {
		walk("glove "+name, c)
	}
}
