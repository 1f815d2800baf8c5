// SPDX-License-Identifier: Apache-2.0

// Package plan is the session plan a remote controller submits to
// gloved: identifiers only. A plan selects a runtime template, a
// resource profile, path alias grants, library projections, egress and
// tool policies and secret handles that the operator's policy
// (supervisor/authority/policy) defines, and repeats the numbers and digests it
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

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/internal/strictjson"
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
func Canonical(p *Plan) []byte { return strictjson.Canonical(p) }

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
