package session

import (
	"errors"
	"fmt"
	"strings"

	"github.com/glove-sandbox/glove/supervisor/plan"
	"github.com/glove-sandbox/glove/supervisor/policy"
)

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
//     ensures), and each read_only_path at its own path;
//   - each path grant: read_only+bind → a read-only bind of the host
//     tree; read_only+copy → a copy (then bound read-only);
//     ephemeral_write+copy → a writable copy of max_bytes;
//     retained_write+copy → a writable copy in an ext4 image of max_bytes
//     (glove-loopext4), kept, frozen, after the session;
//   - /tmp is a tmpfs of the profile's disk_bytes.
func Resolve(pol *policy.Policy, pl *plan.Plan, name string) (*Launch, error) {
	t, ok := pol.Template(pl.RuntimeTemplateID)
	if !ok {
		return nil, fmt.Errorf("resolve: runtime template %q: not in the policy: %w", pl.RuntimeTemplateID, ErrInvalid)
	}
	if t.Launch.ExecutablePath == "" {
		return nil, fmt.Errorf("resolve: runtime template %q: runtime discovery: %w", t.RuntimeTemplateID, ErrUnsupported)
	}
	if len(pl.LibraryProjections) > 0 {
		return nil, fmt.Errorf("resolve: library projections: %w", ErrUnsupported)
	}
	l := &Launch{
		Name:       name,
		Executable: t.Launch.ExecutablePath,
		Args:       append([]string(nil), t.Launch.Arguments...),
		Hostname:   "glove",
		Cwd:        "/",
		Limits:     pl.ResourceProfile,
		Terminal:   true,
	}
	l.Mounts = append(l.Mounts, Mount{Target: t.Launch.ExecutablePath, Kind: ReadOnlyBind, HostPath: t.Launch.ExecutablePath})
	for _, p := range t.Launch.ReadOnlyPaths {
		l.Mounts = append(l.Mounts, Mount{Target: p, Kind: ReadOnlyBind, HostPath: p})
	}
	home := "/tmp"
	for i, g := range pl.PathGrants {
		a, ok := pol.Alias(g.Alias)
		if !ok {
			return nil, fmt.Errorf("resolve: path_grants[%d]: alias %q: not in the policy: %w", i, g.Alias, ErrInvalid)
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
			return nil, fmt.Errorf("resolve: path_grants[%d] %s: %s/%s is not launchable: %w", i, g.Alias, g.Access, g.Materialization, ErrInvalid)
		}
		l.Mounts = append(l.Mounts, m)
	}
	l.Mounts = append(l.Mounts, Mount{Target: "/tmp", Kind: Tmpfs, MaxBytes: pl.ResourceProfile.DiskBytes, Mode: 0o1777})
	l.Cwd = home
	// The managed environment: the template's (validation keeps HOME and
	// GLOVE_* out of it), then what Glove sets itself.
	l.Env = append([]string(nil), t.Launch.Environment...)
	hasPath := false
	for _, e := range l.Env {
		hasPath = hasPath || strings.HasPrefix(e, "PATH=")
	}
	if !hasPath {
		l.Env = append(l.Env, "PATH="+defaultPath)
	}
	l.Env = append(l.Env, "HOME="+home)
	if err := l.Check(); err != nil {
		return nil, err
	}
	return l, nil
}
