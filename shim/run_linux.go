package shim

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

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

// argStage1 is the re-executed binary's argv[1] for stage 1 (stage 2 is
// never executed: stage 1 runs it in the child it clones). A user who
// runs `glove-shim --glove-stage1 N` by hand gains nothing: a stage only
// restricts.
const argStage1 = "--glove-stage1"

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
	if len(args) >= 2 {
		switch args[1] {
		case argStage1:
			// Stages 1 and 2 run as C code before the Go runtime starts
			// (shim/cstage, linked into glove-shim): stage 1's command
			// line never reaches Go, and no Go stage exists to fall back
			// on.
			fmt.Fprintf(os.Stderr, "glove-shim: %s: a stage takes exactly one argument, its control descriptor, and runs before the Go runtime (shim/cstage); this command line reached Go\n", args[1])
			return ExitFailed
		case "--version":
			if len(args) == 2 {
				fmt.Println("glove-shim dev")
				return 0
			}
		case "run":
			ra, err := parseRun(args[2:])
			if err != nil {
				fmt.Fprintf(os.Stderr, "glove-shim: %v\nusage: glove-shim run --bundle DIR [--preserve-fds N] [--sync-fd N] [--seccomp-cache-fd N] ID\n", err)
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
	fmt.Fprintln(os.Stderr, "usage: glove-shim run --bundle DIR [--preserve-fds N] ID | glove-shim --version")
	return ExitUsage
}

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
	id      string
}

// parseRun parses runc's `run` subset: --bundle/-b DIR, --preserve-fds N
// (both also as --flag=value), Glove's --sync-fd N and --seccomp-cache-fd
// N, and one container id.
func parseRun(args []string) (runArgs, error) {
	r := runArgs{syncFD: -1, cacheFD: -1}
	seen := map[string]bool{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := a, "", false
		if len(a) > 1 && a[0] == '-' {
			if n, v, ok := cutFlag(a); ok {
				name, value, hasValue = n, v, true
			}
		}
		switch name {
		case "--bundle", "-b", "--preserve-fds", "--sync-fd", "--seccomp-cache-fd":
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
			case "--preserve-fds", "--sync-fd", "--seccomp-cache-fd":
				n, perr := strconv.Atoi(value)
				if perr != nil || n < 0 || n > maxPreserveFDs+3 || strconv.Itoa(n) != value {
					return r, fmt.Errorf("%s %q: want a number 0..%d", name, value, maxPreserveFDs)
				}
				if name == "--sync-fd" {
					r.syncFD = n
				} else if name == "--seccomp-cache-fd" {
					r.cacheFD = n
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
	if r.bundle == "" {
		r.bundle = "."
	}
	return r, nil
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
	if err := unix.CloseRange(uint(3+preserve), ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return 0, fmt.Errorf("close_range: %w", err)
	}
	// Stage 0's idle threads are made while config.json is read and
	// checked; they exist before stage 1 is forked. Made before the
	// supervisor's placement (--sync-fd), they move with the process:
	// writing a pid to cgroup.procs moves every thread of it.
	warmed := warmThreadsAsync(warmedThreads)
	// Stage 0 forwards signals (the supervisor's TERM reaches PID 1 of the
	// sandbox, which passes it on) and waits; it reaps nothing else.
	// Signals are caught from before stage 1 exists: the program may
	// print its first output before stage 1 has closed the control
	// socket (startNext still waiting), and a TERM sent then would meet
	// the Go runtime's default action, end stage 0 and, through the
	// parent-death signal, kill the sandbox instead of reaching the
	// program (4 to 5 in 30 TERMs sent at the first output byte did).
	// What is caught while startNext runs is forwarded once it returns.
	// Catching every signal is one round trip to the runtime's signal
	// thread per signal, about 1 ms in all: it runs beside the reading
	// and checking below, and is waited for before stage 1 is started.
	sigs := make(chan os.Signal, 64)
	caught := make(chan struct{})
	go func() {
		signal.Notify(sigs)
		close(caught)
	}()
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
	p, err := Validate(s, preserve, uint32(os.Getuid()), uint32(os.Getgid()))
	if err != nil {
		return 0, err
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
	files := make([]*os.File, preserve+1)
	for i := range preserve {
		files[i] = os.NewFile(uintptr(3+i), "preserved")
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
	// Placed in the session's cgroup by now (or created in it): stage 0
	// stays there, waiting, for the whole session.
	warmed()
	<-caught
	// Never stopped: stage 0 exits once the program has, and stopping
	// would cost as much as catching (the round trips above) only to let
	// a late signal meet the default action before stage 0 reports the
	// program's status.
	cmd, ctl, err := startNext(p, files, stage1Attr(p), "/proc/self/exe", argStage1, func() error {
		if err := exportSeccomp(compiled, &p.Process); err != nil {
			return err
		}
		if store != nil && p.Process.Seccomp != nil {
			if err := store(p.Process.Seccomp); err != nil {
				// Unreported: stage 0's stderr is the program's. A
				// store that failed (a full disk, say) costs the next
				// start of this profile a compile, nothing more.
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	defer ctl.Close()
	done := make(chan struct{})
	// Wait's error is the stage's exit status, which the caller reads
	// from cmd.ProcessState once done is closed.
	go func() { _ = cmd.Wait(); close(done) }()
	for {
		select {
		case s := <-sigs:
			if forwarded(s) {
				// Only ESRCH can fail it (our own child, our uid): the
				// child has exited, and Wait reports how.
				_ = unix.Kill(cmd.Process.Pid, s.(syscall.Signal))
			}
		case <-done:
			return exitStatus(cmd.ProcessState.Sys().(syscall.WaitStatus)), nil
		}
	}
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

// stage1Attr enters every namespace of the sandbox. Namespace 1's root is
// the invoking user: it may mount inside its own namespaces and nowhere
// else.
func stage1Attr(p *Plan) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Cloneflags: unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
			unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(p.HostUID), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(p.HostGID), Size: 1}},
		// setgroups stays denied: with it, the program could drop a
		// supplementary group that a host file denies access to.
		GidMappingsEnableSetgroups: false,
		// Threat: a stage outliving the shim that started it (killed
		// supervisor) would keep the program running unsupervised.
		Pdeathsig: unix.SIGKILL,
	}
}

// startNext starts the next stage (exe with arg) with the plan and waits
// for its report. files are the child's descriptors from 3 on; the control
// socket takes slot p.PreserveFDs, and its number is the stage's second
// argument. On success the program is executing and the returned socket is
// still open: closing it is how a stage tells its own parent.
//
// complete, if not nil, finishes the plan's process part; it runs, and
// the plan is encoded, while the child is cloned and executed (a stage's
// clone, execve and Go start-up take 2 to 4 ms, in which this process
// would otherwise only wait). The child reads nothing before the plan is
// sent, and is killed if complete or the encoding fails.
func startNext(p *Plan, files []*os.File, attr *syscall.SysProcAttr, exe, arg string, complete func() error) (*exec.Cmd, *os.File, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	mine := os.NewFile(uintptr(pair[0]), "control")
	theirs := os.NewFile(uintptr(pair[1]), "control-child")
	files[p.PreserveFDs] = theirs
	// The goroutine writes p.Process only; this one reads p.PreserveFDs.
	type encoded struct {
		plan []byte
		err  error
	}
	enc := make(chan encoded, 1)
	go func() {
		var e encoded
		if complete != nil {
			e.err = complete()
		}
		if e.err == nil {
			e.plan = encodePlan(p)
		}
		enc <- e
	}()
	cmd := &exec.Cmd{
		Path:        exe,
		Args:        []string{"glove-shim", arg, strconv.Itoa(3 + p.PreserveFDs)},
		Stdin:       os.Stdin,
		Stdout:      os.Stdout,
		Stderr:      os.Stderr,
		ExtraFiles:  files,
		SysProcAttr: attr,
		Env:         []string{},
	}
	err = cmd.Start()
	theirs.Close()
	files[p.PreserveFDs] = nil
	// Waited for even when Start failed: p is the goroutine's until then.
	e := <-enc
	if err != nil {
		mine.Close()
		return nil, nil, errors.Join(fmt.Errorf("start %s: %w", arg, err), e.err)
	}
	report, err := []byte(nil), e.err
	if err == nil {
		if report, err = exchange(mine, e.plan); err != nil {
			err = fmt.Errorf("%s: %w", arg, err)
		}
	}
	if err != nil || len(report) > 0 {
		// The next stage failed or refused its plan, or its plan could
		// not be completed: end it. ESRCH means it has exited already;
		// Wait then reaps it, and its error is the exit we caused (the
		// stage's report says why). The socket closes after the kill, so
		// that a child still waiting for its plan is gone before it could
		// read end of file and print an error of its own.
		kerr := unix.Kill(cmd.Process.Pid, unix.SIGKILL)
		if errors.Is(kerr, unix.ESRCH) {
			kerr = nil
		}
		_ = cmd.Wait() // the exit we caused: see above
		mine.Close()
		if kerr != nil {
			kerr = fmt.Errorf("kill %s: %w", arg, kerr)
		}
		if err != nil {
			return nil, nil, errors.Join(err, kerr)
		}
		return nil, nil, errors.Join(errors.New(string(report)), kerr)
	}
	return cmd, mine, nil
}

// exchange sends the plan, then reads the child's report until EOF. An
// empty report means the program is executing (the child's end of the
// socket closed on execve); anything else is the error that stopped it.
func exchange(c *os.File, plan []byte) ([]byte, error) {
	if _, err := c.Write(plan); err != nil {
		return nil, fmt.Errorf("send plan: %w", err)
	}
	if err := unix.Shutdown(int(c.Fd()), unix.SHUT_WR); err != nil {
		return nil, fmt.Errorf("send plan: shutdown: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(c, 4096))
	if err != nil {
		return nil, fmt.Errorf("read report: %w", err)
	}
	return b, nil
}

// forwarded says which signals a stage passes on to the next: all but the
// ones about the stage itself (SIGCHLD) and the Go runtime's preemption
// signal (SIGURG), which is not meant for the program.
func forwarded(s os.Signal) bool {
	sig, ok := s.(syscall.Signal)
	return ok && sig != unix.SIGCHLD && sig != unix.SIGURG
}

func exitStatus(ws syscall.WaitStatus) int {
	switch {
	case ws.Exited():
		return ws.ExitStatus()
	case ws.Signaled():
		return 128 + int(ws.Signal())
	}
	return ExitFailed
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
