// SPDX-License-Identifier: Apache-2.0

package shim

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/glove-sandbox/glove/seccomp"
	"github.com/glove-sandbox/glove/spec"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Exit statuses of glove-shim itself. Any other status is the program's
// own (128+N when it was killed by signal N).
const (
	ExitUsage  = 2   // bad command line
	ExitFailed = 125 // the sandbox could not be built; nothing was executed
)

// argStage0 is the re-executed binary's argv[1] for stage 0's waiter
// (stages 1 and 2 are never executed: each runs in the child the stage
// before it clones). A user who runs `glove-shim --glove-stage0 N` by
// hand gains nothing: the stages only restrict.
const argStage0 = "--glove-stage0"

// argJoin is gloved's first argument to glove-shim on a hybrid host:
// `glove-shim --cgroup-join S:T1,T2 run ...`. The constructor in
// shim/cstage (join.c) acts on it before the Go runtime starts: it writes
// "0" to each v1 tasks file T (which moves this process, then one
// thread, into the session's v1 cgroups without the global lock a pid
// written to cgroup.procs takes), closes them, and writes one byte on
// the sync socket S. Main only checks that it agrees with the run
// command.
const argJoin = "--cgroup-join"

// argProbe is `glove-shim probe`: the user-namespace steps of a start
// alone, as the calling user, which the constructor in shim/cstage
// (probe.c) runs before the Go runtime starts for exactly that command
// line and ends with 0 (every step passed) or 1. gloved, glove run and
// glove status learn from it whether glove-shim itself may build a
// sandbox on this host, under whatever confines it here (AppArmor).
const argProbe = "probe"

// runUsage is the command line of run, which its usage errors show;
// usageLine is glove-shim's, shown for any other.
const (
	runUsage  = "usage: glove-shim [--cgroup-join S:T1,T2] run --bundle DIR [--preserve-fds N] [--sync-fd N] [--seccomp-cache-fd N] [--userns-fd N] ID"
	usageLine = "usage: glove-shim run --bundle DIR [--preserve-fds N] ID | glove-shim probe | glove-shim --version"
)

// Layer names (see layers.go): each protection the attack table switches
// off on its own in a test build.
const (
	LayerMountLock = "mountlock" // the second user + mount namespace
	LayerSeccomp   = "seccomp"
	LayerLandlock  = "landlock"
	LayerCaps      = "caps"     // capability drop, bounding set, SECBIT_NOROOT
	LayerProcMask  = "procmask" // maskedPaths and readonlyPaths
)

// Layers lists every layer name.
var Layers = []string{LayerMountLock, LayerSeccomp, LayerLandlock, LayerCaps, LayerProcMask}

// Main runs glove-shim with args (os.Args) and returns the exit status.
func Main(args []string) int {
	var join []int
	if len(args) >= 3 && args[1] == argJoin {
		var err error
		if join, err = parseJoin(args[2]); err != nil || len(args) < 4 || args[3] != "run" {
			if err == nil {
				err = errors.New("must be followed by run")
			}
			fmt.Fprintf(os.Stderr, "glove-shim: %s: %v\n", argJoin, err)
			return ExitUsage
		}
		args = append([]string{args[0]}, args[3:]...)
	}
	if len(args) >= 2 {
		switch args[1] {
		case argStage0:
			// Stage 0's waiter runs as C code before the Go runtime
			// starts (shim/cstage, linked into glove-shim): its command
			// line never reaches Go, and no Go waiter exists to fall back
			// on.
			fmt.Fprintf(os.Stderr, "glove-shim: %s: a stage takes exactly one argument, its control descriptor, and runs before the Go runtime (shim/cstage); this command line reached Go\n", args[1])
			return ExitFailed
		case "--version":
			if len(args) == 2 {
				fmt.Println("glove-shim dev")
				return 0
			}
		case argProbe:
			if len(args) != 2 {
				fmt.Fprintf(os.Stderr, "glove-shim: probe takes no argument\n%s\n", usageLine)
				return ExitUsage
			}
			// Only without shim/cstage linked in (Main called from a
			// test): the probe is C code the constructor runs.
			fmt.Fprintln(os.Stderr, "glove-shim: probe runs before the Go runtime (shim/cstage); this command line reached Go")
			return 1
		case "run":
			ra, err := parseRun(args[2:])
			if err == nil && join != nil {
				err = ra.checkJoin(join)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "glove-shim: %v\n%s\n", err, runUsage)
				return ExitUsage
			}
			code, err := run(ra)
			if err != nil {
				fmt.Fprintf(os.Stderr, "glove-shim: %v\n", err)
				return ExitFailed
			}
			return code
		}
	}
	fmt.Fprintln(os.Stderr, usageLine)
	return ExitUsage
}

// runFlags are the flags of `run`, each taking a value (the next
// argument, or after "="): runc's --bundle (-b) and --preserve-fds,
// Glove's --sync-fd, --seccomp-cache-fd and --userns-fd.
// docs/man/glove-shim.8 is checked against them (man_test.go).
var runFlags = []string{"--bundle", "-b", "--preserve-fds", "--sync-fd", "--seccomp-cache-fd", "--userns-fd"}

// runArgs is the parsed command line of `run`.
type runArgs struct {
	bundle   string
	preserve int
	// syncFD, a Glove extension (not a runc flag), is a descriptor beyond
	// the preserved range from which stage 0 reads one byte before it
	// creates any namespace or process: gloved writes it once it has
	// placed the shim in the session's cgroups, which on cgroup v1 is only
	// possible after the shim started (there is no CLONE_INTO_CGROUP), and
	// must happen before the shim forks anything (children inherit their
	// cgroups at fork). -1 when absent.
	syncFD int
	// cacheFD, a Glove extension too, is a directory descriptor beyond
	// the preserved range: the seccomp cache (seccompcache.go), which
	// gloved opens once and passes to every shim. -1 when absent: the
	// profile is compiled at every start.
	cacheFD int
	// usernsFD, Glove's too, is a descriptor beyond the preserved range
	// of a user namespace made for this shim (by glove-userns, on a host
	// where the kernel lets no unprivileged process create one): stage
	// 0's waiter joins it and creates the other six namespaces in it
	// instead of creating user namespace 1 itself (checkUserns says
	// which namespace is accepted). -1 when absent.
	usernsFD int
	id       string
}

// parseRun parses runc's `run` subset: --bundle/-b DIR, --preserve-fds N
// (both also as --flag=value), Glove's --sync-fd N, --seccomp-cache-fd N
// and --userns-fd N, and one container id.
func parseRun(args []string) (runArgs, error) {
	r := runArgs{syncFD: -1, cacheFD: -1, usernsFD: -1}
	seen := map[string]bool{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := a, "", false
		if len(a) > 1 && a[0] == '-' {
			if n, v, ok := cutFlag(a); ok {
				name, value, hasValue = n, v, true
			}
		}
		switch {
		case slices.Contains(runFlags, name):
			if seen[name] {
				return r, fmt.Errorf("%s given twice", name)
			}
			seen[name] = true
			if !hasValue {
				if i+1 >= len(args) {
					return r, fmt.Errorf("%s needs a value", name)
				}
				i++
				value = args[i]
			}
			switch name {
			case "--preserve-fds", "--sync-fd", "--seccomp-cache-fd", "--userns-fd":
				n, perr := strconv.Atoi(value)
				if perr != nil || n < 0 || n > maxPreserveFDs+3 || strconv.Itoa(n) != value {
					return r, fmt.Errorf("%s %q: want a number 0..%d", name, value, maxPreserveFDs)
				}
				if name == "--sync-fd" {
					r.syncFD = n
				} else if name == "--seccomp-cache-fd" {
					r.cacheFD = n
				} else if name == "--userns-fd" {
					r.usernsFD = n
				} else if n > maxPreserveFDs {
					return r, fmt.Errorf("%s %q: want a number 0..%d", name, value, maxPreserveFDs)
				} else {
					r.preserve = n
				}
			default:
				r.bundle = value
			}
		default:
			if len(a) > 0 && a[0] == '-' {
				return r, fmt.Errorf("unknown flag %q", a)
			}
			if r.id != "" {
				return r, fmt.Errorf("unexpected argument %q", a)
			}
			r.id = a
		}
	}
	if r.id == "" {
		return r, errors.New("missing container id")
	}
	if !validID(r.id) {
		return r, fmt.Errorf("container id %q: want 1..64 of [A-Za-z0-9_.-]", r.id)
	}
	if r.syncFD >= 0 && r.syncFD < 3+r.preserve {
		return r, fmt.Errorf("--sync-fd %d: must lie beyond stdio and the preserved range 3..%d", r.syncFD, 2+r.preserve)
	}
	if r.cacheFD >= 0 && r.cacheFD < 3+r.preserve {
		return r, fmt.Errorf("--seccomp-cache-fd %d: must lie beyond stdio and the preserved range 3..%d", r.cacheFD, 2+r.preserve)
	}
	if r.cacheFD >= 0 && r.cacheFD == r.syncFD {
		return r, fmt.Errorf("--seccomp-cache-fd %d: also the --sync-fd", r.cacheFD)
	}
	if r.usernsFD >= 0 && r.usernsFD < 3+r.preserve {
		return r, fmt.Errorf("--userns-fd %d: must lie beyond stdio and the preserved range 3..%d", r.usernsFD, 2+r.preserve)
	}
	if r.usernsFD >= 0 && (r.usernsFD == r.syncFD || r.usernsFD == r.cacheFD) {
		return r, fmt.Errorf("--userns-fd %d: also the --sync-fd or the --seccomp-cache-fd", r.usernsFD)
	}
	if r.bundle == "" {
		r.bundle = "."
	}
	return r, nil
}

// parseJoin parses argJoin's value, "S:T1[,T2...]" (join.c's grammar:
// descriptor numbers 3..1<<20 without a leading zero, at most 8 T, none
// equal to S), into S followed by the Ts.
func parseJoin(spec string) ([]int, error) {
	num := func(v string) (int, bool) {
		n, err := strconv.Atoi(v)
		return n, err == nil && n >= 3 && n <= 1<<20 && strconv.Itoa(n) == v
	}
	s, ts, ok := strings.Cut(spec, ":")
	fds := []int{}
	if n, good := num(s); ok && good {
		fds = append(fds, n)
		for _, t := range strings.Split(ts, ",") {
			n, good := num(t)
			if !good || n == fds[0] || len(fds) > 8 {
				ok = false
				break
			}
			fds = append(fds, n)
		}
	} else {
		ok = false
	}
	if !ok {
		return nil, fmt.Errorf("%q: want S:T1[,T2...], descriptor numbers 3..%d, at most 8 T, each other than S", spec, 1<<20)
	}
	return fds, nil
}

// checkJoin checks that the descriptors argJoin named agree with the run
// command: S is its --sync-fd, and each T lies beyond the preserved
// range and is no other descriptor it names (the constructor closed
// them; a T in the preserved range would have been one of the program's).
func (r runArgs) checkJoin(join []int) error {
	if join[0] != r.syncFD {
		return fmt.Errorf("%s: S %d is not the --sync-fd", argJoin, join[0])
	}
	for _, t := range join[1:] {
		if t < 3+r.preserve || t == r.cacheFD || t == r.usernsFD {
			return fmt.Errorf("%s: T %d lies in the preserved range 3..%d or is the --seccomp-cache-fd or the --userns-fd", argJoin, t, 2+r.preserve)
		}
	}
	return nil
}

func cutFlag(a string) (string, string, bool) {
	for i := 0; i < len(a); i++ {
		if a[i] == '=' {
			return a[:i], a[i+1:], true
		}
	}
	return a, "", false
}

func validID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c == '_' || c == '.' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// run is stage 0. It returns the program's exit status, or an error when
// the sandbox could not be built.
func run(ra runArgs) (int, error) {
	bundle, preserve := ra.bundle, ra.preserve
	// Whatever the caller leaked beyond the preserved range goes no
	// further than this process; so do --sync-fd and --seccomp-cache-fd
	// (threat: the seccomp cache's directory in a sandbox would let it
	// poison the filter of later sandboxes, see seccompcache.go).
	// --userns-fd goes on to the waiter alone (execWaiter), which closes
	// it before stage 1 exists.
	if err := unix.CloseRange(uint(3+preserve), ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return 0, fmt.Errorf("close_range: %w", err)
	}
	// Stage 0's idle threads are made while config.json is read and
	// checked; they exist before stage 1 is forked. Made before the
	// supervisor's placement (--sync-fd), they move with the process:
	// writing a pid to cgroup.procs moves every thread of it.
	if ra.syncFD >= 0 {
		if _, err := unix.FcntlInt(uintptr(ra.syncFD), unix.F_GETFD, 0); err != nil {
			return 0, fmt.Errorf("--sync-fd %d: %w", ra.syncFD, err)
		}
		defer unix.Close(ra.syncFD)
	}
	var cache *seccompCache
	if ra.cacheFD >= 0 {
		// A bad directory is refused, not ignored: gloved creates it
		// mode 0700, so another owner or mode means tampering or a
		// broken installation, which a quiet compile would hide.
		if _, err := unix.FcntlInt(uintptr(ra.cacheFD), unix.F_GETFD, 0); err != nil {
			return 0, fmt.Errorf("--seccomp-cache-fd %d: %w", ra.cacheFD, err)
		}
		defer unix.Close(ra.cacheFD)
		c, err := openSeccompCache(ra.cacheFD)
		if err != nil {
			return 0, fmt.Errorf("--seccomp-cache-fd %d: %w", ra.cacheFD, err)
		}
		cache = c
	}
	if ra.usernsFD >= 0 {
		if err := checkUserns(ra.usernsFD); err != nil {
			return 0, fmt.Errorf("--userns-fd %d: %w", ra.usernsFD, err)
		}
	}
	for fd := 3; fd < 3+preserve; fd++ {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			return 0, fmt.Errorf("--preserve-fds %d: descriptor %d: %w", preserve, fd, err)
		}
	}
	bundleFD, err := unix.Openat2(unix.AT_FDCWD, bundle, &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return 0, fmt.Errorf("open bundle %s: %w", bundle, err)
	}
	defer unix.Close(bundleFD)
	data, err := readBeneath(bundleFD, "config.json", 4<<20)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", filepath.Join(bundle, "config.json"), err)
	}
	s, err := spec.DecodeStrict(data)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Join(bundle, "config.json"), err)
	}
	if err := unlinkConfig(bundleFD, s.Annotations); err != nil {
		return 0, err
	}
	p, err := Validate(s, preserve, uint32(os.Getuid()), uint32(os.Getgid()))
	if err != nil {
		return 0, err
	}
	if ra.usernsFD >= 0 {
		p.joinUserns(ra.usernsFD)
	}
	if p.Off, err = layersFromEnvironment(); err != nil {
		return 0, err
	}
	if p.UserBudgets, err = readBudgetShares(); err != nil {
		return 0, err
	}
	if err := shareRlimits(&p.Process); err != nil {
		return 0, err
	}
	// Stage 2 applies Landlock last but one; a kernel that cannot is
	// refused here, before anything of the sandbox is built.
	if !p.off(LayerLandlock) {
		if _, err := landlockABI(); err != nil {
			return 0, err
		}
	}
	// The terminal ioctl filter, which stage 2 stacks under the bundle's.
	if !p.off(LayerSeccomp) {
		if p.Process.DenyIoctls, err = denyIoctlsProgram(); err != nil {
			return 0, err
		}
	}
	// The profile is compiled here, where every refusal of it happens
	// before any namespace exists; libseccomp's BPF generation from the
	// compiled rules, which refuses nothing, runs while stage 1 is cloned
	// and executed (exportSeccomp). With a cache, a profile compiled
	// before is read from it instead (seccompcache.go says why skipping
	// CheckRoutes and the compile then is sound).
	var compiled *seccomp.Compiled
	var store func(prog []byte) error
	if s.Linux.Seccomp != nil {
		p.Process.SeccompFlags = seccompFlags(s.Linux.Seccomp)
		p.Process.Seccomp, store = cache.lookup(s, p.Process.SeccompFlags)
		if p.Process.Seccomp == nil {
			// A profile that denies a call natively while a foreign
			// architecture it lists reaches the same call through a
			// multiplexer is refused, unless the bundle says it means it.
			if s.Annotations[seccomp.RoutesAnnotation] != "intended" {
				if err := seccomp.CheckRoutes(s.Linux.Seccomp); err != nil {
					return 0, fmt.Errorf("config.json: linux.seccomp: %w", err)
				}
			}
			if compiled, err = compileSeccomp(s.Linux.Seccomp); err != nil {
				return 0, err
			}
			defer compiled.Release()
		}
	}
	if err := checkSources(p, bundleFD, s.Root.Path); err != nil {
		return 0, err
	}
	if p.Process.Terminal {
		if _, err := unix.IoctlGetTermios(0, unix.TCGETS); err != nil {
			return 0, fmt.Errorf("config.json: process.terminal: standard input is not a terminal: %w", err)
		}
	}
	if ra.syncFD >= 0 {
		if err := awaitPlacement(ra.syncFD); err != nil {
			return 0, err
		}
	}
	// Placed in the session's cgroups by now (or created in them): what
	// stage 0's waiter starts is too.
	if err := exportSeccomp(compiled, &p.Process); err != nil {
		return 0, err
	}
	if store != nil && p.Process.Seccomp != nil {
		if err := store(p.Process.Seccomp); err != nil {
			// Unreported: stage 0's stderr is the program's. A store
			// that failed (a full disk, say) costs the next start of
			// this profile a compile, nothing more.
			return 0, execWaiter(p)
		}
	}
	return 0, execWaiter(p)
}

// execWaiter hands the plan to stage 0's C part, the waiter
// (shim/cstage/stage0.c): the plan goes into a sealed memfd beyond the
// preserved descriptors, and glove-shim is executed again with it, as
// `glove-shim --glove-stage0 N`; the constructor in shim/cstage runs the
// waiter before the Go runtime starts. The waiter starts stage 1,
// forwards signals and exits with the program's status, on one thread:
// this Go process would need idle threads made in advance (threat: a
// program using up the session's pids limit, which stage 0 shares, and
// the runtime dying for want of a thread) and a round trip to the
// runtime's signal thread for each signal it catches, about 3 ms a start
// together (docs/shim-startup.md, "Stage 0's waiter in C"). Every
// descriptor but the preserved ones, the plan's and --userns-fd's is
// close-on-exec. It returns only the reason the waiter could not be
// executed.
func execWaiter(p *Plan) error {
	plan := encodePlan(p)
	fd, err := unix.MemfdCreate("glove-plan", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return fmt.Errorf("plan: memfd_create: %w", err)
	}
	for b := plan; len(b) > 0; {
		n, err := unix.Write(fd, b)
		if err != nil {
			unix.Close(fd)
			return fmt.Errorf("plan: write: %w", err)
		}
		b = b[n:]
	}
	// Sealed: what the waiter reads is what was written here.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE); err != nil {
		unix.Close(fd)
		return fmt.Errorf("plan: seal: %w", err)
	}
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		unix.Close(fd)
		return fmt.Errorf("plan: seek: %w", err)
	}
	if fd < 3+p.PreserveFDs {
		// A number the program's descriptors take: move it beyond them.
		high, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3+p.PreserveFDs)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("plan: move the descriptor: %w", err)
		}
		fd = high
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
		unix.Close(fd)
		return fmt.Errorf("plan: keep the descriptor across execve: %w", err)
	}
	if p.UsernsFD != 0 {
		if _, err := unix.FcntlInt(uintptr(p.UsernsFD), unix.F_SETFD, 0); err != nil {
			unix.Close(fd)
			return fmt.Errorf("--userns-fd %d: keep the descriptor across execve: %w", p.UsernsFD, err)
		}
	}
	err = unix.Exec("/proc/self/exe", []string{"glove-shim", argStage0, strconv.Itoa(fd)}, []string{})
	unix.Close(fd)
	return fmt.Errorf("execute stage 0's waiter: %w", err)
}

// unlinkConfig unlinks config.json from the bundle once read, when its
// annotations ask for it (spec.ConfigAnnotation): the environment in it
// may hold a credential, which then stays on the host's file system no
// longer than this read (threat: the value readable from the bundle for
// the whole session). Before anything of the sandbox is built, so that
// no refusal of the bundle leaves it behind; an unknown value is refused
// rather than ignored.
func unlinkConfig(bundleFD int, annotations map[string]string) error {
	v, ok := annotations[spec.ConfigAnnotation]
	if !ok {
		return nil
	}
	if v != spec.ConfigUnlinkAfterRead {
		return fmt.Errorf("config.json: annotations.%s: %q (only %q): %w", spec.ConfigAnnotation, v, spec.ConfigUnlinkAfterRead, errNotImplemented)
	}
	if err := unix.Unlinkat(bundleFD, "config.json", 0); err != nil {
		return fmt.Errorf("config.json: annotations.%s: unlink: %w", spec.ConfigAnnotation, err)
	}
	return nil
}

// awaitPlacement blocks until the supervisor writes one byte on fd: then
// this process is in every cgroup of the session, and whatever it starts
// will be too. End of file means the supervisor gave up: nothing runs.
func awaitPlacement(fd int) error {
	var b [1]byte
	for {
		n, err := unix.Read(fd, b[:])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return fmt.Errorf("--sync-fd: %w", err)
		case n == 0:
			return errors.New("--sync-fd: closed by the supervisor before placement")
		}
		return nil
	}
}

// compileSeccomp compiles the profile with libseccomp (exact translation or
// refusal, see package seccomp) and returns it, for exportSeccomp.
func compileSeccomp(s *specs.LinuxSeccomp) (*seccomp.Compiled, error) {
	c, err := seccomp.CompileForExport(s)
	if err != nil {
		return nil, fmt.Errorf("config.json: linux.seccomp: %w", err)
	}
	return c, nil
}

// seccompFlags are the kernel flags stage 2 loads the profile's program
// with. An unknown flag is refused by the compile, or was when the cached
// program was made.
func seccompFlags(s *specs.LinuxSeccomp) uint {
	flags := uint(unix.SECCOMP_FILTER_FLAG_TSYNC)
	for _, f := range s.Flags {
		switch f {
		case specs.LinuxSeccompFlagLog:
			flags |= unix.SECCOMP_FILTER_FLAG_LOG
		case specs.LinuxSeccompFlagSpecAllow:
			flags |= unix.SECCOMP_FILTER_FLAG_SPEC_ALLOW
		}
	}
	if s.ListenerPath != "" {
		// The kernel refuses TSYNC with NEW_LISTENER unless TSYNC_ESRCH
		// (Linux 5.7) says how a thread that cannot be synchronized is
		// reported: the result is then the listener.
		flags |= unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH
	}
	return flags
}

// exportSeccomp puts the compiled profile's BPF program, if there is a
// profile, in pp for stage 2. A failure here ends stage 1 before it has
// read a plan, so nothing runs without the bundle's filter.
func exportSeccomp(c *seccomp.Compiled, pp *ProcessPlan) error {
	if c == nil {
		return nil
	}
	prog, err := c.BPF()
	if err != nil {
		return fmt.Errorf("config.json: linux.seccomp: %w", err)
	}
	pp.Seccomp = prog
	return nil
}

// readBeneath reads a regular file beneath dir, refusing symlinks and
// anything larger than limit.
func readBeneath(dir int, name string, limit int64) ([]byte, error) {
	fd, err := unix.Openat2(dir, name, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, fmt.Errorf("openat2: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("fstat: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, errors.New("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
}

// checkSources checks the preserved descriptors and every host path the
// plan names, each opened once here with openat2, and records the
// identities stage 1 must find again.
func checkSources(p *Plan, bundleFD int, root string) error {
	// The passed descriptors: a directory or an O_PATH descriptor would
	// let the program walk the host from it (openat(fd, "..")), so only
	// the mount sources may be such, and those never reach the program.
	for _, fd := range p.Process.PassFDs {
		if err := checkPassFD(fd); err != nil {
			return fmt.Errorf("--preserve-fds: descriptor %d: %w", fd, err)
		}
	}
	if fd := p.Process.SeccompListenerFD; fd != 0 {
		if err := checkListenerFD(fd); err != nil {
			return fmt.Errorf("config.json: linux.seccomp.listenerPath: descriptor %d: %w", fd, err)
		}
	}
	if fd := p.EgressHandoffFD; fd != 0 {
		if err := checkListenerFD(fd); err != nil {
			return fmt.Errorf("config.json: annotations.%s: descriptor %d: %w", spec.EgressHandoffAnnotation, fd, err)
		}
	}
	how := &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	dir := unix.AT_FDCWD
	if !filepath.IsAbs(root) {
		if filepath.Clean(root) != root || root == ".." || strings.HasPrefix(root, "../") {
			return bad("root.path", "%q leaves the bundle", root)
		}
		dir = bundleFD
		how.Resolve |= unix.RESOLVE_BENEATH
	}
	rfd, err := unix.Openat2(dir, root, how)
	if err != nil {
		return fmt.Errorf("config.json: root.path %q: %w", root, err)
	}
	defer unix.Close(rfd)
	if p.RootIdent, err = identify(rfd, true); err != nil {
		return fmt.Errorf("config.json: root.path %q: %w", root, err)
	}
	if p.RootPath, err = os.Readlink("/proc/self/fd/" + strconv.Itoa(rfd)); err != nil || !filepath.IsAbs(p.RootPath) {
		return fmt.Errorf("config.json: root.path %q: cannot name it: %v", root, err)
	}
	if p.RootTmpfs {
		if p.RootEntries, err = readRootEntries(rfd); err != nil {
			return fmt.Errorf("config.json: root.path %q with annotations.%s=%s: %w", root, spec.RootAnnotation, spec.RootTmpfs, err)
		}
	}
	for i := range p.Mounts {
		m := &p.Mounts[i]
		if m.Kind != kindBind {
			continue
		}
		f := fmt.Sprintf("mounts[%d].source", i)
		if m.SourceFD >= 0 {
			isDir, err := checkSourceFD(m.SourceFD)
			if err == nil && m.SourceSub != "" {
				if !isDir {
					err = errors.New("a path beneath a descriptor that is not a directory")
				} else {
					err = checkSourceSub(m.SourceFD, m.SourceSub)
				}
			}
			if err != nil {
				return fmt.Errorf("config.json: %s: descriptor %d: %w", f, m.SourceFD, err)
			}
			m.FileTarget = !isDir
			continue
		}
		fd, err := unix.Openat2(unix.AT_FDCWD, m.SourcePath, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err != nil {
			return fmt.Errorf("config.json: %s %q: %w", f, m.SourcePath, err)
		}
		isDir, err := checkSourceFD(fd)
		if err == nil {
			m.SourceIdent, err = identify(fd, isDir)
		}
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("config.json: %s %q: %w", f, m.SourcePath, err)
		}
		m.FileTarget = !isDir
	}
	return nil
}

// subHow resolves a mount's sub-path beneath its descriptor: no link, no
// magic link, no other mount on the way, never above the descriptor.
var subHow = unix.OpenHow{
	Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
	Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
}

// checkSourceSub checks that sub is a directory beneath fd's mount.
func checkSourceSub(fd int, sub string) error {
	d, err := unix.Openat2(fd, sub, &subHow)
	if err != nil {
		return fmt.Errorf("%s: openat2: %w", sub, err)
	}
	defer unix.Close(d)
	if _, err := identify(d, true); err != nil {
		return fmt.Errorf("%s: %w", sub, err)
	}
	return nil
}

// identify returns fd's identity, checking whether it is a directory.
func identify(fd int, dir bool) (Ident, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return Ident{}, fmt.Errorf("fstat: %w", err)
	}
	if (st.Mode&unix.S_IFMT == unix.S_IFDIR) != dir {
		return Ident{}, fmt.Errorf("file type %#o is not what was expected", st.Mode&unix.S_IFMT)
	}
	return Ident{Dev: st.Dev, Ino: st.Ino}, nil
}

// checkSourceFD accepts a directory, a regular file or a character device
// as a bind source and says whether it is a directory.
func checkSourceFD(fd int) (bool, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, fmt.Errorf("fstat: %w", err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return true, nil
	case unix.S_IFREG, unix.S_IFCHR:
		return false, nil
	}
	return false, fmt.Errorf("file type %#o is not a directory, regular file or character device", st.Mode&unix.S_IFMT)
}

// readRootEntries lists what a tmpfs root is to hold again: root.path may
// hold symbolic links (such as a merged /usr's /bin -> usr/bin) and empty
// directories, nothing else, so that the tmpfs shows exactly what the
// directory would have; a file or a populated directory is refused rather
// than silently left out.
func readRootEntries(rfd int) ([]RootEntry, error) {
	fd, err := unix.Openat(rfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open to list: %w", err)
	}
	f := os.NewFile(uintptr(fd), "root")
	defer f.Close()
	names, err := f.Readdirnames(maxMounts + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("list: %w", err)
	}
	if len(names) > maxMounts {
		return nil, fmt.Errorf("more than %d entries", maxMounts)
	}
	slices.Sort(names)
	var out []RootEntry
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			buf := make([]byte, unix.PathMax+1)
			n, err := unix.Readlinkat(fd, name, buf)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if n > unix.PathMax {
				return nil, fmt.Errorf("%s: link target longer than %d bytes", name, unix.PathMax)
			}
			out = append(out, RootEntry{Name: name, Link: string(buf[:n])})
		case unix.S_IFDIR:
			sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			sf := os.NewFile(uintptr(sub), name)
			inner, err := sf.Readdirnames(1)
			if cerr := sf.Close(); cerr != nil && err == nil {
				err = cerr
			}
			if len(inner) > 0 {
				return nil, fmt.Errorf("%s: a directory that is not empty", name)
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%s: list: %w", name, err)
			}
			out = append(out, RootEntry{Name: name, Dir: true})
		default:
			return nil, fmt.Errorf("%s: neither a symbolic link nor an empty directory", name)
		}
	}
	return out, nil
}

// sharedRlimits are the rlimits whose count the kernel keeps per user, in
// every user namespace up to the initial one (ucounts), rather than per
// process: pending signals (queued siginfo) and memory locked by shmctl
// SHM_LOCK. What the program takes of them is taken from the service
// user's budget on the host too.
var sharedRlimits = []int{unix.RLIMIT_SIGPENDING, unix.RLIMIT_MEMLOCK}

// shareRlimits gives the program, for each shared rlimit the bundle does
// not list, soft and hard limits of a share of stage 0's own soft limit,
// as stage 1 does for the counts of /proc/sys/user (threat: one sandbox
// queuing signals or locking memory until gloved's and the other
// sessions' calls fail). An unlimited host value has no budget to share
// and is left as it is.
func shareRlimits(pp *ProcessPlan) error {
	for _, res := range sharedRlimits {
		if slices.ContainsFunc(pp.Rlimits, func(r Rlimit) bool { return r.Resource == res }) {
			continue
		}
		var cur unix.Rlimit
		if err := unix.Getrlimit(res, &cur); err != nil {
			return fmt.Errorf("getrlimit %d: %w", res, err)
		}
		if cur.Cur == unix.RLIM_INFINITY {
			continue
		}
		share := max(cur.Cur/budgetShares, 1)
		pp.Rlimits = append(pp.Rlimits, Rlimit{Resource: res, Soft: share, Hard: share})
	}
	return nil
}

// checkListenerFD accepts only a connected AF_UNIX stream socket as the
// descriptor the listener is sent on: SCM_RIGHTS needs AF_UNIX, a stream
// keeps the one message in order, and a socket with no peer would take
// the listener nowhere, leaving every notified call unanswered (the
// program would hang in connect).
func checkListenerFD(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fstat: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return fmt.Errorf("file type %#o is not a socket (want a connected AF_UNIX stream socket)", st.Mode&unix.S_IFMT)
	}
	domain, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return fmt.Errorf("getsockopt SO_DOMAIN: %w", err)
	}
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return fmt.Errorf("getsockopt SO_TYPE: %w", err)
	}
	if domain != unix.AF_UNIX || typ != unix.SOCK_STREAM {
		return fmt.Errorf("socket of domain %d, type %d (want a connected AF_UNIX stream socket)", domain, typ)
	}
	if _, err := unix.Getpeername(fd); err != nil {
		return fmt.Errorf("not connected (want a connected AF_UNIX stream socket): getpeername: %w", err)
	}
	return nil
}

// checkPassFD refuses a descriptor the program must not receive.
func checkPassFD(fd int) error {
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return fmt.Errorf("fcntl: %w", err)
	}
	if fl&unix.O_PATH != 0 {
		return errors.New("an O_PATH descriptor (only a mount source may be one)")
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fstat: %w", err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return errors.New("a directory (only a mount source may be one)")
	}
	return nil
}
