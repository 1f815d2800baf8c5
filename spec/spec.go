// SPDX-License-Identifier: Apache-2.0

// Package spec builds the OCI runtime-spec config.json that gloved writes
// into a bundle and glove-shim (or runc, for comparison) executes.
//
// The input is a launch already resolved from the operator's policy: every
// path, descriptor and identity in it is trusted to mean what the policy
// says, but Build still checks the shape of everything, because the spec is
// the last point where a mistake upstream (a relative path, a duplicated
// mount target, a descriptor outside the preserved range) can be caught
// before it becomes a hole in the sandbox.
package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// ErrInvalid is wrapped by every error Build returns for a launch it refuses.
var ErrInvalid = errors.New("invalid launch")

// NoFD is the SourceFD of a mount that has no descriptor source.
const NoFD = -1

// RootAnnotation, set to RootTmpfs in a bundle's annotations, asks
// glove-shim to build the root from a detached tmpfs of its own instead of
// a clone of root.path (which must then be an empty directory, and the
// root read-only): the sandbox's mountinfo then shows "/" as the root's
// source, not the bundle's host path (threat: raw host paths, such as a
// run directory naming the service user's session, in the sandbox's view).
const (
	RootAnnotation = "org.glove.root"
	RootTmpfs      = "tmpfs"
)

// ConfigAnnotation, set to ConfigUnlinkAfterRead, asks glove-shim to
// unlink the bundle's config.json as soon as it has read it, before it
// builds anything: the file holds the program's environment, which may
// hold a credential (a credential policy's environment_variable), and
// nothing reads it again (threat: the value left on the host's file
// system for the whole session, readable by whoever later gets the
// service user's files or the disk).
const (
	ConfigAnnotation      = "org.glove.config"
	ConfigUnlinkAfterRead = "unlink-after-read"
)

// The egress endpoints (issue 32): EgressListenAnnotation lists the
// loopback TCP endpoints "127.0.0.1:PORT[,127.0.0.1:PORT...]" glove-shim's
// stage 1 listens on inside the sandbox's own network namespace, and
// EgressHandoffAnnotation names the preserved descriptor
// ("/proc/self/fd/N", a connected AF_UNIX stream socket) on which it sends
// those listening sockets to the supervisor, which accepts on them from
// the host's side and relays each connection to the operator's upstream.
// Nothing else is reachable: the sandbox keeps its own network namespace
// with loopback alone, and the listeners are bound to 127.0.0.1 of that
// namespace, never of the host's.
const (
	EgressListenAnnotation  = "org.glove.egress.listen"
	EgressHandoffAnnotation = "org.glove.egress.handoff"
	// MaxEgressPorts bounds the endpoints of one sandbox.
	MaxEgressPorts = 8
)

// FormatEgressListen is EgressListenAnnotation's value for ports.
func FormatEgressListen(ports []uint16) string {
	var b strings.Builder
	for i, p := range ports {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("127.0.0.1:")
		b.WriteString(strconv.Itoa(int(p)))
	}
	return b.String()
}

// ParseEgressListen reads EgressListenAnnotation's value: one to
// MaxEgressPorts endpoints, each exactly "127.0.0.1:PORT" with PORT a
// canonical decimal in 1..65535, no port twice. Any other address
// (another loopback address, a wildcard, a name, IPv6) is refused: the
// listener is the sandbox's one door, and what it is bound to must read
// one way only.
func ParseEgressListen(v string) ([]uint16, error) {
	if v == "" {
		return nil, errors.New("no endpoint")
	}
	parts := strings.Split(v, ",")
	if len(parts) > MaxEgressPorts {
		return nil, fmt.Errorf("%d endpoints, more than %d", len(parts), MaxEgressPorts)
	}
	var ports []uint16
	for _, ep := range parts {
		num, ok := strings.CutPrefix(ep, "127.0.0.1:")
		if !ok {
			return nil, fmt.Errorf("%q is not 127.0.0.1:PORT", ep)
		}
		n, err := strconv.ParseUint(num, 10, 16)
		if err != nil || n == 0 || strconv.FormatUint(n, 10) != num {
			return nil, fmt.Errorf("%q: port is not a decimal in 1..65535", ep)
		}
		if slices.Contains(ports, uint16(n)) {
			return nil, fmt.Errorf("port %d twice", n)
		}
		ports = append(ports, uint16(n))
	}
	return ports, nil
}

// Mount kinds.
const (
	KindBind   = "bind"
	KindTmpfs  = "tmpfs"
	KindProc   = "proc"
	KindSysfs  = "sysfs"
	KindMqueue = "mqueue"
	KindDevpts = "devpts"
	KindDev    = "dev"
)

// Limits on the launch. They bound what the shim must parse and keep every
// value within what the kernel accepts, so a refusal happens here with a
// field name rather than later as an opaque EINVAL inside the sandbox.
const (
	maxPath        = 4096 // PATH_MAX
	maxHostname    = 64   // HOST_NAME_MAX
	maxPreserveFDs = 1024
	maxMounts      = 256
	maxArgs        = 4096
	maxEnv         = 4096
)

// Mount is one mount of the sandbox, in the order the shim attaches it.
type Mount struct {
	Target string
	Kind   string // KindBind, KindTmpfs, KindProc, KindSysfs, KindMqueue, KindDevpts, KindDev
	// SourceFD >= 0 is a descriptor the shim receives within the preserved
	// range; the spec names it as /proc/self/fd/N. NoFD (any negative value)
	// means no descriptor.
	SourceFD int
	// SourceSub, with SourceFD, binds the directory at this relative path
	// beneath the descriptor's mount (/proc/self/fd/N/SUB) rather than its
	// root: several mounts may then share one detached mount, such as a
	// session's scratch tmpfs holding /tmp, the home and the copies.
	SourceSub string
	// Source is only for binds of device nodes such as /dev/null.
	Source     string
	ReadOnly   bool
	NoExec     bool
	TmpfsBytes uint64 // tmpfs and dev: required size
	Mode       uint32 // tmpfs and dev: permission bits of the root; 0 leaves the kernel default
}

// Launch is a resolved launch: everything Build needs to write config.json.
type Launch struct {
	Executable string   // absolute path inside the sandbox; becomes args[0]
	Args       []string // arguments after argv[0]
	Env        []string // NAME=value
	Cwd        string

	UID, GID         uint32 // the sandbox user
	HostUID, HostGID uint32 // the service user it maps to, one-to-one, size 1

	Hostname string

	Mounts []Mount // in order; parents before children

	// ReadOnlyPaths and MaskedPaths default to runc's lists when nil; an
	// empty non-nil slice means none.
	ReadOnlyPaths, MaskedPaths []string

	Rlimits         []specs.POSIXRlimit
	NoNewPrivileges bool // must be true
	Terminal        bool
	PreserveFDs     int // descriptors 3 .. 3+PreserveFDs-1 reach the process
	Seccomp         *specs.LinuxSeccomp
	// SeccompListenerFD, when not 0, is the preserved descriptor (3 <= N
	// < 3+PreserveFDs, no mount's source) on which the runtime sends the
	// seccomp filter's user-notification listener: Build writes it as
	// linux.seccomp.listenerPath /proc/self/fd/N. The program never
	// receives N (glove-shim closes it before execve).
	SeccompListenerFD int
	// EgressPorts are the loopback TCP ports glove-shim listens on in the
	// sandbox's network namespace (EgressListenAnnotation), and
	// EgressHandoffFD the preserved descriptor (3 <= N < 3+PreserveFDs,
	// no mount's source, not the seccomp listener's) on which it sends
	// the listening sockets. Both or neither.
	EgressPorts     []uint16
	EgressHandoffFD int
	// UnlinkConfig sets ConfigAnnotation: glove-shim unlinks config.json
	// once read.
	UnlinkConfig bool
}

// Default /proc and /sys paths, as runc's `runc spec` writes them. Masking
// hides kernel state that leaks host information or eases attacks
// (/proc/kcore, /proc/keys, timer and scheduler statistics); the read-only
// ones stop a sandbox root from tuning the host kernel through /proc/sys or
// /proc/sysrq-trigger.
var (
	defaultMaskedPaths = []string{
		"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys",
		"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
		"/proc/sched_debug", "/sys/firmware", "/proc/scsi",
	}
	defaultReadOnlyPaths = []string{
		"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
	}
)

// DefaultMaskedPaths is a copy of the masked paths a Launch gets when its
// MaskedPaths is nil, for a caller that adds its own.
func DefaultMaskedPaths() []string { return slices.Clone(defaultMaskedPaths) }

// deviceSources are the only host paths a bind may name directly. Anything
// else must arrive as a descriptor opened by a helper, so that a path in the
// spec can never be raced or redirected to another host file.
var deviceSources = map[string]bool{
	"/dev/null": true, "/dev/zero": true, "/dev/full": true,
	"/dev/random": true, "/dev/urandom": true, "/dev/tty": true,
}

var rlimitTypes = map[string]bool{
	"RLIMIT_AS": true, "RLIMIT_CORE": true, "RLIMIT_CPU": true, "RLIMIT_DATA": true,
	"RLIMIT_FSIZE": true, "RLIMIT_LOCKS": true, "RLIMIT_MEMLOCK": true,
	"RLIMIT_MSGQUEUE": true, "RLIMIT_NICE": true, "RLIMIT_NOFILE": true,
	"RLIMIT_NPROC": true, "RLIMIT_RSS": true, "RLIMIT_RTPRIO": true,
	"RLIMIT_RTTIME": true, "RLIMIT_SIGPENDING": true, "RLIMIT_STACK": true,
}

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("spec: build: %s: %s: %w", field, fmt.Sprintf(format, args...), ErrInvalid)
}

// checkPath accepts only absolute, clean paths without NUL. A ".." element
// or an unclean path could resolve, inside the shim, to somewhere other than
// what an auditor reading config.json believes (path traversal).
func checkPath(field, p string) error {
	switch {
	case p == "":
		return invalid(field, "empty path")
	case len(p) > maxPath:
		return invalid(field, "path longer than %d bytes", maxPath)
	case strings.IndexByte(p, 0) >= 0:
		return invalid(field, "path contains NUL")
	case !path.IsAbs(p):
		return invalid(field, "path %q is not absolute", p)
	}
	for _, e := range strings.Split(p, "/") {
		if e == ".." {
			return invalid(field, "path %q contains \"..\"", p)
		}
	}
	if path.Clean(p) != p {
		return invalid(field, "path %q is not clean", p)
	}
	return nil
}

// checkPathList checks a list of absolute paths; duplicates are refused
// because they hint at a merge error upstream.
func checkPathList(field string, ps []string) error {
	seen := make(map[string]bool, len(ps))
	for i, p := range ps {
		f := fmt.Sprintf("%s[%d]", field, i)
		if err := checkPath(f, p); err != nil {
			return err
		}
		if p == "/" {
			return invalid(f, "the root itself")
		}
		if seen[p] {
			return invalid(f, "duplicate path %q", p)
		}
		seen[p] = true
	}
	return nil
}

// checkHostname accepts an RFC 1123 host name of at most HOST_NAME_MAX
// bytes. It is required: a new UTS namespace otherwise keeps the host's name,
// which discloses the host to the sandboxed program.
func checkHostname(h string) error {
	if h == "" {
		return invalid("hostname", "empty (the sandbox would show the host's name)")
	}
	if len(h) > maxHostname {
		return invalid("hostname", "longer than %d bytes", maxHostname)
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' {
			return invalid("hostname", "%q is not a valid host name", h)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
				return invalid("hostname", "%q is not a valid host name", h)
			}
		}
	}
	return nil
}

func noNUL(s string) bool { return strings.IndexByte(s, 0) < 0 }

// EnvVar reports whether s is a portable environment variable name,
// [A-Za-z_][A-Za-z0-9_]*: odd bytes in a name are read differently by
// different shells and loaders, which could let a variable slip past a
// reviewer's reading of a spec.
func EnvVar(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}

// Build validates l and returns the runtime spec for it. The spec grants no
// capability, enters every namespace glove-shim supports, maps exactly one
// user and group, and has no linux.resources: limits are enforced by the
// supervisor through glove-cgroup, and a shim run alone refuses them.
func Build(l Launch) (*specs.Spec, error) {
	if err := validateProcess(l); err != nil {
		return nil, err
	}
	if err := checkHostname(l.Hostname); err != nil {
		return nil, err
	}
	if l.PreserveFDs < 0 || l.PreserveFDs > maxPreserveFDs {
		return nil, invalid("preserveFDs", "%d outside 0..%d", l.PreserveFDs, maxPreserveFDs)
	}
	mounts, err := buildMounts(l.Mounts, l.PreserveFDs)
	if err != nil {
		return nil, err
	}
	masked, readonly := defaultMaskedPaths, defaultReadOnlyPaths
	if l.MaskedPaths != nil {
		masked = l.MaskedPaths
	}
	if l.ReadOnlyPaths != nil {
		readonly = l.ReadOnlyPaths
	}
	if err := checkPathList("maskedPaths", masked); err != nil {
		return nil, err
	}
	if err := checkPathList("readOnlyPaths", readonly); err != nil {
		return nil, err
	}
	if l.Seccomp != nil && l.Seccomp.DefaultAction == "" {
		return nil, invalid("seccomp.defaultAction", "empty")
	}
	seccomp, err := buildSeccomp(l)
	if err != nil {
		return nil, err
	}
	annotations := map[string]string{RootAnnotation: RootTmpfs}
	if l.UnlinkConfig {
		annotations[ConfigAnnotation] = ConfigUnlinkAfterRead
	}
	if err := buildEgress(l, annotations); err != nil {
		return nil, err
	}

	s := &specs.Spec{
		Version: specs.Version,
		Process: &specs.Process{
			Terminal: l.Terminal,
			User:     specs.User{UID: l.UID, GID: l.GID},
			Args:     append([]string{l.Executable}, l.Args...),
			Env:      cloneOrNil(l.Env),
			Cwd:      l.Cwd,
			// Every set empty: a process that is root in its user namespace
			// would otherwise hold capabilities over the namespace's mounts
			// and network (mount, remount and raw-socket attacks).
			Capabilities:    &specs.LinuxCapabilities{},
			Rlimits:         cloneOrNil(l.Rlimits),
			NoNewPrivileges: true,
		},
		// The root is read-only so that only the declared writable mounts
		// can be written.
		Root:        &specs.Root{Path: "rootfs", Readonly: true},
		Annotations: annotations,
		Hostname:    l.Hostname,
		Mounts:      mounts,
		Linux: &specs.Linux{
			// Size 1: the sandbox user maps to the service user alone, so no
			// other host identity (root above all) is reachable from inside.
			UIDMappings: []specs.LinuxIDMapping{{ContainerID: l.UID, HostID: l.HostUID, Size: 1}},
			GIDMappings: []specs.LinuxIDMapping{{ContainerID: l.GID, HostID: l.HostGID, Size: 1}},
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.UserNamespace},
				{Type: specs.MountNamespace},
				{Type: specs.PIDNamespace},
				{Type: specs.NetworkNamespace},
				{Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace},
				{Type: specs.CgroupNamespace},
			},
			Seccomp:       seccomp,
			MaskedPaths:   cloneOrNil(masked),
			ReadonlyPaths: cloneOrNil(readonly),
		},
	}
	return s, nil
}

// buildSeccomp returns the profile with its listenerPath, written from
// SeccompListenerFD alone: a path the caller put in the profile could
// name anything on the host, and a descriptor outside the preserved
// range would be whatever the runtime itself has open there.
func buildSeccomp(l Launch) (*specs.LinuxSeccomp, error) {
	if l.Seccomp == nil {
		if l.SeccompListenerFD != 0 {
			return nil, invalid("seccompListenerFD", "%d without a seccomp profile", l.SeccompListenerFD)
		}
		return nil, nil
	}
	if l.Seccomp.ListenerPath != "" || l.Seccomp.ListenerMetadata != "" {
		return nil, invalid("seccomp.listenerPath", "set by SeccompListenerFD only")
	}
	if l.SeccompListenerFD == 0 {
		return l.Seccomp, nil
	}
	if l.SeccompListenerFD < 3 || l.SeccompListenerFD >= 3+l.PreserveFDs {
		return nil, invalid("seccompListenerFD", "%d outside the preserved range 3..%d", l.SeccompListenerFD, 2+l.PreserveFDs)
	}
	for i, m := range l.Mounts {
		if m.SourceFD == l.SeccompListenerFD {
			return nil, invalid("seccompListenerFD", "%d is also the source of mounts[%d]", l.SeccompListenerFD, i)
		}
	}
	c := *l.Seccomp
	c.ListenerPath = "/proc/self/fd/" + strconv.Itoa(l.SeccompListenerFD)
	return &c, nil
}

// buildEgress writes the egress annotations, after checking that the
// hand-off descriptor is one only it uses: a mount's source or the
// seccomp listener's socket would receive the listening sockets (or be
// consumed by stage 1) instead.
func buildEgress(l Launch, annotations map[string]string) error {
	if len(l.EgressPorts) == 0 {
		if l.EgressHandoffFD != 0 {
			return invalid("egressHandoffFD", "%d without an egress port", l.EgressHandoffFD)
		}
		return nil
	}
	v := FormatEgressListen(l.EgressPorts)
	if _, err := ParseEgressListen(v); err != nil {
		return invalid("egressPorts", "%v", err)
	}
	fd := l.EgressHandoffFD
	if fd < 3 || fd >= 3+l.PreserveFDs {
		return invalid("egressHandoffFD", "%d outside the preserved range 3..%d", fd, 2+l.PreserveFDs)
	}
	if fd == l.SeccompListenerFD {
		return invalid("egressHandoffFD", "%d is also the seccomp listener's", fd)
	}
	for i, m := range l.Mounts {
		if m.SourceFD == fd {
			return invalid("egressHandoffFD", "%d is also the source of mounts[%d]", fd, i)
		}
	}
	annotations[EgressListenAnnotation] = v
	annotations[EgressHandoffAnnotation] = "/proc/self/fd/" + strconv.Itoa(fd)
	return nil
}

// cloneOrNil copies s so the spec does not alias the caller's slices, and
// turns an empty slice into nil so that Marshal then DecodeStrict gives back
// an equal spec (the runtime-spec types omit empty slices).
func cloneOrNil[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return append([]T(nil), s...)
}

func validateProcess(l Launch) error {
	if !l.NoNewPrivileges {
		// Without no_new_privs a setuid file written to a workspace, or a
		// file capability, would raise privileges at execve.
		return invalid("noNewPrivileges", "must be true")
	}
	if l.Executable == "" {
		return invalid("executable", "empty")
	}
	if err := checkPath("executable", l.Executable); err != nil {
		return err
	}
	if len(l.Args) > maxArgs {
		return invalid("args", "more than %d arguments", maxArgs)
	}
	for i, a := range l.Args {
		// execve cannot carry a NUL; a runtime would truncate the argument.
		if !noNUL(a) {
			return invalid(fmt.Sprintf("args[%d]", i), "contains NUL")
		}
	}
	if len(l.Env) > maxEnv {
		return invalid("env", "more than %d variables", maxEnv)
	}
	seen := make(map[string]bool, len(l.Env))
	for i, e := range l.Env {
		f := fmt.Sprintf("env[%d]", i)
		name, value, ok := strings.Cut(e, "=")
		if !ok {
			return invalid(f, "%q is not NAME=value", e)
		}
		if !EnvVar(name) {
			return invalid(f, "%q is not a portable variable name", name)
		}
		if !noNUL(value) {
			return invalid(f, "value contains NUL")
		}
		// Duplicates are refused: libc and programs disagree on whether the
		// first or the last one wins, so a reviewer could read one value
		// while the program uses the other.
		if seen[name] {
			return invalid(f, "duplicate variable %q", name)
		}
		seen[name] = true
	}
	if err := checkPath("cwd", l.Cwd); err != nil {
		return err
	}
	seenRlimit := make(map[string]bool, len(l.Rlimits))
	for i, r := range l.Rlimits {
		f := fmt.Sprintf("rlimits[%d]", i)
		if !rlimitTypes[r.Type] {
			return invalid(f+".type", "unknown rlimit %q", r.Type)
		}
		if seenRlimit[r.Type] {
			return invalid(f+".type", "duplicate rlimit %q", r.Type)
		}
		seenRlimit[r.Type] = true
		if r.Soft > r.Hard {
			return invalid(f+".soft", "soft %d above hard %d", r.Soft, r.Hard)
		}
	}
	return nil
}

func buildMounts(ms []Mount, preserveFDs int) ([]specs.Mount, error) {
	if len(ms) > maxMounts {
		return nil, invalid("mounts", "more than %d mounts", maxMounts)
	}
	out := make([]specs.Mount, 0, len(ms))
	seen := make(map[string]int, len(ms))
	for i, m := range ms {
		f := fmt.Sprintf("mounts[%d]", i)
		if err := checkPath(f+".target", m.Target); err != nil {
			return nil, err
		}
		if m.Target == "/" {
			return nil, invalid(f+".target", "the root is not a mount target")
		}
		if j, dup := seen[m.Target]; dup {
			// A second mount on the same target hides the first: a
			// read-only bind could be covered by a writable one.
			return nil, invalid(f+".target", "duplicate of mounts[%d]", j)
		}
		// Parents first: a parent attached after its child hides the child,
		// which again lets a later mount cover a read-only one.
		for t, j := range seen {
			if strings.HasPrefix(t, m.Target+"/") {
				return nil, invalid(f+".target", "%q is a parent of earlier mounts[%d] %q", m.Target, j, t)
			}
		}
		seen[m.Target] = i
		sm, err := buildMount(f, m, preserveFDs)
		if err != nil {
			return nil, err
		}
		out = append(out, sm)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func buildMount(f string, m Mount, preserveFDs int) (specs.Mount, error) {
	if m.Kind != KindTmpfs && m.Kind != KindDev {
		if m.TmpfsBytes != 0 {
			return specs.Mount{}, invalid(f+".tmpfsBytes", "only for tmpfs and dev mounts")
		}
		if m.Mode != 0 {
			return specs.Mount{}, invalid(f+".mode", "only for tmpfs and dev mounts")
		}
	}
	if m.SourceSub != "" && m.SourceFD < 0 {
		return specs.Mount{}, invalid(f+".sourceSub", "only with a descriptor")
	}
	if m.Kind != KindBind {
		if m.SourceFD >= 0 {
			return specs.Mount{}, invalid(f+".sourceFD", "only for bind mounts (use NoFD)")
		}
		if m.Source != "" {
			return specs.Mount{}, invalid(f+".source", "only for bind mounts of devices")
		}
	}
	if m.Mode > 0o7777 {
		return specs.Mount{}, invalid(f+".mode", "%#o has bits outside 07777", m.Mode)
	}
	// nosuid and nodev on every mount but the device binds: a setuid file
	// or a device node written into a writable mount must not be usable.
	var opts []string
	sm := specs.Mount{Destination: m.Target}
	switch m.Kind {
	case KindBind:
		switch {
		case m.SourceFD >= 0 && m.Source != "":
			return specs.Mount{}, invalid(f+".source", "both a descriptor and a source path")
		case m.SourceFD >= 0:
			if m.SourceFD < 3 || m.SourceFD >= 3+preserveFDs {
				// A descriptor outside the preserved range is not passed to
				// the shim, or is stdio: the number could name an unrelated
				// file by the time the shim runs.
				return specs.Mount{}, invalid(f+".sourceFD", "%d outside the preserved range 3..%d", m.SourceFD, 2+preserveFDs)
			}
			sm.Source = fmt.Sprintf("/proc/self/fd/%d", m.SourceFD)
			if m.SourceSub != "" {
				if !CleanSub(m.SourceSub) {
					return specs.Mount{}, invalid(f+".sourceSub", "%q is not a clean relative path", m.SourceSub)
				}
				sm.Source += "/" + m.SourceSub
			}
			opts = []string{"bind", "nosuid", "nodev"}
		case m.Source != "":
			if err := checkPath(f+".source", m.Source); err != nil {
				return specs.Mount{}, err
			}
			if !deviceSources[m.Source] {
				return specs.Mount{}, invalid(f+".source", "%q is not an allowed device", m.Source)
			}
			sm.Source = m.Source
			opts = []string{"bind", "nosuid"}
		default:
			return specs.Mount{}, invalid(f+".sourceFD", "a bind needs a descriptor or a device source")
		}
		// "bind", not "rbind": the shim attaches exactly the mount it was
		// given, never host submounts hidden below the source.
		sm.Type = "bind"
		if m.NoExec || m.Source != "" {
			opts = append(opts, "noexec")
		}
	case KindTmpfs, KindDev:
		if m.TmpfsBytes == 0 {
			// An unsized tmpfs may grow to half the host's memory.
			return specs.Mount{}, invalid(f+".tmpfsBytes", "a tmpfs needs a size")
		}
		sm.Type, sm.Source = "tmpfs", "tmpfs"
		opts = []string{"nosuid", "nodev"}
		if m.Kind == KindDev {
			// /dev is a tmpfs too, and keeps nodev: only the device nodes
			// bound onto it (binds carry their own flags) are usable, so a
			// node created with mknod in /dev opens nothing. strictatime as
			// runc writes it for /dev.
			opts = append(opts, "strictatime")
		}
		if m.NoExec {
			opts = append(opts, "noexec")
		}
		if m.Mode != 0 {
			opts = append(opts, fmt.Sprintf("mode=%#o", m.Mode))
		}
		opts = append(opts, fmt.Sprintf("size=%d", m.TmpfsBytes))
	case KindProc, KindMqueue:
		sm.Type, sm.Source = m.Kind, m.Kind
		opts = []string{"nosuid", "noexec", "nodev"}
	case KindSysfs:
		sm.Type, sm.Source = "sysfs", "sysfs"
		// Always read-only: a writable /sys lets a namespace root reach
		// kernel knobs that are not namespaced.
		opts = []string{"nosuid", "noexec", "nodev", "ro"}
	case KindDevpts:
		sm.Type, sm.Source = "devpts", "devpts"
		// newinstance: a private pty namespace, so the sandbox cannot open
		// the host's terminals.
		opts = []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}
	default:
		return specs.Mount{}, invalid(f+".kind", "unknown mount kind %q", m.Kind)
	}
	if m.ReadOnly && m.Kind != KindSysfs {
		opts = append(opts, "ro")
	}
	sm.Options = opts
	return sm, nil
}

// Marshal encodes s as indented JSON with a final newline. encoding/json
// writes struct fields in declaration order and map keys sorted, so equal
// specs give equal bytes, which keeps bundle digests stable.
func Marshal(s *specs.Spec) ([]byte, error) {
	if s == nil {
		return nil, errors.New("spec: marshal: nil spec")
	}
	b, err := json.MarshalIndent(s, "", "\t")
	if err != nil {
		return nil, fmt.Errorf("spec: marshal: %w", err)
	}
	return append(b, '\n'), nil
}

// maxDocument bounds what DecodeStrict parses: a config.json is a few
// kilobytes, and an unbounded document lets a writer exhaust memory.
const maxDocument = 4 << 20

// DecodeStrict decodes a config.json into specs.Spec, refusing unknown
// fields and trailing data. The JSON schema alone accepts a misspelled key
// such as "noNewPrivilege": a runtime reading it leniently would silently
// drop the protection the author meant to ask for.
//
// It uses JSON v2 (github.com/go-json-experiment/json, as the rest of the
// module does for untrusted documents) rather than encoding/json, whose
// DisallowUnknownFields still matches member names case-insensitively and
// keeps the last of two duplicate members: "NoNewPrivileges" or a second
// "noNewPrivileges" would be read one way by a reviewer and another way by
// the runtime (a parser differential). JSON v2 matches names exactly,
// rejects duplicates, invalid UTF-8 and anything after the value.
func DecodeStrict(data []byte) (*specs.Spec, error) {
	if len(data) > maxDocument {
		return nil, fmt.Errorf("spec: decode: document is %d bytes, more than %d", len(data), maxDocument)
	}
	var s specs.Spec
	if err := jsonv2.Unmarshal(data, &s, jsonv2.RejectUnknownMembers(true)); err != nil {
		return nil, fmt.Errorf("spec: decode: %w", err)
	}
	return &s, nil
}

// CleanSub reports whether sub is a path a descriptor source may name
// beneath its mount: relative, clean, no "." or ".." component, bounded.
func CleanSub(sub string) bool {
	if sub == "" || len(sub) > maxPath || path.IsAbs(sub) || path.Clean(sub) != sub || strings.IndexByte(sub, 0) >= 0 {
		return false
	}
	for _, c := range strings.Split(sub, "/") {
		if c == "." || c == ".." {
			return false
		}
	}
	return true
}
