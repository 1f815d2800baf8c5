// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/internal/jsonedit"
)

const (
	examplePlanPath   = "testdata/example-plan.json"
	examplePolicyPath = "../policy/testdata/example-policy.json"
	// exampleExpiry is the expires_at_unix_ms written in the example
	// plan; tests replace it with a time relative to their own now.
	exampleExpiry = "1767225660000"
)

func readText(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// planFor returns the example plan expiring 60 s after now.
func planFor(t testing.TB, now time.Time) string {
	t.Helper()
	return rep(exampleExpiry, fmt.Sprint(now.UnixMilli()+60000))(t, readText(t, examplePlanPath))
}

func loadPolicy(t testing.TB, text string) *policy.Policy {
	t.Helper()
	p, err := policy.Decode([]byte(text))
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	if err := policy.Validate(p); err != nil {
		t.Fatalf("policy: %v", err)
	}
	return p
}

func expiry(deltaMs int64) func(now time.Time) mutation {
	return func(now time.Time) mutation {
		return rep(`"expires_at_unix_ms": `+fmt.Sprint(now.UnixMilli()+60000), `"expires_at_unix_ms": `+fmt.Sprint(now.UnixMilli()+deltaMs))
	}
}

const (
	otherDigest = "0000000000000000000000000000000000000000000000000000000000000000"
	bundle      = "4c9f2311177156241f8956a0811a55645d9e4c9fc531f5b71be05734f7a0c21c"
)

// Policy mutations some cases need, each leaving the policy valid.
var (
	polAliasNotInTemplate = set("/path_aliases/-", map[string]any{
		"alias": "zdata", "host_path": "/srv/data", "target_path": "/data", "max_ttl_secs": 60,
		"access": []any{map[string]any{"access": "read_only", "materialization": "bind", "create_policy": "must_exist", "cleanup_policy": "none", "max_bytes": 0}},
	})
	polOffersRetained = set("/path_aliases/0/access/-", map[string]any{
		"access": "retained_write", "materialization": "copy", "create_policy": "must_exist", "cleanup_policy": "retain", "max_bytes": 4096,
	})
	polLegacy = set("/path_aliases/0/access/0", map[string]any{
		"access": "direct_write", "materialization": "bind", "create_policy": "must_exist", "cleanup_policy": "none", "max_bytes": 0,
	})
	polDestNotInTemplate = set("/library_projection_destinations/0", map[string]any{"alias": "books", "target_path": "/opt/books"})
	polTwoEgress         = set("/egress_policy_ids", []any{"allow-git", "no-network"})
	polTwoSecrets        = set("/secret_handles", []any{"codex-token", "git-token"})
	polSecondProfile     = set("/resource_profiles/-", map[string]any{
		"profile_id": "tiny", "cpu_time_ms": 10, "memory_bytes": 1 << 20, "pids": 1, "wall_time_ms": 10, "disk_bytes": 1, "terminal_output_bytes": 1,
	})
)

type badPlan struct {
	name, ptr, phrase string
	m                 mutation                 // of the plan
	at                func(time.Time) mutation // of the plan, needing now
	pol               mutation                 // of the policy, or nil
}

// badPlans is the table of rejected plans: each a small mutation of the
// valid example (and sometimes of the policy), each with the exact JSON
// Pointer of the first mismatch and a phrase of its message.
func badPlans() []badPlan {
	return []badPlan{
		// Strict decoding, and that no path, executable, environment or
		// secret value can be expressed at all.
		{name: "unknown member", ptr: "/path_grants/0/ttl", phrase: `unknown member "ttl"`, m: rep(`"ttl_secs"`, `"ttl"`)},
		{name: "executable path member", ptr: "/executable_path", phrase: "unknown member", m: set("/executable_path", "/bin/sh")},
		{name: "host path member", ptr: "/path_grants/0/host_path", phrase: "unknown member", m: set("/path_grants/0/host_path", "/etc")},
		{name: "target path member", ptr: "/library_projections/0/target_path", phrase: "unknown member", m: set("/library_projections/0/target_path", "/x")},
		{name: "environment member", ptr: "/environment", phrase: "unknown member", m: set("/environment", []any{"LD_PRELOAD=/tmp/x.so"})},
		{name: "arguments member", ptr: "/arguments", phrase: "unknown member", m: set("/arguments", []any{"-c", "id"})},
		{name: "secret value member", ptr: "/secrets", phrase: "unknown member", m: set("/secrets", map[string]any{"codex-token": "sk-live"})},
		{name: "member name case", ptr: "/Policy_revision", phrase: "unknown member", m: rep(`"policy_revision"`, `"Policy_revision"`)},
		{name: "duplicate key", ptr: "/runtime_template_id", phrase: "duplicate member name", m: rep(`"runtime_template_id": "codex-safe",`, `"runtime_template_id": "codex-safe", "runtime_template_id": "other",`)},
		{name: "trailing data", ptr: "", phrase: "trailing data", m: func(t testing.TB, s string) string { return s + " []" }},
		{name: "null", ptr: "/secret_handles", phrase: "null", m: rep(`"secret_handles": ["codex-token"]`, `"secret_handles": null`)},
		{name: "wrong type", ptr: "/resource_profile/pids", phrase: "found a string", m: rep(`"pids": 16`, `"pids": "16"`)},
		{name: "negative number", ptr: "/path_grants/0/ttl_secs", phrase: "number -1", m: rep(`"ttl_secs": 120`, `"ttl_secs": -1`)},
		{name: "exponent", ptr: "/policy_revision", phrase: "number 7e0", m: rep(`"policy_revision": 7`, `"policy_revision": 7e0`)},
		// Header.
		{name: "schema version", ptr: "/schema_version", phrase: "is not 1", m: rep(`"schema_version": 1`, `"schema_version": 0`)},
		{name: "revision", ptr: "/policy_revision", phrase: "does not match the policy revision 7", m: rep(`"policy_revision": 7`, `"policy_revision": 6`)},
		{name: "expired now", ptr: "/expires_at_unix_ms", phrase: "has expired", at: expiry(0)},
		{name: "expired earlier", ptr: "/expires_at_unix_ms", phrase: "has expired", at: expiry(-1)},
		{name: "too far in the future", ptr: "/expires_at_unix_ms", phrase: "more than max_plan_ttl_ms 120000", at: expiry(120001)},
		{name: "expiry beyond 2^53", ptr: "/expires_at_unix_ms", phrase: "outside 0..9007199254740991", at: func(now time.Time) mutation {
			return rep(`"expires_at_unix_ms": `+fmt.Sprint(now.UnixMilli()+60000), `"expires_at_unix_ms": 9007199254740992`)
		}},
		// Runtime.
		{name: "unknown template", ptr: "/runtime_template_id", phrase: "not a runtime template", m: rep(`"codex-safe"`, `"codex-unsafe"`)},
		{name: "adapter digest", ptr: "/adapter_command_digest", phrase: `does not match template "codex-safe"`, m: rep(`"58732ba47b86ecbbdd05fdb0a367d69ea5b39349aeaaab75f53bbf8c1c140122"`, `"`+otherDigest+`"`)},
		{name: "adapter digest uppercase", ptr: "/adapter_command_digest", phrase: "does not match", m: rep(`"58732ba4`, `"58732BA4`)},
		{name: "runtime id", ptr: "/runtime_id", phrase: `does not match template "codex-safe" ("codex")`, m: rep(`"runtime_id": "codex"`, `"runtime_id": "claude-code"`)},
		{name: "sandbox backend", ptr: "/sandbox_backend", phrase: "does not match template", m: rep(`"linux_production"`, `"macos_sbpl"`)},
		// Resource profile.
		{name: "unknown profile", ptr: "/resource_profile/profile_id", phrase: "not a resource profile", m: rep(`"small"`, `"large"`)},
		{name: "cpu time", ptr: "/resource_profile/cpu_time_ms", phrase: `1001 does not match profile "small" (1000)`, m: rep(`"cpu_time_ms": 1000`, `"cpu_time_ms": 1001`)},
		{name: "memory", ptr: "/resource_profile/memory_bytes", phrase: `does not match profile "small" (67108864)`, m: rep(`"memory_bytes": 67108864`, `"memory_bytes": 67108865`)},
		{name: "pids", ptr: "/resource_profile/pids", phrase: `32 does not match profile "small" (16)`, m: rep(`"pids": 16`, `"pids": 32`)},
		{name: "wall time", ptr: "/resource_profile/wall_time_ms", phrase: `does not match profile "small" (2000)`, m: rep(`"wall_time_ms": 2000`, `"wall_time_ms": 1999`)},
		{name: "disk", ptr: "/resource_profile/disk_bytes", phrase: `does not match profile "small" (2097152)`, m: rep(`"disk_bytes": 2097152`, `"disk_bytes": 0`)},
		{name: "terminal output", ptr: "/resource_profile/terminal_output_bytes", phrase: `does not match profile "small" (1048576)`, m: rep(`"terminal_output_bytes": 1048576`, `"terminal_output_bytes": 2097152`)},
		{name: "limits of another profile", ptr: "/resource_profile/cpu_time_ms", phrase: `does not match profile "tiny" (10)`, m: rep(`"small"`, `"tiny"`), pol: polSecondProfile},
		// Path grants.
		{name: "grant alias charset", ptr: "/path_grants/0/alias", phrase: "not an identifier", m: rep(`"alias": "workspace"`, `"alias": "../etc"`)},
		{name: "unknown alias", ptr: "/path_grants/0/alias", phrase: "not a path alias of the policy", m: rep(`"alias": "workspace"`, `"alias": "home"`)},
		{name: "alias not allowed by template", ptr: "/path_grants/0/alias", phrase: `not allowed by template "codex-safe"`, m: rep(`"alias": "workspace"`, `"alias": "zdata"`), pol: polAliasNotInTemplate},
		{name: "grants duplicate", ptr: "/path_grants/1/alias", phrase: "duplicate", m: func(t testing.TB, s string) string {
			return set("/path_grants/-", mustPlan(t, s).PathGrants[0])(t, s)
		}},
		{name: "grants unsorted", ptr: "/path_grants/1/alias", phrase: "not sorted after", m: set("/path_grants/-", map[string]any{"alias": "data"})},
		{name: "access not offered", ptr: "/path_grants/0/access", phrase: `"read_only" is not offered for alias "workspace"`, m: rep(`"access": "ephemeral_write"`, `"access": "read_only"`)},
		{name: "direct_write requested", ptr: "/path_grants/0/access", phrase: "never launchable", m: all(rep(`"access": "ephemeral_write"`, `"access": "direct_write"`), rep(`"copy"`, `"bind"`), rep(`"empty_directory"`, `"must_exist"`), rep(`"remove"`, `"none"`), rep(`"max_bytes": 2097152`, `"max_bytes": 0`)), pol: polLegacy},
		{name: "materialization not offered", ptr: "/path_grants/0/materialization", phrase: `"bind" is not offered`, m: rep(`"copy"`, `"bind"`)},
		{name: "create policy not offered", ptr: "/path_grants/0/create_policy", phrase: `"must_exist" is not offered`, m: rep(`"empty_directory"`, `"must_exist"`)},
		{name: "cleanup policy not offered", ptr: "/path_grants/0/cleanup_policy", phrase: `"retain" is not offered`, m: rep(`"remove"`, `"retain"`)},
		{name: "tuple of another access", ptr: "/path_grants/0/create_policy", phrase: "not offered", m: all(rep(`"ephemeral_write"`, `"retained_write"`), rep(`"remove"`, `"retain"`)), pol: polOffersRetained},
		{name: "ttl over max", ptr: "/path_grants/0/ttl_secs", phrase: `outside 1..120, the max_ttl_secs of alias "workspace"`, m: rep(`"ttl_secs": 120`, `"ttl_secs": 121`)},
		{name: "ttl zero", ptr: "/path_grants/0/ttl_secs", phrase: "outside 1..120", m: rep(`"ttl_secs": 120`, `"ttl_secs": 0`)},
		{name: "ttl shorter than the session", ptr: "/path_grants/0/ttl_secs", phrase: "1 s is shorter than the profile's wall_time_ms (2000 ms)", m: rep(`"ttl_secs": 120`, `"ttl_secs": 1`)},
		{name: "quota mismatch", ptr: "/path_grants/0/max_bytes", phrase: `does not match the quota of alias "workspace" for ephemeral_write (2097152)`, m: rep(`"max_bytes": 2097152`, `"max_bytes": 4194304`)},
		{name: "quota smaller", ptr: "/path_grants/0/max_bytes", phrase: "does not match the quota", m: rep(`"max_bytes": 2097152`, `"max_bytes": 1`)},
		// Library projections.
		{name: "library digest uppercase", ptr: "/library_projections/0/digest", phrase: "64 lowercase hex", m: rep(`"4c9f2311`, `"4C9F2311`)},
		{name: "library digest short", ptr: "/library_projections/0/digest", phrase: "64 lowercase hex", m: rep(bundle, bundle[:63])},
		{name: "library digest not hex", ptr: "/library_projections/0/digest", phrase: "64 lowercase hex", m: rep(bundle, "../../../etc/passwd"+bundle[19:])},
		{name: "library digest with prefix", ptr: "/library_projections/0/digest", phrase: "64 lowercase hex", m: rep(bundle, "sha256:"+bundle)},
		{name: "projections duplicate", ptr: "/library_projections/1/digest", phrase: "duplicate", m: set("/library_projections/-", map[string]any{"digest": bundle, "destination_alias": "libraries"})},
		{name: "projections unsorted", ptr: "/library_projections/1/digest", phrase: "not sorted after", m: set("/library_projections/-", map[string]any{"digest": otherDigest, "destination_alias": "libraries"})},
		{name: "destination unknown", ptr: "/library_projections/0/destination_alias", phrase: "not a library projection destination", m: rep(`"libraries"`, `"books"`)},
		{name: "destination not allowed", ptr: "/library_projections/0/destination_alias", phrase: `"books" is not allowed by template "codex-safe"`, m: rep(`"libraries"`, `"books"`), pol: all(polDestNotInTemplate, set("/library_projection_destinations/-", map[string]any{"alias": "libraries", "target_path": "/opt/sage/library-bundles"}))},
		{name: "destination is a path alias", ptr: "/library_projections/0/destination_alias", phrase: "not a library projection destination", m: rep(`"libraries"`, `"workspace"`)},
		// Identifier lists.
		{name: "egress unknown", ptr: "/egress_policy_ids/0", phrase: "not an egress policy of the policy", m: rep(`["no-network"]`, `["open-network"]`)},
		{name: "egress unsorted", ptr: "/egress_policy_ids/1", phrase: "not sorted after", m: rep(`["no-network"]`, `["no-network", "allow-git"]`), pol: polTwoEgress},
		{name: "tool unknown", ptr: "/tool_policy_ids/0", phrase: "not a tool policy of the policy", m: rep(`["sage-readonly"]`, `["sage-write"]`)},
		{name: "tool duplicate", ptr: "/tool_policy_ids/1", phrase: "duplicate", m: rep(`["sage-readonly"]`, `["sage-readonly", "sage-readonly"]`)},
		{name: "secret unknown", ptr: "/secret_handles/0", phrase: "not a secret handle of the policy", m: rep(`["codex-token"]`, `["aws-root"]`)},
		{name: "secret unsorted", ptr: "/secret_handles/1", phrase: "not sorted after", m: rep(`["codex-token"]`, `["git-token", "codex-token"]`), pol: polTwoSecrets},
		{name: "secret charset", ptr: "/secret_handles/0", phrase: "not an identifier", m: rep(`["codex-token"]`, `["Codex-Token"]`)},
	}
}

func mustPlan(t testing.TB, s string) *Plan {
	t.Helper()
	p, err := Decode([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExamplePlanValidates(t *testing.T) {
	now := time.Now()
	pol := loadPolicy(t, readText(t, examplePolicyPath))
	p := mustPlan(t, planFor(t, now))
	if err := Validate(p, pol, now); err != nil {
		t.Fatal(err)
	}
	// The example file itself, at a now 60 s before its expiry.
	p = mustPlan(t, readText(t, examplePlanPath))
	if err := Validate(p, pol, time.UnixMilli(int64(p.ExpiresAtUnixMs)-60000)); err != nil {
		t.Fatal(err)
	}
}

func TestBadPlans(t *testing.T) {
	now := time.Now()
	basePolicy := readText(t, examplePolicyPath)
	seen := map[string]bool{}
	for _, tc := range badPlans() {
		t.Run(tc.name, func(t *testing.T) {
			if seen[tc.name] {
				t.Fatalf("case name %q repeats", tc.name)
			}
			seen[tc.name] = true
			doc := planFor(t, now)
			if tc.at != nil {
				doc = tc.at(now)(t, doc)
			}
			if tc.m != nil {
				doc = tc.m(t, doc)
			}
			polText := basePolicy
			if tc.pol != nil {
				polText = tc.pol(t, polText)
			}
			pol := loadPolicy(t, polText)
			p, err := Decode([]byte(doc))
			if err == nil {
				err = Validate(p, pol, now)
			}
			if err == nil {
				t.Fatalf("accepted:\n%s", doc)
			}
			jsonedit.CheckFault(t, err, tc.ptr, tc.phrase)
			// A fault goes back to the remote controller: it must not
			// reveal the operator's local paths or launch command.
			for _, local := range []string{"/srv/", "/usr/bin", "/opt/", "/workspace", "PATH=", "--version"} {
				if strings.Contains(err.Error(), local) {
					t.Fatalf("fault %q reveals local policy detail %q", err, local)
				}
			}
		})
	}
}

func TestContentDigest(t *testing.T) {
	pretty := readText(t, examplePlanPath)
	p := mustPlan(t, pretty)
	c := Canonical(p)
	q := mustPlan(t, string(c))
	if string(Canonical(q)) != string(c) {
		t.Fatalf("canonical form not stable:\n%s\n%s", c, Canonical(q))
	}
	if ContentDigest(p) != ContentDigest(q) {
		t.Fatal("pretty and canonical spellings have different content digests")
	}
	// Member order and escapes do not change the content digest.
	reordered := `{"secret_handles":["codex-\u0074oken"],` + strings.TrimPrefix(rep(`"secret_handles": ["codex-token"]`, `"tool_policy_ids": ["sage-readonly"]`)(t,
		rep(`  "tool_policy_ids": ["sage-readonly"],`+"\n", "")(t, pretty)), "{")
	r := mustPlan(t, reordered)
	if ContentDigest(r) != ContentDigest(p) {
		t.Fatalf("reordered plan has another content digest:\n%s", reordered)
	}
	// Any change of content changes it.
	changed := mustPlan(t, rep(`"ttl_secs": 120`, `"ttl_secs": 119`)(t, pretty))
	if ContentDigest(changed) == ContentDigest(p) {
		t.Fatal("a changed plan has the same content digest")
	}
	if d := ContentDigest(p); !policy.ValidSHA256Hex(d) {
		t.Fatalf("content digest %q is not lowercase hex", d)
	}
}

func TestCheckControllerDigest(t *testing.T) {
	good := strings.Repeat("0123456789abcdef", 4)
	if err := CheckControllerDigest(good); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", good[:63], good + "0", strings.ToUpper(good), "g" + good[1:], " " + good[1:], "blake3:" + good} {
		err := CheckControllerDigest(bad)
		if !errors.Is(err, ErrControllerDigest) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestValidateNil(t *testing.T) {
	pol := loadPolicy(t, readText(t, examplePolicyPath))
	if err := Validate(nil, pol, time.Now()); err == nil {
		t.Fatal("nil plan accepted")
	}
	if err := Validate(mustPlan(t, planFor(t, time.Now())), nil, time.Now()); err == nil {
		t.Fatal("nil policy accepted")
	}
	// A clock before 1970 cannot judge an expiry (and would make the
	// arithmetic inexact).
	err := Validate(mustPlan(t, planFor(t, time.Now())), pol, time.UnixMilli(-1))
	var f *Fault
	if !errors.As(err, &f) || f.Pointer != "/expires_at_unix_ms" || !strings.Contains(f.Msg, "cannot judge expiry") {
		t.Fatalf("clock before 1970: %v", err)
	}
}

// Short names for the table rows.
type mutation = jsonedit.Mutation

var (
	rep = jsonedit.Rep
	set = jsonedit.Set
	all = jsonedit.All
)
