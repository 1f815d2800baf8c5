// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// FuzzPolicyDecode feeds arbitrary bytes to Decode and Validate. They
// must never panic; every failure must be a *Fault (one line, with a
// pointer); and every decoded policy must re-encode canonically to bytes
// that decode to an equal policy whose canonical form is identical, and
// that validates exactly when the original did.
func FuzzPolicyDecode(f *testing.F) {
	f.Add([]byte(exampleText(f)))
	for _, tc := range badPolicies() {
		f.Add([]byte(tc.m(f, exampleText(f))))
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"runtime_templates":[{"launch":{"runtime_discovery":"codex"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(data)
		if err != nil {
			checkFault(t, err)
			return
		}
		verr := Validate(p)
		if verr != nil {
			checkFault(t, verr)
		}
		c := Canonical(p)
		q, err := Decode(c)
		if err != nil {
			t.Fatalf("canonical form does not decode: %v\n%s", err, c)
		}
		if !equalPolicy(p, q) {
			t.Fatalf("canonical round trip changed the policy:\n%#v\n%#v", p, q)
		}
		if c2 := Canonical(q); !bytes.Equal(c, c2) {
			t.Fatalf("canonical form is not stable:\n%s\n%s", c, c2)
		}
		if (Validate(q) == nil) != (verr == nil) {
			t.Fatalf("validity changed across the round trip: %v", verr)
		}
	})
}

func checkFault(t *testing.T, err error) {
	t.Helper()
	var f *Fault
	if !errors.As(err, &f) {
		t.Fatalf("error %v (%T) is not a *Fault", err, err)
	}
	if bytes.ContainsAny([]byte(err.Error()), "\n\r") {
		t.Fatalf("fault is not one line: %q", err)
	}
}

// equalPolicy compares with nil and empty lists equal: Decode reads an
// absent list as nil and [] as empty, and both mean "none".
func equalPolicy(a, b *Policy) bool {
	return reflect.DeepEqual(normPolicy(*a), normPolicy(*b))
}

func normPolicy(p Policy) Policy {
	p.RuntimeTemplates = norm(p.RuntimeTemplates)
	for i := range p.RuntimeTemplates {
		t := &p.RuntimeTemplates[i]
		t.AllowedPathAliases = norm(t.AllowedPathAliases)
		t.AllowedProjectionDestinations = norm(t.AllowedProjectionDestinations)
		t.Launch.ExecutableSearchPaths = norm(t.Launch.ExecutableSearchPaths)
		t.Launch.Arguments = norm(t.Launch.Arguments)
		t.Launch.Environment = norm(t.Launch.Environment)
		t.Launch.ReadOnlyPaths = norm(t.Launch.ReadOnlyPaths)
	}
	p.PathAliases = norm(p.PathAliases)
	for i := range p.PathAliases {
		p.PathAliases[i].Access = norm(p.PathAliases[i].Access)
	}
	p.LibraryProjectionDestinations = norm(p.LibraryProjectionDestinations)
	p.ResourceProfiles = norm(p.ResourceProfiles)
	p.EgressPolicyIDs = norm(p.EgressPolicyIDs)
	p.ToolPolicyIDs = norm(p.ToolPolicyIDs)
	p.SecretHandles = norm(p.SecretHandles)
	return p
}

// norm returns a copy, with nil as empty, so normalizing never writes
// into the caller's arrays.
func norm[T any](s []T) []T {
	return append([]T{}, s...)
}
