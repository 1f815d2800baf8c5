// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/glove-sandbox/glove/names"
	"github.com/glove-sandbox/glove/spec"
	"github.com/glove-sandbox/glove/supervisor/engine/egress"
	"github.com/glove-sandbox/glove/supervisor/internal/strictjson"
)

var (
	ptr        = strictjson.Ptr
	join       = strictjson.Join
	faultf     = strictjson.Faultf
	checkOrder = strictjson.CheckOrder
	envRE      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	hexRE      = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// IdentifierPattern is the charset of every identifier (template, runtime,
// alias, destination, profile, egress and tool policy ids, secret
// handles): lowercase so two spellings can never name one thing, no "/"
// so an identifier can never become a path, at most 64 bytes.
const IdentifierPattern = names.IdentifierPattern

// ValidIdentifier reports whether s matches IdentifierPattern.
func ValidIdentifier(s string) bool { return names.Identifier(s) }

// ValidSHA256Hex reports whether s is 64 lowercase hex characters, the
// only spelling of a digest Glove accepts (one digest, one string).
func ValidSHA256Hex(s string) bool { return hexRE.MatchString(s) }

// discoveryExecutables is the closed table of native adapters that may
// find their executable in operator-listed search directories (reference
// "runtime_discovery"). The table is code, not policy: a policy can pick
// a row, never add one.
var discoveryExecutables = map[string]string{
	"claude-code": "claude",
	"codex":       "codex",
	"copilot":     "copilot",
	"opencode":    "opencode",
	"pi":          "pi",
}

// DiscoveryRuntimes lists the runtime_discovery values, sorted.
func DiscoveryRuntimes() []string {
	out := make([]string, 0, len(discoveryExecutables))
	for k := range discoveryExecutables {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// DiscoveryExecutable returns the executable name a runtime_discovery
// value searches for.
func DiscoveryExecutable(runtime string) (string, bool) {
	e, ok := discoveryExecutables[runtime]
	return e, ok
}

// kernelRoots are never a host path, target or runtime path: they are the
// kernel's interfaces, which the sandbox sets up itself. Exposing the
// host's /proc, /sys or /dev would hand the attacker the host's
// processes, kernel tunables and devices.
var kernelRoots = []string{"/dev", "/proc", "/sys"}

// reservedTargets are sandbox paths a grant may not cover or contain:
// the kernel roots, and /home/agent, the private harness home Glove
// creates for each session (a grant over it would replace the managed
// home and its adapter configuration with host data).
var reservedTargets = []string{"/dev", "/home/agent", "/proc", "/sys"}

// reservedEnvironment are names Glove itself sets in the managed
// environment (the adapter homes) plus the GLOVE_ prefix, reserved for
// Glove's own channels. An operator value for one of them would either
// be silently overridden or silently override Glove's, and the adapter
// digest would then describe an environment the program never sees.
var reservedEnvironment = []string{"CODEX_HOME", "COPILOT_HOME", "HOME", "XDG_CONFIG_HOME"}

const reservedEnvPrefix = "GLOVE_"

// tupleRule is one valid access tuple shape (docs/policy.md, "Access
// tuples"). Only these combinations are meaningful; anything else is a
// policy that says something Glove would not do.
type tupleRule struct {
	access, materialization string
	creates                 []string
	cleanup                 string
	quota                   bool // max_bytes required in 1..MaxAliasBytes; otherwise it must be 0
}

var tupleRules = []tupleRule{
	// A bind has nothing to copy and so nothing to bound: max_bytes must
	// be 0 so a policy never shows a quota that is not enforced.
	{AccessReadOnly, MaterializationBind, []string{CreateMustExist}, CleanupNone, false},
	{AccessReadOnly, MaterializationCopy, []string{CreateMustExist}, CleanupRemove, true},
	{AccessEphemeralWrite, MaterializationCopy, []string{CreateMustExist, CreateEmptyDirectory}, CleanupRemove, true},
	{AccessRetainedWrite, MaterializationCopy, []string{CreateMustExist, CreateEmptyDirectory}, CleanupRetain, true},
	{AccessDirectWrite, MaterializationBind, []string{CreateMustExist}, CleanupNone, false},
}

var (
	accessValues          = []string{AccessDirectWrite, AccessEphemeralWrite, AccessReadOnly, AccessRetainedWrite}
	materializationValues = []string{MaterializationBind, MaterializationCopy}
	createValues          = []string{CreateEmptyDirectory, CreateMustExist}
	cleanupValues         = []string{CleanupNone, CleanupRemove, CleanupRetain}
)

// Validate checks every rule of docs/policy.md and returns the first
// fault, a *Fault naming its JSON Pointer, or nil. It checks in document
// order, except that max_plan_ttl_ms is compared with the resource
// profiles once those are known to be valid.
func Validate(p *Policy) error {
	if p == nil {
		return faultf("", "no policy")
	}
	if p.SchemaVersion != SchemaVersion {
		return faultf("/schema_version", "%d is not %d", p.SchemaVersion, SchemaVersion)
	}
	if err := checkRange("/revision", p.Revision, 1, MaxSafeInteger); err != nil {
		return err
	}
	if err := checkRange("/max_plan_ttl_ms", p.MaxPlanTTLMs, 1, MaxPlanTTLMsCeiling); err != nil {
		return err
	}
	if err := validateTemplates(p); err != nil {
		return err
	}
	if err := validatePathAliases(p.PathAliases); err != nil {
		return err
	}
	if err := validateDestinations(p); err != nil {
		return err
	}
	if err := validateProfiles(p.ResourceProfiles); err != nil {
		return err
	}
	// Threat: a plan that expires before its session could ever finish
	// wastes a launch at best; at worst a policy whose plans outlive
	// nothing invites operators to raise limits blindly. The reference
	// requires one second of approval and launch headroom.
	for i := range p.ResourceProfiles {
		r := &p.ResourceProfiles[i]
		if p.MaxPlanTTLMs < r.WallTimeMs+LaunchHeadroomMs {
			return faultf("/max_plan_ttl_ms", "%d does not exceed wall_time_ms %d of profile %q by at least %d",
				p.MaxPlanTTLMs, r.WallTimeMs, r.ProfileID, LaunchHeadroomMs)
		}
	}
	if err := checkIdentList("/egress_policy_ids", p.EgressPolicyIDs); err != nil {
		return err
	}
	if err := checkIdentList("/tool_policy_ids", p.ToolPolicyIDs); err != nil {
		return err
	}
	if err := checkIdentList("/secret_handles", p.SecretHandles); err != nil {
		return err
	}
	if err := validateEgress(p); err != nil {
		return err
	}
	return validateCredentials(p)
}

// validateEgress checks the egress policies: sorted by id, each id one of
// /egress_policy_ids and not EgressNoNetwork, 1..MaxEgressEndpoints
// endpoints, each address exactly 127.0.0.1:PORT with allow_private
// true, each port once across the whole policy (so that any set of
// policies a plan selects can be listened on together), and exactly one
// upstream: a unix socket by canonical host path, or a loopback TCP
// address. Threats: an endpoint that names another address, a wildcard or
// a host name would read as a reach the sandbox does not have (or, were
// it honoured, a network); an upstream that is not on the host's
// loopback would make the supervisor a proxy into the operator's network.
func validateEgress(p *Policy) error {
	ports := map[uint16]string{}
	for i := range p.EgressPolicies {
		e := &p.EgressPolicies[i]
		at := ptr("egress_policies", i)
		if err := checkIdent(join(at, "egress_policy_id"), e.EgressPolicyID); err != nil {
			return err
		}
		if i > 0 {
			if err := checkOrder(join(at, "egress_policy_id"), p.EgressPolicies[i-1].EgressPolicyID, e.EgressPolicyID); err != nil {
				return err
			}
		}
		if e.EgressPolicyID == EgressNoNetwork {
			return faultf(join(at, "egress_policy_id"), "%q is the sandbox without endpoints; it takes no entry", EgressNoNetwork)
		}
		if !slices.Contains(p.EgressPolicyIDs, e.EgressPolicyID) {
			return faultf(join(at, "egress_policy_id"), "%q is not one of /egress_policy_ids", e.EgressPolicyID)
		}
		if len(e.Endpoints) == 0 || len(e.Endpoints) > MaxEgressEndpoints {
			return faultf(join(at, "endpoints"), "%d endpoints, want 1..%d", len(e.Endpoints), MaxEgressEndpoints)
		}
		for j := range e.Endpoints {
			ep := &e.Endpoints[j]
			eat := join(join(at, "endpoints"), j)
			port, err := EgressPort(ep.Address)
			if err != nil {
				return faultf(join(eat, "address"), "%v", err)
			}
			if !ep.AllowPrivate {
				return faultf(join(eat, "allow_private"), "must be true: 127.0.0.1 is a private address")
			}
			if other, dup := ports[port]; dup {
				return faultf(join(eat, "address"), "port %d is also an endpoint of egress policy %q", port, other)
			}
			ports[port] = e.EgressPolicyID
			u := ep.Upstream
			switch {
			case (u.UnixSocket == "") == (u.TCP == ""):
				return faultf(join(eat, "upstream"), "exactly one of unix_socket and tcp")
			case u.UnixSocket != "":
				if err := checkHostSidePath(join(join(eat, "upstream"), "unix_socket"), u.UnixSocket); err != nil {
					return err
				}
			}
			if err := egress.CheckUpstream(ep.Upstream.Upstream()); err != nil {
				return faultf(join(eat, "upstream"), "%v", err)
			}
		}
	}
	return nil
}

// EgressPort is the port of an endpoint address, which must be exactly
// "127.0.0.1:PORT" (PORT a canonical decimal in 1..65535).
func EgressPort(addr string) (uint16, error) {
	ports, err := spec.ParseEgressListen(addr)
	if err != nil {
		return 0, err
	}
	if len(ports) != 1 {
		return 0, fmt.Errorf("%q is not one 127.0.0.1:PORT", addr)
	}
	return ports[0], nil
}

// Upstream is u as the relay takes it.
func (u EgressUpstream) Upstream() egress.Upstream {
	if u.UnixSocket != "" {
		return egress.Upstream{Network: "unix", Address: u.UnixSocket}
	}
	return egress.Upstream{Network: "tcp", Address: u.TCP}
}

// CredentialHome is the private harness home a credential's destination
// lies beneath: the only place Glove writes a credential in a sandbox.
const CredentialHome = "/home/agent"

// credentialVariableReserved are names a credential may not be
// delivered as, beyond reservedEnvironment and the GLOVE_ prefix: the
// variables Glove sets in every launch of its own (PATH when the template
// sets none, TERM for the session's terminal). A credential there would
// either be overridden by Glove's value or override it, and the program
// would lose its search path or its terminal to a secret.
var credentialVariableReserved = []string{"PATH", "TERM"}

// validateCredentials checks the credential policies: sorted by handle,
// each handle a declared secret handle, the source a canonical host path,
// exactly one of a destination strictly beneath the private home and an
// environment variable, the bound in 1..MaxCredentialBytes (a variable's
// in 1..MaxCredentialVariableBytes). Threats: a destination outside the
// private home would put the secret where a grant or the image could
// shadow or keep it; two policies writing one destination (or one inside
// the other) would have one session's token overwrite another's; one
// source shared by two handles would make two leases diverge from one
// file; a variable Glove or a template sets, or two handles of one
// variable, would have one value silently replace another (and the
// launch digest and the adapter digest describe an environment the
// program never sees).
func validateCredentials(p *Policy) error {
	cs := p.CredentialPolicies
	if len(cs) > MaxCredentialPolicies {
		return faultf("/credential_policies", "%d credential policies, more than %d", len(cs), MaxCredentialPolicies)
	}
	for i := range cs {
		c := &cs[i]
		at := ptr("credential_policies", i)
		if err := checkIdent(join(at, "handle"), c.Handle); err != nil {
			return err
		}
		if i > 0 {
			if err := checkOrder(join(at, "handle"), cs[i-1].Handle, c.Handle); err != nil {
				return err
			}
		}
		if !slices.Contains(p.SecretHandles, c.Handle) {
			return faultf(join(at, "handle"), "%q is not one of /secret_handles", c.Handle)
		}
		if err := checkHostSidePath(join(at, "source_path"), c.SourcePath); err != nil {
			return err
		}
		if (c.DestinationPath == "") == (c.EnvironmentVariable == "") {
			return faultf(at, "exactly one of destination_path and environment_variable")
		}
		maxBytes := uint64(MaxCredentialBytes)
		if c.EnvironmentVariable != "" {
			if err := checkCredentialVariable(p, join(at, "environment_variable"), c.EnvironmentVariable); err != nil {
				return err
			}
			maxBytes = MaxCredentialVariableBytes
		} else {
			if err := checkPath(join(at, "destination_path"), c.DestinationPath); err != nil {
				return err
			}
			if !strings.HasPrefix(c.DestinationPath, CredentialHome+"/") {
				return faultf(join(at, "destination_path"), "%q is not beneath the private home %s", c.DestinationPath, CredentialHome)
			}
		}
		if err := checkRange(join(at, "max_bytes"), c.MaxBytes, 1, maxBytes); err != nil {
			return err
		}
		for j := range i {
			if c.DestinationPath != "" && cs[j].DestinationPath != "" {
				if rel := relation(c.DestinationPath, cs[j].DestinationPath); rel != "" {
					return faultf(join(at, "destination_path"), "%q %s the destination_path of handle %q", c.DestinationPath, rel, cs[j].Handle)
				}
			}
			if c.EnvironmentVariable != "" && c.EnvironmentVariable == cs[j].EnvironmentVariable {
				return faultf(join(at, "environment_variable"), "%s is also the environment_variable of handle %q", c.EnvironmentVariable, cs[j].Handle)
			}
			if c.SourcePath == cs[j].SourcePath {
				return faultf(join(at, "source_path"), "%q is also the source of handle %q", c.SourcePath, cs[j].Handle)
			}
		}
	}
	return nil
}

// checkCredentialVariable: a portable name ([A-Za-z_][A-Za-z0-9_]*, at
// most 255 bytes), none that Glove sets or reserves, and none that any
// runtime template's environment sets (a plan may combine any template
// with any handle, so every template is checked).
func checkCredentialVariable(p *Policy, at, name string) error {
	if len(name) > MaxPathComponentBytes || !envRE.MatchString(name) {
		return faultf(at, "%q is not a variable name: [A-Za-z_][A-Za-z0-9_]*, at most %d bytes", name, MaxPathComponentBytes)
	}
	if strings.HasPrefix(name, reservedEnvPrefix) || slices.Contains(reservedEnvironment, name) || slices.Contains(credentialVariableReserved, name) {
		return faultf(at, "%s is set by Glove itself (reserved: %s, %s, and the %s prefix)", name,
			strings.Join(reservedEnvironment, ", "), strings.Join(credentialVariableReserved, ", "), reservedEnvPrefix)
	}
	for i := range p.RuntimeTemplates {
		t := &p.RuntimeTemplates[i]
		for _, e := range t.Launch.Environment {
			if n, _, _ := strings.Cut(e, "="); n == name {
				return faultf(at, "%s is also set by the environment of runtime template %q", name, t.RuntimeTemplateID)
			}
		}
	}
	return nil
}

func validateTemplates(p *Policy) error {
	ts := p.RuntimeTemplates
	if len(ts) == 0 {
		return faultf("/runtime_templates", "at least one runtime template is required")
	}
	if len(ts) > MaxTemplates {
		return faultf("/runtime_templates", "%d templates, more than %d", len(ts), MaxTemplates)
	}
	for i := range ts {
		t := &ts[i]
		at := ptr("runtime_templates", i)
		if err := checkIdent(join(at, "runtime_template_id"), t.RuntimeTemplateID); err != nil {
			return err
		}
		if i > 0 {
			if err := checkOrder(join(at, "runtime_template_id"), ts[i-1].RuntimeTemplateID, t.RuntimeTemplateID); err != nil {
				return err
			}
		}
		if err := checkIdent(join(at, "runtime_id"), t.RuntimeID); err != nil {
			return err
		}
		if t.SandboxBackend != BackendLinuxProduction {
			return faultf(join(at, "sandbox_backend"), "%q is not supported: this Glove launches only %q", t.SandboxBackend, BackendLinuxProduction)
		}
		if err := checkIdentList(join(at, "allowed_path_aliases"), t.AllowedPathAliases); err != nil {
			return err
		}
		for j, a := range t.AllowedPathAliases {
			if _, ok := p.Alias(a); !ok {
				return faultf(join(at, "allowed_path_aliases", j), "%q is not a defined path alias", a)
			}
		}
		if err := checkIdentList(join(at, "allowed_projection_destinations"), t.AllowedProjectionDestinations); err != nil {
			return err
		}
		for j, d := range t.AllowedProjectionDestinations {
			if _, ok := p.Destination(d); !ok {
				return faultf(join(at, "allowed_projection_destinations", j), "%q is not a defined library projection destination", d)
			}
		}
		if err := validateLaunch(join(at, "launch"), t); err != nil {
			return err
		}
		// Threat: a grant mounted over (or beneath) what host_files give,
		// so that /etc or the CA store the program sees is not the one
		// the template describes.
		for _, tg := range HostFilesTargets(t.Launch.HostFiles) {
			for j, a := range t.AllowedPathAliases {
				pa, _ := p.Alias(a)
				if rel := relation(pa.TargetPath, tg); rel != "" {
					return faultf(join(at, "allowed_path_aliases", j), "the target_path %q of alias %q %s %s, which launch.host_files provide", pa.TargetPath, a, rel, tg)
				}
			}
			for j, d := range t.AllowedProjectionDestinations {
				pd, _ := p.Destination(d)
				if rel := relation(pd.TargetPath, tg); rel != "" {
					return faultf(join(at, "allowed_projection_destinations", j), "the target_path %q of destination %q %s %s, which launch.host_files provide", pd.TargetPath, d, rel, tg)
				}
			}
		}
		// Last: any launch fault above would also change the digest, and
		// naming the launch field is the more useful report.
		if !ValidSHA256Hex(t.AdapterCommandDigest) {
			return faultf(join(at, "adapter_command_digest"), "%q is not 64 lowercase hex characters", t.AdapterCommandDigest)
		}
		if want := AdapterDigest(t); t.AdapterCommandDigest != want {
			return faultf(join(at, "adapter_command_digest"), "%s does not match the launch fields (they hash to %s; see docs/adapter-digest.md)", t.AdapterCommandDigest, want)
		}
	}
	return nil
}

func validateLaunch(at string, t *RuntimeTemplate) error {
	l := &t.Launch
	if l.RuntimeDiscovery == "" {
		if l.ExecutablePath == "" {
			return faultf(join(at, "executable_path"), "required: a pinned executable, or runtime_discovery with executable_search_paths")
		}
		if err := checkHostSidePath(join(at, "executable_path"), l.ExecutablePath); err != nil {
			return err
		}
		if len(l.ExecutableSearchPaths) != 0 {
			return faultf(join(at, "executable_search_paths"), "only allowed with runtime_discovery")
		}
	} else {
		if l.ExecutablePath != "" {
			return faultf(join(at, "executable_path"), "must be empty or absent when runtime_discovery is set")
		}
		if _, ok := discoveryExecutables[l.RuntimeDiscovery]; !ok {
			return faultf(join(at, "runtime_discovery"), "%q is not one of %s", l.RuntimeDiscovery, strings.Join(DiscoveryRuntimes(), ", "))
		}
		// Threat: an adapter's private-home layout applied to another
		// runtime's executable; the discovered program must be the
		// runtime the template claims.
		if l.RuntimeDiscovery != t.RuntimeID {
			return faultf(join(at, "runtime_discovery"), "%q does not match runtime_id %q", l.RuntimeDiscovery, t.RuntimeID)
		}
		sp := l.ExecutableSearchPaths
		if len(sp) == 0 {
			return faultf(join(at, "executable_search_paths"), "required and non-empty with runtime_discovery (Glove never searches its inherited PATH)")
		}
		if len(sp) > MaxSearchPaths {
			return faultf(join(at, "executable_search_paths"), "%d entries, more than %d", len(sp), MaxSearchPaths)
		}
		for i, s := range sp {
			// Order is kept (it is the search order, and digest-bound),
			// but a repeat is an error: it usually means a typo elsewhere.
			if err := checkHostSidePath(join(at, "executable_search_paths", i), s); err != nil {
				return err
			}
			for j := range i {
				if sp[j] == s {
					return faultf(join(at, "executable_search_paths", i), "%q duplicates entry %d", s, j)
				}
			}
		}
	}
	if len(l.Arguments) > MaxLaunchItems {
		return faultf(join(at, "arguments"), "%d entries, more than %d", len(l.Arguments), MaxLaunchItems)
	}
	for i, a := range l.Arguments {
		if err := checkLaunchString(join(at, "arguments", i), a); err != nil {
			return err
		}
	}
	if err := checkEnvironment(join(at, "environment"), l.Environment); err != nil {
		return err
	}
	if err := checkReadOnlyPaths(join(at, "read_only_paths"), l); err != nil {
		return err
	}
	return checkHostFiles(at, l)
}

// HostFilesTargets are the sandbox paths a template's host_files make
// Glove's: /etc whatever the members (it holds only what they give), and
// the CA link directories with HostFilesCA.
func HostFilesTargets(members []string) []string {
	if len(members) == 0 {
		return nil
	}
	out := []string{"/etc"}
	if slices.Contains(members, HostFilesCA) {
		out = append(out, HostCALinkDirs...)
	}
	return out
}

// checkHostFiles: members from the closed set, sorted, unique; with any,
// the executable, a search directory or a read-only path may not overlap
// /etc (Glove's then: a launch path there would be a second, unreviewed
// source of /etc's content, or a mount over a file Glove wrote), and the
// executable and search directories may not overlap a CA link directory
// (its bind would be a second, unpinned route to the executable). A
// read-only path containing a CA link directory is fine: Glove then does
// not bind it again.
func checkHostFiles(at string, l *Launch) error {
	hf := l.HostFiles
	hat := join(at, "host_files")
	members := HostFilesMembers()
	for i, m := range hf {
		if !slices.Contains(members, m) {
			return faultf(join(hat, i), "%q is not one of %s", m, strings.Join(members, ", "))
		}
		if i > 0 {
			if err := checkOrder(join(hat, i), hf[i-1], m); err != nil {
				return err
			}
		}
	}
	targets := HostFilesTargets(hf)
	if len(targets) == 0 {
		return nil
	}
	for _, tg := range targets {
		if l.ExecutablePath != "" {
			if rel := relation(l.ExecutablePath, tg); rel != "" {
				return faultf(join(at, "executable_path"), "%q %s %s, which host_files provide", l.ExecutablePath, rel, tg)
			}
		}
		for i, s := range l.ExecutableSearchPaths {
			if rel := relation(s, tg); rel != "" {
				return faultf(join(at, "executable_search_paths", i), "%q %s %s, which host_files provide", s, rel, tg)
			}
		}
		for i, p := range l.ReadOnlyPaths {
			// A read-only path over a CA link directory shows the same
			// host tree: Glove then skips its own bind of it.
			if rel := relation(p, tg); rel != "" && (tg == "/etc" || rel != "contains") {
				return faultf(join(at, "read_only_paths", i), "%q %s %s, which host_files provide", p, rel, tg)
			}
		}
	}
	return nil
}

func checkLaunchString(at, s string) error {
	if len(s) > MaxLaunchStringBytes {
		return faultf(at, "%d bytes, more than %d", len(s), MaxLaunchStringBytes)
	}
	// execve cannot carry a NUL: the program would see a shorter string
	// than the one the digest commits.
	if strings.IndexByte(s, 0) >= 0 {
		return faultf(at, "contains a NUL byte")
	}
	return nil
}

func checkEnvironment(at string, env []string) error {
	if len(env) > MaxLaunchItems {
		return faultf(at, "%d entries, more than %d", len(env), MaxLaunchItems)
	}
	prev := ""
	for i, e := range env {
		p := join(at, i)
		if err := checkLaunchString(p, e); err != nil {
			return err
		}
		name, _, ok := strings.Cut(e, "=")
		if !ok || !envRE.MatchString(name) {
			return faultf(p, "%q is not NAME=value with NAME matching [A-Za-z_][A-Za-z0-9_]*", e)
		}
		if strings.HasPrefix(name, reservedEnvPrefix) || slices.Contains(reservedEnvironment, name) {
			return faultf(p, "%s is set by Glove itself (reserved: %s, and the %s prefix)", name, strings.Join(reservedEnvironment, ", "), reservedEnvPrefix)
		}
		if i > 0 {
			if name == prev {
				return faultf(p, "%s is set twice", name)
			}
			if name < prev {
				return faultf(p, "%s is not sorted after %s (entries are sorted by name)", name, prev)
			}
		}
		prev = name
	}
	return nil
}

// checkReadOnlyPaths: sorted, unique, not nested in one another, and not
// overlapping the executable (pinned) or a search directory (discovery).
// Threat: the executable is identity-pinned on its own; a read-only
// mount of it, of a directory holding it, or of something beneath it
// would be a second, unpinned route to the file that is executed.
func checkReadOnlyPaths(at string, l *Launch) error {
	ro := l.ReadOnlyPaths
	if len(ro) > MaxLaunchItems {
		return faultf(at, "%d entries, more than %d", len(ro), MaxLaunchItems)
	}
	for i, p := range ro {
		pp := join(at, i)
		if err := checkHostSidePath(pp, p); err != nil {
			return err
		}
		if i > 0 {
			if err := checkOrder(pp, ro[i-1], p); err != nil {
				return err
			}
		}
		for j := range i {
			if rel := relation(p, ro[j]); rel != "" {
				return faultf(pp, "%q %s read-only path %q", p, rel, ro[j])
			}
		}
		if l.ExecutablePath != "" {
			if rel := relation(p, l.ExecutablePath); rel != "" {
				return faultf(pp, "%q %s the pinned executable %q", p, rel, l.ExecutablePath)
			}
		}
		for _, s := range l.ExecutableSearchPaths {
			if rel := relation(p, s); rel != "" {
				return faultf(pp, "%q %s the executable search path %q", p, rel, s)
			}
			// A staged search path is launched as its whole stage tree,
			// identity-pinned: a mount beneath it would replace part of
			// the pinned tree.
			if root := StagedRoot(s); root != "" {
				if rel := relation(p, root); rel != "" {
					return faultf(pp, "%q %s the stage tree %q of executable search path %q", p, rel, root, s)
				}
			}
		}
	}
	return nil
}

func validatePathAliases(as []PathAlias) error {
	if len(as) > MaxPathAliases {
		return faultf("/path_aliases", "%d aliases, more than %d", len(as), MaxPathAliases)
	}
	for i := range as {
		a := &as[i]
		at := ptr("path_aliases", i)
		if err := checkIdent(join(at, "alias"), a.Alias); err != nil {
			return err
		}
		if i > 0 {
			if err := checkOrder(join(at, "alias"), as[i-1].Alias, a.Alias); err != nil {
				return err
			}
		}
		// Threat: two aliases over one host tree grant it twice, perhaps
		// once read-only and once writable, and defeat the per-alias
		// access rules and quotas.
		if err := checkHostSidePath(join(at, "host_path"), a.HostPath); err != nil {
			return err
		}
		for j := range i {
			if rel := relation(a.HostPath, as[j].HostPath); rel != "" {
				return faultf(join(at, "host_path"), "%q %s the host_path of alias %q", a.HostPath, rel, as[j].Alias)
			}
		}
		// Threat: one mount shadowing another inside the sandbox, so the
		// tree the program sees is not the one the grant describes.
		if err := checkTargetPath(join(at, "target_path"), a.TargetPath); err != nil {
			return err
		}
		for j := range i {
			if rel := relation(a.TargetPath, as[j].TargetPath); rel != "" {
				return faultf(join(at, "target_path"), "%q %s the target_path of alias %q", a.TargetPath, rel, as[j].Alias)
			}
		}
		if err := checkRange(join(at, "max_ttl_secs"), a.MaxTTLSecs, 1, MaxAliasTTLSecs); err != nil {
			return err
		}
		if err := checkAccessTuples(join(at, "access"), a.Access); err != nil {
			return err
		}
	}
	return nil
}

func checkAccessTuples(at string, ts []AccessTuple) error {
	if len(ts) == 0 {
		return faultf(at, "at least one access tuple is required")
	}
	if len(ts) > MaxAccessTuples {
		return faultf(at, "%d tuples, more than %d", len(ts), MaxAccessTuples)
	}
	for i := range ts {
		if err := CheckAccessTuple(join(at, i), ts[i]); err != nil {
			return err
		}
		if i > 0 {
			prev, cur := tupleKey(ts[i-1]), tupleKey(ts[i])
			if cur == prev {
				return faultf(join(at, i), "repeats tuple %d (%s); tuples are unique by access, materialization, create_policy and cleanup_policy", i-1, cur)
			}
			if cur < prev {
				return faultf(join(at, i), "(%s) is not sorted after (%s); tuples are sorted by access, materialization, create_policy, cleanup_policy", cur, prev)
			}
		}
	}
	return nil
}

// tupleKey is the sort and uniqueness key of an access tuple. The
// components come from closed enumerations of [a-z_] words, so joining
// them with a space (below every letter and "_") orders exactly like
// comparing component by component.
func tupleKey(t AccessTuple) string {
	return t.Access + " " + t.Materialization + " " + t.CreatePolicy + " " + t.CleanupPolicy
}

// CheckAccessTuple checks one access tuple against the enumerations and
// the table of valid combinations; at is the tuple's JSON Pointer.
func CheckAccessTuple(at string, t AccessTuple) error {
	if !slices.Contains(accessValues, t.Access) {
		return faultf(join(at, "access"), "%q is not one of %s", t.Access, strings.Join(accessValues, ", "))
	}
	if !slices.Contains(materializationValues, t.Materialization) {
		return faultf(join(at, "materialization"), "%q is not one of %s", t.Materialization, strings.Join(materializationValues, ", "))
	}
	var rule *tupleRule
	for i := range tupleRules {
		if tupleRules[i].access == t.Access && tupleRules[i].materialization == t.Materialization {
			rule = &tupleRules[i]
		}
	}
	if rule == nil {
		return faultf(join(at, "materialization"), "%s cannot use materialization %q", t.Access, t.Materialization)
	}
	if !slices.Contains(createValues, t.CreatePolicy) {
		return faultf(join(at, "create_policy"), "%q is not one of %s", t.CreatePolicy, strings.Join(createValues, ", "))
	}
	if !slices.Contains(rule.creates, t.CreatePolicy) {
		return faultf(join(at, "create_policy"), "%s with %s allows only %s, not %q", t.Access, t.Materialization, strings.Join(rule.creates, ", "), t.CreatePolicy)
	}
	if !slices.Contains(cleanupValues, t.CleanupPolicy) {
		return faultf(join(at, "cleanup_policy"), "%q is not one of %s", t.CleanupPolicy, strings.Join(cleanupValues, ", "))
	}
	if t.CleanupPolicy != rule.cleanup {
		return faultf(join(at, "cleanup_policy"), "%s with %s requires cleanup_policy %s, not %q", t.Access, t.Materialization, rule.cleanup, t.CleanupPolicy)
	}
	if rule.quota {
		return checkRange(join(at, "max_bytes"), t.MaxBytes, 1, MaxAliasBytes)
	}
	if t.MaxBytes != 0 {
		return faultf(join(at, "max_bytes"), "must be 0: a %s has no copy, so a quota would not be enforced", t.Materialization)
	}
	return nil
}

func validateDestinations(p *Policy) error {
	ds := p.LibraryProjectionDestinations
	if len(ds) > MaxDestinations {
		return faultf("/library_projection_destinations", "%d destinations, more than %d", len(ds), MaxDestinations)
	}
	for i := range ds {
		d := &ds[i]
		at := ptr("library_projection_destinations", i)
		if err := checkIdent(join(at, "alias"), d.Alias); err != nil {
			return err
		}
		if i > 0 {
			if err := checkOrder(join(at, "alias"), ds[i-1].Alias, d.Alias); err != nil {
				return err
			}
		}
		// One namespace for both kinds of alias, so an operator reading
		// a plan never has to guess which "workspace" it means.
		if _, ok := p.Alias(d.Alias); ok {
			return faultf(join(at, "alias"), "%q is also a path alias", d.Alias)
		}
		if err := checkTargetPath(join(at, "target_path"), d.TargetPath); err != nil {
			return err
		}
		for j := range p.PathAliases {
			a := &p.PathAliases[j]
			if rel := relation(d.TargetPath, a.TargetPath); rel != "" {
				return faultf(join(at, "target_path"), "%q %s the target_path of path alias %q", d.TargetPath, rel, a.Alias)
			}
		}
		for j := range i {
			if rel := relation(d.TargetPath, ds[j].TargetPath); rel != "" {
				return faultf(join(at, "target_path"), "%q %s the target_path of destination %q", d.TargetPath, rel, ds[j].Alias)
			}
		}
	}
	return nil
}

func validateProfiles(rs []ResourceProfile) error {
	if len(rs) == 0 {
		return faultf("/resource_profiles", "at least one resource profile is required")
	}
	if len(rs) > MaxProfiles {
		return faultf("/resource_profiles", "%d profiles, more than %d", len(rs), MaxProfiles)
	}
	for i := range rs {
		r := &rs[i]
		at := ptr("resource_profiles", i)
		if err := checkIdent(join(at, "profile_id"), r.ProfileID); err != nil {
			return err
		}
		if i > 0 {
			if err := checkOrder(join(at, "profile_id"), rs[i-1].ProfileID, r.ProfileID); err != nil {
				return err
			}
		}
		for _, l := range r.Limits() {
			if err := checkRange(join(at, l.Name), *l.Value, 1, l.Max); err != nil {
				return err
			}
		}
	}
	return nil
}

// Limit is one of a profile's six limits: the one list of their names
// and ceilings, which validation, plans and `glove run --limit` read.
type Limit struct {
	Name  string  // the JSON member name
	Value *uint64 // the profile's field
	Max   uint64  // the ceiling Validate enforces
}

// Limits returns the six limits of r in document order.
func (r *ResourceProfile) Limits() [6]Limit {
	return [6]Limit{
		{"cpu_time_ms", &r.CPUTimeMs, MaxCPUTimeMs},
		{"memory_bytes", &r.MemoryBytes, MaxMemoryBytes},
		{"pids", &r.Pids, MaxPids},
		{"wall_time_ms", &r.WallTimeMs, MaxWallTimeMs},
		{"disk_bytes", &r.DiskBytes, MaxDiskBytes},
		{"terminal_output_bytes", &r.TerminalOutputBytes, MaxTerminalOutputBytes},
	}
}

// CheckIdentifier returns a *Fault at ptr unless s is an identifier.
func CheckIdentifier(at, s string) error { return checkIdent(at, s) }

func checkIdent(at, s string) error {
	if !names.Identifier(s) {
		return faultf(at, "%q is not an identifier (%s)", s, IdentifierPattern)
	}
	return nil
}

// CheckIdentifierList checks a list of identifiers, sorted in byte order
// and unique; at is the list's JSON Pointer.
func CheckIdentifierList(at string, ids []string) error { return checkIdentList(at, ids) }

func checkIdentList(at string, ids []string) error {
	if len(ids) > MaxIdentifiers {
		return faultf(at, "%d entries, more than %d", len(ids), MaxIdentifiers)
	}
	for i, s := range ids {
		if err := checkIdent(join(at, i), s); err != nil {
			return err
		}
		if i > 0 {
			if err := checkOrder(join(at, i), ids[i-1], s); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkRange(at string, v, lo, hi uint64) error {
	if v < lo || v > hi {
		return faultf(at, "%d is outside %d..%d", v, lo, hi)
	}
	return nil
}

// checkPath: absolute, canonical, bounded. Threat: a path that reads
// differently from how the kernel resolves it ("/srv/work/../../etc",
// "/srv//work/") makes review meaningless, and overlap checks on
// non-canonical strings are wrong.
func checkPath(at, p string) error {
	if p == "" {
		return faultf(at, "required: an absolute path")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return faultf(at, "contains a NUL byte")
	}
	if len(p) > MaxPathBytes {
		return faultf(at, "%d bytes, more than %d", len(p), MaxPathBytes)
	}
	if !strings.HasPrefix(p, "/") {
		return faultf(at, "%q is not absolute", p)
	}
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return faultf(at, "%q contains \"..\"", p)
		}
		if len(c) > MaxPathComponentBytes {
			return faultf(at, "%q has a component of %d bytes, more than %d", p, len(c), MaxPathComponentBytes)
		}
	}
	if filepath.Clean(p) != p {
		return faultf(at, "%q is not canonical (it cleans to %q)", p, filepath.Clean(p))
	}
	if p == "/" {
		return faultf(at, "the root directory \"/\" is not allowed")
	}
	return nil
}

// checkHostSidePath checks a path on the host (a runtime path or an
// alias's host_path).
func checkHostSidePath(at, p string) error {
	if err := checkPath(at, p); err != nil {
		return err
	}
	for _, r := range kernelRoots {
		if within(p, r) {
			return faultf(at, "%q is within %s, a kernel interface", p, r)
		}
	}
	return nil
}

func checkTargetPath(at, p string) error {
	if err := checkPath(at, p); err != nil {
		return err
	}
	for _, r := range reservedTargets {
		if rel := relation(p, r); rel != "" {
			return faultf(at, "%q %s %s, which Glove reserves in the sandbox", p, rel, r)
		}
	}
	return nil
}

// StagedRoot returns the stage tree a canonical path lies in or is:
// the prefix of p ending in its first component that is a stage digest
// (64 lowercase hexadecimal characters, the name `glove policy stage`
// gives DIR/<digest>), or "" when no component is one. A launch shows
// such a tree whole and checks that its content digest is its name
// (supervisor/authority/stage, TreePin), so the search path, and with it
// the adapter digest, names the tree's content.
func StagedRoot(p string) string {
	if !strings.HasPrefix(p, "/") {
		return ""
	}
	end := 0
	for _, c := range strings.Split(p[1:], "/") {
		end += 1 + len(c)
		if ValidSHA256Hex(c) {
			return p[:end]
		}
	}
	return ""
}

// within reports whether p is root or lies beneath it; both canonical.
func within(p, root string) bool {
	return p == root || strings.HasPrefix(p, root+"/")
}

// relation names how canonical path p overlaps q, or "" when neither
// contains the other.
func relation(p, q string) string {
	switch {
	case p == q:
		return "equals"
	case strings.HasPrefix(p, q+"/"):
		return "lies beneath"
	case strings.HasPrefix(q, p+"/"):
		return "contains"
	}
	return ""
}
