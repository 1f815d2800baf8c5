// SPDX-License-Identifier: Apache-2.0

// Package strictjson is the one place where gloved turns operator and
// controller JSON into Go values and back: a strict decoder whose every
// failure names the JSON Pointer (RFC 6901) of the fault, and a canonical
// encoder. supervisor/authority/policy and supervisor/authority/plan share it so that both
// documents follow exactly the same rules.
package strictjson

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// Fault is a rejected document: the JSON Pointer of the offending value
// and what is wrong with it. Its Error is one line, so an operator or a
// controller sees exactly one actionable fault (the first one found).
type Fault struct {
	// Pointer is the RFC 6901 JSON Pointer of the fault; "" is the whole
	// document.
	Pointer string
	// Msg says what is wrong; input strings in it are quoted with %q, so
	// hostile input cannot forge a second line in a log.
	Msg string
}

// Error renders "POINTER: MSG"; the whole document is written "(root)"
// because an empty pointer would be invisible.
func (f *Fault) Error() string {
	p := f.Pointer
	if p == "" {
		p = "(root)"
	}
	return oneLine(p + ": " + f.Msg)
}

// oneLine escapes control characters (a member name may hold a newline,
// and it reaches the pointer unquoted), so a fault stays one line and
// hostile input cannot forge a second line in a log.
func oneLine(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Faultf makes a Fault at ptr.
func Faultf(ptr, format string, args ...any) *Fault {
	return &Fault{Pointer: ptr, Msg: fmt.Sprintf(format, args...)}
}

// Ptr builds a JSON Pointer from member names (string) and array indices
// (int), escaping "~" and "/" in names as RFC 6901 requires.
func Ptr(parts ...any) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteByte('/')
		switch v := p.(type) {
		case string:
			b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(v))
		case int:
			b.WriteString(strconv.Itoa(v))
		default:
			panic(fmt.Sprintf("strictjson.Ptr: part %v of type %T", p, p))
		}
	}
	return b.String()
}

// Join appends parts to an existing pointer.
func Join(base string, parts ...any) string { return base + Ptr(parts...) }

// CheckOrder requires cur strictly after prev in byte order: canonical
// arrays have one spelling, so two documents granting the same thing are
// byte-identical and a repeat can never hide a second, different entry.
// The fault is at JSON pointer at.
func CheckOrder(at, prev, cur string) error {
	if cur == prev {
		return Faultf(at, "%q is a duplicate", cur)
	}
	if cur < prev {
		return Faultf(at, "%q is not sorted after %q", cur, prev)
	}
	return nil
}
