// SPDX-License-Identifier: Apache-2.0

package library

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/internal/strictjson"
)

const examplePath = "testdata/example-bundle.json"

// baseDoc is a small valid bundle that the bad-input table mutates.
const baseDoc = `{"schema":"glove.library-bundle-v1","entries":[` +
	`{"kind":"behavior","name":"careful","description":"d","files":[{"path":"BEHAVIOR.md","executable":false,"content":"YQ=="}]},` +
	`{"kind":"skill","name":"pdf","description":"d","files":[{"path":"SKILL.md","executable":false,"content":"YQ=="},{"path":"scripts/run.sh","executable":true,"content":""}]}` +
	`]}`

func rep(old, new string) func() string {
	return func() string {
		if !strings.Contains(baseDoc, old) {
			panic(fmt.Sprintf("base document has no %q", old))
		}
		return strings.Replace(baseDoc, old, new, 1)
	}
}

// entriesDoc is a bundle of n behavior entries.
func entriesDoc(n int) string {
	var b strings.Builder
	b.WriteString(`{"schema":"glove.library-bundle-v1","entries":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"kind":"behavior","name":"e-%04d","files":[{"path":"a","executable":false,"content":""}]}`, i)
	}
	b.WriteString(`]}`)
	return b.String()
}

// filesDoc is a bundle of one prompt entry with n files.
func filesDoc(n int) string {
	var b strings.Builder
	b.WriteString(`{"schema":"glove.library-bundle-v1","entries":[{"kind":"prompt","name":"p","files":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"path":"f%05d","executable":false,"content":""}`, i)
	}
	b.WriteString(`]}]}`)
	return b.String()
}

type badCase struct {
	name     string
	doc      func() string
	sentinel error
	ptr      string // JSON Pointer the message must name
	phrase   string
}

func badDocs() []badCase {
	entry0Files := `"files":[{"path":"BEHAVIOR.md","executable":false,"content":"YQ=="}]`
	return []badCase{
		{"unknown member", rep(`"schema":`, `"extra":1,"schema":`), ErrFormat, "/extra", `unknown member "extra"`},
		{"unknown file member", rep(`"executable":true,`, `"executable":true,"mode":493,`), ErrFormat, "/entries/1/files/1/mode", "unknown member"},
		{"duplicate member", rep(`"name":"careful"`, `"name":"careful","name":"careful"`), ErrFormat, "/entries/0/name", "duplicate member name"},
		{"null", rep(`"description":"d"`, `"description":null`), ErrFormat, "/entries/0/description", "null is not allowed"},
		{"wrong type", rep(`"executable":true`, `"executable":"yes"`), ErrFormat, "/entries/1/files/1/executable", "found a string, want a boolean"},
		{"trailing data", func() string { return baseDoc + "{}" }, ErrFormat, "(root)", "trailing data"},
		{"not an object", func() string { return "[]" }, ErrFormat, "(root)", "must be a JSON object"},
		{"missing schema", rep(`"schema":"glove.library-bundle-v1",`, ``), ErrFormat, "(root)", `missing member "schema"`},
		{"wrong schema", rep(Schema, "glove.library-bundle-v2"), ErrFormat, "/schema", `"glove.library-bundle-v2" is not`},
		{"missing entries", func() string { return `{"schema":"glove.library-bundle-v1"}` }, ErrFormat, "(root)", `missing member "entries"`},
		{"no entries", func() string { return `{"schema":"glove.library-bundle-v1","entries":[]}` }, ErrFormat, "/entries", "0 entries"},
		{"too many entries", func() string { return entriesDoc(MaxEntries + 1) }, ErrFormat, "/entries", "257 entries"},
		{"missing kind", rep(`"kind":"behavior",`, ``), ErrFormat, "/entries/0", `missing member "kind"`},
		{"unknown kind", rep(`"kind":"behavior"`, `"kind":"agent"`), ErrKind, "/entries/0/kind", `entry 0 has kind "agent"`},
		{"kind in upper case", rep(`"kind":"skill"`, `"kind":"Skill"`), ErrKind, "/entries/1/kind", `entry 1 has kind "Skill"`},
		{"missing name", rep(`"name":"careful",`, ``), ErrFormat, "/entries/0", `missing member "name"`},
		{"bad name: upper case", rep(`"name":"careful"`, `"name":"Careful"`), ErrFormat, "/entries/0/name", `name "Careful"`},
		{"bad name: underscore", rep(`"name":"careful"`, `"name":"care_ful"`), ErrFormat, "/entries/0/name", `name "care_ful"`},
		{"bad name: leading hyphen", rep(`"name":"careful"`, `"name":"-careful"`), ErrFormat, "/entries/0/name", `name "-careful"`},
		{"bad name: too long", rep(`"name":"careful"`, `"name":"`+strings.Repeat("a", 65)+`"`), ErrFormat, "/entries/0/name", "is not 1 to 64"},
		{"description too long", rep(`"description":"d"`, `"description":"`+strings.Repeat("d", MaxDescriptionLen+1)+`"`), ErrFormat, "/entries/0/description", "more than 1024"},
		{"unsorted entries", rep(`"kind":"behavior"`, `"kind":"workflow"`), ErrFormat, "/entries/1", "not sorted"},
		{"unsorted names", func() string {
			return strings.Replace(strings.Replace(entriesDoc(2), "e-0000", "zz", 1), "e-0001", "aa", 1)
		}, ErrFormat, "/entries/1", "not sorted"},
		{"duplicate entry", rep(`"kind":"skill","name":"pdf","description":"d","files":[{"path":"SKILL.md","executable":false,"content":"YQ=="},`,
			`"kind":"behavior","name":"careful","description":"d","files":[`), ErrFormat, "/entries/1", "duplicate entry"},
		{"missing files", rep(","+entry0Files, ""), ErrFormat, "/entries/0", `missing member "files"`},
		{"no files", rep(entry0Files, `"files":[]`), ErrFormat, "/entries/0/files", "0 files"},
		{"too many files", func() string { return filesDoc(MaxFilesPerEntry + 1) }, ErrFormat, "/entries/0/files", "1025 files"},
		{"missing path", rep(`"path":"BEHAVIOR.md",`, ``), ErrFormat, "/entries/0/files/0", `missing member "path"`},
		{"missing executable", rep(`"executable":true,`, ``), ErrFormat, "/entries/1/files/1", `missing member "executable"`},
		{"missing content", rep(`,"content":""`, ``), ErrFormat, "/entries/1/files/1", `missing member "content"`},
		{"empty path", rep(`"path":"BEHAVIOR.md"`, `"path":""`), ErrFormat, "/entries/0/files/0/path", "empty"},
		{"absolute path", rep(`"path":"BEHAVIOR.md"`, `"path":"/BEHAVIOR.md"`), ErrFormat, "/entries/0/files/0/path", "absolute"},
		{"dot-dot component", rep(`"path":"BEHAVIOR.md"`, `"path":"../BEHAVIOR.md"`), ErrFormat, "/entries/0/files/0/path", `component ".." is not allowed`},
		{"dot-dot alone", rep(`"path":"BEHAVIOR.md"`, `"path":".."`), ErrFormat, "/entries/0/files/0/path", `component ".." is not allowed`},
		{"dot component", rep(`"path":"BEHAVIOR.md"`, `"path":"./BEHAVIOR.md"`), ErrFormat, "/entries/0/files/0/path", `component "." is not allowed`},
		{"leading dot", rep(`"path":"BEHAVIOR.md"`, `"path":".BEHAVIOR.md"`), ErrFormat, "/entries/0/files/0/path", "starts with a dot"},
		{"leading dot in a directory", rep(`"path":"scripts/run.sh"`, `"path":"scripts/.git/run.sh"`), ErrFormat, "/entries/1/files/1/path", `".git" starts with a dot`},
		{"empty component", rep(`"path":"scripts/run.sh"`, `"path":"scripts//run.sh"`), ErrFormat, "/entries/1/files/1/path", "empty component"},
		{"trailing slash", rep(`"path":"scripts/run.sh"`, `"path":"scripts/"`), ErrFormat, "/entries/1/files/1/path", "empty component"},
		{"too deep", rep(`"path":"scripts/run.sh"`, `"path":"a/b/c/d/e/f/g/h/i"`), ErrFormat, "/entries/1/files/1/path", "9 components, more than 8"},
		{"too long", rep(`"path":"scripts/run.sh"`, `"path":"`+strings.Repeat("s", MaxPathBytes+1)+`"`), ErrFormat, "/entries/1/files/1/path", "256 bytes"},
		{"backslash", rep(`"path":"scripts/run.sh"`, `"path":"scripts\\run.sh"`), ErrFormat, "/entries/1/files/1/path", "outside [A-Za-z0-9._-]"},
		{"space", rep(`"path":"scripts/run.sh"`, `"path":"scripts/run me.sh"`), ErrFormat, "/entries/1/files/1/path", "outside"},
		{"non-ASCII", rep(`"path":"scripts/run.sh"`, `"path":"scripts/r\u00e9sum\u00e9.sh"`), ErrFormat, "/entries/1/files/1/path", "outside"},
		{"control character", rep(`"path":"scripts/run.sh"`, `"path":"scripts/run\n.sh"`), ErrFormat, "/entries/1/files/1/path", "outside"},
		{"unsorted paths", rep(`"path":"scripts/run.sh"`, `"path":"A.md"`), ErrFormat, "/entries/1/files/1/path", `"A.md" follows "SKILL.md"`},
		{"duplicate path", rep(`"path":"scripts/run.sh"`, `"path":"SKILL.md"`), ErrFormat, "/entries/1/files/1/path", `duplicate path "SKILL.md"`},
		{"file and parent", rep(`"path":"scripts/run.sh"`, `"path":"SKILL.md/run.sh"`), ErrFormat, "/entries/1/files/1/path", `lies beneath "SKILL.md", which is a file`},
		{"skill without SKILL.md", rep(`"path":"SKILL.md"`, `"path":"README.md"`), ErrFormat, "/entries/1/files", "has no top-level SKILL.md"},
		{"skill with a nested SKILL.md only", rep(`"path":"SKILL.md"`, `"path":"docs/SKILL.md"`), ErrFormat, "/entries/1/files", "has no top-level SKILL.md"},
		{"bad base64", rep(`"content":"YQ=="`, `"content":"Y*=="`), ErrFormat, "/entries/0/files/0/content", "not standard padded base64"},
		{"unpadded base64", rep(`"content":"YQ=="`, `"content":"YQ"`), ErrFormat, "/entries/0/files/0/content", "not standard padded base64"},
		{"URL-safe base64", rep(`"content":"YQ=="`, `"content":"-_8="`), ErrFormat, "/entries/0/files/0/content", "not standard padded base64"},
		{"non-canonical base64", rep(`"content":"YQ=="`, `"content":"YR=="`), ErrFormat, "/entries/0/files/0/content", "not standard padded base64"},
		{"base64 with a newline", rep(`"content":"YQ=="`, `"content":"YQ==\n"`), ErrFormat, "/entries/0/files/0/content", "not standard padded base64"},
		{"oversize", func() string { return baseDoc + strings.Repeat(" ", MaxBundleBytes+1-len(baseDoc)) }, ErrSize, "(root)", "more than the 16777216 allowed"},
	}
}

// checkRefusal checks that err wraps want, and nothing else of ErrFormat
// and ErrKind unless expected, and is one line naming ptr and phrase.
func checkRefusal(t *testing.T, name string, err, want error, ptr, phrase string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted", name)
		return
	}
	if !errors.Is(err, want) {
		t.Errorf("%s: %v does not wrap %v", name, err, want)
	}
	if want == ErrKind && errors.Is(err, ErrFormat) || want == ErrFormat && errors.Is(err, ErrKind) {
		t.Errorf("%s: %v wraps both ErrFormat and ErrKind", name, err)
	}
	msg := err.Error()
	t.Logf("%s: %.200s", name, msg)
	if strings.ContainsAny(msg, "\n\r") {
		t.Errorf("%s: message is not one line: %q", name, msg)
	}
	if !strings.HasPrefix(msg, "library: ") || !strings.Contains(msg, ptr+": ") || !strings.Contains(msg, phrase) {
		t.Errorf("%s: message %q, want pointer %q and %q", name, msg, ptr, phrase)
	}
}

func TestDecodeRefuses(t *testing.T) {
	cases := badDocs()
	if len(cases) < 20 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, tc := range cases {
		m, err := Decode([]byte(tc.doc()))
		if m != nil {
			t.Errorf("%s: returned a manifest with error %v", tc.name, err)
		}
		checkRefusal(t, tc.name, err, tc.sentinel, tc.ptr, tc.phrase)
		var f *strictjson.Fault
		if err != nil && !errors.As(err, &f) {
			t.Errorf("%s: %v carries no *strictjson.Fault", tc.name, err)
		}
	}
	// The oversized document is refused before parsing and is a format
	// fault as well.
	_, err := Decode(bytes.Repeat([]byte{'x'}, MaxBundleBytes+1))
	if !errors.Is(err, ErrFormat) || !errors.Is(err, ErrSize) {
		t.Errorf("oversize: %v", err)
	}
}

func TestDecodeAccepts(t *testing.T) {
	m, err := Decode([]byte(baseDoc))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Entries) != 2 || m.Entries[1].Files[1].Path != "scripts/run.sh" || !m.Entries[1].Files[1].Executable ||
		string(m.Entries[0].Files[0].Content) != "a" || m.Entries[1].Files[1].Content == nil {
		t.Fatalf("decoded %+v", m)
	}
	// description may be absent: it reads as "".
	m2, err := Decode([]byte(strings.Replace(baseDoc, `"description":"d",`, ``, 1)))
	if err != nil || m2.Entries[0].Description != "" {
		t.Fatalf("absent description: %v", err)
	}
	// Every kind, the limits exactly.
	for _, k := range Kinds() {
		doc := strings.Replace(baseDoc, `"kind":"behavior"`, `"kind":"`+k+`"`, 1)
		if k == KindSkill {
			doc = strings.Replace(doc, `"path":"BEHAVIOR.md"`, `"path":"SKILL.md"`, 1)
			doc = strings.Replace(doc, `"name":"careful"`, `"name":"aaa"`, 1)
		}
		if k > KindSkill {
			continue // would sort after the skill entry
		}
		if _, err := Decode([]byte(doc)); err != nil {
			t.Errorf("kind %s: %v", k, err)
		}
	}
	for _, doc := range []string{
		entriesDoc(MaxEntries),
		filesDoc(MaxFilesPerEntry),
		strings.Replace(baseDoc, `"path":"scripts/run.sh"`, `"path":"a/b/c/d/e/f/g/h"`, 1),
		strings.Replace(baseDoc, `"path":"scripts/run.sh"`, `"path":"`+strings.Repeat("s", MaxPathBytes)+`"`, 1),
		strings.Replace(baseDoc, `"name":"careful"`, `"name":"`+strings.Repeat("a", 64)+`"`, 1),
		strings.Replace(baseDoc, `"name":"careful"`, `"name":"0-a-"`, 1),
		strings.Replace(baseDoc, `"path":"scripts/run.sh"`, `"path":"a..b/x_y-z.sh"`, 1),
		// A file and a sibling that shares its prefix are not in conflict.
		strings.Replace(baseDoc, `{"path":"scripts/run.sh"`, `{"path":"scripts","executable":false,"content":""},{"path":"scripts-x/run.sh"`, 1),
	} {
		if _, err := Decode([]byte(doc)); err != nil {
			t.Errorf("%.80s...: %v", doc, err)
		}
	}
}

func TestExampleAndRoundTrip(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m, m2) {
		t.Fatalf("round trip changed the manifest:\n%+v\n%+v", m, m2)
	}
	enc2, _ := Encode(m2)
	if !bytes.Equal(enc, enc2) {
		t.Fatal("canonical form is not stable")
	}
	for i := range m.Entries {
		if m.Entries[i].Digest() != m2.Entries[i].Digest() {
			t.Errorf("entry %d digest changed", i)
		}
	}
	// The canonical form starts with the sorted members and writes an
	// empty description.
	if !bytes.HasPrefix(enc, []byte(`{"entries":[{"description":"House rules for edits.","files":[{"content":"`)) {
		t.Errorf("canonical form %.80s", enc)
	}
	noDesc := *m
	noDesc.Entries = append([]Entry(nil), m.Entries...)
	noDesc.Entries[0].Description = ""
	enc3, err := Encode(&noDesc)
	if err != nil || !bytes.Contains(enc3, []byte(`"description":""`)) {
		t.Errorf("empty description: %v %s", err, enc3)
	}
}

func TestEntryDigest(t *testing.T) {
	a, err := Decode([]byte(baseDoc))
	if err != nil {
		t.Fatal(err)
	}
	// Another spelling of the same content: whitespace, member order,
	// escapes, an absent description versus "".
	other := `{ "entries" : [ {"files":[{"content":"YQ==","executable":false,"path":"BEHAVIOR.md"}],"description":"\u0064","name":"careful","kind":"behavior"},` +
		`{"kind":"skill","name":"pdf","description":"d","files":[{"path":"SKILL.md","executable":false,"content":"YQ=="},{"path":"scripts/run.sh","executable":true,"content":""}]}],` +
		` "schema":"glove.library-bundle-v1"}`
	b, err := Decode([]byte(other))
	if err != nil {
		t.Fatal(err)
	}
	for i := range a.Entries {
		da, db := a.Entries[i].Digest(), b.Entries[i].Digest()
		if da != db || !ValidDigest(da) {
			t.Errorf("entry %d: %s vs %s", i, da, db)
		}
	}
	c, _ := Decode([]byte(strings.Replace(baseDoc, `"description":"d",`, ``, 1)))
	d, _ := Decode([]byte(strings.Replace(baseDoc, `"description":"d"`, `"description":""`, 1)))
	if c.Entries[0].Digest() != d.Entries[0].Digest() {
		t.Error("absent and empty description digest differently")
	}
	if c.Entries[0].Digest() == a.Entries[0].Digest() {
		t.Error("description does not change the digest")
	}
	e, _ := Decode([]byte(strings.Replace(baseDoc, `"content":"YQ=="`, `"content":"Yg=="`, 1)))
	f, _ := Decode([]byte(strings.Replace(baseDoc, `"executable":true`, `"executable":false`, 1)))
	if e.Entries[0].Digest() == a.Entries[0].Digest() || f.Entries[1].Digest() == a.Entries[1].Digest() {
		t.Error("content or executable bit does not change the digest")
	}
	// A nil and an empty content are the same file.
	x := Entry{Kind: KindPrompt, Name: "x", Files: []File{{Path: "a"}}}
	y := Entry{Kind: KindPrompt, Name: "x", Files: []File{{Path: "a", Content: []byte{}}}}
	if x.Digest() != y.Digest() {
		t.Error("nil and empty content digest differently")
	}
}

func TestEncodeRefuses(t *testing.T) {
	good, err := Decode([]byte(baseDoc))
	if err != nil {
		t.Fatal(err)
	}
	mut := func(f func(m *Manifest)) *Manifest {
		m, _ := Decode([]byte(baseDoc))
		f(m)
		return m
	}
	cases := []struct {
		name     string
		m        *Manifest
		sentinel error
		ptr      string
	}{
		{"nil", nil, ErrFormat, "(root)"},
		{"schema", mut(func(m *Manifest) { m.Schema = "" }), ErrFormat, "/schema"},
		{"kind", mut(func(m *Manifest) { m.Entries[0].Kind = "agent" }), ErrKind, "/entries/0/kind"},
		{"path", mut(func(m *Manifest) { m.Entries[0].Files[0].Path = "../x" }), ErrFormat, "/entries/0/files/0/path"},
		{"invalid UTF-8 description", mut(func(m *Manifest) { m.Entries[0].Description = "\xff" }), ErrFormat, "/entries/0/description"},
		{"no files", mut(func(m *Manifest) { m.Entries[0].Files = nil }), ErrFormat, "/entries/0/files"},
		{"contents too large", mut(func(m *Manifest) {
			m.Entries[0].Files[0].Content = make([]byte, MaxBundleBytes/2+1)
			m.Entries[1].Files[1].Content = make([]byte, MaxBundleBytes/2+1)
		}), ErrSize, "/entries/1/files"},
		{"canonical form too large", mut(func(m *Manifest) {
			m.Entries[0].Files[0].Content = make([]byte, MaxBundleBytes*3/4)
		}), ErrSize, "(root)"},
	}
	for _, tc := range cases {
		_, err := Encode(tc.m)
		checkRefusal(t, tc.name, err, tc.sentinel, tc.ptr, "")
	}
	if _, err := Encode(good); err != nil {
		t.Fatal(err)
	}
}
