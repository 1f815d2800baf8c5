// SPDX-License-Identifier: Apache-2.0

package library

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/glove-sandbox/glove/names"
	"github.com/glove-sandbox/glove/supervisor/internal/strictjson"
)

// Schema is the value of a bundle's "schema" member.
const Schema = "glove.library-bundle-v1"

// MaxBundleBytes bounds a bundle file and, separately, the sum of the
// decoded contents of all its files.
const MaxBundleBytes = 16 << 20

// Entry kinds. The set is closed: any other kind fails closed (ErrKind).
const (
	KindSkill    = "skill"
	KindBehavior = "behavior"
	KindPrompt   = "prompt"
	KindTemplate = "template"
	KindWorkflow = "workflow"
)

// Structural limits (see the package documentation).
const (
	MaxEntries        = 256
	MaxFilesPerEntry  = 1024
	MaxPathBytes      = 255
	MaxPathDepth      = 8
	MaxDescriptionLen = 1024
	// SkillFile is the file every skill entry must hold at its top level.
	SkillFile = "SKILL.md"
)

// Sentinel errors. Every refusal of this package wraps exactly one of
// them (and, for a format fault, the *strictjson.Fault naming the JSON
// Pointer); its message says which bundle and why, on one line.
var (
	// ErrDigest: the SHA-256 of the file is not the digest it is named by.
	ErrDigest = errors.New("digest mismatch")
	// ErrMode: permission bits other than 0700 (root) or 0600 (bundle).
	ErrMode = errors.New("wrong mode")
	// ErrLinks: a bundle file with more than one hard link.
	ErrLinks = errors.New("more than one link")
	// ErrSize: a bundle larger than MaxBundleBytes.
	ErrSize = errors.New("too large")
	// ErrKind: an entry kind outside the closed set.
	ErrKind = errors.New("unknown entry kind")
	// ErrFormat: a bundle document (or a digest string) that breaks the
	// format rules.
	ErrFormat = errors.New("invalid bundle format")
	// ErrOwner: a root or bundle not owned by the effective uid.
	ErrOwner = errors.New("wrong owner")
	// ErrType: not a directory (root), not a regular file (bundle), or a
	// symbolic link.
	ErrType = errors.New("wrong file type")
	// ErrChanged: the bundle file changed while it was being read.
	ErrChanged = errors.New("changed while read")
)

// Manifest is a decoded bundle document.
type Manifest struct {
	Schema  string  `json:"schema"`
	Entries []Entry `json:"entries"`
}

// Entry is one named item of a bundle.
type Entry struct {
	Kind        string `json:"kind"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Files       []File `json:"files"`
}

// File is one file of an entry.
type File struct {
	Path       string `json:"path"`
	Executable bool   `json:"executable"`
	Content    []byte `json:"content"` // base64 (standard, padded) in JSON
}

// Kinds lists the entry kinds, sorted.
func Kinds() []string {
	return []string{KindBehavior, KindPrompt, KindSkill, KindTemplate, KindWorkflow}
}

func validKind(k string) bool {
	switch k {
	case KindSkill, KindBehavior, KindPrompt, KindTemplate, KindWorkflow:
		return true
	}
	return false
}

var (
	componentRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	hexRE       = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// ValidDigest reports whether s is 64 lowercase hex characters, the only
// spelling of a bundle digest.
func ValidDigest(s string) bool { return hexRE.MatchString(s) }

// decodeError is a format fault: the sentinel (ErrFormat or ErrKind)
// and the fault with its JSON Pointer.
type decodeError struct {
	sentinel error
	fault    *strictjson.Fault
	// also is a second sentinel: ErrFormat beside ErrSize.
	also error
}

func (e *decodeError) Error() string  { return "library: " + e.detail() }
func (e *decodeError) detail() string { return e.sentinel.Error() + ": " + e.fault.Error() }

func (e *decodeError) Unwrap() []error {
	if e.also != nil {
		return []error{e.sentinel, e.also, e.fault}
	}
	return []error{e.sentinel, e.fault}
}

// sizef is a size fault: it wraps ErrSize and ErrFormat.
func sizef(ptr, format string, args ...any) error {
	return &decodeError{ErrSize, strictjson.Faultf(ptr, format, args...), ErrFormat}
}

func formatf(ptr, format string, args ...any) error {
	return &decodeError{sentinel: ErrFormat, fault: strictjson.Faultf(ptr, format, args...)}
}

// The wire types mirror Manifest, Entry and File with pointers, so that
// an absent member (nil; null itself is refused by strictjson) can be
// told from an empty one; content is a string so that its base64 is
// checked strictly here.
type wireManifest struct {
	Schema  *string      `json:"schema"`
	Entries *[]wireEntry `json:"entries"`
}

type wireEntry struct {
	Kind        *string     `json:"kind"`
	Name        *string     `json:"name"`
	Description *string     `json:"description"`
	Files       *[]wireFile `json:"files"`
}

type wireFile struct {
	Path       *string `json:"path"`
	Executable *bool   `json:"executable"`
	Content    *string `json:"content"`
}

func missing(ptr, member string) error {
	return formatf(ptr, "missing member %q", member)
}

// Decode strictly decodes and validates a bundle document of at most
// MaxBundleBytes. Every refusal wraps ErrFormat, or ErrKind for an
// unknown entry kind, together with the *strictjson.Fault naming the
// JSON Pointer of the fault.
func Decode(data []byte) (*Manifest, error) {
	if len(data) > MaxBundleBytes {
		return nil, sizef("", "document is %d bytes, more than the %d allowed", len(data), MaxBundleBytes)
	}
	var w wireManifest
	if err := strictjson.Unmarshal(data, &w, MaxBundleBytes); err != nil {
		var f *strictjson.Fault
		if errors.As(err, &f) {
			return nil, &decodeError{sentinel: ErrFormat, fault: f}
		}
		return nil, fmt.Errorf("library: %w: %w", ErrFormat, err)
	}
	if w.Schema == nil {
		return nil, missing("", "schema")
	}
	if *w.Schema != Schema {
		return nil, formatf("/schema", "schema %q is not %q", *w.Schema, Schema)
	}
	if w.Entries == nil {
		return nil, missing("", "entries")
	}
	m := &Manifest{Schema: *w.Schema, Entries: make([]Entry, 0, len(*w.Entries))}
	if n := len(*w.Entries); n == 0 || n > MaxEntries {
		return nil, formatf("/entries", "%d entries; a bundle holds 1 to %d", n, MaxEntries)
	}
	var total int
	for i, we := range *w.Entries {
		at := strictjson.Ptr("entries", i)
		switch {
		case we.Kind == nil:
			return nil, missing(at, "kind")
		case we.Name == nil:
			return nil, missing(at, "name")
		case we.Files == nil:
			return nil, missing(at, "files")
		}
		e := Entry{Kind: *we.Kind, Name: *we.Name, Files: make([]File, 0, len(*we.Files))}
		if we.Description != nil {
			e.Description = *we.Description
		}
		if len(*we.Files) > MaxFilesPerEntry {
			// Checked before the contents are decoded.
			return nil, formatf(strictjson.Join(at, "files"), "%d files; an entry holds 1 to %d", len(*we.Files), MaxFilesPerEntry)
		}
		for j, wf := range *we.Files {
			fat := strictjson.Join(at, "files", j)
			switch {
			case wf.Path == nil:
				return nil, missing(fat, "path")
			case wf.Executable == nil:
				return nil, missing(fat, "executable")
			case wf.Content == nil:
				return nil, missing(fat, "content")
			}
			// Strict refuses non-zero padding bits; line breaks, which the
			// decoder would skip, are refused here: one content, one
			// spelling.
			content, err := base64.StdEncoding.Strict().DecodeString(*wf.Content)
			if err == nil && strings.ContainsAny(*wf.Content, "\r\n") {
				err = errors.New("line break in base64 data")
			}
			if err != nil {
				return nil, formatf(strictjson.Join(fat, "content"), "not standard padded base64: %v", err)
			}
			if total += len(content); total > MaxBundleBytes {
				return nil, sizef(strictjson.Join(fat, "content"), "the decoded contents exceed %d bytes in total", MaxBundleBytes)
			}
			e.Files = append(e.Files, File{Path: *wf.Path, Executable: *wf.Executable, Content: content})
		}
		m.Entries = append(m.Entries, e)
	}
	if err := validate(m); err != nil {
		return nil, err
	}
	return m, nil
}

// validate applies every rule of the format to m (a decoded manifest or
// one built in Go).
func validate(m *Manifest) error {
	if m == nil {
		return formatf("", "no manifest")
	}
	if m.Schema != Schema {
		return formatf("/schema", "schema %q is not %q", m.Schema, Schema)
	}
	if n := len(m.Entries); n == 0 || n > MaxEntries {
		return formatf("/entries", "%d entries; a bundle holds 1 to %d", n, MaxEntries)
	}
	var total int
	for i := range m.Entries {
		e := &m.Entries[i]
		at := strictjson.Ptr("entries", i)
		if err := validateEntry(at, i, e); err != nil {
			return err
		}
		for _, f := range e.Files {
			total += len(f.Content)
		}
		if total > MaxBundleBytes {
			return sizef(strictjson.Join(at, "files"), "the decoded contents exceed %d bytes in total", MaxBundleBytes)
		}
		if i > 0 {
			p := &m.Entries[i-1]
			switch c := compareEntries(p, e); {
			case c == 0:
				return formatf(at, "duplicate entry (kind %q, name %q), also entry %d", e.Kind, e.Name, i-1)
			case c > 0:
				return formatf(at, "entries are not sorted by (kind, name): (%q, %q) follows (%q, %q)", e.Kind, e.Name, p.Kind, p.Name)
			}
		}
	}
	return nil
}

func compareEntries(a, b *Entry) int {
	if c := strings.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// validateEntry checks one entry on its own; i is its index, at its
// JSON Pointer.
func validateEntry(at string, i int, e *Entry) error {
	if !validKind(e.Kind) {
		return &decodeError{sentinel: ErrKind, fault: strictjson.Faultf(strictjson.Join(at, "kind"),
			"entry %d has kind %q; the kinds are %s", i, e.Kind, strings.Join(Kinds(), ", "))}
	}
	if !names.Name(e.Name) {
		return formatf(strictjson.Join(at, "name"), "name %q is not 1 to 64 of [a-z0-9-] starting with a letter or digit", e.Name)
	}
	if !utf8.ValidString(e.Description) {
		return formatf(strictjson.Join(at, "description"), "description is not valid UTF-8")
	}
	if len(e.Description) > MaxDescriptionLen {
		return formatf(strictjson.Join(at, "description"), "description is %d bytes, more than %d", len(e.Description), MaxDescriptionLen)
	}
	if n := len(e.Files); n == 0 || n > MaxFilesPerEntry {
		return formatf(strictjson.Join(at, "files"), "%d files; an entry holds 1 to %d", n, MaxFilesPerEntry)
	}
	paths := make(map[string]bool, len(e.Files))
	for j := range e.Files {
		f := &e.Files[j]
		pat := strictjson.Join(at, "files", j, "path")
		if err := checkPath(f.Path); err != nil {
			return formatf(pat, "path %q: %s", f.Path, err)
		}
		if j > 0 {
			prev := e.Files[j-1].Path
			switch c := strings.Compare(prev, f.Path); {
			case c == 0:
				return formatf(pat, "duplicate path %q", f.Path)
			case c > 0:
				return formatf(pat, "paths are not sorted bytewise: %q follows %q", f.Path, prev)
			}
		}
		paths[f.Path] = true
	}
	// A path may not be both a file and the parent of another file.
	for j := range e.Files {
		p := e.Files[j].Path
		for k := strings.IndexByte(p, '/'); k >= 0; k = nextSlash(p, k) {
			if paths[p[:k]] {
				return formatf(strictjson.Join(at, "files", j, "path"), "path %q lies beneath %q, which is a file", p, p[:k])
			}
		}
	}
	if e.Kind == KindSkill && !paths[SkillFile] {
		return formatf(strictjson.Join(at, "files"), "skill %q has no top-level %s", e.Name, SkillFile)
	}
	return nil
}

func nextSlash(p string, k int) int {
	n := strings.IndexByte(p[k+1:], '/')
	if n < 0 {
		return -1
	}
	return k + 1 + n
}

// checkPath applies the file path rules; the error says which one broke.
func checkPath(p string) error {
	switch {
	case p == "":
		return errors.New("empty")
	case len(p) > MaxPathBytes:
		return fmt.Errorf("%d bytes, more than %d", len(p), MaxPathBytes)
	case strings.HasPrefix(p, "/"):
		return errors.New("absolute; paths are relative to the entry")
	}
	comps := strings.Split(p, "/")
	if len(comps) > MaxPathDepth {
		return fmt.Errorf("%d components, more than %d", len(comps), MaxPathDepth)
	}
	for _, c := range comps {
		switch {
		case c == "":
			return errors.New("empty component (a doubled or trailing slash)")
		case c == "." || c == "..":
			return fmt.Errorf("component %q is not allowed", c)
		case strings.HasPrefix(c, "."):
			return fmt.Errorf("component %q starts with a dot", c)
		case !componentRE.MatchString(c):
			return fmt.Errorf("component %q has a character outside [A-Za-z0-9._-]", c)
		}
	}
	return nil
}

// Encode validates m and returns its canonical form (RFC 8785 JSON, see
// strictjson.Canonical): members sorted, no insignificant whitespace,
// every member written (description as "" when empty), contents as
// standard padded base64. A bundle file holding exactly these bytes is
// named by their SHA-256 (see Write). Encode refuses, with ErrSize, a
// canonical form larger than MaxBundleBytes.
func Encode(m *Manifest) ([]byte, error) {
	if err := validate(m); err != nil {
		return nil, err
	}
	b := strictjson.Canonical(m)
	if len(b) > MaxBundleBytes {
		return nil, sizef("", "canonical form is %d bytes, more than the %d allowed", len(b), MaxBundleBytes)
	}
	return b, nil
}

// Digest is the lowercase hex SHA-256 of the entry's canonical JSON (the
// same encoding as the entry inside Encode's output). Two entries have
// the same digest exactly when they decode to the same kind, name,
// description and files, however the bundle spelled them.
func (e *Entry) Digest() string {
	sum := sha256.Sum256(strictjson.Canonical(e))
	return hex.EncodeToString(sum[:])
}
