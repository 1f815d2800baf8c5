package session

import (
	"errors"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
)

// TestResolveRefusesUnenforced: a plan naming a secret handle (no
// credential leases yet) or an egress policy other than no-network is
// refused as unsupported before anything is resolved, rather than
// launched without what it asked for; no-network and tool policies pass
// that check (the empty policy then fails on its missing template, which
// shows the check let them through).
func TestResolveRefusesUnenforced(t *testing.T) {
	pol := &policy.Policy{}
	for name, pl := range map[string]*plan.Plan{
		"a secret handle":     {SecretHandles: []string{"codex-token"}},
		"an open egress":      {EgressPolicyIDs: []string{"allow-git"}},
		"no-network and more": {EgressPolicyIDs: []string{"allow-git", "no-network"}},
	} {
		if _, _, err := Resolve(pol, pl, "s", Sources{}); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: %v, want ErrUnsupported", name, err)
		}
	}
	for name, pl := range map[string]*plan.Plan{
		"no-network":    {EgressPolicyIDs: []string{EgressNoNetwork}},
		"a tool policy": {ToolPolicyIDs: []string{"sage-readonly"}},
		"nothing":       {},
	} {
		if _, _, err := Resolve(pol, pl, "s", Sources{}); errors.Is(err, ErrUnsupported) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want past the check (ErrInvalid: no template)", name, err)
		}
	}
}
