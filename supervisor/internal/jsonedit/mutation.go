// SPDX-License-Identifier: Apache-2.0

package jsonedit

import (
	"errors"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/internal/strictjson"
)

// Mutation derives a document from a valid one; the bad-input tables of
// the policy and plan packages are lists of them.
type Mutation func(t testing.TB, s string) string

// Rep replaces exactly one occurrence of old, so a case can never pass
// because its mutation silently did nothing.
func Rep(old, new string) Mutation {
	return func(t testing.TB, s string) string {
		t.Helper()
		if n := strings.Count(s, old); n != 1 {
			t.Fatalf("mutation: %q occurs %d times, want 1", old, n)
		}
		return strings.Replace(s, old, new, 1)
	}
}

// Set edits by JSON Pointer (a nil value deletes).
func Set(p string, v any) Mutation {
	return func(t testing.TB, s string) string {
		t.Helper()
		out, err := Edit([]byte(s), EditOp{Pointer: p, Value: v, Delete: v == nil})
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
}

// All applies mutations in order.
func All(ms ...Mutation) Mutation {
	return func(t testing.TB, s string) string {
		for _, m := range ms {
			s = m(t, s)
		}
		return s
	}
}

// FencedBlocks returns the bodies of a Markdown document's fenced code
// blocks whose info string is exactly info; the documents' examples and
// test vectors are checked against the code through it.
func FencedBlocks(t testing.TB, doc, info string) []string {
	t.Helper()
	var out []string
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		if lines[i] != "```"+info {
			continue
		}
		var body []string
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			body = append(body, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("unterminated %s block", info)
		}
		out = append(out, strings.Join(body, "\n"))
	}
	return out
}

// CheckFault fails the test unless err is a one-line *strictjson.Fault at
// JSON Pointer ptr whose message contains phrase.
func CheckFault(t testing.TB, err error, ptr, phrase string) {
	t.Helper()
	var f *strictjson.Fault
	if !errors.As(err, &f) {
		t.Fatalf("error %v (%T) is not a *Fault", err, err)
	}
	if f.Pointer != ptr {
		t.Fatalf("fault at %q, want %q: %v", f.Pointer, ptr, err)
	}
	if !strings.Contains(f.Msg, phrase) {
		t.Fatalf("fault %q lacks %q", err, phrase)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("fault is not one line: %q", err)
	}
}
