// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/cgroup"
	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/loopext4"
	"github.com/glove-sandbox/glove/helpers/mounter"
	"github.com/glove-sandbox/glove/helpers/streamproxy"
	"github.com/glove-sandbox/glove/helpers/userns"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/cgwire"
	"github.com/glove-sandbox/glove/helpers/wire/formatwire"
	"github.com/glove-sandbox/glove/helpers/wire/loopwire"
	"github.com/glove-sandbox/glove/helpers/wire/mountwire"
	"github.com/glove-sandbox/glove/helpers/wire/streamwire"
	"github.com/glove-sandbox/glove/helpers/wire/userwire"
	"github.com/glove-sandbox/glove/packaging/manpage"
)

// manPageName is the page of an installed executable: section 1 for the
// operator's command, 8 for the service and everything it starts.
func manPageName(e captable.Entry) string {
	if e.Dir == captable.DirBin && e.Binary == "glove" {
		return e.Binary + ".1"
	}
	return e.Binary + ".8"
}

// TestManPagesExist: docs/man holds one page for each executable of the
// capability table and nothing else, and groff formats each without a
// warning (-ww).
func TestManPagesExist(t *testing.T) {
	var want []string
	for _, e := range captable.Table {
		want = append(want, manPageName(e))
	}
	entries, err := os.ReadDir(manpage.Dir())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("docs/man holds %v; the capability table's executables want %v", got, want)
	}
	if _, err := exec.LookPath("groff"); err != nil {
		t.Skip("groff is not installed (scripts/install-deps.sh test installs groff-base): pages not linted")
	}
	for _, name := range got {
		if err := manpage.Lint(filepath.Join(manpage.Dir(), name)); err != nil {
			t.Error(err)
		}
	}
}

// protocols are the helpers' wire declarations, by the package the
// capability table names.
var protocols = map[string]*wire.Protocol{
	"helpers/wire/mountwire":  mountwire.Protocol,
	"helpers/wire/loopwire":   loopwire.Protocol,
	"helpers/wire/formatwire": formatwire.Protocol,
	"helpers/wire/cgwire":     cgwire.Protocol,
	"helpers/wire/streamwire": streamwire.Protocol,
	"helpers/wire/userwire":   userwire.Protocol,
}

// boundsTypes are the helpers' bounds, by file name.
var boundsTypes = map[string]helperkit.Config{
	"mounter.json": &mounter.Config{}, "loopext4.json": &loopext4.Config{},
	"cgroup.json": &cgroup.Config{}, "streamproxy.json": &streamproxy.Config{},
	"userns.json": &userns.Config{},
}

var capMention = regexp.MustCompile(`CAP_[A-Z_]+`)

// TestManPageHelpers holds each helper's page, an auditor's entry point,
// to what the helper is: its CAPABILITIES list (.TP tags \fBCAP_NAME\fR)
// exactly its row of the capability table, and the section names no
// other capability; its REQUESTS (.TP tags \fBName\fR (0xTYPE...)) exactly
// the requests its wire package declares, in order, with their type
// numbers; its FILES its bounds file with each member of the bounds in
// bold; its SEE ALSO its section of SECURITY.md, which must exist, and
// every other helper's page.
func TestManPageHelpers(t *testing.T) {
	security, err := os.ReadFile("../SECURITY.md")
	if err != nil {
		t.Fatal(err)
	}
	var helpers []string
	for _, e := range captable.Table {
		if e.Helper {
			helpers = append(helpers, e.Binary)
		}
	}
	for _, e := range captable.Table {
		if !e.Helper {
			continue
		}
		name := manPageName(e)
		page, _, err := manpage.Read(name)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, fault := range helperPageFaults(e, page, string(security), helpers) {
			t.Errorf("%s: %s", name, fault)
		}
	}
}

func helperPageFaults(e captable.Entry, page *manpage.Page, security string, helpers []string) []string {
	var faults []string
	fail := func(format string, a ...any) { faults = append(faults, fmt.Sprintf(format, a...)) }

	// Capabilities: the row's, in setcap's spelling upper-cased.
	var wantCaps []string
	for _, c := range e.Caps {
		wantCaps = append(wantCaps, strings.ToUpper(c.Name))
	}
	if sec := page.Section("CAPABILITIES"); sec == nil {
		fail("no CAPABILITIES section")
	} else {
		var got []string
		for _, tag := range sec.Tags() {
			w, ok := manpage.BoldWord(tag)
			if !ok || !strings.HasPrefix(w, "CAP_") {
				fail("CAPABILITIES: tag %q is not \\fBCAP_NAME\\fR", tag)
				continue
			}
			got = append(got, w)
		}
		slices.Sort(got)
		slices.Sort(wantCaps)
		if !slices.Equal(got, wantCaps) {
			fail("CAPABILITIES lists %v; the capability table's row holds %v", got, wantCaps)
		}
		for _, c := range capMention.FindAllString(sec.Text(), -1) {
			if !slices.Contains(wantCaps, c) {
				fail("CAPABILITIES names %s, which the helper does not hold", c)
			}
		}
	}

	// Requests: the wire declaration's, in order, with type numbers.
	if e.Protocol != "" {
		p, ok := protocols[e.Protocol]
		sec := page.Section("REQUESTS")
		switch {
		case !ok:
			fail("the test knows no wire declaration %s: add it to protocols", e.Protocol)
		case sec == nil:
			fail("no REQUESTS section")
		default:
			var want, got []string
			for _, d := range p.Routes() {
				want = append(want, fmt.Sprintf("%s %#04x", strings.TrimSuffix(d.Request().Go().Elem().Name(), "Request"), uint16(d.Type())))
			}
			for _, tag := range sec.Tags() {
				w, ok := manpage.BoldWord(tag)
				_, rest, _ := strings.Cut(tag, `\fR`)
				num, _, _ := strings.Cut(strings.TrimSpace(rest), ",")
				num, _, _ = strings.Cut(num, ")")
				if !ok {
					fail("REQUESTS: tag %q is not \\fBName\\fR (0xTYPE...)", tag)
					continue
				}
				got = append(got, w+" "+strings.TrimPrefix(num, "("))
			}
			if !slices.Equal(got, want) {
				fail("REQUESTS lists %v; %s declares %v", got, e.Protocol, want)
			}
		}
	}

	// The bounds file and each of its members.
	if e.Bounds != "" {
		sec := page.Section("FILES")
		cfg, ok := boundsTypes[e.Bounds]
		switch {
		case !ok:
			fail("the test knows no bounds type for %s: add it to boundsTypes", e.Bounds)
		case sec == nil:
			fail("no FILES section")
		default:
			if !strings.Contains(sec.Text(), "\n.I /etc/glove/"+e.Bounds+"\n") {
				fail("FILES does not name /etc/glove/%s (as a .TP tag .I /etc/glove/%s)", e.Bounds, e.Bounds)
			}
			var members []string
			for _, sub := range sec.Subs {
				for _, tag := range sub.Tags {
					if w, ok := manpage.BoldWord(tag); ok {
						members = append(members, w)
					}
				}
			}
			var want []string
			t := reflect.TypeOf(cfg).Elem()
			for i := range t.NumField() {
				if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" {
					want = append(want, name)
				}
			}
			slices.Sort(members)
			slices.Sort(want)
			if !slices.Equal(members, want) {
				fail("FILES describes bounds members %v; %s has %v", members, e.Bounds, want)
			}
		}
	}

	// SEE ALSO: its SECURITY.md section, and the other helpers' pages.
	if sec := page.Section("SEE ALSO"); sec == nil {
		fail("no SEE ALSO section")
	} else {
		text := strings.ReplaceAll(sec.Text(), `\-`, "-")
		if heading := securitySection(security, e); heading == "" {
			fail("SECURITY.md has no section for %s (a heading that is its name, or holds it in parentheses)", e.Binary)
		} else if !strings.Contains(text, "SECURITY.md") || !strings.Contains(text, `"`+heading+`"`) {
			fail("SEE ALSO does not point to SECURITY.md's section \"%s\"", heading)
		}
		for _, h := range helpers {
			if h != e.Binary && !strings.Contains(text, ".BR "+h+" (8)") {
				fail("SEE ALSO does not name %s(8)", h)
			}
		}
	}
	return faults
}

// securitySection is the heading of SECURITY.md's section on e: the one
// named after it ("### glove-mounter") or holding its name in
// parentheses ("## The sandbox (glove-shim)"); for a helper another
// starts, its starter's, which describes both. Empty without one.
func securitySection(security string, e captable.Entry) string {
	name := e.Binary
	if e.StartedBy != "" {
		name = e.StartedBy
	}
	for _, l := range strings.Split(security, "\n") {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		if h == name || strings.Contains(h, "("+name+")") {
			return h
		}
	}
	return ""
}

// TestManPageLintFails: the lint sees a page fault (an unknown macro),
// so a clean run means something.
func TestManPageLintFails(t *testing.T) {
	if _, err := exec.LookPath("groff"); err != nil {
		t.Skip("groff is not installed")
	}
	bad := filepath.Join(t.TempDir(), "bad.8")
	if err := os.WriteFile(bad, []byte(".TH BAD 8\n.SH NAME\nbad\n.XX unknown\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := manpage.Lint(bad); err == nil || errors.Is(err, exec.ErrNotFound) {
		t.Errorf("Lint of a page with an unknown macro: %v, want a warning", err)
	}
}
