// Package plan is the session plan a remote controller submits to
// gloved: identifiers only. A plan selects a runtime template, a
// resource profile, path alias grants, library projections, egress and
// tool policies and secret handles that the operator's policy
// (supervisor/policy) defines, and repeats the numbers and digests it
// was approved against so that any drift between approval and launch is
// a mismatch. No member can carry a host path, an executable, an
// argument, an environment variable or a secret value: the schema has no
// field for them, and unknown members are rejected.
//
// The schema, every check and the canonical encoding are documented in
// docs/plan.md.
package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/glove-sandbox/glove/supervisor/internal/strictjson"
	"github.com/glove-sandbox/glove/supervisor/policy"
)

// SchemaVersion is the only plan schema_version this Glove reads.
const SchemaVersion = 1

// MaxPlanBytes bounds a plan document before it is parsed. A plan is a
// few identifiers and numbers; every list in it is bounded by the
// policy anyway (entries are unique and must be defined there), and this
// bound stops a hostile controller from making gloved parse megabytes
// first.
const MaxPlanBytes = 64 << 10

// Plan is a decoded session plan. Decode fills it; Validate checks it
// against a policy; only a validated Plan may be used.
type Plan struct {
	SchemaVersion        int                    `json:"schema_version"`
	PolicyRevision       uint64                 `json:"policy_revision"`
	ExpiresAtUnixMs      uint64                 `json:"expires_at_unix_ms"`
	RuntimeTemplateID    string                 `json:"runtime_template_id"`
	RuntimeID            string                 `json:"runtime_id"`
	SandboxBackend       string                 `json:"sandbox_backend"`
	AdapterCommandDigest string                 `json:"adapter_command_digest"`
	ResourceProfile      policy.ResourceProfile `json:"resource_profile"`
	PathGrants           []PathGrant            `json:"path_grants"`
	LibraryProjections   []LibraryProjection    `json:"library_projections"`
	EgressPolicyIDs      []string               `json:"egress_policy_ids"`
	ToolPolicyIDs        []string               `json:"tool_policy_ids"`
	SecretHandles        []string               `json:"secret_handles"`
}

// PathGrant requests one path alias with one of its access tuples, for
// TTLSecs seconds.
type PathGrant struct {
	Alias           string `json:"alias"`
	Access          string `json:"access"`
	Materialization string `json:"materialization"`
	CreatePolicy    string `json:"create_policy"`
	CleanupPolicy   string `json:"cleanup_policy"`
	TTLSecs         uint64 `json:"ttl_secs"`
	MaxBytes        uint64 `json:"max_bytes"`
}

// LibraryProjection requests the library bundle whose SHA-256 is Digest
// (lowercase hex), mounted read-only at the destination's target.
type LibraryProjection struct {
	Digest           string `json:"digest"`
	DestinationAlias string `json:"destination_alias"`
}

// Fault is a decoding or validation fault: the JSON Pointer of the first
// offending value and what is wrong with it, as one line.
type Fault = strictjson.Fault

// Decode strictly decodes a plan document (at most MaxPlanBytes): one
// JSON object, no unknown member, no duplicate name, no null, no
// trailing data, member names matched case-sensitively. It does not
// validate; a failure is a *Fault naming the JSON Pointer.
func Decode(data []byte) (*Plan, error) {
	var p Plan
	if err := strictjson.Unmarshal(data, &p, MaxPlanBytes); err != nil {
		return nil, err
	}
	return &p, nil
}

// Canonical encodes p as canonical JSON: members in byte order of their
// names at every level, no insignificant whitespace, integers in plain
// decimal, strings minimally escaped (RFC 8785 rules), every member
// always present (empty lists as []). For a validated plan, whose
// strings are identifiers and hex digests and whose integers are below
// 2^53, the result is exactly the RFC 8785 (JCS) encoding. It is what
// gloved stores, and what ContentDigest hashes.
func Canonical(p *Plan) []byte {
	var w strictjson.Writer
	w.BeginObject()
	w.StringMember("adapter_command_digest", p.AdapterCommandDigest)
	w.StringsMember("egress_policy_ids", p.EgressPolicyIDs)
	w.UintMember("expires_at_unix_ms", p.ExpiresAtUnixMs)
	w.Key("library_projections")
	w.BeginArray()
	for _, l := range p.LibraryProjections {
		w.BeginObject()
		w.StringMember("destination_alias", l.DestinationAlias)
		w.StringMember("digest", l.Digest)
		w.EndObject()
	}
	w.EndArray()
	w.Key("path_grants")
	w.BeginArray()
	for _, g := range p.PathGrants {
		w.BeginObject()
		w.StringMember("access", g.Access)
		w.StringMember("alias", g.Alias)
		w.StringMember("cleanup_policy", g.CleanupPolicy)
		w.StringMember("create_policy", g.CreatePolicy)
		w.StringMember("materialization", g.Materialization)
		w.UintMember("max_bytes", g.MaxBytes)
		w.UintMember("ttl_secs", g.TTLSecs)
		w.EndObject()
	}
	w.EndArray()
	w.UintMember("policy_revision", p.PolicyRevision)
	w.Key("resource_profile")
	r := &p.ResourceProfile
	w.BeginObject()
	w.UintMember("cpu_time_ms", r.CPUTimeMs)
	w.UintMember("disk_bytes", r.DiskBytes)
	w.UintMember("memory_bytes", r.MemoryBytes)
	w.UintMember("pids", r.Pids)
	w.StringMember("profile_id", r.ProfileID)
	w.UintMember("terminal_output_bytes", r.TerminalOutputBytes)
	w.UintMember("wall_time_ms", r.WallTimeMs)
	w.EndObject()
	w.StringMember("runtime_id", p.RuntimeID)
	w.StringMember("runtime_template_id", p.RuntimeTemplateID)
	w.StringMember("sandbox_backend", p.SandboxBackend)
	w.Key("schema_version")
	w.Int(int64(p.SchemaVersion))
	w.StringsMember("secret_handles", p.SecretHandles)
	w.StringsMember("tool_policy_ids", p.ToolPolicyIDs)
	w.EndObject()
	return w.Bytes()
}

// ContentDigest is the plan_content_digest: lowercase hex SHA-256 of
// Canonical(p). Two plans have the same content digest exactly when they
// grant the same thing, however the controller spelled them (member
// order, whitespace, escapes).
func ContentDigest(p *Plan) string {
	sum := sha256.Sum256(Canonical(p))
	return hex.EncodeToString(sum[:])
}

// ErrControllerDigest marks a controller_plan_digest that is not 64
// lowercase hex characters.
var ErrControllerDigest = errors.New("controller plan digest is not 64 lowercase hex characters")

// CheckControllerDigest checks the controller's own plan digest (Sage's
// BLAKE3-256, used for correlation). Glove stores it beside its own
// content digest but does not recompute it: it has no BLAKE3 and needs
// none, since its own authority is the content digest. It accepts
// exactly one spelling, so one digest can never be stored as two
// different strings that would defeat an idempotency check.
func CheckControllerDigest(s string) error {
	if !policy.ValidSHA256Hex(s) { // same shape: 32 bytes as lowercase hex
		return fmt.Errorf("check controller plan digest %q: %w", s, ErrControllerDigest)
	}
	return nil
}
