// SPDX-License-Identifier: Apache-2.0

// Package manpage reads the man pages in docs/man for the tests that hold
// them to the code (glove's commands, gloved's flags, each helper's
// requests and capabilities): a page's sections, subsections and the tag
// of each .TP item, parsed strictly enough that a page written outside
// the conventions fails its test rather than passing unread.
package manpage

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
)

// Page is a parsed man page.
type Page struct {
	Sections []*Section
}

// Section is one .SH: its text before the first .SS is Subs[0], whose
// Name is empty.
type Section struct {
	Name string
	Subs []*Sub
}

// Sub is one .SS (or a section's text before its first .SS): the tag
// line of each of its .TP items, in order, and its lines.
type Sub struct {
	Name  string
	Tags  []string
	Lines []string
}

// Parse reads a page's roff source. A .TP with no tag line after it, or
// a .SH or .SS without a name, is an error.
func Parse(src string) (*Page, error) {
	p := &Page{}
	var sec *Section
	var sub *Sub
	lines := strings.Split(src, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		macro, arg, _ := strings.Cut(l, " ")
		arg = unquote(arg)
		switch macro {
		case ".SH":
			if arg == "" {
				return nil, fmt.Errorf("line %d: .SH without a name", i+1)
			}
			sec = &Section{Name: arg}
			sub = &Sub{}
			sec.Subs = append(sec.Subs, sub)
			p.Sections = append(p.Sections, sec)
			continue
		case ".SS":
			if sec == nil || arg == "" {
				return nil, fmt.Errorf("line %d: .SS without a name, or before any .SH", i+1)
			}
			sub = &Sub{Name: arg}
			sec.Subs = append(sec.Subs, sub)
			continue
		}
		if sub == nil {
			continue // the preamble: comments and .TH
		}
		sub.Lines = append(sub.Lines, l)
		if l == ".TP" {
			if i+1 >= len(lines) || lines[i+1] == "" || strings.HasPrefix(lines[i+1], ".TP") {
				return nil, fmt.Errorf("line %d: .TP without a tag line", i+1)
			}
			sub.Tags = append(sub.Tags, lines[i+1])
		}
	}
	return p, nil
}

func unquote(s string) string {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	return s
}

// Section is the page's .SH named name, nil without one.
func (p *Page) Section(name string) *Section {
	for _, s := range p.Sections {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// Text is all of a section's lines.
func (s *Section) Text() string {
	var b strings.Builder
	for _, sub := range s.Subs {
		b.WriteString(strings.Join(sub.Lines, "\n"))
		b.WriteByte('\n')
	}
	return b.String()
}

// Tags is every .TP tag line of a section, its subsections' included.
func (s *Section) Tags() []string {
	var out []string
	for _, sub := range s.Subs {
		out = append(out, sub.Tags...)
	}
	return out
}

// boldTag is a tag line that starts with one bold word: \fBWORD\fR.
var boldTag = regexp.MustCompile(`^\\fB((?:[A-Za-z0-9_.]|\\-)+)\\fR(?:$|[ (,])`)

// BoldWord is the bold word a tag line starts with ("\fB\-\-socket\fR
// \fIPATH\fR" is "--socket"), the roff hyphens \- read as "-".
func BoldWord(tag string) (string, bool) {
	m := boldTag.FindStringSubmatch(tag)
	if m == nil {
		return "", false
	}
	return strings.ReplaceAll(m[1], `\-`, "-"), true
}

// Flags is the flag each tag line names, as BoldWord reads it without
// its leading "--"; a tag that is not a flag so written is an error.
func Flags(tags []string) ([]string, error) {
	var out []string
	for _, t := range tags {
		w, ok := BoldWord(t)
		if !ok || !strings.HasPrefix(w, "--") || len(w) < 3 {
			return nil, fmt.Errorf("tag %q is not a flag written \\fB\\-\\-NAME\\fR", t)
		}
		out = append(out, w[2:])
	}
	return out, nil
}

var flagMention = regexp.MustCompile(`\\-\\-((?:[a-z0-9]|\\-)+)`)

// FlagMentions is every flag named anywhere in src as \-\-NAME, without
// its "--".
func FlagMentions(src string) []string {
	var out []string
	for _, m := range flagMention.FindAllStringSubmatch(src, -1) {
		out = append(out, strings.ReplaceAll(m[1], `\-`, "-"))
	}
	return out
}

// Dir is docs/man in the source tree, found from this file's directory.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "docs", "man")
}

// Read reads and parses docs/man/name.
func Read(name string) (*Page, string, error) {
	b, err := os.ReadFile(filepath.Join(Dir(), name))
	if err != nil {
		return nil, "", fmt.Errorf("read man page: %w", err)
	}
	p, err := Parse(string(b))
	if err != nil {
		return nil, "", fmt.Errorf("man page %s: %w", name, err)
	}
	return p, string(b), nil
}

// Lint formats the page at path with groff's man macros, every warning
// enabled (-ww), output discarded (-z): any line groff writes is a fault
// of the page. It returns exec.ErrNotFound when groff is not installed.
func Lint(path string) error {
	groff, err := exec.LookPath("groff")
	if err != nil {
		return err
	}
	var out bytes.Buffer
	cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z", path)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("groff %s: %w: %s", path, err, out.String())
	}
	if out.Len() != 0 {
		return fmt.Errorf("groff %s: %s", path, strings.TrimSpace(out.String()))
	}
	return nil
}
