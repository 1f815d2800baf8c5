package shim

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// readPlan reads the plan from the control socket named by argv[2]. Every
// inherited descriptor is made close-on-exec first, so that nothing the
// stage did not choose to pass reaches the next one.
func readPlan() (*Plan, *os.File, error) {
	if len(os.Args) != 3 {
		return nil, nil, errors.New("bad stage arguments")
	}
	n, err := strconv.Atoi(os.Args[2])
	if err != nil || n < 3 || n > 3+maxPreserveFDs {
		return nil, nil, errors.New("bad stage arguments")
	}
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return nil, nil, fmt.Errorf("close_range: %w", err)
	}
	ctl := os.NewFile(uintptr(n), "control")
	b, err := io.ReadAll(io.LimitReader(ctl, maxPlan+1))
	if err != nil {
		return nil, ctl, fmt.Errorf("read plan: %w", err)
	}
	if len(b) > maxPlan {
		return nil, ctl, errors.New("read plan: too large")
	}
	p, err := decodePlan(b)
	if err != nil {
		return nil, ctl, fmt.Errorf("decode plan: %w", err)
	}
	if p.PreserveFDs != n-3 {
		return nil, ctl, errors.New("plan does not match the stage arguments")
	}
	return p, ctl, nil
}

// fail reports err to the parent stage, which prints it; the stage then
// exits without running anything.
func fail(ctl *os.File, stage string, err error) int {
	msg := fmt.Sprintf("%s: %v", stage, err)
	if ctl != nil {
		if _, werr := ctl.Write([]byte(msg)); werr == nil {
			return 1
		}
	}
	fmt.Fprintf(os.Stderr, "glove-shim: %s\n", msg)
	return 1
}

// stage1 is PID 1 of the sandbox: it builds the mount tree, then starts
// stage 2, forwards signals to it, reaps every process that ends in the
// sandbox and exits with the program's status.
func stage1() int {
	// The idle threads PID 1 needs are made while the plan is read and
	// the mount tree is built; stage 2 starts only once they exist.
	warmed := warmThreadsAsync(warmedThreads)
	p, ctl, err := readPlan()
	if err != nil {
		return fail(ctl, "stage 1", err)
	}
	if os.Getpid() != 1 {
		return fail(ctl, "stage 1", errors.New("not PID 1 of a new PID namespace"))
	}
	// Signals are caught from here on, before the program exists and
	// before stage 0 hears that it runs: a signal forwarded to PID 1 in
	// between would otherwise meet the Go runtime's default action (exit
	// 2) and end the session as "exited 2" instead of reaching the
	// program (seen with a SIGTERM sent right after the program's first
	// output). reap forwards what was queued once the program exists.
	sigs := make(chan os.Signal, 128)
	signal.Notify(sigs)
	// Stage 2 is executed through this descriptor, since the binary is
	// not inside the new root. It is placed above every number the
	// child's descriptor shuffle may use (os/exec moves descriptors up to
	// 3+len(ExtraFiles) and beyond before placing them).
	exe, err := unix.Open("/proc/self/exe", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(ctl, "stage 1", fmt.Errorf("open /proc/self/exe: %w", err))
	}
	high, err := unix.FcntlInt(uintptr(exe), unix.F_DUPFD_CLOEXEC, 2*(4+p.PreserveFDs)+16)
	if err != nil {
		return fail(ctl, "stage 1", fmt.Errorf("move executable descriptor: %w", err))
	}
	unix.Close(exe)
	if err := shareBudgets(p.UserBudgets); err != nil {
		return fail(ctl, "stage 1", err)
	}
	if err := buildSandbox(p); err != nil {
		return fail(ctl, "stage 1", err)
	}
	warmed()
	files := make([]*os.File, p.PreserveFDs+1)
	for _, fd := range p.Process.PassFDs {
		files[fd-3] = os.NewFile(uintptr(fd), "preserved")
	}
	cmd, next, err := startNext(p, files, stage2Attr(p), "/proc/self/fd/"+strconv.Itoa(high), argStage2, nil)
	// The passed descriptors belong to the program now: PID 1 keeps no
	// copy (a stream socket must have one holder inside the sandbox).
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
	unix.Close(high)
	if err != nil {
		return fail(ctl, "stage 1", err)
	}
	next.Close()
	ctl.Close() // tells stage 0 that the program is executing
	return reap(cmd.Process.Pid, sigs)
}

// budgetShares is how many sandboxes one service user's per-user kernel
// budget is divided among: gloved runs at most 32 sessions at once
// (supervisor/service/daemon's MaxSessions), and one share is left for gloved.
const budgetShares = 33

// userBudgets are the per-user counts of /proc/sys/user: each is counted
// per uid in every user namespace from the creator's up to the initial
// one, so everything a sandbox makes is charged to the service user on
// the host as well. Those a kernel does not have are skipped.
var userBudgets = []string{
	"max_user_namespaces", "max_mnt_namespaces", "max_pid_namespaces",
	"max_net_namespaces", "max_ipc_namespaces", "max_uts_namespaces",
	"max_cgroup_namespaces", "max_time_namespaces",
	"max_inotify_instances", "max_inotify_watches",
	"max_fanotify_groups", "max_fanotify_marks",
}

// readBudgetShares is stage 0's half of shareBudgets: the share of each of
// the service user's per-user budgets, read in stage 0's own user
// namespace (the host's, or the one gloved runs in), since stage 1 would
// read its new namespace's own, still unlimited, values.
func readBudgetShares() (map[string]int, error) {
	shares := map[string]int{}
	for _, name := range userBudgets {
		path := "/proc/sys/user/" + name
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("per-user budget: %w", err)
		}
		host, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || host < 0 {
			return nil, fmt.Errorf("per-user budget: %s: %q is not a count", path, data)
		}
		shares[name] = max(host/budgetShares, 1)
	}
	if len(shares) == 0 {
		return nil, errors.New("per-user budget: /proc/sys/user lists none of the counts")
	}
	return shares, nil
}

// shareBudgets gives user namespace 1, this stage's, a share of each of
// the service user's per-user budgets: everything the program takes is
// counted in this namespace and every ancestor, so with the namespace's
// own limit below the host's, one sandbox cannot use up what gloved and
// the other sessions of the same user need (threat: 128 inotify_init1
// in a sandbox made the host user's fail with EMFILE, attack case
// inotify-user-budget; the namespaces, watches and fanotify marks are
// the same kind of count). A new user namespace starts unlimited
// (bounded by its ancestors only); stage 1 holds CAP_SYS_RESOURCE in it,
// and the files under /proc/sys/user are those of the opener's user
// namespace. Stage 2's own user and mount namespaces are the first
// charged against these shares.
func shareBudgets(shares map[string]int) error {
	names := make([]string, 0, len(shares))
	for name := range shares {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		path := "/proc/sys/user/" + name
		share := strconv.Itoa(shares[name])
		if err := os.WriteFile(path, []byte(share), 0); err != nil {
			return fmt.Errorf("per-user budget: %w", err)
		}
		got, err := os.ReadFile(path)
		if err != nil || strings.TrimSpace(string(got)) != share {
			return fmt.Errorf("per-user budget: %s reads %q after writing %s (%v)", path, got, share, err)
		}
	}
	return nil
}

// stage2Attr enters user namespace 2 and mount namespace 2, where every
// mount built by stage 1 is locked, as the sandbox user.
func stage2Attr(p *Plan) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{
		Pdeathsig: unix.SIGKILL,
		// A new session: the program has no controlling terminal unless
		// process.terminal gives it its standard input (threat: TIOCSTI
		// pushing input into a terminal outside the sandbox, and signals
		// to the caller's process group).
		Setsid: true,
	}
	if p.Process.Terminal {
		a.Setctty, a.Ctty = true, 0
	}
	if !p.off(LayerMountLock) {
		a.Cloneflags = unix.CLONE_NEWUSER | unix.CLONE_NEWNS
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: int(p.UID), HostID: 0, Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: int(p.GID), HostID: 0, Size: 1}}
		a.GidMappingsEnableSetgroups = false
		// CAP_SETPCAP survives the execve of stage 2 (as ambient) only so
		// that stage 2 can empty the bounding set even when the program's
		// uid is not 0; stage 2 drops it with every other capability.
		a.AmbientCaps = []uintptr{unix.CAP_SETPCAP}
	}
	return a
}

// reap is PID 1's loop. When the program (pid) ends, PID 1 returns its
// status and exits, and the kernel kills what is left in the namespace.
func reap(pid int, sigs <-chan os.Signal) int {
	for {
		for {
			var ws syscall.WaitStatus
			w, err := unix.Wait4(-1, (*unix.WaitStatus)(&ws), unix.WNOHANG, nil)
			if err != nil || w <= 0 {
				if errors.Is(err, unix.ECHILD) {
					return ExitFailed
				}
				break
			}
			if w == pid {
				return exitStatus(ws)
			}
		}
		s := <-sigs
		if forwarded(s) {
			// ESRCH only: the program has just exited, and the next
			// Wait4 reaps it; nothing is left unbounded by a lost signal.
			_ = unix.Kill(pid, s.(syscall.Signal))
		}
	}
}

// buildSandbox attaches the mounts, masks /proc, pivots into the new root
// and names the host and the loopback interface.
func buildSandbox(p *Plan) error {
	root, err := buildRoot(p)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	if err := pivot(root); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte(p.Hostname)); err != nil {
		return fmt.Errorf("sethostname: %w", err)
	}
	return loUp()
}

// loUp brings the loopback interface up. A new network namespace has only
// lo, and it is down: programs that talk to themselves over 127.0.0.1
// need it up. Nothing else exists. Two ioctls on a datagram socket do
// what an rtnetlink link dump and change did, without the netlink
// package's start-up and socket round trips (about 0.35 ms a start).
func loUp() error {
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("set lo up: socket: %w", err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("set lo up: %w", err)
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("set lo up: SIOCGIFFLAGS: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("set lo up: SIOCSIFFLAGS: %w", err)
	}
	return nil
}

// noStage2 is reached only in a glove-shim linked without package cstage:
// stage 2 is C (shim/cstage/stage2.c), which that package's constructor
// runs before the Go runtime starts, and there is no Go stage 2 to fall
// back on. It is reported to stage 1 like any failure of stage 2, and
// nothing is executed.
func noStage2() int {
	err := errors.New("not linked into this glove-shim (its C stages, package shim/cstage, are missing)")
	_, ctl, perr := readPlan()
	if perr != nil {
		err = fmt.Errorf("%w; %w", err, perr)
	}
	return fail(ctl, "stage 2", err)
}
