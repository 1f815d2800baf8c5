// SPDX-License-Identifier: Apache-2.0

// Package session runs one managed session: it asks glove-cgroup for the
// session's cgroups and glove-mounter for its mounts, fills ephemeral
// copies through the mount descriptors, writes the bundle with package
// spec, starts glove-shim in the session's cgroups, relays the program's
// terminal, enforces the six limits and reports how the session ended.
//
// It is the code path both `glove run` (in-process) and gloved's
// start_session use. It holds no capability: every privileged step is a
// helper's, reached over the helper's socket.
//
//	cgroup ── cgwire Create ──► dir, events, memory events, cpu.stat descriptors
//	mounts ── Bind / Tmpfs ──► detached mount descriptors (copies filled here)
//	images ── Create / Attach (glove-loopext4) ──► detached ext4 mounts (filled here)
//	bundle ── spec.Build ──► config.json (mounts as /proc/self/fd/N)
//	shim   ── clone3(CLONE_INTO_CGROUP) + cgwire Place (v1) + sync byte ──► program
//	limits ── wall timer, cpu.stat budget, output counter, memory/pids by cgroup
//	end    ── cgwire Stat, cgwire Remove, images synced and frozen (Freeze),
//	          descriptors closed, bundle removed
package session

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/glove-sandbox/glove/names"
	"github.com/glove-sandbox/glove/supervisor/authority/library"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/engine/egress"
	"github.com/glove-sandbox/glove/supervisor/state/lease"
	"golang.org/x/sys/unix"
)

// ErrInvalid is wrapped by every error about a launch that cannot run as
// described (before anything is created).
var ErrInvalid = errors.New("invalid launch")

// Mount kinds.
const (
	ReadOnlyBind = "read_only_bind" // the host tree itself, read-only, by descriptor
	// EphemeralCopy is a copy of the host tree of at most MaxBytes of
	// files: writable, a directory of the session's scratch; read-only
	// (ReadOnly), a tmpfs of MaxBytes of its own.
	EphemeralCopy = "ephemeral_copy"
	Tmpfs         = "tmpfs" // an empty directory of the session's scratch
	// RetainedCopy is an ext4 image of MaxBytes (glove-loopext4), filled
	// with a copy of the host tree and bound writable; after the session
	// it is frozen read-only and the image file is kept in the
	// materialization root as a staged change (retained_write grants).
	RetainedCopy = "retained_copy"
)

// Mount is one mount of the session, beside the fixed /proc and /dev.
type Mount struct {
	Target   string
	Kind     string
	HostPath string // ReadOnlyBind, EphemeralCopy and RetainedCopy
	// MaxBytes is the quota: the bytes of files an EphemeralCopy may copy
	// (and a read-only one's tmpfs size), a LibraryBundles tmpfs's size,
	// or the image file's size (RetainedCopy, rounded up to 4 KiB),
	// which is what the host spends; ext4's own metadata (journal, inode
	// tables) comes out of it, so less is usable inside. Tmpfs and
	// PrivateHome have none of their own: they live in the scratch.
	MaxBytes uint64
	// Alias names a RetainedCopy's image, with the session's name (see
	// ImageName).
	Alias string
	// CreateEmpty starts an EphemeralCopy or RetainedCopy empty when the
	// host path does not exist (create_policy empty_directory); the host
	// is never changed.
	CreateEmpty bool
	Mode        uint32 // Tmpfs: the root's mode (e.g. 01777 for /tmp)
	// ReadOnly binds an EphemeralCopy read-only (read_only+copy grants);
	// a LibraryBundles mount is always read-only.
	ReadOnly bool
	// Bundles are the digests of a LibraryBundles mount's files.
	Bundles []string
}

// Launch is a resolved launch: everything the session runs, decided by
// the operator's policy (or, for `glove run`, by its local defaults).
type Launch struct {
	// Name is the session's cgroup name: [a-z0-9][a-z0-9-]{0,63}.
	Name       string
	Executable string // absolute, inside the sandbox
	Args       []string
	Env        []string
	Cwd        string
	Hostname   string
	Mounts     []Mount
	Limits     policy.ResourceProfile
	// Terminal gives the program a pseudo-terminal (gloved's PTY) instead
	// of pipes.
	Terminal bool
	// Stream, when set, is the inherited-stream-v1 transport: the guest
	// end of the supervisor's socketpair reaches the program at
	// descriptor 3 (StreamFD), and only there may it inspect a socket.
	Stream *Stream
	// Services, when set, is the pathname compatibility transport
	// (services.go): the aliases reachable through the read-only
	// directory of the launch's ServiceDir mount.
	Services *Services
	// ExecutablePin is set for a discovered executable (a
	// runtime_discovery template): Run rechecks it before the program
	// is released.
	ExecutablePin *ExecutablePin
	// Projections are the library bundles projected (LibraryBundles
	// mounts), in the plan's order.
	Projections []Projection
	// Skills is set for a native-skill runtime: its private home
	// (a PrivateHome mount) and the skill entries expanded into it.
	Skills *SkillProjection
	// EgressPolicyIDs and ToolPolicyIDs are the plan's, in the
	// managed-launch digest. Egress is enforced whatever they say (the
	// sandbox's network namespace has loopback alone; a forwarded service
	// is its only way out), and Resolve refuses any egress policy but
	// EgressNoNetwork; tool policies are labels Glove does not enforce
	// (docs/policy.md, "What each member does").
	EgressPolicyIDs []string
	ToolPolicyIDs   []string
	// Credentials are the plan's secret handles, each with the lease it
	// was launched with (credentials.go); their content is in the
	// pins' leases only.
	Credentials []Credential
	// Egress are the loopback TCP endpoints of the plan's egress
	// policies (egress.go): 127.0.0.1:Port inside the sandbox, each
	// connection relayed to the endpoint's upstream on the host.
	Egress []egress.Endpoint
}

// Stream is one adapter-bound alias's inherited stream; its guest end is
// Pins.Stream.
type Stream struct {
	Alias string
}

// Pins are the open descriptors a launch runs with, held by the caller
// from Resolve (or from opening the stream) until the session has
// ended; the Launch itself is plain data. The library bundles stay open
// from their verification to their copy into the sandbox (threat: a
// bundle replaced in the bundle root between the two), with the skill
// entries read from them; Stream is the inherited stream's guest end.
type Pins struct {
	bundles      []*library.Bundle
	skillSources []skillSource
	// Stream is the sandbox's end of the inherited stream (an AF_UNIX
	// SOCK_STREAM socket, the program's StreamFD) when Launch.Stream is
	// set, and nil otherwise.
	Stream *os.File
	// leases are the credential leases of Launch.Credentials, in order,
	// held (locked) until Close.
	leases []*lease.Lease
}

// Close releases the pins, reporting the first descriptor that would
// not close. The engine never closes them: their owner does, once.
func (p *Pins) Close() error {
	if p == nil {
		return nil
	}
	var errs []error
	for _, b := range p.bundles {
		if err := b.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close library bundle %s: %w", b.Digest, err))
		}
	}
	p.bundles, p.skillSources = nil, nil
	for _, l := range p.leases {
		if err := l.Release(); err != nil {
			errs = append(errs, err)
		}
	}
	p.leases = nil
	if p.Stream != nil {
		if err := p.Stream.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close the inherited stream's guest end: %w", err))
		}
		p.Stream = nil
	}
	return errors.Join(errs...)
}

// checkPins checks that pins hold what l names: the guest end of its
// stream, an AF_UNIX stream socket, and no stream it does not name.
func checkPins(l *Launch, pins *Pins) error {
	var guest *os.File
	if pins != nil {
		guest = pins.Stream
	}
	if (l.Stream == nil) != (guest == nil) {
		return fmt.Errorf("session: the launch's stream and its pinned guest end do not match: %w", ErrInvalid)
	}
	if guest == nil {
		return nil
	}
	dom, derr := unix.GetsockoptInt(int(guest.Fd()), unix.SOL_SOCKET, unix.SO_DOMAIN)
	typ, terr := unix.GetsockoptInt(int(guest.Fd()), unix.SOL_SOCKET, unix.SO_TYPE)
	if derr != nil || terr != nil || dom != unix.AF_UNIX || typ != unix.SOCK_STREAM {
		return fmt.Errorf("session: stream %s: the guest end is not an AF_UNIX stream socket: %w", l.Stream.Alias, ErrInvalid)
	}
	return nil
}

// StreamFD is the program's descriptor for the inherited stream.
const StreamFD = 3

// StreamEnv is the variable that tells the program which descriptor
// serves which alias (GLOVE_LOCAL_SERVICE_FDS_V1={"<alias>":3}). Names
// beginning GLOVE_ are Glove's: a launch whose environment already has
// one is refused (mixed or operator-supplied reserved environment).
const StreamEnv = "GLOVE_LOCAL_SERVICE_FDS_V1"

// StreamAliasEnv is the alias selector: which alias of the descriptor map
// is the adapter's channel (GLOVE_LOCAL_SERVICE_ALIAS=<alias>). The
// reference leaves its name to the adapter; Glove projects this one until
// an adapter registry names its own.
const StreamAliasEnv = "GLOVE_LOCAL_SERVICE_ALIAS"

// Check validates the launch's shape, once: Resolve checks what it
// returns, and glove run checks the launch of its local defaults;
// Prepare takes a checked launch. glove-shim validates the bundle again
// as a boundary of its own.
func (l *Launch) Check() error {
	bad := func(f string, a ...any) error { return fmt.Errorf("session: %s: %w", fmt.Sprintf(f, a...), ErrInvalid) }
	if !validName(l.Name) {
		return bad("name %q is not [a-z0-9][a-z0-9-]{0,63}", l.Name)
	}
	envNames := map[string]bool{}
	for i, e := range l.Env {
		if strings.HasPrefix(e, "GLOVE_") {
			return bad("env[%d]: GLOVE_ names are Glove's own", i)
		}
		name, _, _ := strings.Cut(e, "=")
		envNames[name] = true
	}
	// A variable credential is joined to the environment only in the
	// bundle (secretEnv): its name must be one no other entry has, so
	// that the environment the digest commits is the rest of what the
	// program gets, and no value replaces another.
	for i, c := range l.Credentials {
		if (c.Destination == "") == (c.Variable == "") {
			return bad("credentials[%d] %s: exactly one of a destination and a variable", i, c.Handle)
		}
		if c.Variable == "" {
			continue
		}
		if strings.HasPrefix(c.Variable, "GLOVE_") || envNames[c.Variable] {
			return bad("credentials[%d] %s: variable %s is set otherwise", i, c.Handle, c.Variable)
		}
		envNames[c.Variable] = true
	}
	if st := l.Stream; st != nil {
		if !policy.ValidIdentifier(st.Alias) {
			return bad("stream: alias %q is not an identifier", st.Alias)
		}
	}
	if err := checkEgress(l.Egress, l.Services != nil); err != nil {
		return err
	}
	lim := l.Limits
	if lim.CPUTimeMs == 0 || lim.MemoryBytes == 0 || lim.Pids == 0 || lim.WallTimeMs == 0 || lim.DiskBytes == 0 || lim.TerminalOutputBytes == 0 {
		return bad("every one of the six limits is required")
	}
	seen, images := map[string]bool{}, map[string]bool{}
	for i, m := range l.Mounts {
		if !path.IsAbs(m.Target) || path.Clean(m.Target) != m.Target || m.Target == "/" {
			return bad("mounts[%d]: target %q is not an absolute clean path", i, m.Target)
		}
		for _, fixed := range []string{"/proc", "/dev"} {
			if m.Target == fixed || strings.HasPrefix(m.Target, fixed+"/") {
				return bad("mounts[%d]: %s is the sandbox's own", i, fixed)
			}
		}
		if seen[m.Target] {
			return bad("mounts[%d]: target %q twice", i, m.Target)
		}
		seen[m.Target] = true
		switch m.Kind {
		case ReadOnlyBind:
			if m.MaxBytes != 0 || m.CreateEmpty {
				return bad("mounts[%d]: a bind has no quota and must exist", i)
			}
		case EphemeralCopy:
			if m.MaxBytes == 0 {
				return bad("mounts[%d]: %s needs a quota", i, m.Kind)
			}
		case Tmpfs:
			if m.MaxBytes != 0 || m.ReadOnly {
				return bad("mounts[%d]: a tmpfs is writable scratch, bounded by disk_bytes with the rest (no quota of its own)", i)
			}
		case ServiceDir: // checkServices
		case PrivateHome:
			if m.MaxBytes != 0 || m.Target != HomeDir || l.Skills == nil || m.ReadOnly {
				return bad("mounts[%d]: a private home is writable scratch at %s (no quota of its own), with its skill projection", i, HomeDir)
			}
		case SyntheticEtc:
			if m.Target != EtcDir || !m.ReadOnly || m.MaxBytes != 0 || m.HostPath != "" {
				return bad("mounts[%d]: a synthetic /etc is read-only scratch at %s, of no host path and no quota of its own", i, EtcDir)
			}
		case LibraryBundles:
			if m.MaxBytes == 0 || len(m.Bundles) == 0 || !m.ReadOnly {
				return bad("mounts[%d]: a library mount is read-only, with a quota and bundles", i)
			}
		case RetainedCopy:
			if m.MaxBytes == 0 || m.MaxBytes > maxImageBytes {
				return bad("mounts[%d]: a retained copy needs a quota of 1..%d bytes", i, uint64(maxImageBytes))
			}
			if m.ReadOnly {
				return bad("mounts[%d]: a retained copy is writable", i)
			}
			name := ImageName(l.Name, m.Alias)
			if m.Alias == "" || !validImageName(name) {
				return bad("mounts[%d]: alias %q does not name an image", i, m.Alias)
			}
			if images[name] {
				return bad("mounts[%d]: image %s twice", i, name)
			}
			images[name] = true
		default:
			return bad("mounts[%d]: unknown kind %q", i, m.Kind)
		}
		if m.Kind != Tmpfs && m.Kind != PrivateHome && m.Kind != LibraryBundles && m.Kind != ServiceDir && m.Kind != SyntheticEtc && (!path.IsAbs(m.HostPath) || path.Clean(m.HostPath) != m.HostPath) {
			return bad("mounts[%d]: host path %q is not an absolute clean path", i, m.HostPath)
		}
	}
	return l.checkServices()
}

// inScratch reports whether m lives in the session's scratch: one tmpfs
// of the profile's disk_bytes per session, of which /tmp, the private
// home and each writable copy are directories, so that disk_bytes bounds
// what the session can write in total, not per mount (threat: scratch
// reaching a multiple of the profile's disk_bytes, as when each of them
// was a tmpfs of disk_bytes). Retained copies are images of their own
// quota, kept after the session; read-only copies and library bundles
// cannot be written.
func (m Mount) inScratch() bool {
	return m.Kind == Tmpfs || m.Kind == PrivateHome || m.Kind == ServiceDir || m.Kind == SyntheticEtc || (m.Kind == EphemeralCopy && !m.ReadOnly)
}

// Retains reports whether the launch has a RetainedCopy mount: its
// supervisor must then provide glove-loopext4 and the materialization
// root (Env.Loopext4, Env.MaterializationRoot).
func (l *Launch) Retains() bool {
	for _, m := range l.Mounts {
		if m.Kind == RetainedCopy {
			return true
		}
	}
	return false
}

// maxImageBytes is the largest retained copy (policy: max_bytes ≤ 2^40,
// as glove-loopext4's max_image_bytes).
const maxImageBytes = 1 << 40

// ImageName is the file name of a retained copy's image in the
// materialization root: "<session>_<alias>.img", which glove-loopext4's
// rule ([a-z0-9][a-z0-9._-]{0,63} ending in ".img") accepts for a valid
// session name and alias identifier. A pair too long for 64 bytes keeps
// its first bytes and ends in a digest of the whole, so two aliases of
// one session never share a name.
func ImageName(session, alias string) string {
	base := session + "_" + alias
	const suffix = ".img"
	if len(base)+len(suffix) > 64 {
		sum := sha256.Sum256([]byte(base))
		d := hex.EncodeToString(sum[:8])
		base = base[:64-len(suffix)-1-len(d)] + "-" + d
	}
	return base + suffix
}

// validImageName is glove-loopext4's name rule.
func validImageName(s string) bool {
	if len(s) > 64 || !strings.HasSuffix(s, ".img") || len(s) == len(".img") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '.' || c == '_' || c == '-')) {
			return false
		}
	}
	return true
}

func validName(s string) bool { return names.Name(s) }
