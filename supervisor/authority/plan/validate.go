// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"slices"
	"strings"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/internal/strictjson"
)

var (
	ptr        = strictjson.Ptr
	join       = strictjson.Join
	faultf     = strictjson.Faultf
	checkOrder = strictjson.CheckOrder
)

// Validate checks p against the validated policy pol at time now and
// returns the first mismatch as a *Fault naming its JSON Pointer, or nil.
// The checks, in order (docs/plan.md):
//
//  1. schema_version, policy revision;
//  2. expiry: after now, and no later than now + max_plan_ttl_ms;
//  3. runtime template, its runtime id, sandbox backend and adapter
//     command digest;
//  4. resource profile and all six limits;
//  5. path grants: sorted by alias and unique, defined, allowed by the
//     template, launchable, one offered access tuple exactly, TTL within
//     the alias maximum, byte quota equal to the tuple's;
//  6. library projections: lowercase hex SHA-256, sorted and unique,
//     destination defined and allowed by the template;
//  7. egress policies, tool policies, secret handles: sorted, unique,
//     defined.
//
// Threat: the controller is remote and may be compromised. Each check
// ensures it can only select what the operator defined, and that what
// was approved (the numbers and digests repeated in the plan) is exactly
// what the policy grants today.
func Validate(p *Plan, pol *policy.Policy, now time.Time) error {
	if p == nil {
		return faultf("", "no plan")
	}
	if pol == nil {
		return faultf("", "no policy to validate against")
	}
	if p.SchemaVersion != SchemaVersion {
		return faultf("/schema_version", "%d is not %d", p.SchemaVersion, SchemaVersion)
	}
	// Threat: a plan approved under an older policy, whose meaning the
	// operator has since changed.
	if p.PolicyRevision != pol.Revision {
		return faultf("/policy_revision", "%d does not match the policy revision %d", p.PolicyRevision, pol.Revision)
	}
	if err := checkExpiry(p.ExpiresAtUnixMs, pol.MaxPlanTTLMs, now); err != nil {
		return err
	}
	t, ok := pol.Template(p.RuntimeTemplateID)
	if !ok {
		return faultf("/runtime_template_id", "%q is not a runtime template of policy revision %d", p.RuntimeTemplateID, pol.Revision)
	}
	if p.RuntimeID != t.RuntimeID {
		return faultf("/runtime_id", "%q does not match template %q (%q)", p.RuntimeID, t.RuntimeTemplateID, t.RuntimeID)
	}
	if p.SandboxBackend != t.SandboxBackend {
		return faultf("/sandbox_backend", "%q does not match template %q (%q)", p.SandboxBackend, t.RuntimeTemplateID, t.SandboxBackend)
	}
	// The policy's digest was recomputed from its launch fields when it
	// was validated, so equality here means the plan was approved for
	// exactly the command that will run.
	if p.AdapterCommandDigest != t.AdapterCommandDigest {
		return faultf("/adapter_command_digest", "%q does not match template %q (%s)", p.AdapterCommandDigest, t.RuntimeTemplateID, t.AdapterCommandDigest)
	}
	if err := checkProfile(&p.ResourceProfile, pol); err != nil {
		return err
	}
	if err := checkPathGrants(p.PathGrants, pol, t, p.ResourceProfile.WallTimeMs); err != nil {
		return err
	}
	if err := checkProjections(p.LibraryProjections, pol, t); err != nil {
		return err
	}
	if err := checkDefinedIDs("/egress_policy_ids", p.EgressPolicyIDs, pol.EgressPolicyIDs, "an egress policy"); err != nil {
		return err
	}
	if err := checkDefinedIDs("/tool_policy_ids", p.ToolPolicyIDs, pol.ToolPolicyIDs, "a tool policy"); err != nil {
		return err
	}
	return checkDefinedIDs("/secret_handles", p.SecretHandles, pol.SecretHandles, "a secret handle")
}

// checkExpiry: a plan is a short-lived approval. Threat: a captured or
// stale plan replayed long after approval, or a plan minted to stay
// valid indefinitely.
func checkExpiry(exp, ttlMs uint64, now time.Time) error {
	const at = "/expires_at_unix_ms"
	if exp > policy.MaxSafeInteger {
		return faultf(at, "%d is outside 0..%d", exp, uint64(policy.MaxSafeInteger))
	}
	nowMs := now.UnixMilli()
	if nowMs < 0 || nowMs > policy.MaxSafeInteger {
		// Keeps the arithmetic below exact; a clock this wrong cannot
		// judge an expiry at all.
		return faultf(at, "cannot judge expiry: the clock reads %d ms since 1970", nowMs)
	}
	e := int64(exp) // exact: exp < 2^53
	if e <= nowMs {
		return faultf(at, "%d is not after now (%d): the plan has expired", exp, nowMs)
	}
	if e-nowMs > int64(ttlMs) {
		return faultf(at, "%d is %d ms after now (%d), more than max_plan_ttl_ms %d", exp, e-nowMs, nowMs, ttlMs)
	}
	return nil
}

func checkProfile(r *policy.ResourceProfile, pol *policy.Policy) error {
	want, ok := pol.Profile(r.ProfileID)
	if !ok {
		return faultf("/resource_profile/profile_id", "%q is not a resource profile of the policy", r.ProfileID)
	}
	// The numbers are repeated so that the controller approves the limits
	// themselves, not a name whose limits may change under it.
	got, exp := r.Limits(), want.Limits()
	for i := range got {
		if *got[i].Value != *exp[i].Value {
			return faultf(ptr("resource_profile", got[i].Name), "%d does not match profile %q (%d)", *got[i].Value, want.ProfileID, *exp[i].Value)
		}
	}
	return nil
}

func checkPathGrants(gs []PathGrant, pol *policy.Policy, t *policy.RuntimeTemplate, wallMs uint64) error {
	for i := range gs {
		g := &gs[i]
		at := ptr("path_grants", i)
		if err := policy.CheckIdentifier(join(at, "alias"), g.Alias); err != nil {
			return err
		}
		if i > 0 {
			if err := checkOrder(join(at, "alias"), gs[i-1].Alias, g.Alias); err != nil {
				return err
			}
		}
		a, ok := pol.Alias(g.Alias)
		if !ok {
			return faultf(join(at, "alias"), "%q is not a path alias of the policy", g.Alias)
		}
		if !slices.Contains(t.AllowedPathAliases, g.Alias) {
			return faultf(join(at, "alias"), "%q is not allowed by template %q", g.Alias, t.RuntimeTemplateID)
		}
		// Threat: in-place host writes by the sandboxed program. The
		// legacy value parses in a policy but no plan may use it.
		if g.Access == policy.AccessDirectWrite {
			return faultf(join(at, "access"), "%s is legacy and never launchable; use retained_write", g.Access)
		}
		tuple, err := matchTuple(at, g, a)
		if err != nil {
			return err
		}
		if g.TTLSecs == 0 || g.TTLSecs > a.MaxTTLSecs {
			return faultf(join(at, "ttl_secs"), "%d is outside 1..%d, the max_ttl_secs of alias %q", g.TTLSecs, a.MaxTTLSecs, a.Alias)
		}
		// A grant is held for the whole session (its mount cannot be
		// taken from a running program), and the wall time limit is what
		// ends a session: so the session may not outlast the grant.
		// Threat: a grant meant for minutes held for the hours a long
		// profile allows.
		if g.TTLSecs*1000 < wallMs {
			return faultf(join(at, "ttl_secs"), "%d s is shorter than the profile's wall_time_ms (%d ms): the grant is held for the whole session", g.TTLSecs, wallMs)
		}
		if g.MaxBytes != tuple.MaxBytes {
			return faultf(join(at, "max_bytes"), "%d does not match the quota of alias %q for %s (%d)", g.MaxBytes, a.Alias, g.Access, tuple.MaxBytes)
		}
	}
	return nil
}

// matchTuple finds the offered tuple equal to the grant's, narrowing one
// member at a time so the fault names the first member that differs.
func matchTuple(at string, g *PathGrant, a *policy.PathAlias) (*policy.AccessTuple, error) {
	type field struct {
		name string
		get  func(*policy.AccessTuple) string
		want string
	}
	fields := []field{
		{"access", func(t *policy.AccessTuple) string { return t.Access }, g.Access},
		{"materialization", func(t *policy.AccessTuple) string { return t.Materialization }, g.Materialization},
		{"create_policy", func(t *policy.AccessTuple) string { return t.CreatePolicy }, g.CreatePolicy},
		{"cleanup_policy", func(t *policy.AccessTuple) string { return t.CleanupPolicy }, g.CleanupPolicy},
	}
	cands := make([]*policy.AccessTuple, 0, len(a.Access))
	for i := range a.Access {
		cands = append(cands, &a.Access[i])
	}
	var matched []string // the members matched so far, for the message
	for _, f := range fields {
		var next []*policy.AccessTuple
		var names []string
		for _, c := range cands {
			if f.get(c) == f.want {
				next = append(next, c)
			}
			if !slices.Contains(names, f.get(c)) {
				names = append(names, f.get(c))
			}
		}
		if len(next) == 0 {
			with := ""
			if len(matched) > 0 {
				with = " with " + strings.Join(matched, ", ")
			}
			return nil, faultf(join(at, f.name), "%q is not offered for alias %q%s (offered: %s)", f.want, a.Alias, with, strings.Join(names, ", "))
		}
		matched = append(matched, f.want)
		cands = next
	}
	// Tuples are unique by these four members (policy.Validate), so
	// exactly one remains.
	return cands[0], nil
}

func checkProjections(ls []LibraryProjection, pol *policy.Policy, t *policy.RuntimeTemplate) error {
	for i := range ls {
		l := &ls[i]
		at := ptr("library_projections", i)
		// Threat: one bundle named by two spellings (upper and lower
		// case) would pass a uniqueness check and defeat the digest's
		// role as the bundle's only name.
		if !policy.ValidSHA256Hex(l.Digest) {
			return faultf(join(at, "digest"), "%q is not a SHA-256 digest in 64 lowercase hex characters", l.Digest)
		}
		if i > 0 {
			if err := checkOrder(join(at, "digest"), ls[i-1].Digest, l.Digest); err != nil {
				return err
			}
		}
		if err := policy.CheckIdentifier(join(at, "destination_alias"), l.DestinationAlias); err != nil {
			return err
		}
		if _, ok := pol.Destination(l.DestinationAlias); !ok {
			return faultf(join(at, "destination_alias"), "%q is not a library projection destination of the policy", l.DestinationAlias)
		}
		if !slices.Contains(t.AllowedProjectionDestinations, l.DestinationAlias) {
			return faultf(join(at, "destination_alias"), "%q is not allowed by template %q", l.DestinationAlias, t.RuntimeTemplateID)
		}
	}
	return nil
}

func checkDefinedIDs(at string, ids, defined []string, what string) error {
	if err := policy.CheckIdentifierList(at, ids); err != nil {
		return err
	}
	for i, id := range ids {
		if !slices.Contains(defined, id) {
			return faultf(join(at, i), "%q is not %s of the policy", id, what)
		}
	}
	return nil
}
