// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// dep5Paragraph is one paragraph of a machine-readable debian/copyright:
// its fields, continuation lines joined with "\n".
type dep5Paragraph map[string]string

func readCopyright(t *testing.T) []dep5Paragraph {
	t.Helper()
	data, err := os.ReadFile("../debian/copyright")
	if err != nil {
		t.Fatal(err)
	}
	var paras []dep5Paragraph
	for _, block := range strings.Split(strings.TrimSpace(string(data)), "\n\n") {
		p := dep5Paragraph{}
		key := ""
		for _, l := range strings.Split(block, "\n") {
			if strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t") {
				if key == "" {
					t.Fatalf("debian/copyright: continuation line before any field: %q", l)
				}
				p[key] += "\n" + strings.TrimSpace(l)
				continue
			}
			k, v, ok := strings.Cut(l, ":")
			if !ok {
				t.Fatalf("debian/copyright: not a field: %q", l)
			}
			key = k
			p[key] = strings.TrimSpace(v)
		}
		paras = append(paras, p)
	}
	if len(paras) == 0 || paras[0]["Format"] != "https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" {
		t.Fatal("debian/copyright: the first paragraph is not DEP-5's header (Format: .../copyright-format/1.0/)")
	}
	return paras
}

// makefileCmds are the executables' main packages, as the Makefile's
// build target lists them, by the way each is built: cgo, cgo static
// (tags netgo,osusergo), or without cgo.
func makefileCmds(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	out := map[string][]string{}
	for _, v := range []string{"CGO_CMDS", "STATIC_CMDS", "NOCGO_CMDS"} {
		m := regexp.MustCompile(`(?m)^` + v + `\s*:=(.*)$`).FindStringSubmatch(text)
		if m == nil || len(strings.Fields(m[1])) == 0 {
			t.Fatalf("Makefile: no %s", v)
		}
		out[v] = strings.Fields(m[1])
	}
	return out
}

// linkedModules lists the Go modules the executables link (go list
// -deps, built as the Makefile builds each), the main module left out.
func linkedModules(t *testing.T) map[string]string {
	t.Helper()
	mods := map[string]string{}
	for set, cmds := range makefileCmds(t) {
		args := []string{"list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}"}
		env := append(os.Environ(), "CGO_ENABLED=1")
		switch set {
		case "STATIC_CMDS":
			args = append(args, "-tags", "netgo,osusergo")
		case "NOCGO_CMDS":
			env = append(os.Environ(), "CGO_ENABLED=0")
		}
		cmd := exec.Command("go", append(args, cmds...)...)
		cmd.Dir = ".."
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %v: %v", cmds, err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if path, version, ok := strings.Cut(l, " "); ok {
				mods[path] = version
			}
		}
	}
	if len(mods) == 0 {
		t.Fatal("go list -deps: no module besides the main one: the listing is wrong")
	}
	return mods
}

// words is a licence text as its sequence of words, lowercased, so that
// the copy in debian/copyright (re-wrapped, " ." for blank lines) and
// the module's LICENSE compare.
func words(s string) string {
	s = regexp.MustCompile(`(?m)^\s*\.\s*$`).ReplaceAllString(s, "")
	return strings.Join(strings.Fields(strings.ToLower(s)), " ")
}

// TestCopyrightModules: debian/copyright names, by a Files stanza
// vendor/MODULE/*, exactly the Go modules the executables link (a module
// added to or dropped from the build fails here until its stanza is
// written or removed), each with a copyright holder and a licence whose
// text the stanza's License gives, as the module's LICENSE in the module
// cache has it (a module whose licence changes on an update fails too).
// Files: * is Glove's own: Apache-2.0. Every License has its text or a
// pointer to /usr/share/common-licenses.
func TestCopyrightModules(t *testing.T) {
	paras := readCopyright(t)
	standalone := map[string]string{} // licence name -> text
	for _, p := range paras[1:] {
		if _, ok := p["Files"]; !ok {
			name, text, _ := strings.Cut(p["License"], "\n")
			if name == "" || strings.TrimSpace(text) == "" {
				t.Errorf("debian/copyright: standalone License paragraph %q without text", name)
			}
			standalone[name] = text
		}
	}
	licenceText := func(p dep5Paragraph) (string, string) {
		name, text, _ := strings.Cut(p["License"], "\n")
		if strings.TrimSpace(text) == "" {
			text = standalone[name]
		}
		return name, text
	}
	named := map[string]dep5Paragraph{}
	for _, p := range paras[1:] {
		files, ok := p["Files"]
		if !ok {
			continue
		}
		name, text := licenceText(p)
		if strings.TrimSpace(p["Copyright"]) == "" {
			t.Errorf("debian/copyright: Files: %s has no Copyright", files)
		}
		if strings.TrimSpace(text) == "" {
			t.Errorf("debian/copyright: Files: %s: License %q has neither its text nor a standalone paragraph", files, name)
		}
		if strings.Contains(text, "/usr/share/common-licenses/") {
			ptr := regexp.MustCompile(`/usr/share/common-licenses/[A-Za-z0-9.+-]+`).FindString(text)
			if filepath.Base(ptr) != name {
				t.Errorf("debian/copyright: License %s points to %s", name, ptr)
			}
			if _, err := os.Stat(ptr); err != nil {
				t.Errorf("debian/copyright: License %s points to %s (base-files ships it): %v", name, ptr, err)
			}
		}
		switch {
		case files == "*":
			if name != "Apache-2.0" || !strings.Contains(text, "/usr/share/common-licenses/Apache-2.0") {
				t.Errorf("debian/copyright: Files: * is %s, want Apache-2.0 with the pointer to /usr/share/common-licenses/Apache-2.0", name)
			}
		case strings.HasPrefix(files, "vendor/") && strings.HasSuffix(files, "/*"):
			named[strings.TrimSuffix(strings.TrimPrefix(files, "vendor/"), "/*")] = p
		}
	}
	mods := linkedModules(t)
	var linked, listed []string
	for m := range mods {
		linked = append(linked, m)
	}
	for m := range named {
		listed = append(listed, m)
	}
	sort.Strings(linked)
	sort.Strings(listed)
	if !slices.Equal(linked, listed) {
		t.Errorf("debian/copyright names the modules %v, the executables link %v", listed, linked)
	}

	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	cache := strings.TrimSpace(string(out))
	for _, m := range linked {
		p, ok := named[m]
		if !ok {
			continue
		}
		name, text := licenceText(p)
		dir := filepath.Join(cache, m+"@"+mods[m])
		lic, err := os.ReadFile(filepath.Join(dir, "LICENSE"))
		if err != nil {
			t.Errorf("module %s: %v", m, err)
			continue
		}
		have := words(string(lic))
		if name == "Apache-2.0" {
			if !strings.Contains(have, "apache license version 2.0, january 2004") {
				t.Errorf("module %s: debian/copyright says Apache-2.0, its LICENSE is not", m)
			}
			continue
		}
		// The stanza's text, every sentence of it, is the module's LICENSE
		// without its copyright lines (those are the stanza's Copyright).
		var kept []string
		for _, l := range strings.Split(string(lic), "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "Copyright") {
				kept = append(kept, l)
			}
		}
		if w := words(text); !strings.Contains(words(strings.Join(kept, "\n")), w) {
			t.Errorf("module %s: the text of License %s in debian/copyright is not its LICENSE's (%s)", m, name, filepath.Join(dir, "LICENSE"))
		}
		for _, l := range strings.Split(string(lic), "\n") {
			if c, ok := strings.CutPrefix(strings.TrimSpace(l), "Copyright"); ok {
				holder := strings.TrimSpace(regexp.MustCompile(`^\s*(\(c\)|©)?\s*[0-9, -]*`).ReplaceAllString(c, ""))
				holder = strings.TrimSuffix(strings.TrimSuffix(holder, " All rights reserved."), ".")
				if !strings.Contains(p["Copyright"], holder) {
					t.Errorf("module %s: LICENSE says %q, debian/copyright's Copyright %q lacks %q", m, strings.TrimSpace(l), p["Copyright"], holder)
				}
			}
		}
	}
}
