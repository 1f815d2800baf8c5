// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// lintianOverrideFiles are the override files of the source package:
// debian/PACKAGE.lintian-overrides (binary packages) and
// debian/source/lintian-overrides.
func lintianOverrideFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../debian/*lintian-overrides")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("../debian/source/lintian-overrides"); err == nil {
		files = append(files, "../debian/source/lintian-overrides")
	}
	return files
}

// TestLintianOverridesCommented holds every override to a reason: the
// line above an override is a comment (lintian shows it with the
// override), or an override of the same tag under that comment.
func TestLintianOverridesCommented(t *testing.T) {
	files := lintianOverrideFiles(t)
	if len(files) == 0 {
		t.Fatal("no debian/*lintian-overrides: the 0750 helpers need one (TestDebLintian)")
	}
	tagOf := func(l string) string { // "[pkg[ type]]: tag [context]" or "tag [context]"
		f := strings.Fields(l)
		for i, w := range f {
			if strings.HasSuffix(w, ":") && i+1 < len(f) {
				return f[i+1]
			}
		}
		return f[0]
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		prev := "" // the line above: "#" for a comment, else the tag it overrides
		for i, l := range strings.Split(string(data), "\n") {
			switch l = strings.TrimSpace(l); {
			case l == "":
				prev = ""
			case strings.HasPrefix(l, "#"):
				if strings.TrimSpace(strings.TrimPrefix(l, "#")) != "" {
					prev = "#"
				}
			default:
				if tag := tagOf(l); prev != "#" && prev != tag {
					t.Errorf("%s:%d: override %q has no comment above it giving the reason", f, i+1, l)
				} else {
					prev = tag
				}
			}
		}
	}
}

// lintianTag is a line of lintian's output: severity, package, tag.
var lintianTag = regexp.MustCompile(`^([EWIXOP]): (\S+)(?: \S+)?: (\S+)`)

// TestDebLintian runs lintian (Debian 12's, from scripts/install-deps.sh
// test) on the .changes of `make deb` (the .deb, the -dbgsym package and
// the .changes itself) and fails on every error or warning, i.e. on every
// E: or W: line that no commented override in debian/ covers, and on an
// override that matches nothing (it would hide a future finding for no
// reason).
func TestDebLintian(t *testing.T) {
	for _, tool := range []string{"lintian", "dpkg-buildpackage", "dh"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipped: %s not found (scripts/install-deps.sh test installs it)", tool)
		}
	}
	_, changes := buildDeb(t)
	// --display-info: the I: tags too, unused-override among them;
	// --show-overrides: the overridden ones as O: lines, for the log.
	cmd := exec.Command("lintian", "--display-info", "--show-overrides", "--fail-on", "none", changes)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("lintian %s: %v\n%s", changes, err, out)
	}
	var checked int
	for _, l := range strings.Split(string(out), "\n") {
		m := lintianTag.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		checked++
		switch {
		case m[1] == "E" || m[1] == "W":
			t.Errorf("lintian: %s (fix it, or override it in debian/ with a comment giving the reason)", l)
		case m[3] == "unused-override" || m[3] == "mismatched-override":
			t.Errorf("lintian: %s (remove or correct the override)", l)
		default:
			t.Logf("lintian: %s", l)
		}
	}
	if checked == 0 {
		t.Errorf("lintian on %s: no tag at all, not even the overridden ones: its output was not read\n%s", filepath.Base(changes), out)
	}
	t.Logf("lintian on %s: %d tags shown", filepath.Base(changes), checked)
}
