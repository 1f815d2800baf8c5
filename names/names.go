// SPDX-License-Identifier: Apache-2.0

// Package names holds the two grammars of the names Glove's processes
// pass to each other, written once: the supervisor, gloved's API, the
// receipts and each helper that receives a name check it here, so a name
// one of them accepts is never refused, or read differently, by another.
//
// A name is what becomes a path component (a session's cgroup, an image
// file's stem) or a key: ASCII lowercase letters and digits, so no
// component is ".", "..", hidden, upper-case-folded or empty.
package names

import "strings"

// MaxLen is the longest name of either grammar, in bytes.
const MaxLen = 64

// The grammars as patterns, for messages and documentation (the checks
// below do not use regular expressions).
const (
	// NamePattern: session ids and names, Agent Skills names.
	NamePattern = `[a-z0-9][a-z0-9-]{0,63}`
	// IdentifierPattern: every identifier of a policy and a plan
	// (templates, runtimes, aliases, profiles, ...) and stream aliases.
	IdentifierPattern = `[a-z0-9][a-z0-9._-]{0,63}`
)

// Name reports whether s matches NamePattern.
func Name(s string) bool { return valid(s, "-") }

// Identifier reports whether s matches IdentifierPattern.
func Identifier(s string) bool { return valid(s, "._-") }

// valid checks 1 to MaxLen bytes: the first a lowercase letter or digit,
// each other one of those or a byte of inner.
func valid(s, inner string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || i > 0 && strings.IndexByte(inner, c) >= 0) {
			return false
		}
	}
	return len(s) > 0 && len(s) <= MaxLen
}
