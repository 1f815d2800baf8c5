// SPDX-License-Identifier: Apache-2.0

package session

import (
	"errors"
	"fmt"
	"strings"

	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/engine/egress"
)

// EgressNoNetwork is the egress policy of no network at all but the
// sandbox's own loopback. Every other egress policy a plan may select is
// one of the policy's egress_policies: loopback endpoints relayed to the
// operator's upstreams (egress.go).
const EgressNoNetwork = policy.EgressNoNetwork

// checkUnenforced refuses, before anything is resolved, what a plan may
// name but this launch cannot give it (threat: a plan member accepted
// and then ignored, so that a session runs with less than it asked for
// and nobody is told, issue 20):
//   - a secret handle the policy maps to no credential source, or any
//     secret handle where there is no lease store (glove run): a harness
//     started without its credential fails later and less clearly;
//   - an egress policy the policy gives no endpoints (egress_policies),
//     but for EgressNoNetwork, and EgressNoNetwork with any other: a
//     label Glove would not enforce, or a plan that says two things.
func checkUnenforced(pol *policy.Policy, pl *plan.Plan, src Sources) error {
	for _, h := range pl.SecretHandles {
		if _, ok := pol.Credential(h); !ok {
			return fmt.Errorf("resolve: secret handle %q: the policy maps no credential source to it: %w", h, ErrUnsupported)
		}
		if src.Leases == nil {
			return fmt.Errorf("resolve: secret handle %q: no credential lease store here: %w", h, ErrUnsupported)
		}
	}
	for _, id := range pl.EgressPolicyIDs {
		if id == EgressNoNetwork {
			if len(pl.EgressPolicyIDs) > 1 {
				return fmt.Errorf("resolve: egress policy %q with others: %w", id, ErrInvalid)
			}
			continue
		}
		if _, ok := pol.Egress(id); !ok {
			return fmt.Errorf("resolve: egress policy %q: the policy gives it no endpoints (egress_policies): %w", id, ErrUnsupported)
		}
	}
	return nil
}

// resolveEgress gives the launch the endpoints of the plan's egress
// policies, in the plan's order.
func resolveEgress(l *Launch, pol *policy.Policy, pl *plan.Plan) error {
	for _, id := range pl.EgressPolicyIDs {
		e, ok := pol.Egress(id)
		if !ok {
			continue // EgressNoNetwork (checkUnenforced)
		}
		for _, ep := range e.Endpoints {
			port, err := policy.EgressPort(ep.Address)
			if err != nil {
				return fmt.Errorf("resolve: egress policy %q: %w: %w", id, err, ErrInvalid)
			}
			l.Egress = append(l.Egress, egress.Endpoint{PolicyID: id, Port: port, Upstream: ep.Upstream.Upstream()})
		}
	}
	return nil
}

// ErrUnsupported is wrapped when a valid plan asks for something this
// revision cannot launch yet; the session fails before anything is made.
var ErrUnsupported = errors.New("not supported by this revision")

// defaultPath is the program's PATH when the template sets none.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// Resolve turns a plan that plan.Validate accepted against pol into the
// launch it selects. Everything in the launch comes from the policy: the
// plan contributes identifiers, the access tuple it chose among the
// alias's, and the limits (which Validate checked equal the profile's).
//
//   - the executable is bound read-only, alone, at its own path (it is
//     identity-pinned: no other mount may reach it, as policy validation
//     ensures), or, when discovery found it in a staged tree, that whole
//     tree is (StagePin); and each read_only_path at its own path;
//   - each path grant: read_only+bind → a read-only bind of the host
//     tree; read_only+copy → a copy (then bound read-only);
//     ephemeral_write+copy → a writable copy of at most max_bytes of
//     files, in the session's scratch; retained_write+copy → a writable
//     copy in an ext4 image of max_bytes (glove-loopext4), kept, frozen,
//     after the session;
//   - the session's scratch is one tmpfs of the profile's disk_bytes:
//     /tmp, the private home and the writable copies are directories of
//     it, so disk_bytes bounds what they hold together;
//   - a runtime_discovery template's executable is found in its search
//     directories (package discovery) and pinned; Run rechecks the pin;
//   - a native-skill runtime (codex, claude-code, pi, copilot, opencode)
//     gets a private home at /home/agent (in the scratch), HOME
//     and its managed environment, and the skill entries of the
//     projected bundles in its skill directory;
//   - the template's host_files give the parts of /etc it names
//     (hostfiles.go), and without them there is no /etc;
//   - each library projection's bundle is opened beneath the pinned
//     bundle root (src.Libraries) and verified, and mounted read-only at
//     <destination target>/<digest>.
//
// The launch is checked (Launch.Check) and plain data; the bundle
// descriptors it runs with are its pins, which the caller closes
// (Pins.Close) once the session has ended.
func Resolve(pol *policy.Policy, pl *plan.Plan, name string, src Sources) (_ *Launch, _ *Pins, err error) {
	if err := checkUnenforced(pol, pl, src); err != nil {
		return nil, nil, err
	}
	t, ok := pol.Template(pl.RuntimeTemplateID)
	if !ok {
		return nil, nil, fmt.Errorf("resolve: runtime template %q: not in the policy: %w", pl.RuntimeTemplateID, ErrInvalid)
	}
	l := &Launch{
		Name:       name,
		Executable: t.Launch.ExecutablePath,
		Args:       append([]string(nil), t.Launch.Arguments...),
		Hostname:   "glove",
		Cwd:        "/",
		Limits:     pl.ResourceProfile,
		Terminal:   true,
		// Labels, in the launch digest (Launch says why).
		EgressPolicyIDs: append([]string(nil), pl.EgressPolicyIDs...),
		ToolPolicyIDs:   append([]string(nil), pl.ToolPolicyIDs...),
	}
	pins := &Pins{}
	defer func() {
		if err != nil {
			err = errors.Join(err, pins.Close())
		}
	}()
	if t.Launch.RuntimeDiscovery != "" {
		pin, err := resolveExecutable(t.Launch.RuntimeDiscovery, t.Launch.ExecutableSearchPaths)
		if err != nil {
			return nil, nil, err
		}
		l.Executable, l.ExecutablePin = pin.Path, pin
	}
	if l.Executable == "" {
		return nil, nil, fmt.Errorf("resolve: runtime template %q: no executable: %w", t.RuntimeTemplateID, ErrInvalid)
	}
	// The executable alone, or for a staged runtime its whole stage tree
	// (StagePin says why), read-only at its own path.
	pinned := l.Executable
	if l.ExecutablePin != nil {
		pinned = l.ExecutablePin.Mount()
	}
	l.Mounts = append(l.Mounts, Mount{Target: pinned, Kind: ReadOnlyBind, HostPath: pinned})
	for _, p := range t.Launch.ReadOnlyPaths {
		l.Mounts = append(l.Mounts, Mount{Target: p, Kind: ReadOnlyBind, HostPath: p})
	}
	home := "/tmp"
	for i, g := range pl.PathGrants {
		a, ok := pol.Alias(g.Alias)
		if !ok {
			return nil, nil, fmt.Errorf("resolve: path_grants[%d]: alias %q: not in the policy: %w", i, g.Alias, ErrInvalid)
		}
		m := Mount{Target: a.TargetPath, HostPath: a.HostPath}
		switch {
		case g.Access == policy.AccessReadOnly && g.Materialization == policy.MaterializationBind:
			m.Kind = ReadOnlyBind
		case g.Access == policy.AccessReadOnly && g.Materialization == policy.MaterializationCopy:
			m.Kind, m.MaxBytes, m.ReadOnly = EphemeralCopy, g.MaxBytes, true
		case g.Access == policy.AccessEphemeralWrite && g.Materialization == policy.MaterializationCopy:
			m.Kind, m.MaxBytes = EphemeralCopy, g.MaxBytes
			m.CreateEmpty = g.CreatePolicy == policy.CreateEmptyDirectory
			if home == "/tmp" {
				home = a.TargetPath
			}
		case g.Access == policy.AccessRetainedWrite && g.Materialization == policy.MaterializationCopy:
			m.Kind, m.MaxBytes, m.Alias = RetainedCopy, g.MaxBytes, g.Alias
			m.CreateEmpty = g.CreatePolicy == policy.CreateEmptyDirectory
			if home == "/tmp" {
				home = a.TargetPath
			}
		default:
			return nil, nil, fmt.Errorf("resolve: path_grants[%d] %s: %s/%s is not launchable: %w", i, g.Alias, g.Access, g.Materialization, ErrInvalid)
		}
		l.Mounts = append(l.Mounts, m)
	}
	l.Mounts = append(l.Mounts, Mount{Target: "/tmp", Kind: Tmpfs, Mode: 0o1777})
	l.Cwd = home
	// The managed environment: the template's (validation keeps HOME,
	// the adapter homes and GLOVE_* out of it), then what Glove sets
	// itself.
	l.Env = append([]string(nil), t.Launch.Environment...)
	hasPath := false
	for _, e := range l.Env {
		hasPath = hasPath || strings.HasPrefix(e, "PATH=")
	}
	if !hasPath {
		l.Env = append(l.Env, "PATH="+defaultPath)
	}
	if !privateHome(l, t.RuntimeID) {
		l.Env = append(l.Env, "HOME="+home)
	}
	if err := resolveHostFiles(l, t.Launch.HostFiles, t.Launch.ReadOnlyPaths); err != nil {
		return nil, nil, err
	}
	var reqs []libraryRequest
	for i, p := range pl.LibraryProjections {
		d, ok := pol.Destination(p.DestinationAlias)
		if !ok {
			return nil, nil, fmt.Errorf("resolve: library_projections[%d]: destination %q: not in the policy: %w", i, p.DestinationAlias, ErrInvalid)
		}
		reqs = append(reqs, libraryRequest{digest: p.Digest, destination: p.DestinationAlias, target: d.TargetPath})
	}
	if err := resolveLibraries(l, pins, src, reqs, t.RuntimeID); err != nil {
		return nil, nil, err
	}
	if err := resolveCredentials(l, pins, pol, pl, src); err != nil {
		return nil, nil, err
	}
	if err := resolveEgress(l, pol, pl); err != nil {
		return nil, nil, err
	}
	// Threat: another mount at, above or beneath the pinned program's
	// mount (a path alias's target, a library destination) would hide
	// or replace part of what was pinned with something that was not.
	if l.ExecutablePin != nil {
		for i, m := range l.Mounts[1:] {
			if m.Target == pinned || strings.HasPrefix(m.Target, pinned+"/") || strings.HasPrefix(pinned, m.Target+"/") {
				return nil, nil, fmt.Errorf("resolve: mounts[%d] %s overlaps the pinned %s: %w", i+1, m.Target, pinned, ErrInvalid)
			}
		}
	}
	if err := l.Check(); err != nil {
		return nil, nil, err
	}
	return l, pins, nil
}
