// SPDX-License-Identifier: Apache-2.0

package shim_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/seccomp"
	"github.com/glove-sandbox/glove/shim"
	"github.com/glove-sandbox/glove/spec"
	"github.com/glove-sandbox/glove/testenv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// The attack table. Each case is one threat, attempted by
// shim/internal/attackprobe inside a real sandbox run by the service user,
// and judged from outside the sandbox wherever the attack would have an
// effect there (a host file changed, the host's secret printed, a host
// process signalled or traced, a host listener reached, input pushed into
// a terminal). The table runs
//
//   - with the installed production glove-shim, every layer on: every
//     case must be stopped;
//   - with the test-layers shim once per layer L, every other layer off:
//     a case must be stopped exactly when the base stops it or L is in
//     its stoppedBy;
//   - with the test-layers shim and every layer off ("base"): a case must
//     be stopped exactly when base is true, so a case that claims a layer
//     stops it also shows that the attack works when nothing does;
//   - all of the above again with --userns-fd (configurations "userns-"),
//     in a user namespace made for the shim as glove-userns makes one,
//     mapping the bundle's process.user: the same verdicts, but that
//     mountlock alone gives exactly the base's, since the mount lock
//     (user namespace 2) cannot exist there. Production runs the
//     bundle's uid 1000, as Glove's bundles are, and again a bundle of
//     uid 0 ("userns-production-uid0"); the layer runs a bundle of uid
//     0, so that the program is uid 0 of user namespace 1 there too, as
//     it is in the default mode with mountlock off (a program of another
//     uid loses every capability at its execve, whatever the caps layer
//     says, and the table would not show what each layer stops alone).
//
// On a host that refuses unprivileged user namespaces (noUserns: Debian's
// kernel.unprivileged_userns_clone=0, hardened_test.go) the default mode
// cannot start: the table runs its userns- configurations alone, and
// shows once, before them, that a run without --userns-fd is refused
// (exit 125 and the line naming the refused clone; the report says so).
// There the kernel itself refuses every nested user namespace, so the
// base stops unshare-userns and clone-newuser.
//
// Layers (shim.Layers): mountlock, seccomp, landlock, caps, procmask. The
// base, which nothing switches off: the seven namespaces, pivot_root, the
// spec's mount flags, no_new_privs, close-on-exec of undeclared
// descriptors, setsid. With mountlock off the program runs as uid 0 of
// user namespace 1; with caps off too it holds every capability there.

// attackCase is one row of the table.
type attackCase struct {
	name   string
	threat string
	// stoppedBy lists the layers that stop the attack on their own; base
	// says whether the base alone stops it.
	stoppedBy []string
	base      bool
	// control marks a positive control: an operation that must work in
	// every configuration (it shows a neighbouring denial is specific).
	control bool
	// runcDiffers names why runc's verdict differs from the production
	// shim's (runc_compare_test.go); empty when they agree.
	runcDiffers string
	// runcUnsupported names why the case cannot run under runc at all;
	// the comparison then leaves it out.
	runcUnsupported string
	// setup prepares the bundle and the host; it returns the outside
	// judgement, or nil when the verdict line printed inside is the only
	// evidence (an attack whose only effect is inside the sandbox).
	setup func(t *testing.T, r *attackRun) judge
}

// judge looks at the host after the run (and at what the sandbox printed)
// and says whether the attack succeeded.
type judge func(out string) (succeeded bool, evidence string)

// attackRun is one case in one configuration.
type attackRun struct {
	e        *testenv.Env
	b        *testenv.Bundle
	args     []string   // probe arguments after the case name
	extra    []*os.File // descriptors 3, 4, ... of the shim
	preserve int
	stdin    *os.File // nil: /dev/null
	rosrc    string   // host directory bound read-only at /ro
	probe    string   // the probe's host path (for a watcher run on the host)
	peer     *os.File // the host's end of descriptor 3 (declaredSocket)
	rootfs   string
}

const (
	hostSecret   = "host secret"        // testenv's b.Outside/secret
	hiddenToken  = "hidden-below-mount" // planted in the rootfs under /ro
	victimText   = "original\n"         // /ro/victim
	probeInside  = "/probe/attackprobe"
	reportEnvVar = "GLOVE_ATTACK_REPORT"
)

var (
	atkML = shim.LayerMountLock
	atkSC = shim.LayerSeccomp
	atkLL = shim.LayerLandlock
	atkCP = shim.LayerCaps
	atkPM = shim.LayerProcMask
)

// resolveUnix says whether this kernel's Landlock handles the resolution
// of pathname unix sockets (ABI 9, LANDLOCK_ACCESS_FS_RESOLVE_UNIX),
// which glove-shim's stage 2 then restricts to the writable mounts.
var resolveUnix = func() bool {
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	return errno == 0 && abi >= 9
}()

// withResolveUnix is layers on a kernel where resolveUnix holds, and
// nothing elsewhere.
func withResolveUnix(layers ...string) []string {
	if resolveUnix {
		return layers
	}
	return nil
}

// resolveUnixRuncDiffers: runc applies no Landlock, so from ABI 9 its
// verdict on a path send through a handed-over socket differs.
func resolveUnixRuncDiffers() string {
	if resolveUnix {
		return "runc applies no Landlock: the pathname socket resolution it handles from ABI 9 is glove-shim's alone"
	}
	return ""
}

var attackCases = []attackCase{
	// Read-only mounts.
	{name: "write-ro-bind", threat: "write a file of a read-only bind of a host directory", base: true, setup: victimUnchanged},
	{name: "write-usr", threat: "create a file in the read-only /usr of the host", base: true, setup: usrUnchanged},
	{name: "write-rootfs", threat: "create a file in the read-only root", base: true, setup: rootfsUnchanged},
	{name: "remount-rw-setattr", threat: "mount_setattr clearing MOUNT_ATTR_RDONLY on a read-only bind, then write the host file", stoppedBy: []string{atkML, atkSC, atkLL, atkCP}, setup: victimUnchanged},
	{name: "remount-rw-classic", threat: "mount(MS_REMOUNT|MS_BIND) without MS_RDONLY on a read-only bind, then write the host file", stoppedBy: []string{atkML, atkSC, atkLL, atkCP}, setup: victimUnchanged},
	{name: "remount-root-rw", threat: "mount_setattr clearing MOUNT_ATTR_RDONLY on /, then create a file in the host's rootfs", stoppedBy: []string{atkML, atkSC, atkLL, atkCP}, setup: rootfsUnchanged},
	{name: "umount-reveal", threat: "umount2(MNT_DETACH) a bind to reveal the rootfs file below it", stoppedBy: []string{atkML, atkSC, atkLL, atkCP}, setup: revealed},
	{name: "tmpfs-over-ro", threat: "mount a tmpfs over a read-only path and write there", stoppedBy: []string{atkML, atkSC, atkLL, atkCP}},
	{name: "fsmount-over-ro", threat: "fsopen/fsmount/move_mount a tmpfs over a read-only path", stoppedBy: []string{atkML, atkSC, atkLL, atkCP}},
	// procmask alone does not stop it: the kernel refuses a new proc
	// only while a *locked* mount covers part of the old one, and the
	// masks are locked only by mountlock (mnt_already_visible).
	{name: "mount-proc", threat: "mount a second, unmasked proc", stoppedBy: []string{atkML, atkSC, atkLL, atkCP}},
	{name: "pivot-root-out", threat: "pivot_root into a new root and look for the host in the old one", base: true, setup: secretNotPrinted},
	{name: "chroot-out", threat: "chroot into a subdirectory and climb out with ..", base: true, setup: secretNotPrinted},
	// The sandbox's view: with the root built from a tmpfs of its own
	// (spec.RootAnnotation, as gloved and glove run write it), mountinfo
	// shows "/" as the root's source, not the bundle's host directory.
	{name: "mountinfo-host-path", threat: "read the bundle root's host path (the service user's run directory) from /proc/self/mountinfo or /proc/1/mountinfo", base: true, setup: tmpfsRootPathHidden,
		runcDiffers: "runc roots the sandbox at a bind of root.path, whose host path mountinfo shows"},
	// Namespaces.
	// A kernel that refuses unprivileged user namespaces refuses them to
	// anyone in a user namespace, even its root with every capability
	// there: the base stops both (hostUserns.kernel).
	{name: "unshare-userns", threat: "unshare(CLONE_NEWUSER)", stoppedBy: []string{atkSC}, base: hostUserns.kernel},
	{name: "clone-newuser", threat: "clone(CLONE_NEWUSER)", stoppedBy: []string{atkSC}, base: hostUserns.kernel},
	{name: "setns-pid1-mnt", threat: "setns into PID 1's mount namespace (/proc/1/ns/mnt) and unmount there", stoppedBy: []string{atkML, atkSC, atkLL, atkCP}, setup: revealed},
	{name: "setns-undeclared-net", threat: "setns into the host's network namespace through an undeclared descriptor 7, then connect to a host listener", base: true, setup: hostNetNS},
	// Processes.
	{name: "ptrace-host", threat: "PTRACE_ATTACH to a host process of the service user", base: true, setup: hostProcessUntouched},
	{name: "kill-host", threat: "SIGKILL a host process of the service user", base: true, setup: hostProcessUntouched},
	{name: "kill-all", threat: "kill(-1, SIGKILL) against every process the sandbox may signal", base: true, setup: hostProcessUntouched},
	{name: "ptrace-pid1", threat: "PTRACE_ATTACH to PID 1 (the shim's stage 1, which holds capabilities)", stoppedBy: []string{atkML, atkSC, atkLL, atkCP}},
	// seccomp alone does not stop it: /proc/1/mem is open and pwrite, not
	// ptrace, and the program shares PID 1's user namespace and uid.
	{name: "write-pid1-mem", threat: "write PID 1's memory through /proc/1/mem", stoppedBy: []string{atkML, atkLL, atkCP},
		runcDiffers: "under runc PID 1 is the program itself (no runtime process stays in the sandbox), so it writes its own memory: no attack"},
	// The host through /proc.
	{name: "proc1-root-secret", threat: "read the host's secret through /proc/1/root", base: true, setup: secretNotPrinted},
	{name: "proc1-cwd-secret", threat: "read the host's secret through /proc/1/cwd/..", base: true, setup: secretNotPrinted},
	{name: "proc1-fd-secret", threat: "read the host's secret through a descriptor of PID 1 (/proc/1/fd/*)", base: true, setup: secretNotPrinted},
	// The Go runtime keeps the host's cgroup CPU files open unless
	// GODEBUG=containermaxprocs=0, which the shim sets for its stages.
	{name: "proc1-fd-cgroup", threat: "read a host cgroup file held open by PID 1 (Go runtime), through /proc/1/fd/N", base: true},
	{name: "proc-self-fd-secret", threat: "read the host's secret through an own descriptor (/proc/self/fd/*)", base: true, setup: secretNotPrinted},
	// Network.
	{name: "abstract-unix-host", threat: "connect to an abstract unix socket listening in the host's network namespace", base: true, setup: hostAbstract},
	{name: "tcp4-host", threat: "AF_INET connect to a TCP listener on the host's 127.0.0.1", base: true, setup: hostTCP("tcp4", "127.0.0.1:0")},
	{name: "tcp6-host", threat: "AF_INET6 connect to a TCP listener on the host's [::1]", base: true, setup: hostTCP("tcp6", "[::1]:0")},
	// Path sockets: a datagram socket needs no socket() or connect() to
	// reach a listener whose socket file the sandbox can see.
	// From Landlock ABI 9 the landlock layer handles the resolution of
	// a path socket too (LANDLOCK_ACCESS_FS_RESOLVE_UNIX), and stops
	// both on its own.
	{name: "dgram-path-sendto", threat: "socketpair(AF_UNIX, SOCK_DGRAM), then sendto a host datagram listener's path in a read-only bind (log injection through a granted /dev/log)", stoppedBy: append([]string{atkSC}, withResolveUnix(atkLL)...), setup: hostDgram},
	{name: "stream-path-connect", threat: "socket(AF_UNIX, SOCK_STREAM), then connect to a host stream listener's path in a read-only bind (a world-writable service socket)", stoppedBy: append([]string{atkSC}, withResolveUnix(atkLL)...), setup: hostStream},
	{name: "stream-path-sendto", threat: "socketpair(AF_UNIX, SOCK_STREAM), the pair the profile allows, then sendto a host datagram listener's path", base: true, setup: hostDgram},
	// The inherited stream is connected: the kernel refuses it an
	// address (EISCONN) and a second connect, in every configuration.
	{name: "inherited-stream-sendto", threat: "sendto and connect with a host datagram listener's path on the inherited stream (descriptor 3), to reach anything but its peer", base: true, setup: declaredStreamToDgram},
	// A socket the stream's peer hands over is a socket like any other:
	// before Landlock ABI 9 no layer of the sandbox stops it (a positive
	// control), the peer must not send one. glove-streamproxy, the peer
	// of every inherited stream, relays bytes only
	// (TestStreamproxyCarriesNoDescriptors). From ABI 9 the landlock
	// layer refuses the send's path.
	{name: "scm-rights-from-peer", threat: "a datagram socket handed over the inherited stream by its peer (SCM_RIGHTS) sends to a host listener's path (a positive control below Landlock ABI 9); glove-streamproxy never hands one over", control: !resolveUnix, stoppedBy: withResolveUnix(atkLL), runcDiffers: resolveUnixRuncDiffers(), setup: peerHandsDgram},
	{name: "socket-packet", threat: "open an AF_PACKET raw socket", stoppedBy: []string{atkML, atkSC, atkCP}},
	{name: "netlink-route-admin", threat: "AF_NETLINK: change an interface over rtnetlink", stoppedBy: []string{atkML, atkSC, atkCP}},
	// Kernel attack surface.
	{name: "keyctl", threat: "add_key into the kernel keyring", stoppedBy: []string{atkSC}},
	{name: "bpf", threat: "bpf(BPF_MAP_CREATE)", base: true},
	{name: "perf-event-open", threat: "perf_event_open on itself", stoppedBy: []string{atkSC}, base: perfRestricted()},
	{name: "userfaultfd", threat: "userfaultfd(UFFD_USER_MODE_ONLY)", stoppedBy: []string{atkSC}},
	{name: "io-uring-setup", threat: "io_uring_setup", stoppedBy: []string{atkSC}},
	// Kernel-global budgets: no namespace or cgroup divides them.
	{name: "aio-global-budget", threat: "io_setup taking native AIO events from the machine-wide fs.aio-max-nr (one io_setup(65536) left the host none)", stoppedBy: []string{atkSC}, setup: aioBudgetWatched},
	// Per-user budgets: every sandbox runs as the service user, and what
	// it is charged is charged to that user on the host too. glove-shim
	// sets RLIMIT_MSGQUEUE to 0 unless the bundle sets it (base).
	{name: "mq-user-budget", threat: "POSIX message queues taking the service user's RLIMIT_MSGQUEUE budget from gloved and the other sessions (a host mq_open of the service user refused while the sandbox holds them)", base: true, setup: hostWatched("mq"),
		runcDiffers: "runc applies only the rlimits a bundle lists, and the bundle lists none: the sandbox keeps the service user's RLIMIT_MSGQUEUE and takes the host's budget"},
	// Queued signals are counted per user (ucounts) against
	// RLIMIT_SIGPENDING; glove-shim gives the program a share of the
	// service user's limit unless the bundle sets it (base).
	{name: "sigpending-user-budget", threat: "queued real-time signals taking the service user's RLIMIT_SIGPENDING budget from gloved and the other sessions (a host sigqueue of the service user refused while the sandbox holds them)", base: true, setup: hostWatched("sigpending"),
		runcDiffers: "runc applies only the rlimits a bundle lists: the sandbox keeps the service user's RLIMIT_SIGPENDING and takes the host's budget"},
	// glove-shim's stage 1 gives user namespace 1 a share of the host
	// user's inotify instances and watches (base).
	{name: "inotify-user-budget", threat: "inotify instances taking the service user's fs.inotify.max_user_instances from gloved and the other sessions (a host inotify_init1 of the service user refused while the sandbox holds them)", base: true, setup: hostWatched("inotify"),
		runcDiffers: "runc sets no per-namespace budget: the sandbox's instances count against the service user's whole host limit"},
	{name: "open-by-handle-at", threat: "open_by_handle_at with a handle of the host's outside directory (\"shocker\")", base: true, setup: shocker},
	// Terminal and descriptors.
	{name: "tiocsti", threat: "TIOCSTI (after TIOCSCTTY) to push input into the terminal given as stdin", base: true, setup: terminal},
	// With process.terminal the program's own terminal is its controlling
	// one, so the kernel allows TIOCSTI there (dev.tty.legacy_tiocsti=1):
	// only the shim's ioctl filter stops it (on the low 32 bits of the
	// request, which libseccomp cannot compare).
	{name: "tiocsti-own-terminal", threat: "TIOCSTI on the program's own controlling terminal (process.terminal)", stoppedBy: []string{atkSC}, base: !legacyTIOCSTI(), runcUnsupported: "runc allocates the terminal itself and hands it over --console-socket; glove-shim uses its standard input", setup: ownTerminal},
	{name: "tiocsti-high-bits", threat: "TIOCSTI with a high bit set in the 64-bit request, past a filter that compares all 64 bits", stoppedBy: []string{atkSC}, base: !legacyTIOCSTI(), runcUnsupported: "runc allocates the terminal itself and hands it over --console-socket; glove-shim uses its standard input", setup: ownTerminal},
	// The terminal given as standard input is the operator's (glove run):
	// its state must be the same after the program is gone. The kernel
	// lets any holder of a terminal descriptor change it; only the
	// shim's always-on ioctl filter stops these.
	{name: "tiocsetd-terminal", threat: "TIOCSETD N_NULL on the terminal given as stdin: the operator's terminal drops all input and output afterwards", stoppedBy: []string{atkSC}, base: !nullLdiscReachable(), setup: terminalState},
	{name: "tiocexcl-terminal", threat: "TIOCEXCL on the terminal given as stdin: nobody but root may open it again", stoppedBy: []string{atkSC}, setup: terminalState},
	// A terminal on the program's standard descriptors may be re-opened
	// by name for writing (/dev/stderr, /proc/self/fd/N): Landlock has a
	// rule for exactly its inode. Another host pts, even one the program
	// holds a read-only descriptor of, may not: only Landlock stops the
	// upgrade when the pts is the service user's (DAC allows it).
	{name: "reopen-own-terminal", threat: "positive control: re-open the program's own terminal (descriptor 0) through /proc/self/fd/0 for writing, as \"> /dev/stderr\" does", control: true, runcUnsupported: "runc allocates the terminal itself and hands it over --console-socket; glove-shim uses its standard input", setup: ownTerminalReopen},
	{name: "reopen-other-pts", threat: "re-open for writing, through /proc/self/fd/3, another host pts of the service user (another session's or the operator's terminal) of which descriptor 3 allows only reading, and write to it", stoppedBy: []string{atkLL}, runcUnsupported: "runc allocates the terminal itself and hands it over --console-socket; glove-shim uses its standard input", setup: otherPTS},
	{name: "undeclared-fd-file", threat: "read and write a host file through an undeclared inherited descriptor 7", base: true, setup: undeclared(false)},
	{name: "undeclared-fd-dir", threat: "open the host's secret through an undeclared inherited directory descriptor 7", base: true, setup: undeclared(true)},
	{name: "getsockopt-declared", threat: "positive control: getsockopt(3, SOL_SOCKET, SO_TYPE) on the declared socket", control: true, setup: declaredSocket},
	{name: "getsockopt-rcvbuf", threat: "getsockopt(3, SOL_SOCKET, SO_RCVBUF): another option on the declared socket", stoppedBy: []string{atkSC}, setup: declaredSocket},
	{name: "getsockopt-undeclared", threat: "getsockopt(SO_TYPE) on a socket other than the declared one", stoppedBy: []string{atkSC}, setup: declaredSocket},
	// Privilege.
	{name: "setuid-own", threat: "execute a setuid copy of id the sandbox wrote to the workspace", base: true},
	{name: "setuid-root", threat: "execute a setuid-root copy of id in a bind without nosuid", base: true, setup: setuidRoot},
	{name: "mknod-workspace", threat: "mknod char 1:3 in /workspace and open it", base: true},
	{name: "mknod-tmp", threat: "mknod char 1:3 in /tmp and open it", base: true},
	// /proc/sys, /sys, and the kernel's interfaces.
	{name: "write-proc-hostname", threat: "write /proc/sys/kernel/hostname", base: true, setup: hostnameUnchanged},
	{name: "write-drop-caches", threat: "write /proc/sys/vm/drop_caches", base: true},
	{name: "write-core-pattern", threat: "write /proc/sys/kernel/core_pattern (a host-wide escape)", base: true, setup: corePatternUnchanged},
	{name: "write-sys-mtu", threat: "write /sys/class/net/lo/mtu", base: true},
	// /proc/kcore and /proc/sysrq-trigger are not in this kernel
	// (CONFIG_PROC_KCORE, CONFIG_MAGIC_SYSRQ), so a case on them would pass
	// without attacking anything; these two reach the same layers.
	{name: "write-proc-sys-net", threat: "write a network sysctl of the sandbox's own network namespace (/proc/sys/net/ipv4/ip_forward)", stoppedBy: []string{atkML, atkLL, atkCP, atkPM}},
	{name: "read-sys-firmware", threat: "read the host's physical memory map under /sys/firmware (a masked path)", stoppedBy: []string{atkPM}},
	{name: "sethostname", threat: "sethostname visible on the host", base: true, setup: hostnameUnchanged},
}

// attackConfig is one way of running the table.
type attackConfig struct {
	name  string
	only  string // the one layer on; "" with all: production or base
	prod  bool
	layer bool // a layers-shim run (only or base)
	// userns runs the shim with --userns-fd, in a user namespace made
	// for it as glove-userns makes one (makeUserns): there is no user
	// namespace 2, so the mountlock layer cannot exist.
	userns bool
	// uid0 gives the bundle process.user 0:0 (and mappings of 0), which
	// the namespace of userns then maps.
	uid0 bool
}

// attackConfigs are the table's configurations: production, each layer
// alone and none, by default and again with --userns-fd ("userns-").
func attackConfigs() []attackConfig {
	var cs []attackConfig
	for _, userns := range []bool{false, true} {
		prefix := ""
		if userns {
			prefix = "userns-"
		}
		cs = append(cs, attackConfig{name: prefix + "production", prod: true, userns: userns})
		if userns {
			cs = append(cs, attackConfig{name: prefix + "production-uid0", prod: true, userns: true, uid0: true})
		}
		for _, l := range shim.Layers {
			cs = append(cs, attackConfig{name: prefix + "only-" + l, only: l, layer: true, userns: userns, uid0: userns})
		}
		cs = append(cs, attackConfig{name: prefix + "base", layer: true, userns: userns, uid0: userns})
	}
	return cs
}

// expectStopped is the table's claim for c in configuration cfg. With
// --userns-fd, production must still stop every case, every layer alone
// but mountlock gives its verdicts of the default mode, and mountlock
// alone gives exactly the base's: the layer does not exist there.
func (c attackCase) expectStopped(cfg attackConfig) bool {
	switch {
	case c.control:
		return false
	case cfg.prod:
		return true
	case cfg.userns && cfg.only == shim.LayerMountLock:
		return c.base
	case cfg.only != "":
		return c.base || slices.Contains(c.stoppedBy, cfg.only)
	}
	return c.base
}

func (cfg attackConfig) env() []string {
	if cfg.prod {
		return []string{}
	}
	var off []string
	for _, l := range shim.Layers {
		if l != cfg.only {
			off = append(off, l)
		}
	}
	return []string{"GLOVE_SHIM_TEST_LAYERS_OFF=" + strings.Join(off, ",")}
}

// attackResult is one cell of the report.
type attackResult struct {
	stopped  bool
	evidence string
}

func TestAttackTable(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	probeDir := buildProbe(t, e)
	shims := map[bool]string{false: e.HelperPath("glove-shim"), true: e.LayersShim(t)}
	if len(attackCases) < 35 {
		t.Fatalf("the table has %d cases, want at least 35", len(attackCases))
	}
	var mu sync.Mutex
	results := map[string]map[string]attackResult{} // case → config → result
	configs := attackConfigs()
	refused := ""
	if noUserns(t) {
		configs = slices.DeleteFunc(configs, func(cfg attackConfig) bool { return !cfg.userns })
		t.Run("default-mode-refused", func(t *testing.T) {
			refused = defaultModeRefused(t, e, shims[false], e.NewBundle(t))
		})
	}
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			for _, c := range attackCases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					res := runAttack(t, e, probeDir, shims[cfg.layer], cfg, c)
					mu.Lock()
					if results[c.name] == nil {
						results[c.name] = map[string]attackResult{}
					}
					results[c.name][cfg.name] = res
					mu.Unlock()
					t.Logf("%s: %s", verdict(res.stopped), res.evidence)
					want := c.expectStopped(cfg)
					if res.stopped != want {
						t.Errorf("%s in %s: %s, the table says %s (stoppedBy %v, base %v)\nevidence: %s",
							c.name, cfg.name, verdict(res.stopped), verdict(want), c.stoppedBy, c.base, res.evidence)
					}
				})
			}
		})
	}
	report := attackReport(configs, results)
	if refused != "" {
		report += "This host refuses unprivileged user namespaces: the default mode (no --userns-fd) did not start, " + refused + "\n"
	}
	t.Log("\n" + report)
	if p := os.Getenv(reportEnvVar); p != "" {
		if err := os.WriteFile(p, []byte(report), 0o644); err != nil {
			t.Errorf("write %s: %v", p, err)
		}
	}
}

func verdict(stopped bool) string {
	if stopped {
		return "stopped"
	}
	return "SUCCEEDED"
}

func attackReport(configs []attackConfig, results map[string]map[string]attackResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-22s", "case")
	for _, cfg := range configs {
		fmt.Fprintf(&b, " %-*s", max(15, len(cfg.name)), cfg.name)
	}
	b.WriteString("\n")
	for _, c := range attackCases {
		fmt.Fprintf(&b, "%-22s", c.name)
		for _, cfg := range configs {
			cell := "-"
			if r, ok := results[c.name][cfg.name]; ok {
				cell = verdict(r.stopped)
				if r.stopped != c.expectStopped(cfg) {
					cell += "(!)"
				}
			}
			fmt.Fprintf(&b, " %-*s", max(15, len(cfg.name)), cell)
		}
		b.WriteString("\n")
	}
	b.WriteString("stopped: the attack had no effect; SUCCEEDED: it worked (expected in a configuration without the layers that stop it); (!) differs from the table\n")
	return b.String()
}

// buildProbe returns the directory of the static attacker
// (testenv.ToolAttackProbe), which holds nothing else: the sandbox gets it
// read-only at /probe.
func buildProbe(t *testing.T, e *testenv.Env) string {
	t.Helper()
	return filepath.Dir(e.Tool(t, testenv.ToolAttackProbe))
}

// runAttack runs one case in one configuration with the shim at shimPath
// and returns the verdict.
func runAttack(t *testing.T, e *testenv.Env, probeDir, shimPath string, cfg attackConfig, c attackCase) attackResult {
	t.Helper()
	rt := attackRuntime{path: shimPath, env: cfg.env(), userns: cfg.userns}
	if cfg.uid0 {
		rt.edit = func(s *specs.Spec) {
			s.Process.User.UID, s.Process.User.GID = 0, 0
			s.Linux.UIDMappings[0].ContainerID, s.Linux.GIDMappings[0].ContainerID = 0, 0
		}
	}
	return runAttackWith(t, e, probeDir, rt, c)
}

// attackRuntime is the OCI runtime a case runs under: glove-shim, or runc
// (runc_compare_test.go) with its global flags and a bundle edit.
type attackRuntime struct {
	path   string
	env    []string
	global []string // flags before "run"
	id     string   // container id; "attack" when empty
	edit   func(*specs.Spec)
	// userns passes a user namespace made for the run (makeUserns) with
	// --userns-fd, at the first descriptor after the case's own.
	userns bool
}

func runAttackWith(t *testing.T, e *testenv.Env, probeDir string, rt attackRuntime, c attackCase) attackResult {
	t.Helper()
	r := newAttackRun(t, e, probeDir)
	var j judge
	if c.setup != nil {
		j = c.setup(t, r)
	}
	r.b.Spec.Process.Args = append([]string{probeInside, c.name}, r.args...)
	if rt.edit != nil {
		rt.edit(r.b.Spec)
	}
	r.b.Write(t)
	args := append(append([]string(nil), rt.global...), "run", "--bundle", r.b.Dir)
	if r.preserve > 0 {
		args = append(args, "--preserve-fds", strconv.Itoa(r.preserve))
	}
	extra := r.extra
	if rt.userns {
		// Mapping the bundle's process.user, as gloved asks glove-userns
		// to: the program is that uid in user namespace 1.
		extra = append(slices.Clip(extra), makeUserns(t, e, usernsFor(e, r.b.Spec.Process.User)))
		args = append(args, "--userns-fd", strconv.Itoa(2+len(extra)))
	}
	id := rt.id
	if id == "" {
		id = "attack"
	}
	args = append(args, id)
	out, code := shimRun(t, e, rt.path, args, rt.env, extra, r.stdin)
	if !strings.Contains(out, "RAN "+c.name+"\n") {
		t.Fatalf("%s did not run (no case may pass only because it failed to run): exit %d\n%s", c.name, code, out)
	}
	inside := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "ATTACK-SUCCEEDED "+c.name) || strings.HasPrefix(l, "DENIED "+c.name) {
			inside = l
		}
	}
	res := attackResult{evidence: fmt.Sprintf("exit %d; inside: %q", code, inside)}
	switch {
	case strings.Contains(out, hostSecret):
		// Whatever the case, the host's secret must never come out.
		res.stopped = false
		res.evidence += "; the host's secret was printed"
	case j != nil:
		succeeded, ev := j(out)
		res.stopped = !succeeded
		res.evidence += "; outside: " + ev
	case inside == "":
		t.Fatalf("%s printed no verdict: exit %d\n%s", c.name, code, out)
	default:
		res.stopped = strings.HasPrefix(inside, "DENIED ")
	}
	return res
}

// shimRun runs the shim as the service user with the given descriptors
// (nil entries stay closed) and standard input, and returns its combined
// output and exit status.
func shimRun(t *testing.T, e *testenv.Env, shimPath string, args, env []string, extra []*os.File, stdin *os.File) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, shimPath, args...)
	cmd.Env = env
	cmd.ExtraFiles = extra
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.Credential(), Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %v: still running after 30s\n%s", shimPath, args, &out)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		return out.String(), ee.ExitCode()
	}
	t.Fatalf("%s %v: %v", shimPath, args, err)
	return "", 0
}

// newAttackRun makes a bundle with the probe at /probe, a host directory
// of the service user bound read-only at /ro (holding victim), and a file
// planted in the rootfs below /ro.
func newAttackRun(t *testing.T, e *testenv.Env, probeDir string) *attackRun {
	t.Helper()
	b := e.NewBundle(t)
	r := &attackRun{e: e, b: b, rosrc: filepath.Join(b.Dir, "rosrc"), rootfs: filepath.Join(b.Dir, "rootfs"),
		probe: filepath.Join(probeDir, "attackprobe")}
	mustMkdir(t, e, r.rosrc)
	mustWrite(t, e, filepath.Join(r.rosrc, "victim"), victimText)
	mustMkdir(t, e, filepath.Join(r.rootfs, "ro"))
	mustMkdir(t, e, filepath.Join(r.rootfs, "probe"))
	mustWrite(t, e, filepath.Join(r.rootfs, "ro", "hidden"), hiddenToken+"\n")
	b.Spec.Mounts = append(b.Spec.Mounts,
		specs.Mount{Destination: "/probe", Type: "bind", Source: probeDir, Options: []string{"bind", "ro", "nosuid", "nodev"}},
		specs.Mount{Destination: "/ro", Type: "bind", Source: r.rosrc, Options: []string{"bind", "ro", "nosuid", "nodev"}},
	)
	r.args = []string{"outside=" + b.Outside}
	return r
}

func mustMkdir(t *testing.T, e *testenv.Env, p string) {
	t.Helper()
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, e.UID, e.GID); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, e *testenv.Env, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, e.UID, e.GID); err != nil {
		t.Fatal(err)
	}
}

// Outside judgements.

func victimUnchanged(t *testing.T, r *attackRun) judge {
	return func(string) (bool, string) {
		b, err := os.ReadFile(filepath.Join(r.rosrc, "victim"))
		if err != nil || string(b) != victimText {
			return true, fmt.Sprintf("host file now %q (%v)", b, err)
		}
		return false, "host file unchanged"
	}
}

func usrUnchanged(t *testing.T, r *attackRun) judge {
	var rnd [6]byte
	_, _ = unix.Getrandom(rnd[:], 0)
	name := "glove-attack-" + hex.EncodeToString(rnd[:])
	r.args = append(r.args, "name="+name)
	p := filepath.Join("/usr", name)
	t.Cleanup(func() { _ = os.Remove(p) })
	return func(string) (bool, string) {
		if _, err := os.Lstat(p); err == nil {
			return true, p + " exists on the host"
		}
		return false, p + " absent on the host"
	}
}

// aioBudgetWatched asks the sandbox for 1,024 AIO events held for 600 ms
// and watches the host's fs.aio-nr (the machine-wide count of events
// taken) while it runs: the attack succeeded if the count rose by the
// sandbox's request (the kernel charges at least twice what is asked).
func aioBudgetWatched(t *testing.T, r *attackRun) judge {
	const nr = 1024
	r.args = append(r.args, fmt.Sprintf("nr=%d", nr), "hold=600")
	read := func() int {
		b, err := os.ReadFile("/proc/sys/fs/aio-nr")
		if err != nil {
			t.Fatalf("read fs.aio-nr: %v", err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("fs.aio-nr %q: %v", b, err)
		}
		return n
	}
	base := read()
	stop, done := make(chan struct{}), make(chan int)
	go func() {
		peak := base
		for {
			select {
			case <-stop:
				done <- peak
				return
			case <-time.After(5 * time.Millisecond):
				peak = max(peak, read())
			}
		}
	}()
	var peak int
	var once sync.Once
	finish := func() int {
		once.Do(func() { close(stop); peak = <-done })
		return peak
	}
	t.Cleanup(func() { finish() })
	return func(string) (bool, string) {
		p := finish()
		if p-base >= nr {
			return true, fmt.Sprintf("fs.aio-nr rose from %d to %d while the sandbox ran", base, p)
		}
		return false, fmt.Sprintf("fs.aio-nr stayed within %d..%d while the sandbox ran", base, p)
	}
}

func rootfsUnchanged(t *testing.T, r *attackRun) judge {
	return func(string) (bool, string) {
		if _, err := os.Lstat(filepath.Join(r.rootfs, "pwned")); err == nil {
			return true, "rootfs/pwned exists on the host"
		}
		return false, "rootfs/pwned absent on the host"
	}
}

// tmpfsRootPathHidden asks for a tmpfs root (the planted file below /ro
// goes: such a root may hold only links and empty directories) and judges
// whether the root's host path came out.
func tmpfsRootPathHidden(t *testing.T, r *attackRun) judge {
	if err := os.Remove(filepath.Join(r.rootfs, "ro", "hidden")); err != nil {
		t.Fatal(err)
	}
	r.b.Spec.Annotations = map[string]string{spec.RootAnnotation: spec.RootTmpfs}
	return func(out string) (bool, string) {
		if !strings.Contains(out, "/proc/self/mountinfo: \"") {
			return true, "no mount table was read: the case did not run as written"
		}
		if strings.Contains(out, r.rootfs) {
			return true, "the root's host path " + r.rootfs + " was printed"
		}
		return false, "mountinfo names no host path of the root"
	}
}

// revealed: there is no outside effect; the planted token in the output
// is the evidence that the mount was removed.
func revealed(t *testing.T, r *attackRun) judge {
	return func(out string) (bool, string) {
		if strings.Contains(out, hiddenToken) {
			return true, "the file below /ro was read"
		}
		return false, "the file below /ro stayed hidden"
	}
}

func secretNotPrinted(t *testing.T, r *attackRun) judge {
	return func(out string) (bool, string) {
		if strings.Contains(out, hostSecret) {
			return true, "the host's secret was printed"
		}
		return false, "the host's secret was not printed"
	}
}

// hostProcessUntouched starts a host process of the service user, passes
// its pid, and checks afterwards that it is alive, not stopped, untraced.
func hostProcessUntouched(t *testing.T, r *attackRun) judge {
	cmd := exec.Command("/bin/sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: r.e.Credential(), Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	// Asleep before the sandbox starts: a victim still starting up reads
	// "R (running)" afterwards, which the judge below would take for a
	// disturbance (seen in the VM lane's emulated guest, where starting
	// sleep(1) can outlast a whole attack).
	for deadline := time.Now().Add(30 * time.Second); ; {
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil && strings.Contains(string(st), "State:\tS") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("host process %d not asleep 30 s after its start", pid)
		}
		time.Sleep(time.Millisecond)
	}
	r.args = append(r.args, "pid="+strconv.Itoa(pid))
	return func(string) (bool, string) {
		var ws unix.WaitStatus
		if w, _ := unix.Wait4(pid, &ws, unix.WNOHANG|unix.WUNTRACED, nil); w == pid {
			return true, fmt.Sprintf("host process %d changed state: %v", pid, ws)
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return true, fmt.Sprintf("host process %d gone: %v", pid, err)
		}
		s := string(st)
		if !strings.Contains(s, "\nTracerPid:\t0\n") || !strings.Contains(s, "State:\tS") {
			return true, fmt.Sprintf("host process %d disturbed:\n%s", pid, s)
		}
		return false, fmt.Sprintf("host process %d alive, sleeping, untraced", pid)
	}
}

// listen accepts connections on l until the test ends and counts them.
func listen(t *testing.T, l net.Listener) *atomic.Int32 {
	var n atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return &n
}

func acceptedNothing(n *atomic.Int32, what string) judge {
	return func(string) (bool, string) {
		time.Sleep(20 * time.Millisecond) // an accepted connection is counted asynchronously
		if k := n.Load(); k > 0 {
			return true, fmt.Sprintf("%s accepted %d connection(s)", what, k)
		}
		return false, what + " accepted nothing"
	}
}

func hostTCP(network, addr string) func(t *testing.T, r *attackRun) judge {
	return func(t *testing.T, r *attackRun) judge {
		l, err := net.Listen(network, addr)
		if err != nil {
			t.Fatalf("host listener: %v", err)
		}
		n := listen(t, l)
		r.args = append(r.args, "port="+strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
		return acceptedNothing(n, "host listener "+l.Addr().String())
	}
}

func hostAbstract(t *testing.T, r *attackRun) judge {
	var rnd [6]byte
	_, _ = unix.Getrandom(rnd[:], 0)
	name := "glove-attack-" + hex.EncodeToString(rnd[:])
	l, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatalf("abstract listener: %v", err)
	}
	n := listen(t, l)
	r.args = append(r.args, "name="+name)
	return acceptedNothing(n, "host abstract socket @"+name)
}

// hostWatched runs the probe on the host as the service user, taking and
// giving back one unit of the budget kind ("mq", "inotify") every 2 ms
// while the sandbox runs; the attack succeeded if the kernel refused any
// of those (the user's budget was taken). The sandbox holds what it took
// for 600 ms.
func hostWatched(kind string) func(t *testing.T, r *attackRun) judge {
	return func(t *testing.T, r *attackRun) judge { return hostWatch(t, r, kind) }
}

func hostWatch(t *testing.T, r *attackRun, kind string) judge {
	r.args = append(r.args, "hold=600")
	cmd := exec.Command(r.probe, "host-watch", kind)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: r.e.Credential()}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	var werr error
	finish := func() {
		once.Do(func() {
			in.Close()
			werr = cmd.Wait()
		})
	}
	t.Cleanup(finish)
	return func(string) (bool, string) {
		finish()
		res := strings.TrimSpace(out.String())
		if werr != nil || !strings.HasPrefix(res, "WATCH tries=") {
			t.Fatalf("host watcher: %v: %q", werr, res)
		}
		if !strings.Contains(res, " refused=0 ") {
			return true, "the service user's " + kind + " on the host was refused while the sandbox ran: " + res
		}
		return false, "the service user's " + kind + " on the host always succeeded: " + res
	}
}

// hostDgram binds a host datagram socket in the directory bound read-only
// at /ro, writable by anyone, so that only the sandbox's layers stand in
// the way (a read-only mount does not stop a send to a socket). The
// attack succeeded if it received anything.
func hostDgram(t *testing.T, r *attackRun) judge {
	p := filepath.Join(r.rosrc, "dgram.sock")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: p}); err != nil {
		t.Fatalf("bind %s: %v", p, err)
	}
	if err := os.Chmod(p, 0o777); err != nil {
		t.Fatal(err)
	}
	r.args = append(r.args, "path=/ro/dgram.sock")
	return func(string) (bool, string) {
		var buf [256]byte
		n, _, err := unix.Recvfrom(fd, buf[:], 0)
		if err == nil {
			return true, fmt.Sprintf("the host datagram socket received %q", buf[:n])
		}
		return false, "the host datagram socket received nothing (" + err.Error() + ")"
	}
}

// hostStream listens on a host stream socket in the directory bound
// read-only at /ro, writable by anyone (a service socket such as a bus's);
// the attack succeeded if it accepted a connection.
func hostStream(t *testing.T, r *attackRun) judge {
	p := filepath.Join(r.rosrc, "stream.sock")
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatalf("listen %s: %v", p, err)
	}
	if err := os.Chmod(p, 0o777); err != nil {
		t.Fatal(err)
	}
	n := listen(t, l)
	r.args = append(r.args, "path=/ro/stream.sock")
	return acceptedNothing(n, "the host stream socket")
}

// hostNetNS passes the host's network namespace at descriptor 7, not
// declared with --preserve-fds, and a host listener's port.
func hostNetNS(t *testing.T, r *attackRun) judge {
	ns, err := os.Open("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	r.extra = []*os.File{nil, nil, nil, nil, ns}
	return hostTCP("tcp4", "127.0.0.1:0")(t, r)
}

func undeclared(dir bool) func(t *testing.T, r *attackRun) judge {
	return func(t *testing.T, r *attackRun) judge {
		p := filepath.Join(r.b.Outside, "secret")
		flags := os.O_RDWR
		if dir {
			p, flags = r.b.Outside, os.O_RDONLY
		}
		f, err := os.OpenFile(p, flags, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		r.extra = []*os.File{nil, nil, nil, nil, f}
		return func(out string) (bool, string) {
			b, err := os.ReadFile(filepath.Join(r.b.Outside, "secret"))
			if err != nil || string(b) != hostSecret+"\n" {
				return true, fmt.Sprintf("host secret now %q (%v)", b, err)
			}
			if strings.Contains(out, hostSecret) {
				return true, "the host's secret was printed"
			}
			return false, "host secret unchanged and not printed"
		}
	}
}

// declaredSocket passes a socket at descriptor 3 with --preserve-fds 1 and
// uses the profile that lets the sandbox inspect that descriptor only.
func declaredSocket(t *testing.T, r *attackRun) judge {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, b := os.NewFile(uintptr(fds[0]), "sock"), os.NewFile(uintptr(fds[1]), "peer")
	t.Cleanup(func() { a.Close(); b.Close() })
	r.extra, r.preserve, r.peer = []*os.File{a}, 1, b
	r.b.Spec.Linux.Seccomp = seccomp.DefaultProfile(seccomp.ProfileOptions{InheritedFDs: []uint32{3}})
	return nil
}

// declaredStreamToDgram is declaredSocket with a host datagram listener
// (hostDgram) for the program to aim descriptor 3 at.
func declaredStreamToDgram(t *testing.T, r *attackRun) judge {
	declaredSocket(t, r)
	return hostDgram(t, r)
}

// peerHandsDgram is declaredSocket whose host peer sends, before the
// program starts, one byte with an unbound datagram socket attached.
func peerHandsDgram(t *testing.T, r *attackRun) judge {
	declaredSocket(t, r)
	j := hostDgram(t, r)
	peer := r.peer
	d, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(d)
	if err := unix.Sendmsg(int(peer.Fd()), []byte{1}, unix.UnixRights(d), nil, 0); err != nil {
		t.Fatalf("hand the socket over: %v", err)
	}
	return j
}

// shocker passes a file handle of the host's outside directory, read on
// the host; /ro is on the same file system.
func shocker(t *testing.T, r *attackRun) judge {
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, r.b.Outside, 0)
	if err != nil {
		t.Fatalf("name_to_handle_at: %v", err)
	}
	r.args = append(r.args, "type="+strconv.Itoa(int(h.Type())), "handle="+hex.EncodeToString(h.Bytes()), "mount=/ro")
	return secretNotPrinted(t, r)
}

// terminal gives the sandbox a pseudo-terminal as standard input. The
// terminal is the controlling terminal of a host session (as a user's
// terminal is), whose input queue is checked afterwards.
func terminal(t *testing.T, r *attackRun) judge { return terminalWithHolder(t, r, true) }

// terminalState gives the program a pty (held by a host session) as
// standard input and judges, from the host, whether its line discipline
// and exclusive mode are what they were.
func terminalState(t *testing.T, r *attackRun) judge {
	terminalWithHolder(t, r, true)
	slave := int(r.stdin.Fd())
	ldisc, err := unix.IoctlGetInt(slave, unix.TIOCGETD)
	if err != nil {
		t.Fatalf("TIOCGETD: %v", err)
	}
	return func(string) (bool, string) {
		now, err := unix.IoctlGetInt(slave, unix.TIOCGETD)
		if err != nil {
			return true, fmt.Sprintf("TIOCGETD after the run: %v", err)
		}
		excl, err := unix.IoctlGetInt(slave, unix.TIOCGEXCL)
		if err != nil {
			return true, fmt.Sprintf("TIOCGEXCL after the run: %v", err)
		}
		if now != ldisc || excl != 0 {
			return true, fmt.Sprintf("the host's terminal changed: line discipline %d (was %d), exclusive %d", now, ldisc, excl)
		}
		return false, fmt.Sprintf("the host's terminal unchanged: line discipline %d, not exclusive", now)
	}
}

// terminalWithHolder gives the program a pty as standard input; with
// holder, a host session owns it as its controlling terminal first.
func terminalWithHolder(t *testing.T, r *attackRun, holder bool) judge {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	t.Cleanup(func() { slave.Close() })
	if holder {
		// The host session that owns the terminal.
		h := exec.Command("/bin/sleep", "300")
		h.Stdin = slave
		h.SysProcAttr = &syscall.SysProcAttr{Credential: r.e.Credential(), Setsid: true, Setctty: true, Ctty: 0}
		if err := h.Start(); err != nil {
			t.Fatalf("start terminal holder: %v", err)
		}
		t.Cleanup(func() { _ = h.Process.Kill(); _ = h.Wait() })
	}
	r.stdin = slave
	return func(string) (bool, string) {
		q, err := unix.IoctlGetInt(int(slave.Fd()), unix.TIOCINQ)
		if err != nil {
			return true, fmt.Sprintf("TIOCINQ: %v", err)
		}
		// Echoed input shows on the master. The master is not pollable
		// through package os, so it is polled by hand.
		echo := make([]byte, 64)
		k := 0
		pfd := []unix.PollFd{{Fd: int32(master.Fd()), Events: unix.POLLIN}}
		if n, _ := unix.Poll(pfd, 50); n > 0 && pfd[0].Revents&unix.POLLIN != 0 {
			k, _ = unix.Read(int(master.Fd()), echo)
			k = max(k, 0)
		}
		if q > 0 || k > 0 {
			return true, fmt.Sprintf("terminal input queue holds %d bytes; master read %q", q, echo[:k])
		}
		return false, "nothing injected into the terminal"
	}
}

// legacyTIOCSTI reports whether the kernel lets a process push input into
// its own controlling terminal without CAP_SYS_ADMIN.
// perfRestricted reports whether the kernel refuses perf_event_open to
// every caller without CAP_PERFMON in the initial user namespace, as
// Debian's kernels do at perf_event_paranoid 3, their default
// (CONFIG_SECURITY_PERF_EVENTS_RESTRICT; seen in the VM lane on 6.1, 6.12
// and 7.2): the sandbox's user namespaces give no such capability, so the
// base stops the case there. Upstream kernels know no level 3; on one
// set to it the case would succeed in the base and this table fail.
func perfRestricted() bool {
	b, err := os.ReadFile("/proc/sys/kernel/perf_event_paranoid")
	if err != nil {
		return false
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return err == nil && n >= 3
}

// nullLdiscReachable says whether an unprivileged program can set the
// N_NULL line discipline here: registered already (built in or loaded),
// or a module the kernel loads on demand (dev.tty.ldisc_autoload 1);
// otherwise the kernel itself refuses TIOCSETD N_NULL with EINVAL.
func nullLdiscReachable() bool {
	// Registered (built in, or loaded): /proc/tty/ldiscs lists it.
	if b, err := os.ReadFile("/proc/tty/ldiscs"); err == nil && slices.Contains(strings.Fields(string(b)), "n_null") {
		return true
	}
	b, err := os.ReadFile("/proc/sys/dev/tty/ldisc_autoload")
	if err != nil || strings.TrimSpace(string(b)) != "1" {
		return false
	}
	// On demand only if the kernel was built with it as a module.
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false
	}
	m, _ := filepath.Glob(filepath.Join("/lib/modules", unix.ByteSliceToString(u.Release[:]), "kernel/drivers/tty/n_null.ko*"))
	return len(m) > 0
}

func legacyTIOCSTI() bool {
	b, err := os.ReadFile("/proc/sys/dev/tty/legacy_tiocsti")
	return err != nil || strings.TrimSpace(string(b)) != "0"
}

// hostPTY opens a new host pty pair of the service user (its slave's
// owner, as a terminal of that user's would be).
func hostPTY(t *testing.T, r *attackRun) (master *os.File, slavePath string) {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	slavePath = "/dev/pts/" + strconv.Itoa(n)
	if err := os.Chown(slavePath, r.e.UID, -1); err != nil {
		t.Fatal(err)
	}
	return master, slavePath
}

// reopenWritten is the judge of the reopen cases: whether the probe's
// marker came out of master.
func reopenWritten(master *os.File) judge {
	return func(string) (bool, string) {
		buf := make([]byte, 256)
		k := 0
		pfd := []unix.PollFd{{Fd: int32(master.Fd()), Events: unix.POLLIN}}
		if n, _ := unix.Poll(pfd, 100); n > 0 && pfd[0].Revents&unix.POLLIN != 0 {
			k, _ = unix.Read(int(master.Fd()), buf)
			k = max(k, 0)
		}
		if strings.Contains(string(buf[:k]), "REOPENED-WRITE") {
			return true, fmt.Sprintf("the pty's master read %q", buf[:k])
		}
		return false, fmt.Sprintf("nothing written to the pty (master read %q)", buf[:k])
	}
}

// ownTerminalReopen is ownTerminal on a pty of the service user, judged
// by what its master reads.
func ownTerminalReopen(t *testing.T, r *attackRun) judge {
	master, path := hostPTY(t, r)
	slave, err := os.OpenFile(path, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty: %v", err)
	}
	t.Cleanup(func() { slave.Close() })
	r.stdin = slave
	r.b.Spec.Process.Terminal = true
	return reopenWritten(master)
}

// otherPTS gives the program its own terminal (ownTerminal) and, as
// descriptor 3, a read-only descriptor of another host pty of the
// service user; the judge reads that pty's master.
func otherPTS(t *testing.T, r *attackRun) judge {
	ownTerminal(t, r)
	master, path := hostPTY(t, r)
	ro, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty read-only: %v", err)
	}
	t.Cleanup(func() { ro.Close() })
	r.extra, r.preserve = []*os.File{ro}, 1
	return reopenWritten(master)
}

// ownTerminal gives the program a terminal that is nobody else's
// controlling terminal, as gloved's PTY is, with process.terminal set.
func ownTerminal(t *testing.T, r *attackRun) judge {
	j := terminalWithHolder(t, r, false)
	r.b.Spec.Process.Terminal = true
	return j
}

func setuidRoot(t *testing.T, r *attackRun) judge {
	dir := filepath.Join(r.b.Dir, "suid")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/usr/bin/id")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "id")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o4755); err != nil { // root-owned, setuid
		t.Fatal(err)
	}
	mustMkdir(t, r.e, filepath.Join(r.rootfs, "suid"))
	r.b.Spec.Mounts = append(r.b.Spec.Mounts, specs.Mount{Destination: "/suid", Type: "bind", Source: dir, Options: []string{"bind", "ro"}})
	return nil
}

func hostnameUnchanged(t *testing.T, r *attackRun) judge {
	before, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return func(string) (bool, string) {
		now, err := os.Hostname()
		if err != nil || now != before {
			_ = unix.Sethostname([]byte(before))
			return true, fmt.Sprintf("host name changed to %q (%v)", now, err)
		}
		return false, "host name unchanged"
	}
}

func corePatternUnchanged(t *testing.T, r *attackRun) judge {
	const p = "/proc/sys/kernel/core_pattern"
	before, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return func(string) (bool, string) {
		now, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(now, before) {
			_ = os.WriteFile(p, before, 0o644)
			return true, fmt.Sprintf("host core_pattern changed to %q (%v)", now, err)
		}
		return false, "host core_pattern unchanged"
	}
}
