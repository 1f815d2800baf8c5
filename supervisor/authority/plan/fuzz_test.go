// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
)

// FuzzPlanDecode feeds arbitrary bytes to Decode and to Validate against
// the example policy. They must never panic; every failure must be a
// one-line *Fault; every decoded plan must re-encode canonically to bytes
// that decode to an equal plan with the same canonical form and content
// digest, and that validates exactly when the original did.
func FuzzPlanDecode(f *testing.F) {
	polText := readText(f, examplePolicyPath)
	pol, err := policy.Decode([]byte(polText))
	if err != nil {
		f.Fatal(err)
	}
	if err := policy.Validate(pol); err != nil {
		f.Fatal(err)
	}
	// A fixed now, 60 s before the example plan's expiry, so that runs
	// are reproducible and the example seed validates.
	now := time.UnixMilli(1767225600000)
	f.Add([]byte(readText(f, examplePlanPath)))
	for _, tc := range badPlans() {
		if tc.pol != nil {
			continue // validated against another policy
		}
		doc := planFor(f, now)
		if tc.at != nil {
			doc = tc.at(now)(f, doc)
		}
		if tc.m != nil {
			doc = tc.m(f, doc)
		}
		f.Add([]byte(doc))
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"path_grants":[{"alias":"workspace"}],"secret_handles":["\u0000"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(data)
		if err != nil {
			checkFault(t, err)
			return
		}
		verr := Validate(p, pol, now)
		if verr != nil {
			checkFault(t, verr)
		}
		c := Canonical(p)
		q, err := Decode(c)
		if err != nil {
			t.Fatalf("canonical form does not decode: %v\n%s", err, c)
		}
		if !reflect.DeepEqual(normPlan(*p), normPlan(*q)) {
			t.Fatalf("canonical round trip changed the plan:\n%#v\n%#v", p, q)
		}
		if c2 := Canonical(q); !bytes.Equal(c, c2) {
			t.Fatalf("canonical form is not stable:\n%s\n%s", c, c2)
		}
		if ContentDigest(p) != ContentDigest(q) {
			t.Fatal("content digest changed across the round trip")
		}
		if (Validate(q, pol, now) == nil) != (verr == nil) {
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

// normPlan treats nil and empty lists alike: Decode reads an absent list
// as nil and [] as empty, and both mean "none".
func normPlan(p Plan) Plan {
	p.PathGrants = append([]PathGrant{}, p.PathGrants...)
	p.LibraryProjections = append([]LibraryProjection{}, p.LibraryProjections...)
	p.EgressPolicyIDs = append([]string{}, p.EgressPolicyIDs...)
	p.ToolPolicyIDs = append([]string{}, p.ToolPolicyIDs...)
	p.SecretHandles = append([]string{}, p.SecretHandles...)
	return p
}
