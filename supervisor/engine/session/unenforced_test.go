// SPDX-License-Identifier: Apache-2.0

package session

import (
	"errors"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/state/lease"
)

// TestResolveRefusesUnenforced: a plan naming a secret handle the policy
// maps to no credential source, or any secret handle where there is no
// lease store (glove run), or an egress policy other than no-network is
// refused as unsupported before anything is resolved, rather than
// launched without what it asked for; no-network, tool policies and a
// mapped handle with a store pass that check (the policy then fails on
// its missing template, which shows the check let them through).
func TestResolveRefusesUnenforced(t *testing.T) {
	pol := &policy.Policy{SecretHandles: []string{"codex-token", "unmapped"},
		CredentialPolicies: []policy.CredentialPolicy{{Handle: "codex-token", SourcePath: "/nonexistent", DestinationPath: "/home/agent/t", MaxBytes: 1}}}
	store, err := lease.Open(t.TempDir() + "/leases")
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	withStore := Sources{Leases: store}
	for name, tc := range map[string]struct {
		pl  *plan.Plan
		src Sources
	}{
		"an unmapped handle":          {&plan.Plan{SecretHandles: []string{"unmapped"}}, withStore},
		"a mapped and an unmapped":    {&plan.Plan{SecretHandles: []string{"codex-token", "unmapped"}}, withStore},
		"a handle and no lease store": {&plan.Plan{SecretHandles: []string{"codex-token"}}, Sources{}},
		"an open egress":              {&plan.Plan{EgressPolicyIDs: []string{"allow-git"}}, withStore},
		"no-network and more":         {&plan.Plan{EgressPolicyIDs: []string{"allow-git", "no-network"}}, withStore},
	} {
		if _, _, err := Resolve(pol, tc.pl, "s", tc.src); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", name, err)
		}
	}
	for name, pl := range map[string]*plan.Plan{
		"no-network":      {EgressPolicyIDs: []string{EgressNoNetwork}},
		"a tool policy":   {ToolPolicyIDs: []string{"sage-readonly"}},
		"a mapped handle": {SecretHandles: []string{"codex-token"}},
		"nothing":         {},
	} {
		if _, _, err := Resolve(pol, pl, "s", withStore); errors.Is(err, ErrUnsupported) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want past the check (ErrInvalid: no template)", name, err)
		}
	}
}
