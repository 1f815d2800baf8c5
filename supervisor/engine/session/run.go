// SPDX-License-Identifier: Apache-2.0

package session

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/cgwire"
	"github.com/glove-sandbox/glove/helpers/wire/loopwire"
	"github.com/glove-sandbox/glove/helpers/wire/mountwire"
	"github.com/glove-sandbox/glove/seccomp/profile"
	"github.com/glove-sandbox/glove/spec"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/engine/helperproc"
	"github.com/glove-sandbox/glove/supervisor/engine/materialize"
	"golang.org/x/sys/unix"
)

// Terminations: how a session ended, as the state and the receipt say.
const (
	Exited   = "exited"
	Signaled = "signaled"
	// A limit's termination is "limit:" followed by its profile name.
	LimitCPU    = "limit:cpu_time_ms"
	LimitMemory = "limit:memory_bytes"
	LimitPids   = "limit:pids"
	LimitWall   = "limit:wall_time_ms"
	LimitDisk   = "limit:disk_bytes"
	LimitOutput = "limit:terminal_output_bytes"
)

// Sandbox identity: the program runs as this uid and gid inside, mapped
// to the service user (the only host identity it can reach).
const (
	SandboxUID = 1000
	SandboxGID = 1000
)

// ShimTasks is added to a session's pids limit for glove-shim's own tasks
// (stage 0's Go part, about 10 threads, until it executes its waiter,
// which is C on one thread and stays; stage 1, PID 1, is C on one thread;
// stage 2 becomes the program): the profile's pids is what the program
// may use.
const ShimTasks = 32

// CgroupLimits are the memory and pids limits glove-cgroup is asked for
// a session of profile p: its memory_bytes, and its pids plus ShimTasks.
// The shipped-bounds test (packaging) checks every shipped profile's
// with glove-cgroup's own bounds check.
func CgroupLimits(p policy.ResourceProfile) (memoryBytes, pids uint64) {
	return p.MemoryBytes, p.Pids + ShimTasks
}

// Env is what the session needs from its supervisor: helpers that are
// running and have answered Hello, where the shim is, and a private
// directory for bundles.
type Env struct {
	Mounter    *helperproc.Proc
	Cgroup     *helperproc.Proc
	ShimPath   string
	RuntimeDir string // owned by the service user, mode 0700
	// Loopext4 and MaterializationRoot (glove-loopext4's configured
	// materialization_root, an absolute path) are needed only by a
	// launch with a RetainedCopy mount (Launch.Retains).
	Loopext4            *helperproc.Proc
	MaterializationRoot string
	// Fault, if set, is called at each named point of Prepare
	// ("cgroup", "mounts", "bundle"); the recovery tests use it to kill
	// the supervisor there (gloved also calls it between the stages that
	// follow: "placed", "released").
	Fault func(point string)
	// StartHelper, if set, starts a fresh helper of the given name that
	// has answered Hello (the caller of Run starts the others the same
	// way). When a helper of the session dies, the session's clean-up
	// (usage, cgroup removal, image freezing) is asked of a fresh one,
	// which Run closes before it returns. Without it, what the dead
	// helper would have removed is left for gloved's recovery.
	StartHelper func(name string) (*helperproc.Proc, error)
	// Hidden are host paths no sandbox may see even when a mount shows
	// the tree that holds them: each becomes a masked path (an empty
	// read-only directory, or /dev/null for a file) wherever a bind
	// shows it. gloved and glove run hide their helper directory: its
	// executables are the service group's alone (mode 0750), and a
	// sandbox runs with the service user's groups, which an unprivileged
	// supervisor cannot drop (setgroups is refused in a user namespace
	// whose group map it wrote itself), so the group must reach nothing
	// there (issue 17, item 7).
	Hidden []string
	// Guard, if set, is given each host tree a mount binds or copies,
	// open (O_PATH) as it will be used, and refuses it with an error:
	// gloved refuses its own state this way (ownpaths), by identity, at
	// every launch, as policy validation did by name.
	Guard func(fd int) error
	// SeccompCache, if set, is glove-shim's seccomp cache directory
	// (an O_PATH descriptor the caller keeps and closes), passed to every
	// shim with --seccomp-cache-fd beyond the release pipe: the shim then
	// compiles a profile once rather than at every start. Without it the
	// shim compiles as before (glove run has none).
	SeccompCache *os.File
	// ServeServices, needed by a launch with local services (Launch.
	// Services), starts the supervisor's server of its alias sockets and
	// seccomp listener (ServiceHandles) and returns how to stop it; the
	// session calls stop once its program is gone, before its scratch
	// goes. gloved has one; glove run serves no local service.
	ServeServices func(h ServiceHandles) (stop func() error, err error)
	// UserNamespace, set in the glove-userns mode (package usermode: a
	// host whose kernel refuses the service user a user namespace),
	// makes the session's user namespace 1 (glove-userns's Create),
	// mapping the sandbox's uid and gid (the bundle's) onto the service
	// user, just before the shim starts; the shim joins it (--userns-fd) instead of
	// creating one. Spawn passes it beyond the preserved range, so the
	// program never gets it, and closes its own copy once the shim has
	// started or failed to.
	UserNamespace func(session string, uid, gid uint32) (*os.File, error)
}

// guard applies Env.Guard to the host tree of mount target open at fd.
func (e *Env) guard(target string, fd int) error {
	if e.Guard == nil {
		return nil
	}
	if err := e.Guard(fd); err != nil {
		return fmt.Errorf("the host tree of %s: %w", target, err)
	}
	return nil
}

func (e *Env) fault(point string) {
	if e.Fault != nil {
		e.Fault(point)
	}
}

// IO connects the program. Input is copied to the program until it ends
// (nil: no input); Output receives what it prints, up to the output limit.
// Progress, if set, is told about long materializations.
type IO struct {
	Input    io.Reader
	Output   io.Writer
	Progress func(target string, done, total materialize.Totals)
	// Resize carries window sizes for the program's terminal; Signals,
	// signals for the program. Either may be nil.
	Resize  <-chan unix.Winsize
	Signals <-chan syscall.Signal
	// EgressAudit receives the audit records of the launch's egress
	// endpoints (package egress), one synced JSON line each; required
	// when the launch has any. The caller owns it.
	EgressAudit *os.File
	// Size is the program's terminal's size from its start (a launch
	// with a terminal); zero rows or columns: DefaultRows × DefaultCols.
	Size unix.Winsize
}

// Usage is what the session consumed, as the receipt reports it.
type Usage struct {
	CPUTimeMs           uint64
	MemoryPeakBytes     uint64
	PidsPeak            uint64
	WallTimeMs          uint64
	DiskBytes           uint64
	TerminalOutputBytes uint64
}

// Result is how a session ended.
type Result struct {
	Termination string // Exited, Signaled or a limit
	ExitCode    int    // Exited: the program's status
	Signal      int    // Signaled: the signal's number
	Usage       Usage
	StartedAt   time.Time
	EndedAt     time.Time
	// Retained lists the retained copies, in mount order: each image
	// file stays in the materialization root, frozen, for inspection.
	Retained []RetainedImage
	// HelpersLost names the helpers of the session (HelperCgroup,
	// HelperMounter, HelperLoopext4, in that order) that died or stopped
	// answering while it ran. The termination still says what ended the
	// program: with glove-cgroup gone, the supervisor kills the session
	// itself (see session.kill), so a limit still ends it.
	HelpersLost []string
	// ReplacedCalls lists the clean-up requests ("glove-cgroup:remove",
	// "glove-loopext4:freeze", …) that a fresh helper answered because
	// the session's own was lost: the clean-up was done all the same.
	ReplacedCalls []string
	// Credentials say what became of each credential lease (nil for a
	// launch with none).
	Credentials []CredentialOutcome
	// UsageMissing names the Usage fields that could not be read (their
	// value is 0): with glove-cgroup lost and no fresh one answering, only
	// what the supervisor's own descriptors show is known.
	UsageMissing []string
}

// RetainedImage is one retained copy's staged change.
type RetainedImage struct {
	Target string // where the session saw it
	Image  string // the image's file name in the materialization root
}

// ErrNoImages is wrapped when a launch with a RetainedCopy mount is run
// without glove-loopext4 or a materialization root.
var ErrNoImages = errors.New("a retained_write grant needs glove-loopext4 and its materialization root")

// Status is the exit status a command line reports for r: the program's
// own, 128+N for signal N, and 128+9 for a session a limit ended.
func (r *Result) Status() int {
	switch r.Termination {
	case Exited:
		return r.ExitCode
	case Signaled:
		return 128 + r.Signal
	}
	return 128 + int(unix.SIGKILL)
}

// prepared holds everything a session created before its program starts;
// release undoes it, in reverse, whatever happened.
type prepared struct {
	env    *Env
	name   string
	pins   *Pins      // the caller's, never closed here
	cg     *helper    // glove-cgroup
	mnt    *helper    // glove-mounter
	lx     *helper    // glove-loopext4 (proc nil unless the launch retains)
	cgroup []*os.File // dir, events, memory events, cpu.stat
	// cgJoin are the session's v1 tasks files on a hybrid host (cgwire
	// Join), which the shim joins by itself; nil on a pure v2 host. Spawn
	// hands them to the shim and closes them.
	cgJoin []*os.File
	mounts []*os.File // in l.Mounts order (a scratch mount: its directory)
	// scratch is the session's scratch tmpfs (Mount.inScratch), nil when
	// no mount lives there.
	scratch *os.File
	// shimFiles are the shim's preserved descriptors, 3 onwards, and
	// sources each mount's descriptor there (descriptors lays both out).
	shimFiles []*os.File
	sources   []mountSource
	// handoffShim is the shim's end of the hand-off socket, the last of
	// shimFiles.
	handoffShim *os.File
	// listeners are a pathname session's alias sockets (listenAliases),
	// handoff the supervisor's end of the seccomp listener's hand-off
	// socket and handoffFD the shim's end's number among shimFiles;
	// stopServices stops the supervisor's server of them (Spawn starts
	// it). All nil or zero without Launch.Services.
	listeners    map[string]*os.File
	handoff      *os.File
	handoffFD    int
	stopServices func() error
	// egressShim and egressSup are the two ends of the egress hand-off
	// socket (Launch.Egress), egressFD the shim's end's number among
	// shimFiles; egress is the relay of the listeners received on it
	// (egress.go). All nil or zero without Launch.Egress.
	egressShim, egressSup *os.File
	egressFD              int
	egress                *egressRelay
	bundle                string
	cgMade                bool
	cgInode               uint64
	released              bool
	// root is the materialization root (O_PATH), when the launch retains.
	root *os.File
	// images are the retained copies' images, from their creation on.
	images []*image
	// started: the program was released; images are kept from then on
	// (before, a failed launch removes the images it created).
	started bool
	// endErrs are failures after the program started that do not lose
	// its result (a kill path that failed, usage that could not be read):
	// Run returns them with the result.
	endErrs []error
}

// image is a retained copy's image file.
type image struct {
	target   string
	name     string
	dev, ino uint64
	mnt      *os.File // its mount, once filled (also in mounts)
}

func (p *prepared) release() error {
	if p.released {
		return nil
	}
	p.released = true
	var errs []error
	// The program is gone (or never ran): its connections to the local
	// services end, and each relay's last audit record is written.
	if p.stopServices != nil {
		if err := p.stopServices(); err != nil {
			errs = append(errs, fmt.Errorf("local services: %w", err))
		}
		p.stopServices = nil
	}
	// The session's processes are gone (its cgroup is empty): the images
	// are written back, made read-only, and their mounts closed below,
	// which unbinds their loop devices (autoclear). The image files stay.
	for _, img := range p.images {
		if !p.started {
			if err := p.removeImage(img); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if img.mnt == nil {
			continue
		}
		if err := syncImage(img.mnt); err != nil {
			errs = append(errs, fmt.Errorf("sync image %s: %w", img.name, err))
		}
		// A fresh glove-loopext4 if the session's died: Freeze checks
		// the mount itself, not what its own process attached.
		if _, files, err := request(p.lx, "freeze", loopwire.Freeze, &loopwire.FreezeRequest{}, callOpts{timeout: freezeCallWait, replace: true}, int(img.mnt.Fd())); err != nil {
			errs = append(errs, fmt.Errorf("freeze image %s: %w", img.name, err))
		} else {
			closeAll(files)
		}
	}
	if p.cgMade {
		// A fresh glove-cgroup if the session's died: otherwise the
		// session's empty cgroups would stay until gloved restarts.
		if _, files, err := request(p.cg, "remove", cgwire.Remove, &cgwire.RemoveRequest{Session: p.name}, callOpts{timeout: removeCallWait, replace: true}); err != nil {
			errs = append(errs, fmt.Errorf("remove the session's cgroups: %w", err))
		} else {
			closeAll(files)
		}
	}
	for _, h := range []*helper{p.cg, p.lx} {
		if err := h.close(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, f := range append(append(p.cgroup, p.cgJoin...), p.mounts...) {
		f.Close()
	}
	for _, f := range p.listeners {
		f.Close()
	}
	for _, f := range []*os.File{p.handoff, p.handoffShim, p.egressShim, p.egressSup} {
		if f != nil {
			f.Close()
		}
	}
	if p.scratch != nil {
		p.scratch.Close()
	}
	if p.root != nil {
		p.root.Close()
	}
	if p.bundle != "" {
		if err := os.RemoveAll(p.bundle); err != nil {
			errs = append(errs, fmt.Errorf("remove the bundle: %w", err))
		}
	}
	return errors.Join(errs...)
}

// syncImage writes an image's file system back to the image file (its
// loop device passes the flush on as an fsync of the file), so the staged
// change survives a crash of the host. The mount descriptor is O_PATH,
// which syncfs refuses: its root is opened for reading.
func syncImage(mnt *os.File) error {
	fd, err := unix.Openat(int(mnt.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Syncfs(fd)
}

// removeImage unlinks an image of a launch that never started, if its
// name still names the file created (the service user owns the root;
// nothing else there is touched). A failed unlink is reported: the
// image would stay in the materialization root, holding its space.
func (p *prepared) removeImage(img *image) error {
	var st unix.Stat_t
	if unix.Fstatat(int(p.root.Fd()), img.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Dev == img.dev && st.Ino == img.ino {
		if err := unix.Unlinkat(int(p.root.Fd()), img.name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("remove the unused image %s: %w", img.name, err)
		}
	}
	return nil
}

// call sends one request of the start path to a helper and returns the
// reply's descriptors. No fresh helper replaces a lost one here: the
// launch fails, naming the helper (HelperLostError).
func call[Q, R any](h *helper, op string, r wire.Route[Q, R], req *Q, fds ...int) ([]*os.File, error) {
	_, files, err := request(h, op, r, req, callOpts{}, fds...)
	return files, err
}

// prepare creates what the session needs before its shim starts: its
// cgroups, the materialization root (retained copies), the scratch
// tmpfs, every mount, and the bundle. The cgroups are made by
// glove-cgroup while glove-mounter makes the mounts and the bundle is
// written: nothing of one depends on the other, and the start waits for
// both (issue 19: independent helper calls in parallel; about 0.8 ms of
// a start on this 2-core host). Whatever either made is recorded in p
// before prepare returns, so release undoes it on any failure.
func prepare(p *prepared, l *Launch, pio IO) error {
	cg := make(chan error, 1)
	go func() { cg <- p.createCgroups(l) }()
	err := prepareMounts(p, l, pio)
	if cerr := <-cg; cerr != nil {
		return errors.Join(cerr, err)
	}
	if err != nil {
		return err
	}
	p.env.fault("cgroup")
	return nil
}

// createCgroups makes the session's cgroups (glove-cgroup Create and, on
// a hybrid host, Join). It writes only p's cgroup fields, which nothing
// else reads before prepare has waited for it.
func (p *prepared) createCgroups(l *Launch) error {
	mem, pids := CgroupLimits(l.Limits)
	cr, files, err := request(p.cg, "create", cgwire.Create, &cgwire.CreateRequest{Session: l.Name, MemoryBytes: mem, Pids: pids}, callOpts{})
	if err != nil {
		// The pids asked for are not the profile's: say why, or a
		// refusal of 1056 for a profile of 1024 reads as a mistake.
		return fmt.Errorf("create the session's cgroups (memory_bytes %d, pids %d: the profile's %d and %d for glove-shim): %w",
			mem, pids, l.Limits.Pids, ShimTasks, err)
	}
	p.cgMade, p.cgroup, p.cgInode = true, files, cr.Inode
	if cr.V1 {
		if p.cgJoin, err = call(p.cg, "join", cgwire.Join, &cgwire.JoinRequest{Session: l.Name}); err != nil {
			return fmt.Errorf("the session's v1 tasks files: %w", err)
		}
		if err := checkJoin(p.cgJoin); err != nil {
			return err
		}
	}
	return nil
}

// prepareMounts makes the materialization root, the scratch, every mount
// and the bundle (prepare). Its first point, "prepare", comes before any
// mount or image exists (the cgroups may or may not yet).
func prepareMounts(p *prepared, l *Launch, pio IO) error {
	p.env.fault("prepare")
	if l.Retains() {
		// Opened once, without following links; glove-loopext4 checks it
		// is its configured root (device and inode).
		fd, err := unix.Openat2(unix.AT_FDCWD, p.env.MaterializationRoot, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err != nil {
			return fmt.Errorf("open the materialization root: %w", err)
		}
		p.root = os.NewFile(uintptr(fd), p.env.MaterializationRoot)
	}
	if slices.ContainsFunc(l.Mounts, Mount.inScratch) {
		files, err := call(p.mnt, "tmpfs", mountwire.Tmpfs, TmpfsRequest(l.Limits.DiskBytes))
		if err != nil {
			return fmt.Errorf("the session's scratch: glove-mounter tmpfs of %d bytes: %w", l.Limits.DiskBytes, err)
		}
		p.scratch = files[0]
	}
	for i, m := range l.Mounts {
		var f *os.File
		var err error
		switch {
		case m.Kind == RetainedCopy:
			f, err = p.retain(l.Name, m, pio)
		case m.inScratch():
			f, err = p.scratchDir(i, m, l, pio)
		case m.Kind == LibraryBundles:
			f, err = sourceMount(p.mnt, m, p.pins)
		default:
			f, err = materializeMount(p.env, p.mnt, m, pio)
		}
		if err != nil {
			return fmt.Errorf("mounts[%d] %s: %w", i, m.Target, err)
		}
		p.mounts = append(p.mounts, f)
	}
	p.env.fault("mounts")
	if pin := l.ExecutablePin; pin != nil {
		i := slices.IndexFunc(l.Mounts, func(m Mount) bool { return m.Target == pin.Mount() && m.Kind == ReadOnlyBind })
		if i < 0 {
			return fmt.Errorf("the discovered executable has no mount: %w", ErrInvalid)
		}
		if err := recheckExecutable(pin, p.mounts[i]); err != nil {
			return err
		}
	}
	if l.Services != nil {
		if p.env.ServeServices == nil {
			return fmt.Errorf("local services: this supervisor serves none: %w", ErrInvalid)
		}
		var shimEnd *os.File
		var err error
		if shimEnd, p.handoff, err = handoffSocket(); err != nil {
			return err
		}
		p.handoffShim = shimEnd
	}
	p.shimFiles, p.sources = p.descriptors(l)
	if p.handoffShim != nil {
		p.shimFiles = append(p.shimFiles, p.handoffShim)
		p.handoffFD = 2 + len(p.shimFiles)
	}
	if len(l.Egress) > 0 {
		if pio.EgressAudit == nil {
			return fmt.Errorf("egress: no audit file for the launch's endpoints: %w", ErrInvalid)
		}
		var err error
		if p.egressShim, p.egressSup, err = shimSocket("egress hand-off socket", "egress-handoff"); err != nil {
			return err
		}
		p.shimFiles = append(p.shimFiles, p.egressShim)
		p.egressFD = 2 + len(p.shimFiles)
	}
	secret, err := secretEnv(l, p.pins)
	if err != nil {
		return err
	}
	bundle, err := writeBundle(p.env.RuntimeDir, l, secret, p.sources, len(p.shimFiles), p.handoffFD, p.egressFD, p.env.Hidden)
	if err != nil {
		return err
	}
	p.bundle = bundle
	p.env.fault("bundle")
	return nil
}

// materializeMount returns a detached mount descriptor for m.
func materializeMount(env *Env, mounter *helper, m Mount, pio IO) (*os.File, error) {
	switch m.Kind {
	case ReadOnlyBind:
		// Opened once, here, without following any link; from now on the
		// tree is this descriptor (threat: a path swapped for a link to
		// somewhere else between a check and a use).
		src, err := unix.Openat2(unix.AT_FDCWD, m.HostPath, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err != nil {
			return nil, fmt.Errorf("open the host tree: %w", err)
		}
		defer unix.Close(src)
		if err := env.guard(m.Target, src); err != nil {
			return nil, err
		}
		files, err := call(mounter, "bind", mountwire.Bind, &mountwire.BindRequest{Flags: mountwire.BindReadOnly}, src)
		if err != nil {
			return nil, fmt.Errorf("glove-mounter bind: %w", err)
		}
		return files[0], nil
	case EphemeralCopy:
		// A read-only copy: a tmpfs of its own (nothing writes it after
		// the copy; writable copies are in the scratch).
		files, err := call(mounter, "tmpfs", mountwire.Tmpfs, TmpfsRequest(m.MaxBytes))
		if err != nil {
			return nil, fmt.Errorf("glove-mounter tmpfs of %d bytes: %w", m.MaxBytes, err)
		}
		if err := fill(env, files[0], m, pio); err != nil {
			files[0].Close()
			return nil, err
		}
		return files[0], nil
	}
	return nil, fmt.Errorf("unknown kind %q: %w", m.Kind, ErrInvalid)
}

// sourceMount makes a LibraryBundles tmpfs and fills it through its
// descriptor before anything can see it.
func sourceMount(mounter *helper, m Mount, pins *Pins) (*os.File, error) {
	files, err := call(mounter, "tmpfs", mountwire.Tmpfs, TmpfsRequest(m.MaxBytes))
	if err != nil {
		return nil, fmt.Errorf("glove-mounter tmpfs of %d bytes: %w", m.MaxBytes, err)
	}
	if err := fillLibraries(files[0], m, pins); err != nil {
		files[0].Close()
		return nil, err
	}
	return files[0], nil
}

// scratchSub is mount i's directory in the scratch, named after its
// target's last element so that the sandbox's mountinfo reads plainly
// ("/tmp-4 /tmp"), and by its index so that no two collide.
func scratchSub(i int, m Mount) string {
	return fmt.Sprintf("%s-%d", path.Base(m.Target), i)
}

// scratchDir makes mount i's directory in the scratch, with the mount's
// mode whatever the umask, and fills it (a copy, the home's skills)
// through its descriptor before anything can see it. The directory's
// descriptor is the mount's in p.mounts; the shim binds it from the
// scratch's descriptor (descriptors).
func (p *prepared) scratchDir(i int, m Mount, l *Launch, pio IO) (*os.File, error) {
	sub, root := scratchSub(i, m), int(p.scratch.Fd())
	mode := uint32(0o755)
	if m.Mode != 0 {
		mode = m.Mode
	}
	if m.Kind == ServiceDir {
		mode = 0o700 // the service user's alone: its sockets are the way out
	}
	if err := unix.Mkdirat(root, sub, 0o700); err != nil {
		return nil, fmt.Errorf("the session's scratch: mkdir %s: %w", sub, err)
	}
	fd, err := unix.Openat2(root, sub, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return nil, fmt.Errorf("the session's scratch: open %s: %w", sub, err)
	}
	dir := os.NewFile(uintptr(fd), sub)
	if err := unix.Fchmod(fd, mode); err != nil {
		dir.Close()
		return nil, fmt.Errorf("the session's scratch: chmod %s: %w", sub, err)
	}
	switch m.Kind {
	case PrivateHome:
		err = fillHome(dir, l, p.pins)
	case EphemeralCopy:
		err = fill(p.env, dir, m, pio)
	case ServiceDir:
		p.listeners, err = listenAliases(dir, l.Services.Aliases)
	case SyntheticEtc:
		err = fillEtc(dir, l)
	}
	if err != nil {
		dir.Close()
		return nil, err
	}
	return dir, nil
}

// mountSource is where the shim finds a mount: its descriptor, and the
// directory beneath it for a scratch mount.
type mountSource struct {
	fd  int
	sub string
}

// descriptors lays out the shim's preserved descriptors, once, for both
// the bundle (each mount's source) and the exec (ExtraFiles, 3 onwards):
// the inherited stream when there is one (passed to the program), each
// mount with a descriptor of its own in l.Mounts order, then the scratch,
// which every scratch mount names with its directory.
func (p *prepared) descriptors(l *Launch) ([]*os.File, []mountSource) {
	var files []*os.File
	if l.Stream != nil {
		files = append(files, p.pins.Stream)
	}
	srcs := make([]mountSource, len(l.Mounts))
	for i, m := range l.Mounts {
		if !m.inScratch() {
			files = append(files, p.mounts[i])
			srcs[i] = mountSource{fd: 2 + len(files)}
		}
	}
	if p.scratch != nil {
		files = append(files, p.scratch)
		for i, m := range l.Mounts {
			if m.inScratch() {
				srcs[i] = mountSource{fd: 2 + len(files), sub: scratchSub(i, m)}
			}
		}
	}
	return files, srcs
}

// retain makes a RetainedCopy: glove-loopext4 creates the image (its size
// is the quota), attaches it read-write as a detached ext4 mount, and the
// copy is made through that mount's descriptor.
func (p *prepared) retain(session string, m Mount, pio IO) (*os.File, error) {
	img := &image{target: m.Target, name: ImageName(session, m.Alias)}
	lx := p.lx
	files, err := call(lx, "create", loopwire.Create, &loopwire.CreateRequest{Name: img.name, SizeBytes: roundPage(m.MaxBytes)}, int(p.root.Fd()))
	if err != nil {
		return nil, fmt.Errorf("glove-loopext4 create %s of %d bytes: %w", img.name, roundPage(m.MaxBytes), err)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(int(p.root.Fd()), img.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, fmt.Errorf("stat image %s: %w", img.name, err)
	}
	img.dev, img.ino = st.Dev, st.Ino
	p.images = append(p.images, img)
	closeAll(files)
	files, err = call(lx, "attach", loopwire.Attach, &loopwire.AttachRequest{Name: img.name}, int(p.root.Fd()))
	if err != nil {
		return nil, fmt.Errorf("glove-loopext4 attach %s: %w", img.name, err)
	}
	mnt := files[0]
	// mkfs.ext4 leaves lost+found (root's) in the new file system; the
	// copy starts from an empty directory, so the staged tree holds only
	// the host tree and the session's changes (e2fsck remakes it).
	if err := unix.Unlinkat(int(mnt.Fd()), "lost+found", unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		mnt.Close()
		return nil, fmt.Errorf("image %s: remove lost+found: %w", img.name, err)
	}
	if err := fill(p.env, mnt, m, pio); err != nil {
		mnt.Close()
		return nil, err
	}
	img.mnt = mnt
	return mnt, nil
}

// fill copies the host tree into the tmpfs (or image) through its
// descriptor: its size is the quota, so a copy that does not fit fails
// here with limit:disk_bytes, before the program exists.
func fill(env *Env, dst *os.File, m Mount, pio IO) error {
	src, err := materialize.Open(m.HostPath)
	if errors.Is(err, unix.ENOENT) && m.CreateEmpty {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open the host tree: %w", err)
	}
	defer src.Close()
	if err := env.guard(m.Target, src.Fd()); err != nil {
		return err
	}
	// The copy's own bound: in the scratch, the tmpfs's size is the
	// session's, not the grant's.
	opts := materialize.Options{MaxBytes: int64(min(m.MaxBytes, 1<<62))}
	if pio.Progress != nil {
		if opts.Total, err = src.Scan(); err != nil {
			return fmt.Errorf("scan the host tree: %w", err)
		}
		opts.Progress = func(done, total materialize.Totals) { pio.Progress(m.Target, done, total) }
	}
	if _, err := src.CopyTo(int(dst.Fd()), opts); err != nil {
		if errors.Is(err, materialize.ErrQuota) {
			return fmt.Errorf("%s: the copy needs more than its %d bytes or the space left in the session's scratch: %w", LimitDisk, m.MaxBytes, err)
		}
		return fmt.Errorf("copy the host tree: %w", err)
	}
	return nil
}

func roundPage(n uint64) uint64 {
	pg := uint64(os.Getpagesize())
	return (n + pg - 1) / pg * pg
}

// TmpfsRequest is the glove-mounter request for a tmpfs of quota bytes
// (the scratch's disk_bytes, a read-only copy's or a library mount's
// max_bytes): the quota rounded up to whole pages, the inode limit
// InodesFor derives from it, mode 0755. The shipped-bounds
// test (packaging) checks every shipped profile's scratch request with
// glove-mounter's own bounds check.
func TmpfsRequest(quota uint64) *mountwire.TmpfsRequest {
	return &mountwire.TmpfsRequest{SizeBytes: roundPage(quota), Inodes: InodesFor(quota), Mode: 0o755}
}

// writeBundle writes the bundle: an empty root with the usual links into
// /usr, and config.json whose mounts name the descriptors the shim gets
// at 3, 4, ... in l.Mounts order, and whose environment is l's with the
// variable credentials' entries (secret, secretEnv) at its end.
//
// config.json is mode 0600 in a directory of its own (0700) in the
// runtime directory (gloved: the materialization root, mode 0700, the
// service user's), and it asks glove-shim to unlink it as soon as it has
// read it (spec.Launch.UnlinkConfig): a variable credential's value is
// on the host's file system from here to the shim's read, a few
// milliseconds, readable by the service user and root alone, who can
// read the credential's lease anyway. The threat accepted: a crash of
// gloved in that window leaves the file until gloved's next start
// removes the bundle (recover.go), and the host's page cache may write
// it to the disk holding the runtime directory meanwhile, where the
// lease itself already is.
func writeBundle(runtimeDir string, l *Launch, secret []string, srcs []mountSource, n, listenerFD, egressFD int, hidden []string) (string, error) {
	dir, err := os.MkdirTemp(runtimeDir, "bundle-"+l.Name+"-")
	if err != nil {
		return "", fmt.Errorf("create the bundle: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	rootfs := filepath.Join(dir, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return "", fmt.Errorf("create the bundle's root: %w", err)
	}
	// Merged /usr, as Debian has it: /bin, /sbin, /lib and /lib64 are
	// links into /usr, made for each part of /usr the launch mounts, so
	// the program finds /bin/sh and the dynamic loader where it expects.
	for link, target := range map[string]string{"bin": "usr/bin", "sbin": "usr/sbin", "lib": "usr/lib", "lib64": "usr/lib64"} {
		if !mountsUnder(l.Mounts, "/"+target) {
			continue
		}
		if err := os.Symlink(target, filepath.Join(rootfs, link)); err != nil {
			return "", fmt.Errorf("create the bundle's root: %w", err)
		}
	}
	// /dev is read-only (glove-shim makes it so once its mount points
	// are in it): only its device nodes, its own devpts and the links
	// to /proc/self/fd can be written or opened, and nothing can be
	// created there. /dev/tty is the host's: it opens the opener's
	// controlling terminal, which in a session on a terminal is the
	// session's pty (glove-shim's stage 1 makes it so with TIOCSCTTY),
	// and fails with ENXIO in a session without one, as on any host.
	mounts := []spec.Mount{
		{Target: "/proc", Kind: spec.KindProc, SourceFD: spec.NoFD},
		{Target: "/dev", Kind: spec.KindDev, SourceFD: spec.NoFD, TmpfsBytes: 64 << 10, Mode: 0o755, ReadOnly: true},
		{Target: "/dev/pts", Kind: spec.KindDevpts, SourceFD: spec.NoFD},
	}
	for _, d := range []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"} {
		mounts = append(mounts, spec.Mount{Target: d, Kind: spec.KindBind, SourceFD: spec.NoFD, Source: d})
	}
	for i, m := range l.Mounts {
		mounts = append(mounts, spec.Mount{Target: m.Target, Kind: spec.KindBind, SourceFD: srcs[i].fd, SourceSub: srcs[i].sub, ReadOnly: m.Kind == ReadOnlyBind || m.ReadOnly})
	}
	// The inherited stream: descriptor 3, named in the environment, and
	// the only descriptor the seccomp profile lets the program inspect as
	// a socket (getsockname, getsockopt(SOL_SOCKET, SO_TYPE)).
	var opts profile.ProfileOptions
	env := l.Env
	if l.Stream != nil {
		opts.InheritedFDs = []uint32{StreamFD}
		env = append(append([]string(nil), env...), fmt.Sprintf(`%s={"%s":%d}`, StreamEnv, l.Stream.Alias, StreamFD),
			StreamAliasEnv+"="+l.Stream.Alias)
	}
	// The pathname transport: the alias directory's variable, and
	// connect(2) sent to the supervisor (services.go), which gets the
	// seccomp listener on the hand-off socket at listenerFD.
	opts.Egress = len(l.Egress) > 0
	if l.Services != nil {
		opts.LocalServiceConnect = true
		env = append(append([]string(nil), env...), ServiceDirEnv+"="+ServiceDirTarget)
	}
	if len(secret) > 0 {
		env = append(append([]string(nil), env...), secret...)
	}
	// Parents before children (spec.Build refuses anything else).
	sort.SliceStable(mounts, func(i, j int) bool { return depth(mounts[i].Target) < depth(mounts[j].Target) })
	s, err := spec.Build(spec.Launch{
		Executable: l.Executable, Args: l.Args, Env: env, Cwd: l.Cwd,
		UID: SandboxUID, GID: SandboxGID, HostUID: uint32(os.Getuid()), HostGID: uint32(os.Getgid()),
		Hostname:        l.Hostname,
		Mounts:          mounts,
		MaskedPaths:     append(spec.DefaultMaskedPaths(), maskedFor(hidden, l.Mounts)...),
		NoNewPrivileges: true,
		Terminal:        l.Terminal,
		PreserveFDs:     n,
		Seccomp:         profile.DefaultProfile(opts),
		// 0 without local services: no listener.
		SeccompListenerFD: listenerFD,
		EgressPorts:       egressPorts(l.Egress),
		EgressHandoffFD:   egressFD,
		UnlinkConfig:      true,
	})
	if err != nil {
		return "", fmt.Errorf("build config.json: %w", err)
	}
	data, err := spec.Marshal(s)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), data, 0o600); err != nil {
		return "", fmt.Errorf("write config.json: %w", err)
	}
	ok = true
	return dir, nil
}

func depth(p string) int { return strings.Count(p, "/") }

// maskedFor is where each hidden host path appears in the sandbox: below
// the target of every bind whose host tree holds it (or is it), by path.
// Copies are not masked: a copy holds what the supervisor read, as the
// service user, and Glove's own state is refused as a copy source anyway
// (Env.Guard).
func maskedFor(hidden []string, ms []Mount) []string {
	var out []string
	for _, h := range hidden {
		h = path.Clean(h)
		for _, m := range ms {
			if m.Kind != ReadOnlyBind || m.HostPath == "" {
				continue
			}
			src := path.Clean(m.HostPath)
			var in string
			switch {
			case h == src:
				in = m.Target
			case src == "/":
				in = path.Join(m.Target, h)
			case strings.HasPrefix(h, src+"/"):
				in = path.Join(m.Target, strings.TrimPrefix(h, src))
			default:
				continue
			}
			if !slices.Contains(out, in) {
				out = append(out, in)
			}
		}
	}
	return out
}

// mountsUnder reports whether a mount makes p visible: p itself or one of
// its parents is a mount target.
func mountsUnder(ms []Mount, p string) bool {
	for _, m := range ms {
		if m.Target == p || strings.HasPrefix(p, m.Target+"/") {
			return true
		}
	}
	return false
}

// session is a running program and what watches it.
type session struct {
	p      *prepared
	l      *Launch
	cmd    *exec.Cmd
	mu     sync.Mutex
	ended  bool
	reason string // the limit that ended it, if one did
	output uint64
	// killErrs are the failures of the ways of killing the session that
	// failed (whether or not another way then succeeded), in order.
	killErrs []error
	// relayErrs are the failures to pass a resize or a signal on to a
	// session still running (noteRelayErr), reported with its end.
	relayErrs []error
	// killMu serializes kills: a limit's timer, the CPU watcher, the
	// output pump and the main path may all end the session at once. It
	// guards over (the session's supervision is over: kill is a no-op)
	// and shimFD (a pidfd of the shim, -1 if none).
	killMu sync.Mutex
	over   bool
	shimFD int
}

// noteRelayErr records err, a failure to pass the caller's resize or
// signal on, unless the session has ended or is ending: then a closed
// terminal (EBADF, EIO) or a shim already reaped (os.ErrProcessDone) is
// what the end leaves, not a fault. Anything else while the session runs
// is reported with its end.
func (s *session) noteRelayErr(what string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended || errors.Is(err, os.ErrProcessDone) || errors.Is(err, unix.EBADF) || errors.Is(err, unix.EIO) {
		return
	}
	s.relayErrs = append(s.relayErrs, fmt.Errorf("%s: %w", what, err))
}

// end records why the session is being ended and kills everything in it
// (the shim and the program alike). Only the first reason counts; an
// empty reason (a stop) leaves the termination to how the program died.
// Every call kills again: cgroup.kill is idempotent, and a second end
// (the main path finding the cgroup still populated) must not be a no-op.
func (s *session) end(reason string) {
	s.mu.Lock()
	if !s.ended {
		s.ended, s.reason = true, reason
	}
	s.mu.Unlock()
	s.kill()
}

// kill kills every process of the session, trying each way in turn until
// one works, and records each failure (s.killErrs; Run returns them).
//
// Threat: a sandboxed program outliving its limits because a helper died
// (or hangs). glove-cgroup is killed like any process, by the OOM killer,
// an operator or a bug, and a session whose only kill went through it
// kept running past its wall and CPU limits, ignored stop_session and
// held gloved's shutdown (issue 16). So no way of killing here depends on
// another process unless the ones that do not have failed. The order:
//
//  1. cgroup.kill, opened relative to the session's v2 cgroup directory
//     descriptor this supervisor has held since cgwire Create. The kernel
//     kills every process of the cgroup, those forked meanwhile
//     included, and the shim (outside the sandbox's PID namespace) too.
//     The descriptor names that cgroup and no other (a cgroup removed
//     and re-created under the same name is a different one), the file
//     name is fixed, and the write needs no helper: the session's cgroup
//     was created by glove-cgroup as the service user, so its
//     cgroup.kill (mode 0200) belongs to the service user, as we are.
//  2. SIGKILL through pidfds to the sandbox's PID 1 (killing a PID
//     namespace's init kills every process in the namespace) and to the
//     shim: for a cgroup.kill that is missing or refused (a kernel older
//     than 5.14, a cgroup directory removed under us, a host whose
//     delegation differs). A pidfd names the process it was opened for,
//     never a later one with the same pid.
//  3. glove-cgroup's cgwire Kill, bounded by killCallWait, on a fresh helper if
//     the session's is gone: the same write, through another process, as
//     a last resort.
func (s *session) kill() {
	s.killMu.Lock()
	defer s.killMu.Unlock()
	if s.over {
		return
	}
	var errs []error
	record := func() {
		s.mu.Lock()
		s.killErrs = append(s.killErrs, errs...)
		s.mu.Unlock()
	}
	defer record()
	err := writeCgroupKill(s.p.cgroup[0])
	if err == nil {
		return
	}
	errs = append(errs, fmt.Errorf("%w: cgroup.kill through the session's cgroup descriptor: %w", ErrKill, err))
	if err = s.killPidfds(); err == nil {
		return
	}
	errs = append(errs, fmt.Errorf("%w: SIGKILL through pidfds: %w", ErrKill, err))
	_, files, err := request(s.p.cg, "kill", cgwire.Kill, &cgwire.KillRequest{Session: s.l.Name}, callOpts{timeout: killCallWait, replace: true})
	if err != nil {
		errs = append(errs, fmt.Errorf("%w: glove-cgroup kill: %w", ErrKill, err))
		return
	}
	closeAll(files)
}

// writeCgroupKill writes "1" to cgroup.kill in the cgroup directory dir:
// SIGKILL to every process of the cgroup and its descendants.
func writeCgroupKill(dir *os.File) error {
	fd, err := unix.Openat(int(dir.Fd()), "cgroup.kill", unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("open cgroup.kill: %w", err)
	}
	_, werr := unix.Write(fd, []byte("1"))
	cerr := unix.Close(fd)
	if werr != nil {
		return fmt.Errorf("write cgroup.kill: %w", werr)
	}
	if cerr != nil {
		return fmt.Errorf("close cgroup.kill: %w", cerr)
	}
	return nil
}

// killPidfds sends SIGKILL to the shim's children (the sandbox's PID 1,
// stage 1 of glove-shim) and then to the shim, each through a pidfd. It
// succeeds when the shim is killed or already gone: a shim that is gone
// took its PID namespace with it (stage 1 dies with its parent,
// PR_SET_PDEATHSIG), and the direct kill of stage 1 does not rely on that.
func (s *session) killPidfds() error {
	var errs []error
	shim := s.cmd.Process.Pid
	kids, err := childrenOf(shim)
	if err != nil {
		errs = append(errs, err)
	}
	for _, pid := range kids {
		if err := killChild(pid, shim, s.shimFD); err != nil {
			errs = append(errs, err)
		}
	}
	// os.Process signals through its own pidfd (Linux 5.4 and later):
	// never another process that reused the pid after the shim's exit.
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return errors.Join(append(errs, fmt.Errorf("kill glove-shim: %w", err))...)
	}
	if len(errs) > 0 {
		// The shim is killed; what failed before is still reported.
		s.mu.Lock()
		s.killErrs = append(s.killErrs, fmt.Errorf("%w: SIGKILL to the sandbox's PID 1: %w", ErrKill, errors.Join(errs...)))
		s.mu.Unlock()
	}
	return nil
}

// killChild sends SIGKILL to pid through a pidfd, if pid is still a child
// of parent once the pidfd is open and parent (parentFD, its pidfd) has
// not exited: then parent's pid still named parent when the child's
// parent was read, and the pidfd names that child, not a process that
// took its pid since the listing.
func killChild(pid, parent, parentFD int) error {
	if parentFD < 0 {
		return errors.New("no pidfd of glove-shim: its children cannot be told from a reused pid's")
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil // gone since the listing
	}
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(fd)
	if pp, err := parentOf(pid); err != nil || pp != parent {
		return nil // exited, or not the child listed
	}
	pfd := []unix.PollFd{{Fd: int32(parentFD), Events: unix.POLLIN}}
	if n, err := unix.Poll(pfd, 0); err != nil {
		return fmt.Errorf("poll glove-shim's pidfd: %w", err)
	} else if n > 0 {
		// The shim has exited: its stage 1 dies with it (parent-death
		// signal), and its pid may name another process now.
		return nil
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("pidfd_send_signal %d: %w", pid, err)
	}
	return nil
}

// childrenOf lists the processes whose parent is pid, by reading every
// process's /proc/PID/stat: it finds another process's children, and is
// ownChildren's fallback on a kernel without /proc/PID/task/TID/children.
func childrenOf(pid int) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []int
	for _, d := range ents {
		c, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if pp, err := parentOf(c); err == nil && pp == pid {
			out = append(out, c)
		}
	}
	return out, nil
}

// parentOf reads a process's parent pid from /proc/PID/stat.
func parentOf(pid int) (int, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return 0, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	return strconv.Atoi(f[1])
}

// usage fills u's CPU time, memory peak and pids peak from glove-cgroup
// (a fresh one if the session's is gone). If no glove-cgroup answers, it
// records what the supervisor's own descriptors of the session's v2
// cgroup show, returns the names of the fields it could not read, and an
// error saying why: a dead helper costs figures, never silently.
func (p *prepared) usage(u *Usage) ([]string, error) {
	st, files, err := request(p.cg, "stat", cgwire.Stat, &cgwire.StatRequest{Session: p.name}, callOpts{timeout: statCallWait, replace: true})
	if err == nil {
		closeAll(files)
		u.CPUTimeMs, u.MemoryPeakBytes, u.PidsPeak = st.CPUTimeNS/1e6, st.MemoryPeakBytes, st.PidsPeak
		return nil, nil
	}
	var missing []string
	if us, ok := cpuUsageUsec(p.cgroup[3]); ok {
		u.CPUTimeMs = us / 1000
	} else {
		missing = append(missing, "cpu_time_ms")
	}
	// Where v2 holds the limits, its peaks are files of the directory we
	// hold; on a hybrid host they are v1's, which only the helper opens.
	for _, f := range []struct {
		file, field string
		out         *uint64
	}{{"memory.peak", "memory_peak_bytes", &u.MemoryPeakBytes}, {"pids.peak", "pids_peak", &u.PidsPeak}} {
		if v, ok := readNumber(p.cgroup[0], f.file); ok {
			*f.out = v
		} else {
			missing = append(missing, f.field)
		}
	}
	return missing, fmt.Errorf("read the session's usage (missing %s): %w", strings.Join(missing, ", "), err)
}

// readNumber reads a single-number file of the cgroup directory dir.
func readNumber(dir *os.File, name string) (uint64, bool) {
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return 0, false
	}
	defer unix.Close(fd)
	buf := make([]byte, 64)
	n, err := unix.Read(fd, buf)
	if err != nil || n <= 0 {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(buf[:n])), 10, 64)
	return v, err == nil
}

// BecomeSubreaper makes the calling process the reaper of its
// descendants' orphans: when glove-shim ends, its stages' children are
// re-parented here instead of to the host's init, and Run reaps them.
// Call it once, at start-up, in the process that calls Run.
func BecomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", err)
	}
	return nil
}

// reapOrphans collects the zombies of this session that were re-parented
// to this supervisor: its children that have ended while in the session's
// cgroup (a zombie still shows its cgroup). Only those: a supervisor runs
// several sessions, and reaping another session's glove-shim, or a
// helper, would take its exit status from under its own Wait.
//
// A process leaves its cgroup's population (cgroup.events "populated 0",
// which waitEmpty saw) before it becomes a zombie, so a child of ours
// may still be exiting here: the scan is repeated, for at most
// orphanWait, until no child of ours in the session is left unreaped.
// Threat: a zombie left behind when this supervisor exits is re-parented
// to the host's init, which may never reap it (seen with the shim's
// stage 1 after a kill of a session whose helper was gone).
func reapOrphans(name string) error {
	deadline := time.Now().Add(orphanWait)
	for {
		left, err := reapOrphansOnce(name)
		if err != nil || left == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes of the session still exiting %v after its cgroup emptied", left, orphanWait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// orphanWait bounds reapOrphans: a killed process that has left its
// cgroup is a zombie within microseconds.
const orphanWait = 5 * time.Second

// reapOrphansOnce reaps this session's zombie children of ours and counts
// those that are still exiting.
//
// It runs at every session's end and looks at every child of gloved:
// the helpers and shims of all the sessions running (24 at a concurrency
// of 8), of which none is normally this session's. So each child costs
// one read, of its cgroup, and only one in the session's cgroup has its
// stat read too (parent and state); all reads are raw (procRead). That
// order is as safe as the other: a process in this session's cgroup is
// reaped by nobody but this scan, so its pid cannot name another process
// between the two reads, and its stat is read last, just before Wait4.
// With 24 children of other cgroups this is 0.32 ms a scan instead of
// 0.83 ms (BenchmarkReapOrphansOnce).
func reapOrphansOnce(name string) (int, error) {
	buf := make([]byte, 1024)
	kids, err := ownChildren(buf)
	if err != nil {
		return 0, err
	}
	self := strconv.Itoa(os.Getpid())
	left := 0
	for _, pid := range kids {
		d := strconv.Itoa(pid)
		cg, err := procRead("/proc/"+d+"/cgroup", buf)
		if err != nil || !inSessionCgroup(string(cg), name) {
			continue // gone since the listing, or not this session's
		}
		stat, err := procRead("/proc/"+d+"/stat", buf)
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[1] != self {
			continue
		}
		if f[0] != "Z" {
			left++
			continue
		}
		var ws unix.WaitStatus
		if _, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); err != nil && !errors.Is(err, unix.ECHILD) {
			return left, fmt.Errorf("reap %d: %w", pid, err)
		}
	}
	return left, nil
}

// procRead reads a small /proc file whole into buf (grown if it is too
// small) with open, read and close only: os.ReadFile also stats the file
// and offers it to the runtime's poller (two more system calls, refused
// or unneeded here), which at one file per child and per thread on every
// session's end is most of reapOrphans' cost. The result aliases buf.
func procRead(path string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	n := 0
	for {
		if n == len(buf) {
			buf = append(buf, make([]byte, len(buf)+512)...)
		}
		k, err := unix.Read(fd, buf[n:])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		case k == 0:
			return buf[:n], nil
		}
		n += k
	}
}

// ownChildren lists this process's children from the kernel's own lists
// (/proc/self/task/TID/children: an orphan re-parented to a subreaper
// joins one of its threads' lists). It reads one small file per thread,
// where a scan of every /proc/PID/stat costs about 16 us per process on
// the host, on every session's end: 1.3 ms with 83 processes, more on a
// busy host. A kernel without CONFIG_PROC_CHILDREN has no such file; then
// every process's parent is read instead. buf is scratch space.
func ownChildren(buf []byte) ([]int, error) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("list own threads: %w", err)
	}
	var out []int
	found := false // a children file was read: the kernel has them
	for _, t := range tasks {
		b, err := procRead("/proc/self/task/"+t.Name()+"/children", buf)
		if errors.Is(err, os.ErrNotExist) && !found {
			if _, serr := os.Stat("/proc/self/task/" + t.Name()); serr == nil {
				return childrenOf(os.Getpid()) // no CONFIG_PROC_CHILDREN
			}
			continue // the thread has exited since the listing
		}
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("list own children: %w", err)
		}
		found = true
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				return nil, fmt.Errorf("list own children: %q is not a pid", f)
			}
			out = append(out, pid)
		}
	}
	return out, nil
}

// inSessionCgroup reports whether a /proc/PID/cgroup text puts the process
// in the v2 cgroup of session name (a directory of that name).
func inSessionCgroup(cg, name string) bool {
	for _, l := range strings.Split(cg, "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return strings.HasSuffix(p, "/"+name)
		}
	}
	return false
}

// waitEmpty waits until the cgroup.events descriptor says "populated 0".
func waitEmpty(events *os.File, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	buf := make([]byte, 512)
	for {
		n, err := unix.Pread(int(events.Fd()), buf, 0)
		if err == nil && strings.Contains(string(buf[:max(n, 0)]), "populated 0") {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// identify returns the identity of the shim process pid.
func identify(pid int, cgInode uint64) (Identity, error) {
	boot, err := BootID()
	if err != nil {
		return Identity{}, err
	}
	t, err := StartTicks(pid)
	if err != nil {
		return Identity{}, err
	}
	return Identity{BootID: boot, PID: pid, StartTicks: t, CgroupInode: cgInode}, nil
}

// checkJoin checks the descriptors of a Join reply before the shim gets
// them: each must be a v1 cgroup file open for writing only. Threat: a
// compromised glove-cgroup handing the shim a descriptor of anything
// else (a file the shim's write of "0" would clobber, a directory).
// Which v1 file it is, the kernel alone can tell; Place then checks the
// result, membership in every session cgroup, from the helper's side.
func checkJoin(files []*os.File) error {
	for i, f := range files {
		var fs unix.Statfs_t
		if err := unix.Fstatfs(int(f.Fd()), &fs); err != nil {
			return fmt.Errorf("the session's v1 tasks file %d: fstatfs: %w", i, err)
		}
		fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
		if err != nil {
			return fmt.Errorf("the session's v1 tasks file %d: fcntl: %w", i, err)
		}
		if fs.Type != unix.CGROUP_SUPER_MAGIC || fl&unix.O_ACCMODE != unix.O_WRONLY {
			return fmt.Errorf("the session's v1 tasks file %d: not a v1 cgroup file open for writing only (file system %#x, flags %#o)", i, fs.Type, fl)
		}
	}
	return nil
}

// place puts the shim in the session's v1 cgroups (a no-op for v2, where
// it was born in its cgroup). A shim given the v1 tasks files (Spawn)
// joins them itself before its Go runtime starts and says so with one
// byte on its sync socket, sync: place waits for that byte first, so that
// glove-cgroup's Place finds it there and writes nothing.
func place(p *prepared, pid int, sync *os.File) error {
	if sync != nil {
		if err := awaitJoin(sync); err != nil {
			return err
		}
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(pidfd)
	files, err := call(p.cg, "place", cgwire.Place, &cgwire.PlaceRequest{Session: p.name}, pidfd)
	if err != nil {
		return fmt.Errorf("place glove-shim in the session's cgroups: %w", err)
	}
	closeAll(files)
	return nil
}

// pump relays the program's output, counting it; past the output limit
// nothing more is relayed and the session is ended.
func (s *session) pump(r io.Reader, w io.Writer) {
	limit := s.l.Limits.TerminalOutputBytes
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			s.mu.Lock()
			room := limit - min(s.output, limit)
			k := uint64(n)
			if k > room {
				k = room
			}
			s.output += k
			s.mu.Unlock()
			if w != nil && k > 0 {
				if _, werr := w.Write(buf[:k]); werr != nil {
					// The output's reader is gone (glove run's stdout
					// closed by the operator's pipe, say): the session's
					// output is still read, counted and bounded above, so
					// the program never blocks on a full terminal; only
					// the copy stops.
					w = nil
				}
			}
			if uint64(n) > k {
				s.end(LimitOutput)
			}
		}
		if err != nil {
			return
		}
	}
}

// watchCPU ends the session when its CPU time reaches the budget. The
// budget is a total, not a rate: the cgroup's usage is read from the
// cpu.stat descriptor glove-cgroup gave at creation.
func (s *session) watchCPU(stop <-chan struct{}) {
	budget := s.l.Limits.CPUTimeMs * 1000 // usage_usec
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if u, ok := cpuUsageUsec(s.p.cgroup[3]); ok && u >= budget {
				s.end(LimitCPU)
				return
			}
		}
	}
}

// cpuUsageUsec reads usage_usec from a cpu.stat descriptor.
func cpuUsageUsec(f *os.File) (uint64, bool) {
	buf := make([]byte, 4096)
	n, err := unix.Pread(int(f.Fd()), buf, 0)
	if err != nil || n <= 0 {
		return 0, false
	}
	for _, line := range strings.Split(string(buf[:n]), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			u, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return u, err == nil
		}
	}
	return 0, false
}

// oomKilled reads the memory events descriptor (v2 memory.events or v1
// memory.oom_control): any OOM kill in the session means the memory
// limit ended it.
func oomKilled(f *os.File) bool {
	buf := make([]byte, 4096)
	n, err := unix.Pread(int(f.Fd()), buf, 0)
	if err != nil || n <= 0 {
		return false
	}
	for _, line := range strings.Split(string(buf[:n]), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			k, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return err == nil && k > 0
		}
	}
	return false
}

// openPTY opens a new pseudo-terminal pair.
func openPTY() (master, slave *os.File, err error) {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(m)
		return nil, nil, fmt.Errorf("unlock the pty: %w", err)
	}
	// TIOCGPTPEER opens the slave without a path lookup (threat: a
	// /dev/pts entry swapped between naming and opening).
	sfd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		unix.Close(m)
		return nil, nil, fmt.Errorf("open the pty's peer: %w", errno)
	}
	return os.NewFile(uintptr(m), "ptmx"), os.NewFile(sfd, "pts"), nil
}
