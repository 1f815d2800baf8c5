// SPDX-License-Identifier: Apache-2.0

package session

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/internal/strictjson"
)

// LaunchDigestSchema names the managed-launch digest's preimage.
const LaunchDigestSchema = "glove.managed-launch-v5"

// Transport is what a launch's local-service transport binds: its kind,
// the alias-to-descriptor map the program sees, the identities of both
// socket endpoints (the guest end of the socketpair and the upstream
// socket file with its peer's uid), and the operator's upstream manifest
// (alias and socket path).
type Transport struct {
	Kind     string          `json:"kind"` // "inherited-stream-v1" or "pathname-compat-v1"
	FDs      map[string]int  `json:"fds"`
	Guest    EndpointID      `json:"guest"`
	Upstream EndpointID      `json:"upstream"`
	Manifest []ManifestEntry `json:"manifest"`
	// Dir and Upstreams are the pathname transport's: the alias
	// directory the program sees, and each manifest entry's socket file
	// identity at launch (its connections are made later, one by one,
	// so no guest or upstream endpoint is fixed at launch).
	Dir       string       `json:"dir,omitzero"`
	Upstreams []EndpointID `json:"upstreams,omitzero"`
}

// EndpointID identifies a socket endpoint.
type EndpointID struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
	UID uint32 `json:"uid"`
}

// ManifestEntry is one configured upstream.
type ManifestEntry struct {
	Alias  string `json:"alias"`
	Socket string `json:"socket"`
}

type launchPreimage struct {
	Schema               string                 `json:"schema"`
	AdapterCommandDigest string                 `json:"adapter_command_digest"`
	Executable           string                 `json:"executable"`
	Args                 []string               `json:"args"`
	Env                  []string               `json:"env"`
	Cwd                  string                 `json:"cwd"`
	Hostname             string                 `json:"hostname"`
	Mounts               []Mount                `json:"mounts"`
	Limits               policy.ResourceProfile `json:"limits"`
	Terminal             bool                   `json:"terminal"`
	Transport            *Transport             `json:"transport"`
	ExecutablePin        *ExecutablePin         `json:"executable_pin"`
	LibraryProjections   []Projection           `json:"library_projections"`
	SkillProjection      *SkillProjection       `json:"skill_projection"`
	// v2: the plan's labels (Launch.EgressPolicyIDs, ToolPolicyIDs).
	EgressPolicyIDs []string `json:"egress_policy_ids"`
	ToolPolicyIDs   []string `json:"tool_policy_ids"`
	// v3: the credentials, each with its lease identity and the version
	// launched (never the content: the digest is no oracle for it).
	// v5: a credential delivered as a variable names it
	// (environment_variable) instead of a destination; its value is not
	// in Env either (writeBundle adds it), so a guess at it cannot be
	// confirmed against a published digest.
	Credentials []Credential `json:"credential_leases"`
	// v4: ExecutablePin carries the stage tree (root and content digest)
	// of a staged runtime, which is mounted whole.
	// v4 too: the egress endpoints: policy, port and upstream of each.
	Egress []egressPreimage `json:"egress"`
}

type egressPreimage struct {
	PolicyID string `json:"egress_policy_id"`
	Port     uint16 `json:"port"`
	Network  string `json:"upstream_network"`
	Address  string `json:"upstream_address"`
}

// LaunchDigest is the managed-launch digest: SHA-256 of the canonical
// JSON of everything a session was launched with (the adapter command
// digest, the resolved executable, arguments, environment, working
// directory, mounts and limits, a discovered executable's pinned
// identity with, for a staged runtime, its stage tree's root and content
// digest, the library projections, and a native-skill runtime's
// private home with its skill projection digest) and, for a session with a local-service
// transport, the transport's kind, descriptor map, both endpoint
// identities and the upstream manifest. Two launches that differ in any
// of these have different digests, so the digest recorded for a session
// says exactly which composition ran.
func LaunchDigest(l *Launch, adapterDigest string, t *Transport) string {
	p := launchPreimage{Schema: LaunchDigestSchema, AdapterCommandDigest: adapterDigest,
		Executable: l.Executable, Args: nonNil(l.Args), Env: nonNil(l.Env), Cwd: l.Cwd, Hostname: l.Hostname,
		Mounts: nonNil(l.Mounts), Limits: l.Limits, Terminal: l.Terminal, Transport: t,
		ExecutablePin: l.ExecutablePin, LibraryProjections: nonNil(l.Projections), SkillProjection: l.Skills,
		EgressPolicyIDs: nonNil(l.EgressPolicyIDs), ToolPolicyIDs: nonNil(l.ToolPolicyIDs), Credentials: nonNil(l.Credentials)}
	p.Egress = []egressPreimage{}
	for _, ep := range l.Egress {
		p.Egress = append(p.Egress, egressPreimage{PolicyID: ep.PolicyID, Port: ep.Port, Network: ep.Upstream.Network, Address: ep.Upstream.Address})
	}
	sum := sha256.Sum256(strictjson.Canonical(p))
	return hex.EncodeToString(sum[:])
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
