// SPDX-License-Identifier: Apache-2.0

// Package policy is gloved's session policy: the operator-owned local file
// that defines everything a session may ever receive (runtime templates
// with their launch commands, host path aliases, library destinations,
// resource profiles, egress and tool policy identifiers, secret handles).
// A remote controller's plan can only select from it by identifier
// (supervisor/authority/plan); it can never add a path, an executable, an
// environment variable or a secret.
//
// The schema and every rule are documented in docs/policy.md; the
// adapter command digest in docs/adapter-digest.md.
package policy

import "github.com/glove-sandbox/glove/supervisor/internal/strictjson"

// SchemaVersion is the only policy schema_version this Glove reads.
const SchemaVersion = 1

// MaxPolicyBytes bounds the policy file (reference table "Protected
// files"): it is a list of identifiers, paths and numbers; anything
// larger is not a policy an operator wrote by hand or by generator.
const MaxPolicyBytes = 1 << 20

// Sandbox backends. Only linux_production exists in this Glove: it is
// the one backend whose enforcement (namespaces, cgroups, seccomp, quota
// filesystems) is implemented. Other backends named by the reference
// design (a remote Linux container, macOS) are rejected at validation
// rather than parsed and flagged: a backend gloved cannot enforce must
// not be nameable by a policy it accepts, so no later code path can
// mistake it for launch authority.
const (
	BackendLinuxProduction = "linux_production"
)

// Access modes of a path alias.
const (
	// AccessReadOnly: the sandbox reads the host tree.
	AccessReadOnly = "read_only"
	// AccessEphemeralWrite: the sandbox writes a private copy that is
	// removed after the session.
	AccessEphemeralWrite = "ephemeral_write"
	// AccessRetainedWrite: the sandbox writes a private copy that is
	// retained, as a staged change, for separate inspection.
	AccessRetainedWrite = "retained_write"
	// AccessDirectWrite is legacy: it parses (old policies stay
	// readable) but is never launchable, and a plan that requests it is
	// rejected. Writing the host tree in place would let the sandboxed
	// program (the attacker) mutate operator data with no review step.
	AccessDirectWrite = "direct_write"
)

// Materializations of a path alias.
const (
	// MaterializationBind mounts the host tree itself (read-only).
	MaterializationBind = "bind"
	// MaterializationCopy copies the host tree into quota-bounded
	// storage owned by the session.
	MaterializationCopy = "copy"
)

// Create policies: what happens when the host path does not exist.
const (
	// CreateMustExist: the session fails to prepare.
	CreateMustExist = "must_exist"
	// CreateEmptyDirectory: the materialization starts as an empty
	// directory. The host is never modified.
	CreateEmptyDirectory = "empty_directory"
)

// Cleanup policies: what happens to the materialization after the session.
const (
	// CleanupNone: nothing was materialized (a bind); the mount goes with
	// the sandbox.
	CleanupNone = "none"
	// CleanupRemove: the copy is removed.
	CleanupRemove = "remove"
	// CleanupRetain: the copy is kept as a staged change.
	CleanupRetain = "retain"
)

// Ceilings. Each bound is far above a real session and far below the
// point where arithmetic on it (adding a TTL to a clock, summing quotas)
// could overflow or lose precision in a JavaScript controller (2^53).
const (
	MaxSafeInteger         = 1<<53 - 1 // revision and other counters
	MaxPlanTTLMsCeiling    = 48 * 3600 * 1000
	MaxCPUTimeMs           = 7 * 24 * 3600 * 1000 // CPU time may exceed wall time on several cores
	MaxMemoryBytes         = 1 << 40
	MaxPids                = 1 << 22 // the kernel's PID_MAX_LIMIT; glove-cgroup's own ceiling
	MaxWallTimeMs          = 24 * 3600 * 1000
	MaxDiskBytes           = 1 << 40 // glove-loopext4's image ceiling
	MaxTerminalOutputBytes = 1 << 30
	MaxAliasBytes          = 1 << 40 // a copy's quota; same ceiling as disk
	MaxAliasTTLSecs        = 7 * 24 * 3600
	LaunchHeadroomMs       = 1000 // max_plan_ttl_ms - wall_time_ms, at least
	MaxTemplates           = 256
	MaxPathAliases         = 256
	MaxDestinations        = 256
	MaxProfiles            = 256
	MaxIdentifiers         = 1024 // per identifier list
	MaxAccessTuples        = 8
	MaxLaunchItems         = 256 // arguments, environment entries, read-only paths
	MaxSearchPaths         = 32
	MaxLaunchStringBytes   = 4096
	MaxPathBytes           = 4095 // PATH_MAX less the terminating NUL
	MaxPathComponentBytes  = 255  // NAME_MAX
	// MaxCredentialBytes bounds one credential (a token file, an
	// auth.json): it is read whole into memory at each launch and back
	// after the session.
	MaxCredentialBytes = 1 << 20
	// MaxCredentialPolicies bounds the credential policies.
	MaxCredentialPolicies = 64
	// MaxCredentialVariableBytes bounds max_bytes of a credential
	// delivered as an environment variable: far below the kernel's
	// bound on one execve string (MAX_ARG_STRLEN, 128 KiB), far above
	// any API key or token.
	MaxCredentialVariableBytes = 32 << 10
)

// Policy is a decoded session policy. Decode fills it; Validate checks
// it; only a validated Policy may be used.
type Policy struct {
	SchemaVersion                 int                  `json:"schema_version"`
	Revision                      uint64               `json:"revision"`
	MaxPlanTTLMs                  uint64               `json:"max_plan_ttl_ms"`
	RuntimeTemplates              []RuntimeTemplate    `json:"runtime_templates"`
	PathAliases                   []PathAlias          `json:"path_aliases"`
	LibraryProjectionDestinations []LibraryDestination `json:"library_projection_destinations"`
	ResourceProfiles              []ResourceProfile    `json:"resource_profiles"`
	EgressPolicyIDs               []string             `json:"egress_policy_ids"`
	ToolPolicyIDs                 []string             `json:"tool_policy_ids"`
	SecretHandles                 []string             `json:"secret_handles"`
	// CredentialPolicies map secret handles to credential sources
	// (optional; a handle without one cannot be launched).
	CredentialPolicies []CredentialPolicy `json:"credential_policies,omitzero"`
	// EgressPolicies give egress policy identifiers their endpoints
	// (optional; an identifier without one, but for EgressNoNetwork,
	// cannot be launched).
	EgressPolicies []EgressPolicy `json:"egress_policies,omitzero"`
}

// EgressNoNetwork is the egress policy of a sandbox with loopback alone
// and no endpoint; it needs no entry in egress_policies.
const EgressNoNetwork = "no-network"

// MaxEgressEndpoints bounds the endpoints of one egress policy, and of
// one session (glove-shim listens on at most this many).
const MaxEgressEndpoints = 8

// EgressPolicy is what an egress policy identifier stands for: the
// loopback endpoints a session selecting it gets inside its sandbox,
// each relayed to an upstream the operator runs on the host (a model
// gateway, an HTTP CONNECT proxy that holds the credentials). Nothing
// else is reachable: the sandbox's network namespace has loopback alone
// (docs/policy.md, "Egress policies").
type EgressPolicy struct {
	EgressPolicyID string           `json:"egress_policy_id"`
	Endpoints      []EgressEndpoint `json:"endpoints"`
}

// EgressEndpoint is one endpoint: Address is exactly "127.0.0.1:PORT"
// inside the sandbox; AllowPrivate must be true, saying in the policy
// that this endpoint is a private (loopback) address; Upstream is where
// its connections go.
type EgressEndpoint struct {
	Address      string         `json:"address"`
	AllowPrivate bool           `json:"allow_private"`
	Upstream     EgressUpstream `json:"upstream"`
}

// EgressUpstream is exactly one of a unix socket on the host (by absolute
// path) or a TCP address of the host's loopback.
type EgressUpstream struct {
	UnixSocket string `json:"unix_socket,omitzero"`
	TCP        string `json:"tcp,omitzero"`
}

// CredentialPolicy is what a secret handle stands for: the operator's
// source file (owner-protected: ReadProtected's rules) and how the
// session receives it, exactly one of: DestinationPath, the exact path
// in the private harness home where the session finds a copy, or
// EnvironmentVariable, the name of the program's environment variable
// that holds it (one line). A plan names the handle only; the source
// path never leaves the host. At launch the source is imported into a
// lease Glove owns (the session sees a copy of the lease, never the
// source); what the session leaves at a destination becomes the lease's
// next version, so a harness may rotate its token, while a variable is
// the program's own copy and never goes back (docs/policy.md,
// "Credential policies").
type CredentialPolicy struct {
	Handle              string `json:"handle"`
	SourcePath          string `json:"source_path"`
	DestinationPath     string `json:"destination_path,omitzero"`
	EnvironmentVariable string `json:"environment_variable,omitzero"`
	MaxBytes            uint64 `json:"max_bytes"`
}

// RuntimeTemplate is one launchable runtime: what it executes and which
// aliases and destinations a plan selecting it may use.
type RuntimeTemplate struct {
	RuntimeTemplateID             string   `json:"runtime_template_id"`
	RuntimeID                     string   `json:"runtime_id"`
	AdapterCommandDigest          string   `json:"adapter_command_digest"`
	SandboxBackend                string   `json:"sandbox_backend"`
	AllowedPathAliases            []string `json:"allowed_path_aliases"`
	AllowedProjectionDestinations []string `json:"allowed_projection_destinations"`
	Launch                        Launch   `json:"launch"`
}

// Launch is what a template executes. Exactly one of ExecutablePath (a
// pinned executable) and RuntimeDiscovery (with ExecutableSearchPaths) is
// set.
type Launch struct {
	ExecutablePath        string   `json:"executable_path,omitzero"`
	RuntimeDiscovery      string   `json:"runtime_discovery,omitzero"`
	ExecutableSearchPaths []string `json:"executable_search_paths,omitzero"`
	Arguments             []string `json:"arguments"`
	Environment           []string `json:"environment"`
	ReadOnlyPaths         []string `json:"read_only_paths"`
	// HostFiles are the parts of /etc the program gets (HostFilesCA,
	// HostFilesNameService), sorted, unique; none: no /etc at all.
	HostFiles []string `json:"host_files,omitzero"`
}

// Members of launch.host_files. Each is a fixed set of files made for one
// need, never an operator-chosen path: a blanket /etc would hand the
// sandbox the host's accounts, its machine identity, its resolver and
// whatever else an administrator keeps there.
const (
	// HostFilesCA: the host's CA certificates, read-only: HostCADir
	// (with ca-certificates.crt, the bundle OpenSSL, rustls-native-certs
	// and Bun read) and the directories its hashed links point into
	// (HostCALinkDirs), as Debian's ca-certificates lays them out.
	HostFilesCA = "ca_certificates"
	// HostFilesNameService: a synthetic /etc (read-only) holding passwd
	// and group that name the sandbox user alone, nsswitch.conf (files
	// only) and hosts (loopback and the sandbox's hostname). Not the
	// host's: those name the host's accounts.
	HostFilesNameService = "name_service"
)

// HostCADir is the CA directory HostFilesCA binds at the same path.
const HostCADir = "/etc/ssl/certs"

// HostCALinkDirs are where HostCADir's links point (Debian: the
// distribution's certificates and the operator's own, such as a
// corporate CA added with update-ca-certificates); each is bound
// read-only at the same path when it exists on the host and no
// read-only path of the template already shows it.
var HostCALinkDirs = []string{"/usr/local/share/ca-certificates", "/usr/share/ca-certificates"}

// HostFilesMembers lists the host_files values, sorted.
func HostFilesMembers() []string { return []string{HostFilesCA, HostFilesNameService} }

// PathAlias is a host path a plan may request by name.
type PathAlias struct {
	Alias      string        `json:"alias"`
	HostPath   string        `json:"host_path"`
	TargetPath string        `json:"target_path"`
	MaxTTLSecs uint64        `json:"max_ttl_secs"`
	Access     []AccessTuple `json:"access"`
}

// AccessTuple is one way a path alias may be granted; a plan must request
// one of them exactly.
type AccessTuple struct {
	Access          string `json:"access"`
	Materialization string `json:"materialization"`
	CreatePolicy    string `json:"create_policy"`
	CleanupPolicy   string `json:"cleanup_policy"`
	MaxBytes        uint64 `json:"max_bytes"`
}

// Launchable reports whether a plan may use this tuple: everything but
// the legacy direct_write.
func (a AccessTuple) Launchable() bool { return a.Access != AccessDirectWrite }

// LibraryDestination is where digest-named library bundles are mounted
// read-only.
type LibraryDestination struct {
	Alias      string `json:"alias"`
	TargetPath string `json:"target_path"`
}

// ResourceProfile is a named set of the six limits a session runs under.
// A plan repeats the numbers, so a controller cannot approve one set and
// receive another.
type ResourceProfile struct {
	ProfileID           string `json:"profile_id"`
	CPUTimeMs           uint64 `json:"cpu_time_ms"`
	MemoryBytes         uint64 `json:"memory_bytes"`
	Pids                uint64 `json:"pids"`
	WallTimeMs          uint64 `json:"wall_time_ms"`
	DiskBytes           uint64 `json:"disk_bytes"`
	TerminalOutputBytes uint64 `json:"terminal_output_bytes"`
}

// Fault is a validation or decoding fault: the JSON Pointer of the first
// offending value and what is wrong with it, as one line.
type Fault = strictjson.Fault

// Template returns the template with the given id.
func (p *Policy) Template(id string) (*RuntimeTemplate, bool) {
	for i := range p.RuntimeTemplates {
		if p.RuntimeTemplates[i].RuntimeTemplateID == id {
			return &p.RuntimeTemplates[i], true
		}
	}
	return nil, false
}

// Alias returns the path alias with the given name.
func (p *Policy) Alias(name string) (*PathAlias, bool) {
	for i := range p.PathAliases {
		if p.PathAliases[i].Alias == name {
			return &p.PathAliases[i], true
		}
	}
	return nil, false
}

// Destination returns the library destination with the given alias.
func (p *Policy) Destination(name string) (*LibraryDestination, bool) {
	for i := range p.LibraryProjectionDestinations {
		if p.LibraryProjectionDestinations[i].Alias == name {
			return &p.LibraryProjectionDestinations[i], true
		}
	}
	return nil, false
}

// Egress returns the egress policy with the given id.
func (p *Policy) Egress(id string) (*EgressPolicy, bool) {
	for i := range p.EgressPolicies {
		if p.EgressPolicies[i].EgressPolicyID == id {
			return &p.EgressPolicies[i], true
		}
	}
	return nil, false
}

// Credential returns the credential policy of a secret handle.
func (p *Policy) Credential(handle string) (*CredentialPolicy, bool) {
	for i := range p.CredentialPolicies {
		if p.CredentialPolicies[i].Handle == handle {
			return &p.CredentialPolicies[i], true
		}
	}
	return nil, false
}

// Profile returns the resource profile with the given id.
func (p *Policy) Profile(id string) (*ResourceProfile, bool) {
	for i := range p.ResourceProfiles {
		if p.ResourceProfiles[i].ProfileID == id {
			return &p.ResourceProfiles[i], true
		}
	}
	return nil, false
}
