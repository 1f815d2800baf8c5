// SPDX-License-Identifier: Apache-2.0

// Package glove_test holds the repository-wide checks of README.md: a
// newcomer follows it as written, so every command, target and path it
// names must exist, and it stays short enough to read in two minutes.
package glove_test

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/operator/cli"
)

const (
	readmePath   = "README.md"
	maxReadme    = 150
	makefilePath = "Makefile"
	cellsPath    = "vmlane/cells"
	ciPath       = ".ci/run"
)

func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatalf("read README: %v", err)
	}
	return string(b)
}

// codeText is what README shows as commands: its inline code spans and
// the lines of its fenced blocks, without a block line's `#` comment
// (a comment is prose about the command, not a command).
func codeText(doc string) []string {
	var out []string
	inBlock := false
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock {
			if i := strings.Index(l, "#"); i >= 0 {
				l = l[:i]
			}
			out = append(out, strings.TrimPrefix(strings.TrimSpace(l), "$ "))
			continue
		}
		for _, m := range codeSpan.FindAllStringSubmatch(l, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

var (
	codeSpan = regexp.MustCompile("`([^`]+)`")
	word     = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)
	assign   = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)
)

// invocations returns, for each place the code text runs cmd, the words
// that follow it up to the first that is not a plain lowercase word
// (a flag, a placeholder, `--`, a path). keepAssign skips make's
// VAR=VALUE arguments instead of stopping at them.
func invocations(code []string, cmd string, keepAssign bool) [][]string {
	var out [][]string
	for _, c := range code {
		f := strings.Fields(c)
		for i := range f {
			if f[i] != cmd {
				continue
			}
			var words []string
			for _, w := range f[i+1:] {
				if keepAssign && assign.MatchString(w) {
					continue
				}
				if !word.MatchString(w) {
					break
				}
				words = append(words, w)
			}
			out = append(out, words)
		}
	}
	return out
}

// TestReadmeLength: README is the two-minute read issue 34 asks for;
// what is longer belongs in docs/.
func TestReadmeLength(t *testing.T) {
	if n := strings.Count(readme(t), "\n"); n > maxReadme {
		t.Errorf("README.md has %d lines, more than %d: move detail into docs/ and link it from README's map", n, maxReadme)
	}
}

// makeTargets are the Makefile's rule targets (a line `a b: deps`,
// neither a variable assignment nor a recipe line nor a special target
// such as .PHONY).
func makeTargets(t *testing.T) map[string]bool {
	b, err := os.ReadFile(makefilePath)
	if err != nil {
		t.Fatalf("read Makefile: %v", err)
	}
	rule := regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9_.-]*(?:[ \t]+[A-Za-z0-9][A-Za-z0-9_.-]*)*)[ \t]*:([^=]|$)`)
	targets := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if m := rule.FindStringSubmatch(l); m != nil {
			for _, name := range strings.Fields(m[1]) {
				targets[name] = true
			}
		}
	}
	return targets
}

// TestReadmeMakeTargets: every `make TARGET` README shows is a rule of
// the Makefile.
func TestReadmeMakeTargets(t *testing.T) {
	targets := makeTargets(t)
	if !targets["test"] || !targets["build"] {
		t.Fatalf("found no test or build rule in the Makefile (parsed %d targets): the rule parser is broken", len(targets))
	}
	seen := map[string]bool{}
	for _, words := range invocations(codeText(readme(t)), "make", true) {
		for _, w := range words {
			if seen[w] {
				continue
			}
			seen[w] = true
			if !targets[w] {
				t.Errorf("README names `make %s`, but the Makefile has no target %q", w, w)
				continue
			}
			t.Logf("make %s: ok", w)
		}
	}
	if len(seen) == 0 {
		t.Error("README names no make target: the two commands (make demo, make test) are gone")
	}
}

// gloveHelp runs `glove WORDS... --help` in process: cli.Run is the
// whole of glove's main, so this is the dispatch the built command
// takes, without building it. Nothing but help is ever asked for, and a
// word is only passed on to a group that lists it, so no command runs.
func gloveHelp(words []string) (string, int) {
	var out, errb bytes.Buffer
	code := cli.Run(append(slices.Clone(words), "--help"), &out, &errb)
	return out.String() + errb.String(), code
}

// usageLine says whether output holds a usage line for the command
// words: "usage: glove WORDS" at the end of a line or before a space.
func usageLine(output string, words []string) bool {
	prefix := "usage: glove " + strings.Join(words, " ")
	sc := bufio.NewScanner(strings.NewReader(output))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == prefix || strings.HasPrefix(l, prefix+" ") {
			return true
		}
	}
	return false
}

// subcommands are the words a group's help lists after its name
// ("usage: glove GROUP SUB ..."); none for a command that is no group.
func subcommands(help string, words []string) []string {
	prefix := "usage: glove " + strings.Join(words, " ") + " "
	var subs []string
	for _, l := range strings.Split(help, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(l), prefix)
		if !ok {
			continue
		}
		if f := strings.Fields(rest); len(f) > 0 && word.MatchString(f[0]) && !slices.Contains(subs, f[0]) {
			subs = append(subs, f[0])
		}
	}
	return subs
}

// checkGlove follows `glove WORDS...` down glove's command tree: each
// level must answer --help with its own usage; a group must list the
// next word as one of its subcommands; a command that is no group takes
// the rest as its arguments.
func checkGlove(words []string) error {
	for n := 1; n <= len(words); n++ {
		cmd := words[:n]
		help, code := gloveHelp(cmd)
		if !usageLine(help, cmd) || strings.Contains(help, "unknown command") || strings.Contains(help, "unknown subcommand") {
			return fmt.Errorf("glove has no command %q: `glove %s --help` exited %d and printed no \"usage: glove %s\" line:\n%s",
				strings.Join(cmd, " "), strings.Join(cmd, " "), code, strings.Join(cmd, " "), firstLines(help, 3))
		}
		subs := subcommands(help, cmd)
		if len(subs) == 0 || n == len(words) {
			return nil
		}
		if !slices.Contains(subs, words[n]) {
			return fmt.Errorf("glove has no command %q: `glove %s --help` lists the subcommands %s",
				strings.Join(words[:n+1], " "), strings.Join(cmd, " "), strings.Join(subs, ", "))
		}
	}
	return nil
}

func firstLines(s string, n int) string {
	l := strings.SplitN(strings.TrimSpace(s), "\n", n+1)
	if len(l) > n {
		l = l[:n]
	}
	return "    " + strings.Join(l, "\n    ")
}

// TestReadmeGloveCommands: every `glove COMMAND [SUBCOMMAND]` README
// shows exists in glove's dispatch (supervisor/operator/cli), taken
// from glove's own answers to --help rather than a list kept here.
func TestReadmeGloveCommands(t *testing.T) {
	seen := map[string]bool{}
	for _, words := range invocations(codeText(readme(t)), "glove", false) {
		key := strings.Join(words, " ")
		if len(words) == 0 || seen[key] {
			continue
		}
		seen[key] = true
		if err := checkGlove(words); err != nil {
			t.Errorf("README names `glove %s`, but %v\n(add the command to glove, or take it out of README)", key, err)
			continue
		}
		t.Logf("glove %s: ok", key)
	}
	if len(seen) == 0 {
		t.Error("README names no glove command")
	}
	// The checker itself: a made-up command and subcommand are refused.
	for _, bad := range [][]string{{"no-such-command"}, {"policy", "no-such-subcommand"}} {
		if checkGlove(bad) == nil {
			t.Errorf("checkGlove accepts `glove %s`", strings.Join(bad, " "))
		}
	}
}

var docPath = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./-])(docs/[A-Za-z0-9_./-]*[A-Za-z0-9_/-])`)

// TestReadmeDocsMap: every docs/ path README names exists, as does
// every relative link target; every entry of docs/ is in README's map,
// so a new document cannot be left out of it.
func TestReadmeDocsMap(t *testing.T) {
	doc := readme(t)
	named := map[string]bool{}
	for _, m := range docPath.FindAllStringSubmatch(doc, -1) {
		named[m[1]] = true
	}
	for _, m := range regexp.MustCompile(`\]\(([^)#]+)\)`).FindAllStringSubmatch(doc, -1) {
		if !strings.Contains(m[1], "://") {
			named[m[1]] = true
		}
	}
	for _, p := range []string{"SECURITY.md", "LICENSE"} {
		if !strings.Contains(doc, p) {
			t.Errorf("README's map lacks %s", p)
		}
		named[p] = true
	}
	for _, p := range slices.Sorted(maps.Keys(named)) {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("README names %s, which does not exist (add it, or take it out of README): %v", p, err)
		}
	}
	entries, err := os.ReadDir("docs")
	if err != nil {
		t.Fatalf("read docs/: %v", err)
	}
	for _, e := range entries {
		p := "docs/" + e.Name()
		if e.IsDir() {
			p += "/"
		}
		if !strings.Contains(doc, p) {
			t.Errorf("README's map of docs/ lacks %s", p)
		}
	}
}

// TestReadmeSupportedHosts: the supported-hosts table is the VM lane's
// matrix, cell for cell (vmlane/cells: one cell a line, its name first).
func TestReadmeSupportedHosts(t *testing.T) {
	doc := readme(t)
	_, section, ok := strings.Cut(doc, "\n## Supported hosts\n")
	if !ok {
		t.Fatal("README has no \"Supported hosts\" section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9-]+)` \\|")
	var table []string
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		table = append(table, m[1])
	}
	b, err := os.ReadFile(cellsPath)
	if err != nil {
		t.Fatalf("read %s: %v", cellsPath, err)
	}
	var cells []string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 0 && !strings.HasPrefix(f[0], "#") {
			cells = append(cells, f[0])
		}
	}
	if len(cells) == 0 {
		t.Fatalf("%s holds no cell", cellsPath)
	}
	if !slices.Equal(table, cells) {
		t.Errorf("README's supported-hosts table has the cells %q; %s has %q", table, cellsPath, cells)
	}
}

// TestReadmeCI: README says CI runs exactly `make test`; .ci/run must.
func TestReadmeCI(t *testing.T) {
	doc := readme(t)
	if !strings.Contains(doc, "CI runs exactly `make test`") || !strings.Contains(doc, ciPath) {
		t.Fatalf("README no longer says that CI runs exactly `make test` (%s): update this test with it", ciPath)
	}
	b, err := os.ReadFile(ciPath)
	if err != nil {
		t.Fatalf("read %s: %v", ciPath, err)
	}
	var cmds []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "set ") || strings.HasPrefix(l, "cd ") {
			continue
		}
		cmds = append(cmds, l)
	}
	if !slices.Equal(cmds, []string{"make test"}) {
		t.Errorf("%s runs %q, not exactly `make test` as README says", ciPath, cmds)
	}
}
