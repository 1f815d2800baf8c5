// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"fmt"
	"strconv"
	"strings"
)

// Explanation is what a validated policy authorizes, arranged by runtime
// template: for each template, everything a plan selecting it can
// receive. `glove policy explain` prints it in words or as JSON.
type Explanation struct {
	Revision         uint64              `json:"revision"`
	MaxPlanTTLMs     uint64              `json:"max_plan_ttl_ms"`
	RuntimeTemplates []TemplateAuthority `json:"runtime_templates"`
	ResourceProfiles []ResourceProfile   `json:"resource_profiles"`
	EgressPolicyIDs  []string            `json:"egress_policy_ids"`
	ToolPolicyIDs    []string            `json:"tool_policy_ids"`
	SecretHandles    []string            `json:"secret_handles"`
	// CredentialPolicies say what each mapped secret handle stands for;
	// UnmappedSecretHandles are handles a plan may name and that no
	// credential policy maps, so a plan naming one is refused at start.
	CredentialPolicies    []CredentialPolicy `json:"credential_policies"`
	UnmappedSecretHandles []string           `json:"unmapped_secret_handles"`
	// UnusedPathAliases and UnusedDestinations are defined but allowed by
	// no template, so no plan can reach them.
	UnusedPathAliases  []string `json:"unused_path_aliases"`
	UnusedDestinations []string `json:"unused_destinations"`
}

// TemplateAuthority is what one runtime template launches and grants.
type TemplateAuthority struct {
	RuntimeTemplateID     string               `json:"runtime_template_id"`
	RuntimeID             string               `json:"runtime_id"`
	SandboxBackend        string               `json:"sandbox_backend"`
	AdapterCommandDigest  string               `json:"adapter_command_digest"`
	ExecutablePath        string               `json:"executable_path,omitempty"`
	RuntimeDiscovery      string               `json:"runtime_discovery,omitempty"`
	DiscoveryExecutable   string               `json:"discovery_executable,omitempty"`
	ExecutableSearchPaths []string             `json:"executable_search_paths,omitempty"`
	Arguments             []string             `json:"arguments"`
	Environment           []string             `json:"environment"`
	ReadOnlyPaths         []string             `json:"read_only_paths"`
	HostFiles             []string             `json:"host_files"`
	PathGrants            []GrantAuthority     `json:"path_grants"`
	LibraryDestinations   []LibraryDestination `json:"library_destinations"`
}

// GrantAuthority is one access tuple of one path alias a template allows.
type GrantAuthority struct {
	Alias           string `json:"alias"`
	HostPath        string `json:"host_path"`
	TargetPath      string `json:"target_path"`
	MaxTTLSecs      uint64 `json:"max_ttl_secs"`
	Access          string `json:"access"`
	Materialization string `json:"materialization"`
	CreatePolicy    string `json:"create_policy"`
	CleanupPolicy   string `json:"cleanup_policy"`
	MaxBytes        uint64 `json:"max_bytes"`
	// Launchable is false for the legacy direct_write: it parses, and a
	// plan requesting it is rejected.
	Launchable bool `json:"launchable"`
}

// Explain arranges a validated policy by runtime template.
func Explain(p *Policy) *Explanation {
	e := &Explanation{
		Revision:              p.Revision,
		MaxPlanTTLMs:          p.MaxPlanTTLMs,
		RuntimeTemplates:      []TemplateAuthority{},
		ResourceProfiles:      nonNil(p.ResourceProfiles),
		EgressPolicyIDs:       nonNil(p.EgressPolicyIDs),
		ToolPolicyIDs:         nonNil(p.ToolPolicyIDs),
		SecretHandles:         nonNil(p.SecretHandles),
		CredentialPolicies:    nonNil(p.CredentialPolicies),
		UnmappedSecretHandles: []string{},
		UnusedPathAliases:     []string{},
		UnusedDestinations:    []string{},
	}
	for _, h := range p.SecretHandles {
		if _, ok := p.Credential(h); !ok {
			e.UnmappedSecretHandles = append(e.UnmappedSecretHandles, h)
		}
	}
	usedAlias := map[string]bool{}
	usedDest := map[string]bool{}
	for i := range p.RuntimeTemplates {
		t := &p.RuntimeTemplates[i]
		ta := TemplateAuthority{
			RuntimeTemplateID:     t.RuntimeTemplateID,
			RuntimeID:             t.RuntimeID,
			SandboxBackend:        t.SandboxBackend,
			AdapterCommandDigest:  t.AdapterCommandDigest,
			ExecutablePath:        t.Launch.ExecutablePath,
			RuntimeDiscovery:      t.Launch.RuntimeDiscovery,
			ExecutableSearchPaths: t.Launch.ExecutableSearchPaths,
			Arguments:             nonNil(t.Launch.Arguments),
			Environment:           nonNil(t.Launch.Environment),
			ReadOnlyPaths:         nonNil(t.Launch.ReadOnlyPaths),
			HostFiles:             nonNil(t.Launch.HostFiles),
			PathGrants:            []GrantAuthority{},
			LibraryDestinations:   []LibraryDestination{},
		}
		if exe, ok := DiscoveryExecutable(t.Launch.RuntimeDiscovery); ok {
			ta.DiscoveryExecutable = exe
		}
		for _, name := range t.AllowedPathAliases {
			usedAlias[name] = true
			a, ok := p.Alias(name)
			if !ok {
				continue
			}
			for _, at := range a.Access {
				ta.PathGrants = append(ta.PathGrants, GrantAuthority{
					Alias: a.Alias, HostPath: a.HostPath, TargetPath: a.TargetPath, MaxTTLSecs: a.MaxTTLSecs,
					Access: at.Access, Materialization: at.Materialization, CreatePolicy: at.CreatePolicy,
					CleanupPolicy: at.CleanupPolicy, MaxBytes: at.MaxBytes, Launchable: at.Launchable(),
				})
			}
		}
		for _, name := range t.AllowedProjectionDestinations {
			usedDest[name] = true
			if d, ok := p.Destination(name); ok {
				ta.LibraryDestinations = append(ta.LibraryDestinations, *d)
			}
		}
		e.RuntimeTemplates = append(e.RuntimeTemplates, ta)
	}
	for _, a := range p.PathAliases {
		if !usedAlias[a.Alias] {
			e.UnusedPathAliases = append(e.UnusedPathAliases, a.Alias)
		}
	}
	for _, d := range p.LibraryProjectionDestinations {
		if !usedDest[d.Alias] {
			e.UnusedDestinations = append(e.UnusedDestinations, d.Alias)
		}
	}
	return e
}

// Text renders the explanation in words, one statement per line.
// Operator-written strings are quoted (strconv.Quote) so that a control
// character in a path cannot disguise a line.
func (e *Explanation) Text() string {
	var b strings.Builder
	q := strconv.Quote
	fmt.Fprintf(&b, "policy revision %d: a plan must name revision %d and expire at most %d ms after it is validated\n",
		e.Revision, e.Revision, e.MaxPlanTTLMs)
	for _, t := range e.RuntimeTemplates {
		fmt.Fprintf(&b, "runtime template %s: runtime %s on backend %s, adapter_command_digest %s\n",
			q(t.RuntimeTemplateID), q(t.RuntimeID), t.SandboxBackend, t.AdapterCommandDigest)
		if t.ExecutablePath != "" {
			fmt.Fprintf(&b, "  executes the pinned executable %s\n", q(t.ExecutablePath))
		} else {
			fmt.Fprintf(&b, "  executes the first %s found in %s (never the inherited PATH), with the %s adapter\n",
				q(t.DiscoveryExecutable), quoteList(t.ExecutableSearchPaths), t.RuntimeDiscovery)
		}
		fmt.Fprintf(&b, "  arguments: %s\n", quoteList(t.Arguments))
		fmt.Fprintf(&b, "  environment: %s\n", quoteList(t.Environment))
		fmt.Fprintf(&b, "  read-only dependencies: %s\n", quoteList(t.ReadOnlyPaths))
		if len(t.HostFiles) == 0 {
			b.WriteString("  host files: none (no /etc)\n")
		} else {
			fmt.Fprintf(&b, "  host files: %s (read-only: %s)\n", quoteList(t.HostFiles), hostFilesText(t.HostFiles))
		}
		if len(t.PathGrants) == 0 {
			b.WriteString("  path grants: none\n")
		}
		for _, g := range t.PathGrants {
			fmt.Fprintf(&b, "  path alias %s: host %s at %s for at most %d s as %s (%s, %s, cleanup %s",
				q(g.Alias), q(g.HostPath), q(g.TargetPath), g.MaxTTLSecs, g.Access, g.Materialization, g.CreatePolicy, g.CleanupPolicy)
			if g.MaxBytes != 0 {
				fmt.Fprintf(&b, ", at most %d bytes", g.MaxBytes)
			}
			b.WriteString(")")
			if !g.Launchable {
				b.WriteString(" - legacy, never launchable: a plan requesting it is rejected")
			}
			b.WriteString("\n")
		}
		if len(t.LibraryDestinations) == 0 {
			b.WriteString("  library projections: none\n")
		}
		for _, d := range t.LibraryDestinations {
			fmt.Fprintf(&b, "  library bundles, by SHA-256 digest, read-only at %s (destination %s)\n", q(d.TargetPath), q(d.Alias))
		}
	}
	b.WriteString("any template, with one of these resource profiles (a plan repeats all six numbers):\n")
	for _, r := range e.ResourceProfiles {
		fmt.Fprintf(&b, "  %s: cpu %d ms, memory %d bytes, %d pids, wall %d ms, disk %d bytes, terminal output %d bytes\n",
			q(r.ProfileID), r.CPUTimeMs, r.MemoryBytes, r.Pids, r.WallTimeMs, r.DiskBytes, r.TerminalOutputBytes)
	}
	fmt.Fprintf(&b, "egress policies a plan may name: %s\n", quoteList(e.EgressPolicyIDs))
	fmt.Fprintf(&b, "tool policies a plan may name: %s\n", quoteList(e.ToolPolicyIDs))
	fmt.Fprintf(&b, "secret handles a plan may name: %s\n", quoteList(e.SecretHandles))
	for _, c := range e.CredentialPolicies {
		if c.EnvironmentVariable != "" {
			fmt.Fprintf(&b, "  %s: its lease (imported from %s, at most %d bytes, one line) as the program's environment variable %s; never taken back\n",
				q(c.Handle), q(c.SourcePath), c.MaxBytes, c.EnvironmentVariable)
			continue
		}
		fmt.Fprintf(&b, "  %s: a copy of its lease (imported from %s, at most %d bytes) at %s in a native-skill runtime's private home; what the session leaves there is the lease's next version\n",
			q(c.Handle), q(c.SourcePath), c.MaxBytes, q(c.DestinationPath))
	}
	if len(e.UnmappedSecretHandles) != 0 {
		fmt.Fprintf(&b, "secret handles no credential policy maps (a plan naming one is refused at start): %s\n", quoteList(e.UnmappedSecretHandles))
	}
	if len(e.UnusedPathAliases) != 0 {
		fmt.Fprintf(&b, "path aliases no template allows (unreachable): %s\n", quoteList(e.UnusedPathAliases))
	}
	if len(e.UnusedDestinations) != 0 {
		fmt.Fprintf(&b, "library destinations no template allows (unreachable): %s\n", quoteList(e.UnusedDestinations))
	}
	return b.String()
}

// Summary is the one line `glove policy validate` prints.
func Summary(p *Policy) string {
	legacy := 0
	for _, a := range p.PathAliases {
		for _, t := range a.Access {
			if !t.Launchable() {
				legacy++
			}
		}
	}
	s := fmt.Sprintf("valid: revision %d, %s, %s, %s, %s, %s, %s, %s",
		p.Revision,
		count(len(p.RuntimeTemplates), "runtime template"),
		count(len(p.PathAliases), "path alias"),
		count(len(p.LibraryProjectionDestinations), "library destination"),
		count(len(p.ResourceProfiles), "resource profile"),
		count(len(p.EgressPolicyIDs), "egress policy"),
		count(len(p.ToolPolicyIDs), "tool policy"),
		count(len(p.SecretHandles), "secret handle"))
	if legacy > 0 {
		s += fmt.Sprintf("; %s: parsed, never launchable", count(legacy, "legacy direct_write tuple"))
	}
	return s
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	switch {
	case strings.HasSuffix(noun, "y"):
		noun = strings.TrimSuffix(noun, "y") + "ies"
	case strings.HasSuffix(noun, "s"):
		noun += "es"
	default:
		noun += "s"
	}
	return fmt.Sprintf("%d %s", n, noun)
}

// hostFilesText says what each host_files member shows the program.
func hostFilesText(members []string) string {
	var out []string
	for _, m := range members {
		switch m {
		case HostFilesCA:
			out = append(out, "the host's "+HostCADir+" and "+strings.Join(HostCALinkDirs, " and "))
		case HostFilesNameService:
			out = append(out, "a synthetic /etc/passwd, /etc/group naming the sandbox user alone, /etc/nsswitch.conf, /etc/hosts with loopback alone")
		}
	}
	return strings.Join(out, "; ")
}

func quoteList(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return strings.Join(out, ", ")
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
