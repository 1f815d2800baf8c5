// SPDX-License-Identifier: Apache-2.0

package shim

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/glove-sandbox/glove/seccomp"
	"github.com/glove-sandbox/glove/spec"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

var (
	// errNotImplemented is wrapped when config.json asks for something
	// glove-shim does not do; errInvalid when it asks for something no
	// runtime should do. Both stop the shim before any namespace exists.
	errNotImplemented = errors.New("not implemented by glove-shim")
	errInvalid        = errors.New("invalid")
)

// Mount kinds of a plan.
const (
	kindBind   = "bind"
	kindTmpfs  = "tmpfs"
	kindProc   = "proc"
	kindSysfs  = "sysfs"
	kindMqueue = "mqueue"
	kindDevpts = "devpts"
)

// Limits on what a bundle may ask for; beyond them it is refused.
const (
	maxPreserveFDs = 1024
	maxMounts      = 256
	maxPaths       = 256
	maxArgs        = 4096
	maxEnv         = 4096
	maxHostname    = 64
	maxSourceLabel = 64
)

// Plan is what stage 0 decides from config.json and hands to stage 1 and
// stage 2. It holds no path that a later stage resolves on the host:
// every host source has become a descriptor by the time stage 1 reads it.
type Plan struct {
	PreserveFDs  int
	Hostname     string
	UID, GID     uint32 // the program's ids in user namespace 2 (1 with UsernsFD)
	HostUID      uint32 // the service user that namespace 1's root (UID with UsernsFD) maps to
	HostGID      uint32
	RootReadonly bool
	// RootTmpfs builds the root from a detached tmpfs rather than a
	// clone of root.path (spec.RootAnnotation).
	RootTmpfs bool
	Mounts    []MountPlan
	Masked    []string
	Readonly  []string
	Process   ProcessPlan
	Off       []string // layers switched off (test builds only; see layers.go)

	// Filled by stage 0: the root's absolute path and identity. Stage 1
	// opens it again in its own copy of the mount tree (a descriptor from
	// the host's namespace cannot be cloned there) and checks that it
	// found the same directory.
	RootPath  string
	RootIdent Ident
	// UserBudgets is the share of each per-user count of /proc/sys/user
	// that stage 1 gives user namespace 1, read by stage 0.
	UserBudgets map[string]int
	// RootEntries is what a tmpfs root holds before the mounts: root.path's
	// symbolic links and empty directories, read by stage 0.
	RootEntries []RootEntry
	// EgressHandoffFD, when not 0, is the preserved descriptor (a
	// connected AF_UNIX stream socket, no mount's source, not the seccomp
	// listener's) named by spec.EgressHandoffAnnotation, on which stage 1
	// sends a listening TCP socket for each of EgressPorts, bound to
	// 127.0.0.1 of the sandbox's network namespace once lo is up (one
	// message, one byte per socket, the sockets in SCM_RIGHTS in
	// EgressPorts order). Stage 1 then closes them and the descriptor
	// before stage 2 exists: the program never holds a listener nor the
	// hand-off socket (threat: a program accepting its own egress
	// connections, or sending descriptors to the supervisor).
	EgressHandoffFD int
	EgressPorts     []uint16
	// UsernsFD, when not 0, is --userns-fd: the descriptor, beyond the
	// preserved range, of a user namespace made for the service user
	// (glove-userns; stage 0 checked it: checkUserns), mapping UID and
	// GID alone to HostUID and HostGID, as the bundle's own mappings do.
	// Stage 0's waiter joins it, checks its maps and closes it before it
	// clones stage 1, which it then clones without CLONE_NEWUSER and
	// without writing maps: user namespace 1 is this one, and stage 1 is
	// UID and GID there, with every capability. Stage 1 then starts
	// stage 2 without a user namespace 2 (no mount lock), as the kernels
	// that need this mode allow no nested user namespace
	// (docs/hardened-hosts-measured.md, "Consequences"). Neither stage 1,
	// stage 2 nor the program ever holds the descriptor. Set by
	// joinUserns.
	UsernsFD int
}

// joinUserns makes p the plan of a sandbox whose user namespace 1 is the
// one of descriptor fd (--userns-fd), which maps UID and GID to the
// service user, where the namespace stage 0's waiter makes itself maps 0.
// Every id the plan gives stage 1 in user namespace 1's terms is
// translated so that it names the same host id as in the default mode:
// a devpts's gid= (the only id a plan carries: fsconfig reads it in the
// mounter's user namespace, user namespace 1) has 0 and GID exchanged. 0,
// the sandbox group on the host in the default mode, becomes GID, which
// is that group here; GID, which no id maps to in the default mode (and
// fsconfig refuses there), becomes 0, which none maps to here; any other
// id is mapped in neither. Threat: the pts nodes given a group other
// than the one the bundle's gid names, or a bundle that the default mode
// refuses running in this one.
func (p *Plan) joinUserns(fd int) {
	p.UsernsFD = fd
	for i := range p.Mounts {
		m := &p.Mounts[i]
		if m.Kind != kindDevpts {
			continue
		}
		for j := range m.Config {
			if m.Config[j][0] != "gid" {
				continue
			}
			n, err := strconv.ParseUint(m.Config[j][1], 10, 32)
			switch {
			case err != nil:
				// Cannot be: Validate accepted it (isUint). Left as
				// it is, fsconfig would refuse it in both modes.
			case n == 0:
				m.Config[j][1] = strconv.FormatUint(uint64(p.GID), 10)
			case n == uint64(p.GID):
				m.Config[j][1] = "0"
			}
		}
	}
}

// RootEntry is one entry of a tmpfs root: a symbolic link to Link, or an
// empty directory.
type RootEntry struct {
	Name string
	Link string
	Dir  bool
}

// Ident is a file's identity: stage 1 refuses a path whose identity is not
// the one stage 0 checked (threat: a path swapped between the two opens).
type Ident struct {
	Dev, Ino uint64
}

// MountPlan is one mount, attached in order.
type MountPlan struct {
	Destination string
	Kind        string
	SourcePath  string // bind from a host path, absolute
	SourceIdent Ident  // its identity, as stage 0 found it
	SourceFD    int    // bind from a preserved descriptor; -1 otherwise
	// SourceSub binds the directory at this path beneath SourceFD's
	// mount (source /proc/self/fd/N/SUB); SourceFD must be a detached
	// mount, which stage 1 attaches once, out of the sandbox's sight,
	// to clone each such directory from.
	SourceSub  string
	Recursive  bool
	Attr       uint64      // MOUNT_ATTR_* set on the mount
	Config     [][2]string // fsconfig string parameters (filesystems)
	Writable   bool
	FileTarget bool // the source is not a directory: the mount point is a file
}

// ProcessPlan is stage 2's part of the plan.
type ProcessPlan struct {
	Args         []string
	Env          []string
	Cwd          string
	Terminal     bool
	Umask        *uint32
	Rlimits      []Rlimit
	Seccomp      []byte // classic BPF, compiled by stage 0; nil: no filter
	SeccompFlags uint
	// SeccompListenerFD, when not 0, is the preserved descriptor named by
	// linux.seccomp.listenerPath (/proc/self/fd/N): a connected AF_UNIX
	// stream socket on which stage 2 sends the bundle's filter's
	// user-notification listener (SCM_RIGHTS, one byte) once it is
	// loaded. It is neither a mount source nor among PassFDs: the program
	// never has it (threat: a program holding its own filter's listener,
	// or the handler's socket, could answer its own calls).
	SeccompListenerFD int
	// DenyIoctls is the deniedIoctls filter (seccomp_extra.go) in the
	// kernel's struct sock_filter layout, built once by stage 0 and
	// loaded by stage 2 under Seccomp; nil when the seccomp layer is off
	// (test builds).
	DenyIoctls   []byte
	PassFDs      []int // preserved descriptors the program receives
	Caps         CapSets
	Writable     []string
	WritableFile []string
}

// CapSets are the program's capability sets, as bit masks. All zero is
// Glove's own case: no capability, and an empty bounding set.
type CapSets struct {
	Bounding, Effective, Inheritable, Permitted, Ambient uint64
}

// capNames are the capabilities of Linux 6.x (capability.h), by number.
var capNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
	"CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
	"CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT",
	"CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME",
	"CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL",
	"CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
}

// capSets turns the spec's capability names into masks. Capabilities are
// those of user namespace 2: they reach only what that namespace owns
// (nothing of the host, nor stage 1's namespaces). Ambient capabilities
// need to be inheritable, and are made so, as runc does in effect; an
// effective or ambient capability that is not permitted is refused, since
// the kernel would refuse it.
func capSets(c *specs.LinuxCapabilities) (CapSets, error) {
	mask := func(field string, names []string) (uint64, error) {
		var m uint64
		for i, n := range names {
			j := slices.Index(capNames, n)
			if j < 0 {
				return 0, bad(fmt.Sprintf("process.capabilities.%s[%d]", field, i), "unknown capability %q", n)
			}
			m |= 1 << j
		}
		return m, nil
	}
	var cs CapSets
	var err error
	for _, f := range []struct {
		name  string
		names []string
		into  *uint64
	}{{"bounding", c.Bounding, &cs.Bounding}, {"effective", c.Effective, &cs.Effective},
		{"inheritable", c.Inheritable, &cs.Inheritable}, {"permitted", c.Permitted, &cs.Permitted},
		{"ambient", c.Ambient, &cs.Ambient}} {
		if *f.into, err = mask(f.name, f.names); err != nil {
			return cs, err
		}
	}
	if cs.Effective&^cs.Permitted != 0 {
		return cs, bad("process.capabilities.effective", "not a subset of permitted")
	}
	if cs.Ambient&^cs.Permitted != 0 {
		return cs, bad("process.capabilities.ambient", "not a subset of permitted")
	}
	if cs.Permitted&^cs.Bounding != 0 {
		return cs, bad("process.capabilities.permitted", "not a subset of bounding")
	}
	cs.Inheritable |= cs.Ambient
	return cs, nil
}

// Rlimit is one resource limit.
type Rlimit struct {
	Resource   int
	Soft, Hard uint64
}

var rlimits = map[string]int{
	"RLIMIT_AS": unix.RLIMIT_AS, "RLIMIT_CORE": unix.RLIMIT_CORE, "RLIMIT_CPU": unix.RLIMIT_CPU,
	"RLIMIT_DATA": unix.RLIMIT_DATA, "RLIMIT_FSIZE": unix.RLIMIT_FSIZE, "RLIMIT_LOCKS": unix.RLIMIT_LOCKS,
	"RLIMIT_MEMLOCK": unix.RLIMIT_MEMLOCK, "RLIMIT_MSGQUEUE": unix.RLIMIT_MSGQUEUE,
	"RLIMIT_NICE": unix.RLIMIT_NICE, "RLIMIT_NOFILE": unix.RLIMIT_NOFILE, "RLIMIT_NPROC": unix.RLIMIT_NPROC,
	"RLIMIT_RSS": unix.RLIMIT_RSS, "RLIMIT_RTPRIO": unix.RLIMIT_RTPRIO, "RLIMIT_RTTIME": unix.RLIMIT_RTTIME,
	"RLIMIT_SIGPENDING": unix.RLIMIT_SIGPENDING, "RLIMIT_STACK": unix.RLIMIT_STACK,
}

// requiredNamespaces are the namespaces glove-shim always creates. A bundle
// must list exactly these: one that omits, say, the network namespace
// would run with the host's network under runc, and must not be read as
// asking for that here.
var requiredNamespaces = []specs.LinuxNamespaceType{
	specs.UserNamespace, specs.MountNamespace, specs.PIDNamespace, specs.NetworkNamespace,
	specs.IPCNamespace, specs.UTSNamespace, specs.CgroupNamespace,
}

func bad(field, format string, args ...any) error {
	return fmt.Errorf("config.json: %s: %s: %w", field, fmt.Sprintf(format, args...), errInvalid)
}

func unsupported(field, format string, args ...any) error {
	return fmt.Errorf("config.json: %s: %s: %w", field, fmt.Sprintf(format, args...), errNotImplemented)
}

// checkAbs accepts an absolute, clean path without NUL: anything else
// could resolve to somewhere other than what a reader of config.json sees.
func checkAbs(field, p string) error {
	switch {
	case p == "":
		return bad(field, "empty path")
	case len(p) > unix.PathMax:
		return bad(field, "path longer than %d bytes", unix.PathMax)
	case strings.IndexByte(p, 0) >= 0:
		return bad(field, "path contains NUL")
	case !path.IsAbs(p):
		return bad(field, "%q is not absolute", p)
	case path.Clean(p) != p:
		return bad(field, "%q is not clean", p)
	}
	return nil
}

// Validate turns a strictly decoded config.json into a plan, or refuses it
// with an error naming the member. hostUID and hostGID are the ids of the
// user running the shim: the only host ids an unprivileged user may map.
func Validate(s *specs.Spec, preserveFDs int, hostUID, hostGID uint32) (*Plan, error) {
	if err := checkImplemented(s); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(s.Version, "1.") {
		return nil, unsupported("ociVersion", "%q (glove-shim reads 1.x)", s.Version)
	}
	if preserveFDs < 0 || preserveFDs > maxPreserveFDs {
		return nil, bad("--preserve-fds", "%d outside 0..%d", preserveFDs, maxPreserveFDs)
	}
	if s.Process == nil {
		return nil, bad("process", "missing")
	}
	if s.Root == nil || s.Root.Path == "" {
		return nil, bad("root.path", "missing")
	}
	if s.Linux == nil {
		return nil, bad("linux", "missing")
	}
	p := &Plan{PreserveFDs: preserveFDs, HostUID: hostUID, HostGID: hostGID, RootReadonly: s.Root.Readonly}
	switch v, ok := s.Annotations[spec.RootAnnotation]; {
	case !ok:
	case v != spec.RootTmpfs:
		return nil, unsupported("annotations."+spec.RootAnnotation, "%q (only %q)", v, spec.RootTmpfs)
	case !s.Root.Readonly:
		// A writable tmpfs root would be scratch outside every quota.
		return nil, bad("annotations."+spec.RootAnnotation, "a tmpfs root must be read-only (root.readonly)")
	default:
		p.RootTmpfs = true
	}
	if err := checkHostname(s.Hostname); err != nil {
		return nil, err
	}
	p.Hostname = s.Hostname
	if err := validateIdentity(s, p); err != nil {
		return nil, err
	}
	if err := validateProcess(s.Process, &p.Process); err != nil {
		return nil, err
	}
	if err := validateNamespaces(s.Linux.Namespaces); err != nil {
		return nil, err
	}
	switch s.Linux.RootfsPropagation {
	case "", "private", "rprivate":
	default:
		return nil, unsupported("linux.rootfsPropagation", "%q (the sandbox's mounts are always private)", s.Linux.RootfsPropagation)
	}
	if err := validatePathList("linux.maskedPaths", s.Linux.MaskedPaths); err != nil {
		return nil, err
	}
	if err := validatePathList("linux.readonlyPaths", s.Linux.ReadonlyPaths); err != nil {
		return nil, err
	}
	p.Masked, p.Readonly = s.Linux.MaskedPaths, s.Linux.ReadonlyPaths
	if len(s.Mounts) > maxMounts {
		return nil, bad("mounts", "more than %d mounts", maxMounts)
	}
	seen := map[string]int{}
	proc := false
	for i, m := range s.Mounts {
		f := fmt.Sprintf("mounts[%d]", i)
		mp, err := validateMount(f, m, preserveFDs)
		if err != nil {
			return nil, err
		}
		if j, dup := seen[mp.Destination]; dup {
			// A second mount on one destination hides the first: a
			// read-only bind could be covered by a writable one.
			return nil, bad(f+".destination", "%q already mounted by mounts[%d]", mp.Destination, j)
		}
		for d, j := range seen {
			if strings.HasPrefix(d, mp.Destination+"/") {
				// Parents first: a parent attached after its child hides it.
				return nil, bad(f+".destination", "%q is a parent of mounts[%d] %q, which comes first", mp.Destination, j, d)
			}
		}
		seen[mp.Destination] = i
		if mp.Kind == kindProc && mp.Destination == "/proc" {
			proc = true
		}
		if mp.Kind == kindBind && mp.SourceFD >= 0 {
			for _, q := range p.Mounts {
				// A descriptor is one mount, moved where it goes, unless
				// every use names a directory beneath it.
				if q.SourceFD == mp.SourceFD && (q.SourceSub == "" || mp.SourceSub == "") {
					return nil, bad(f+".source", "descriptor %d is already the source of %s", mp.SourceFD, q.Destination)
				}
			}
		}
		p.Mounts = append(p.Mounts, mp)
		if mp.Writable {
			switch {
			case mp.Kind == kindBind && mp.SourcePath != "" && strings.HasPrefix(mp.SourcePath, "/dev/"):
				p.Process.WritableFile = append(p.Process.WritableFile, mp.Destination)
			case mp.Kind == kindBind || mp.Kind == kindTmpfs || mp.Kind == kindDevpts:
				p.Process.Writable = append(p.Process.Writable, mp.Destination)
			}
		}
	}
	if err := validateListener(s.Linux.Seccomp, preserveFDs, p); err != nil {
		return nil, err
	}
	if err := validateEgress(s.Annotations, preserveFDs, p); err != nil {
		return nil, err
	}
	if !proc {
		// Stage 2 is started through /proc/self/fd inside the new root,
		// and masking needs the sandbox's own /proc.
		return nil, unsupported("mounts", "no proc mount at /proc (glove-shim needs one)")
	}
	// The preserved descriptors that are not mount sources reach the
	// program at their numbers.
	for fd := 3; fd < 3+preserveFDs; fd++ {
		used := fd == p.Process.SeccompListenerFD || fd == p.EgressHandoffFD
		for _, m := range p.Mounts {
			used = used || m.SourceFD == fd
		}
		if !used {
			p.Process.PassFDs = append(p.Process.PassFDs, fd)
		}
	}
	return p, nil
}

// validateListener takes linux.seccomp.listenerPath: /proc/self/fd/N with
// N a preserved descriptor that no mount uses (package seccomp's
// Compile refuses a notify rule without it, and it without one).
func validateListener(s *specs.LinuxSeccomp, preserveFDs int, p *Plan) error {
	if s == nil || s.ListenerPath == "" {
		return nil
	}
	const f = "linux.seccomp.listenerPath"
	n, ok := seccomp.ListenerFD(s.ListenerPath)
	if !ok {
		return bad(f, "%q is not /proc/self/fd/N", s.ListenerPath)
	}
	if n < 3 || n >= 3+preserveFDs {
		return bad(f, "descriptor %d outside the preserved range 3..%d", n, 2+preserveFDs)
	}
	for i, m := range p.Mounts {
		if m.SourceFD == n {
			return bad(f, "descriptor %d is the source of mounts[%d]", n, i)
		}
	}
	p.Process.SeccompListenerFD = n
	return nil
}

// validateEgress takes the egress annotations (spec.EgressListenAnnotation,
// spec.EgressHandoffAnnotation): both or neither; the hand-off is
// /proc/self/fd/N with N a preserved descriptor that no mount and not the
// seccomp listener uses.
func validateEgress(a map[string]string, preserveFDs int, p *Plan) error {
	const fl, fh = "annotations." + spec.EgressListenAnnotation, "annotations." + spec.EgressHandoffAnnotation
	listen, hasListen := a[spec.EgressListenAnnotation]
	handoff, hasHandoff := a[spec.EgressHandoffAnnotation]
	switch {
	case !hasListen && !hasHandoff:
		return nil
	case !hasListen:
		return bad(fh, "without %s", fl)
	case !hasHandoff:
		return bad(fl, "without %s", fh)
	}
	ports, err := spec.ParseEgressListen(listen)
	if err != nil {
		return bad(fl, "%v", err)
	}
	n, ok := seccomp.ListenerFD(handoff)
	if !ok {
		return bad(fh, "%q is not /proc/self/fd/N", handoff)
	}
	if n < 3 || n >= 3+preserveFDs {
		return bad(fh, "descriptor %d outside the preserved range 3..%d", n, 2+preserveFDs)
	}
	if n == p.Process.SeccompListenerFD {
		return bad(fh, "descriptor %d is also linux.seccomp.listenerPath", n)
	}
	for i, m := range p.Mounts {
		if m.SourceFD == n {
			return bad(fh, "descriptor %d is the source of mounts[%d]", n, i)
		}
	}
	p.EgressHandoffFD, p.EgressPorts = n, ports
	return nil
}

func checkHostname(h string) error {
	if h == "" {
		// A new UTS namespace starts with the host's name, which would
		// tell the program where it runs.
		return bad("hostname", "empty (the sandbox would show the host's name)")
	}
	if len(h) > maxHostname {
		return bad("hostname", "longer than %d bytes", maxHostname)
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c == '-' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return bad("hostname", "%q is not a host name", h)
		}
	}
	return nil
}

// validateIdentity checks the id mappings. An unprivileged user may map
// one id of its own and nothing else; rather than let the kernel refuse a
// wider map with an opaque EPERM, the shim accepts exactly that shape.
func validateIdentity(s *specs.Spec, p *Plan) error {
	u := s.Process.User
	p.UID, p.GID = u.UID, u.GID
	check := func(field string, ms []specs.LinuxIDMapping, inside, host uint32) error {
		if len(ms) == 0 {
			return nil
		}
		if len(ms) != 1 {
			return unsupported(field, "%d mappings (an unprivileged user maps one id)", len(ms))
		}
		m := ms[0]
		if m.Size != 1 || m.HostID != host {
			return unsupported(field, "%d:%d:%d (only %d:%d:1, the invoking user's own id)", m.ContainerID, m.HostID, m.Size, inside, host)
		}
		if m.ContainerID != inside {
			return bad(field, "maps %d, but process.user is %d", m.ContainerID, inside)
		}
		return nil
	}
	if err := check("linux.uidMappings", s.Linux.UIDMappings, u.UID, p.HostUID); err != nil {
		return err
	}
	return check("linux.gidMappings", s.Linux.GIDMappings, u.GID, p.HostGID)
}

func validateProcess(sp *specs.Process, pp *ProcessPlan) error {
	if !sp.NoNewPrivileges {
		// glove-shim always sets no_new_privs; a bundle that asks for the
		// opposite is refused rather than quietly overridden.
		return unsupported("process.noNewPrivileges", "must be true (glove-shim always sets no_new_privs)")
	}
	if c := sp.Capabilities; c != nil {
		caps, err := capSets(c)
		if err != nil {
			return err
		}
		pp.Caps = caps
	}
	if len(sp.Args) == 0 || sp.Args[0] == "" {
		return bad("process.args", "no program")
	}
	if len(sp.Args) > maxArgs {
		return bad("process.args", "more than %d arguments", maxArgs)
	}
	for i, a := range sp.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return bad(fmt.Sprintf("process.args[%d]", i), "contains NUL")
		}
	}
	if len(sp.Env) > maxEnv {
		return bad("process.env", "more than %d variables", maxEnv)
	}
	for i, e := range sp.Env {
		name, _, ok := strings.Cut(e, "=")
		if !ok || name == "" || strings.IndexByte(e, 0) >= 0 {
			return bad(fmt.Sprintf("process.env[%d]", i), "%q is not NAME=value", e)
		}
	}
	if err := checkAbs("process.cwd", sp.Cwd); err != nil {
		return err
	}
	if sp.User.Umask != nil && *sp.User.Umask > 0o777 {
		return bad("process.user.umask", "%#o has bits outside 0777", *sp.User.Umask)
	}
	seen := map[string]bool{}
	for i, r := range sp.Rlimits {
		f := fmt.Sprintf("process.rlimits[%d]", i)
		res, ok := rlimits[r.Type]
		if !ok {
			return bad(f+".type", "unknown rlimit %q", r.Type)
		}
		if seen[r.Type] {
			return bad(f+".type", "duplicate %q", r.Type)
		}
		seen[r.Type] = true
		if r.Soft > r.Hard {
			return bad(f, "soft %d above hard %d", r.Soft, r.Hard)
		}
		pp.Rlimits = append(pp.Rlimits, Rlimit{Resource: res, Soft: r.Soft, Hard: r.Hard})
	}
	if !seen["RLIMIT_MSGQUEUE"] {
		// No POSIX message queue unless the bundle asks for a budget:
		// what a sandbox's queues hold is charged to the service user on
		// the host as well (per-user ucounts, through every user
		// namespace), so one session's queues made gloved's and every
		// other session's mq_open fail (attack case mq-user-budget). A
		// queue created read-only is charged although Landlock refuses
		// its write-open. 0 as the hard limit too: the program cannot
		// raise it.
		pp.Rlimits = append(pp.Rlimits, Rlimit{Resource: unix.RLIMIT_MSGQUEUE, Soft: 0, Hard: 0})
	}
	pp.Args, pp.Env, pp.Cwd, pp.Terminal, pp.Umask = sp.Args, sp.Env, sp.Cwd, sp.Terminal, sp.User.Umask
	return nil
}

func validateNamespaces(ns []specs.LinuxNamespace) error {
	seen := map[specs.LinuxNamespaceType]bool{}
	for i, n := range ns {
		if n.Path != "" {
			return unsupported(fmt.Sprintf("linux.namespaces[%d].path", i), "joining an existing namespace")
		}
		known := false
		for _, r := range requiredNamespaces {
			known = known || r == n.Type
		}
		if !known {
			return unsupported(fmt.Sprintf("linux.namespaces[%d].type", i), "%q", n.Type)
		}
		if seen[n.Type] {
			return bad(fmt.Sprintf("linux.namespaces[%d].type", i), "duplicate %q", n.Type)
		}
		seen[n.Type] = true
	}
	for _, r := range requiredNamespaces {
		if !seen[r] {
			return unsupported("linux.namespaces", "%q missing (glove-shim always creates user, mount, pid, network, ipc, uts and cgroup namespaces)", r)
		}
	}
	return nil
}

func validatePathList(field string, ps []string) error {
	if len(ps) > maxPaths {
		return bad(field, "more than %d paths", maxPaths)
	}
	seen := map[string]bool{}
	for i, p := range ps {
		f := fmt.Sprintf("%s[%d]", field, i)
		if err := checkAbs(f, p); err != nil {
			return err
		}
		if p == "/" {
			return bad(f, "the root itself")
		}
		if seen[p] {
			return bad(f, "duplicate %q", p)
		}
		seen[p] = true
	}
	return nil
}

// Mount attribute options shared by every kind.
var attrOptions = map[string]uint64{
	"ro": unix.MOUNT_ATTR_RDONLY, "nosuid": unix.MOUNT_ATTR_NOSUID, "nodev": unix.MOUNT_ATTR_NODEV,
	"noexec": unix.MOUNT_ATTR_NOEXEC, "noatime": unix.MOUNT_ATTR_NOATIME,
	"strictatime": unix.MOUNT_ATTR_STRICTATIME, "nodiratime": unix.MOUNT_ATTR_NODIRATIME,
	"relatime": 0, "rw": 0,
}

// fsParams are the filesystem parameters accepted per kind, passed to
// fsconfig after their value is checked.
var fsParams = map[string]map[string]func(string) bool{
	kindTmpfs:  {"size": isSize, "mode": isMode, "nr_inodes": isSize},
	kindDevpts: {"ptmxmode": isMode, "mode": isMode, "gid": isUint},
	kindProc:   {"hidepid": isHidepid, "subset": func(v string) bool { return v == "pid" }},
	kindSysfs:  {},
	kindMqueue: {},
}

func isUint(v string) bool {
	_, err := strconv.ParseUint(v, 10, 32)
	return err == nil
}

func isMode(v string) bool {
	n, err := strconv.ParseUint(v, 8, 32)
	return err == nil && n <= 0o7777
}

func isSize(v string) bool {
	if v == "" {
		return false
	}
	switch v[len(v)-1] {
	case 'k', 'm', 'g', 'K', 'M', 'G':
		v = v[:len(v)-1]
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return err == nil && n > 0
}

func isHidepid(v string) bool {
	switch v {
	case "0", "1", "2", "4", "off", "noaccess", "invisible", "ptraceable":
		return true
	}
	return false
}

func validateMount(f string, m specs.Mount, preserveFDs int) (MountPlan, error) {
	mp := MountPlan{Destination: m.Destination, SourceFD: -1}
	if err := checkAbs(f+".destination", m.Destination); err != nil {
		return mp, err
	}
	if m.Destination == "/" {
		return mp, bad(f+".destination", "the root is not a mount destination")
	}
	bind := m.Type == "bind"
	for _, o := range m.Options {
		if o == "bind" || o == "rbind" {
			bind = true
		}
	}
	switch {
	case bind:
		if m.Type != "" && m.Type != "bind" && m.Type != "none" {
			return mp, bad(f+".type", "%q with a bind option", m.Type)
		}
		mp.Kind = kindBind
	case m.Type == kindTmpfs || m.Type == kindProc || m.Type == kindSysfs || m.Type == kindMqueue || m.Type == kindDevpts:
		mp.Kind = m.Type
	default:
		return mp, unsupported(f+".type", "%q (glove-shim mounts bind, tmpfs, proc, sysfs, mqueue and devpts)", m.Type)
	}
	sized := false
	for _, o := range m.Options {
		if a, ok := attrOptions[o]; ok {
			mp.Attr |= a
			continue
		}
		switch {
		case o == "bind" || o == "rbind":
			if mp.Kind != kindBind {
				return mp, bad(f+".options", "%q on a %s mount", o, mp.Kind)
			}
			mp.Recursive = mp.Recursive || o == "rbind"
			continue
		case o == "private" || o == "rprivate":
			continue // every mount of the sandbox is private anyway
		case o == "newinstance" && mp.Kind == kindDevpts:
			continue // a devpts from fsopen is always a new instance
		}
		k, v, hasValue := strings.Cut(o, "=")
		check, known := fsParams[mp.Kind][k]
		if !hasValue || !known {
			return mp, unsupported(f+".options", "%q on a %s mount", o, mp.Kind)
		}
		if !check(v) {
			return mp, bad(f+".options", "%q: bad value", o)
		}
		mp.Config = append(mp.Config, [2]string{k, v})
		sized = sized || (mp.Kind == kindTmpfs && k == "size")
	}
	if mp.Kind == kindTmpfs && !sized {
		// An unsized tmpfs may grow to half the host's memory.
		return mp, bad(f+".options", "a tmpfs needs size=")
	}
	mp.Writable = mp.Attr&unix.MOUNT_ATTR_RDONLY == 0
	if mp.Kind != kindBind {
		if len(m.Source) > maxSourceLabel || strings.ContainsAny(m.Source, "/\x00,") {
			return mp, bad(f+".source", "%q is not a filesystem label", m.Source)
		}
		if m.Source != "" {
			mp.Config = append([][2]string{{"source", m.Source}}, mp.Config...)
		}
		return mp, nil
	}
	if rest, ok := strings.CutPrefix(m.Source, "/proc/self/fd/"); ok {
		rest, sub, hasSub := strings.Cut(rest, "/")
		if hasSub {
			if !spec.CleanSub(sub) {
				return mp, bad(f+".source", "%q: %q is not a clean relative path beneath the descriptor", m.Source, sub)
			}
			mp.SourceSub = sub
		}
		n, err := strconv.Atoi(rest)
		if err != nil || strconv.Itoa(n) != rest {
			return mp, bad(f+".source", "%q is not a descriptor", m.Source)
		}
		if n < 3 || n >= 3+preserveFDs {
			// Outside the preserved range the number would name whatever
			// the shim itself has open there.
			return mp, bad(f+".source", "descriptor %d outside the preserved range 3..%d", n, 2+preserveFDs)
		}
		mp.SourceFD = n
		return mp, nil
	}
	if err := checkAbs(f+".source", m.Source); err != nil {
		return mp, err
	}
	mp.SourcePath = m.Source
	return mp, nil
}
