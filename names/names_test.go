// SPDX-License-Identifier: Apache-2.0

package names

import (
	"regexp"
	"strings"
	"testing"
)

var (
	nameRE  = regexp.MustCompile(`^` + NamePattern + `$`)
	identRE = regexp.MustCompile(`^` + IdentifierPattern + `$`)
)

// TestTable: each input's verdict under both grammars, bad inputs first.
func TestTable(t *testing.T) {
	for _, c := range []struct {
		in          string
		name, ident bool
	}{
		{"", false, false},
		{"-a", false, false},
		{".a", false, false},
		{"_a", false, false},
		{"A", false, false},
		{"a b", false, false},
		{"a/b", false, false},
		{"..", false, false},
		{"a\x00", false, false},
		{"é", false, false},
		{strings.Repeat("a", 65), false, false},
		{"a.b", false, true},
		{"a_b", false, true},
		{"a-", true, true},
		{"s-1", true, true},
		{"0", true, true},
		{strings.Repeat("a", 64), true, true},
		{"codex.token", false, true},
	} {
		if got := Name(c.in); got != c.name {
			t.Errorf("Name(%q) = %v, want %v", c.in, got, c.name)
		}
		if got := Identifier(c.in); got != c.ident {
			t.Errorf("Identifier(%q) = %v, want %v", c.in, got, c.ident)
		}
	}
}

// FuzzGrammars: the checks agree with the patterns they document.
func FuzzGrammars(f *testing.F) {
	for _, s := range []string{"", "s-1", "a.b", "-", strings.Repeat("z", 64), "A_b", "x\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if Name(s) != nameRE.MatchString(s) {
			t.Errorf("Name(%q) = %v, the pattern says %v", s, Name(s), nameRE.MatchString(s))
		}
		if Identifier(s) != identRE.MatchString(s) {
			t.Errorf("Identifier(%q) = %v, the pattern says %v", s, Identifier(s), identRE.MatchString(s))
		}
	})
}
