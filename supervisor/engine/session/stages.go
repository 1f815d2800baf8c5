// SPDX-License-Identifier: Apache-2.0

package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/glove-sandbox/glove/supervisor/engine/egress"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"golang.org/x/sys/unix"
)

// Handle is one session, started and run one stage at a time:
//
//	h, err := Prepare(env, l, pins, pio) // cgroups, mounts, bundle
//	id, err := h.Spawn()           // glove-shim in the cgroups, held
//	...                            // the caller makes id durable
//	err = h.Release()              // the program runs
//	err = h.Wait(ctx)              // to its end, limits enforced
//	res, err := h.Close(err)       // everything released; the result
//
// Each stage runs only if the one before succeeded; Close is always
// called, with the first error (or nil), and undoes whatever was made: a
// shim that was spawned but not released is killed before the program
// ever runs. gloved and glove run drive it the same way; Run is the
// sequence without a durable record.
type Handle struct {
	p   *prepared
	l   *Launch
	pio IO
	sp  *spawned // from Spawn
	res *Result  // from Wait
	// watch keeps credential rotations durable while the program runs
	// (credWatch); nil without credentials.
	watch *credWatch
}

// Run runs l to its end: Prepare, Spawn, Release, Wait, Close. An error
// means the program never started (the command line reports it with
// status 125); once it has started, every ending is a Result.
func Run(ctx context.Context, env *Env, l *Launch, pins *Pins, pio IO) (*Result, error) {
	h, err := Prepare(env, l, pins, pio)
	if h == nil {
		return nil, err
	}
	if err == nil {
		_, err = h.Spawn()
	}
	if err == nil {
		err = h.Release()
	}
	if err == nil {
		err = h.Wait(ctx)
	}
	return h.Close(err)
}

// Prepare makes what the shim of l, a checked launch (Launch.Check),
// needs: the session's cgroups, its mounts and its bundle, filled from
// pins (which stay the caller's). A nil Handle means l was refused and
// nothing was made; otherwise Close must follow, error or not.
func Prepare(env *Env, l *Launch, pins *Pins, pio IO) (*Handle, error) {
	if err := checkPins(l, pins); err != nil {
		return nil, err
	}
	if l.Retains() && (env.Loopext4 == nil || !filepath.IsAbs(env.MaterializationRoot)) {
		return nil, fmt.Errorf("session %s: %w", l.Name, ErrNoImages)
	}
	p := &prepared{env: env, name: l.Name, pins: pins,
		cg: newHelper(HelperCgroup, env.Cgroup, env.StartHelper), mnt: newHelper(HelperMounter, env.Mounter, env.StartHelper),
		lx: newHelper(HelperLoopext4, env.Loopext4, env.StartHelper)}
	err := prepare(p, l, pio)
	// glove-mounter serves only this: the mounts are made (or failed),
	// and the detached trees it sent are the session's descriptors, not
	// its. Threat: an idle privileged helper per running session, a
	// process to attack and a MiB of memory each, for nothing.
	p.mnt.retire(false)
	return &Handle{p: p, l: l, pio: pio}, err
}

// spawned is a started glove-shim and what supervises it.
type spawned struct {
	s          *session
	syncR      *os.File // the shim's end of the sync socket
	syncW      *os.File // the sync socket: one byte lets the program run (and one from the shim says it joined its v1 cgroups)
	ptyMaster  *os.File
	ptySlave   *os.File
	outR       *os.File // the output pipe without a terminal
	outDone    sync.WaitGroup
	waited     chan error
	started    time.Time
	terminated bool // the shim was waited for
	// placing is the v1 placement under way (Spawn started it), until
	// Placed has its result in placeErr.
	placing  chan error
	placeErr error
}

// Spawn starts glove-shim in the session's cgroups (placed in the v1
// hierarchies too), held before the program, and returns its identity.
func (h *Handle) Spawn() (Identity, error) {
	p, l, pio := h.p, h.l, h.pio
	sp := &spawned{waited: make(chan error, 1)}
	h.sp = sp
	var err error
	if sp.syncR, sp.syncW, err = syncSocket(); err != nil {
		return Identity{}, err
	}
	extra := append(append([]*os.File(nil), p.shimFiles...), sp.syncR)
	n := len(extra) - 1
	args := []string{"glove-shim", "run", "--bundle", p.bundle, "--preserve-fds", strconv.Itoa(n),
		"--sync-fd", strconv.Itoa(3 + n)}
	if p.env.SeccompCache != nil {
		// Beyond the preserved range, so the program never receives it:
		// the shim makes it close-on-exec before it starts anything.
		extra = append(extra, p.env.SeccompCache)
		args = append(args, "--seccomp-cache-fd", strconv.Itoa(3+len(extra)-1))
	}
	if p.env.UserNamespace != nil {
		// The bundle's one mapping (spec.Build): the sandbox's user onto
		// the service user; glove-shim refuses any other.
		ns, err := p.env.UserNamespace(l.Name, SandboxUID, SandboxGID)
		if err != nil {
			return Identity{}, fmt.Errorf("the session's user namespace: %w", err)
		}
		// Ours until the shim has started: closed whatever happens.
		defer ns.Close()
		extra = append(extra, ns)
		args = append(args, "--userns-fd", strconv.Itoa(3+len(extra)-1))
	}
	joining := len(p.cgJoin) > 0
	if joining {
		// On a hybrid host: the v1 tasks files, beyond the preserved
		// range too, which the shim's constructor writes "0" to and
		// closes before its Go runtime starts (cgwire.JoinRequest says
		// why); it is argv[1] so that the constructor finds it without
		// parsing the rest.
		join := strconv.Itoa(3+n) + ":"
		for i, f := range p.cgJoin {
			extra = append(extra, f)
			if i > 0 {
				join += ","
			}
			join += strconv.Itoa(3 + len(extra) - 1)
		}
		args = append([]string{"glove-shim", "--cgroup-join", join}, args[1:]...)
	}
	cmd := &exec.Cmd{
		Path:       p.env.ShimPath,
		Args:       append(args, l.Name),
		Env:        []string{},
		ExtraFiles: extra,
		SysProcAttr: &syscall.SysProcAttr{
			// Born in the session's v2 cgroup: everything the shim
			// starts is too. This needs the supervisor inside its
			// delegated subtree (write access to the common ancestor).
			UseCgroupFD: true, CgroupFD: int(p.cgroup[0].Fd()),
			// Its own process group: the caller's terminal signals reach
			// the supervisor, which decides what the program gets.
			Setpgid:   true,
			Pdeathsig: unix.SIGKILL,
		},
	}
	s := &session{p: p, l: l, cmd: cmd, shimFD: -1}
	sp.s = s
	if l.Terminal {
		if sp.ptyMaster, sp.ptySlave, err = openPTY(); err != nil {
			return Identity{}, err
		}
		// The size is the pty's before the shim exists, so the
		// program's first TIOCGWINSZ already sees it (a resize sent
		// after Release would race the program's start, and a
		// full-screen program reads its size once, at start).
		ws := pio.Size
		if ws.Row == 0 || ws.Col == 0 {
			ws = unix.Winsize{Row: DefaultRows, Col: DefaultCols}
		}
		if err := unix.IoctlSetWinsize(int(sp.ptyMaster.Fd()), unix.TIOCSWINSZ, &ws); err != nil {
			return Identity{}, fmt.Errorf("set the terminal's size %d×%d: %w", ws.Row, ws.Col, err)
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = sp.ptySlave, sp.ptySlave, sp.ptySlave
		sp.outDone.Add(1)
		go func() { defer sp.outDone.Done(); s.pump(sp.ptyMaster, pio.Output) }()
	} else {
		outR, outW, err := os.Pipe()
		if err != nil {
			return Identity{}, fmt.Errorf("output pipe: %w", err)
		}
		sp.outR = outR
		cmd.Stdout, cmd.Stderr = outW, outW
		sp.outDone.Add(1)
		go func() { defer sp.outDone.Done(); s.pump(outR, pio.Output) }()
		if pio.Input != nil {
			in, err := cmd.StdinPipe()
			if err != nil {
				outW.Close()
				return Identity{}, fmt.Errorf("input pipe: %w", err)
			}
			go func() { _, _ = io.Copy(in, pio.Input); in.Close() }()
		}
	}
	// "fork" and "exec" time the spawn's parts in the test builds
	// (gloved's BenchmarkStartStages); production passes no Fault.
	p.env.fault("fork")
	if err := cmd.Start(); err != nil {
		if !l.Terminal {
			cmd.Stdout.(*os.File).Close()
		}
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
			return Identity{}, fmt.Errorf("start glove-shim in the session's cgroup: %w (the supervisor must run inside its delegated cgroup subtree: see scripts/setup-host.sh)", err)
		}
		return Identity{}, fmt.Errorf("start glove-shim: %w", err)
	}
	// The shim's ends now belong to the shim.
	sp.syncR.Close()
	sp.syncR = nil
	closeAll(p.cgJoin)
	p.cgJoin = nil
	if p.handoffShim != nil {
		// The shim's now: its end closes when the shim and its stages
		// are gone, which the server sees as end of file.
		p.handoffShim.Close()
		p.handoffShim = nil
	}
	if p.egressShim != nil {
		// Likewise: stage 1 closes it once it has sent the listeners.
		p.egressShim.Close()
		p.egressShim = nil
	}
	if !l.Terminal {
		cmd.Stdout.(*os.File).Close()
	}
	// A pidfd of the shim, opened before anything can reap it, so that it
	// names the shim and no later process: kill uses it to tell whether
	// the shim's pid still means the shim.
	if fd, err := unix.PidfdOpen(cmd.Process.Pid, 0); err == nil {
		s.killMu.Lock()
		s.shimFD = fd
		s.killMu.Unlock()
	} else {
		p.endErrs = append(p.endErrs, fmt.Errorf("pidfd_open glove-shim: %w", err))
	}
	go func() { sp.waited <- cmd.Wait() }()
	sp.started = time.Now()
	if l.Services != nil {
		// Before the program may run: its first connect waits for the
		// server, which takes the seccomp listener from the hand-off
		// socket as soon as the shim sends it.
		stop, err := p.env.ServeServices(ServiceHandles{Session: l.Name, Dir: p.mounts[l.serviceIndex()], Listeners: p.listeners, Handoff: p.handoff})
		if err != nil {
			return Identity{}, fmt.Errorf("local services: %w", err)
		}
		p.stopServices = stop
	}
	p.env.fault("exec")
	// v1 hierarchies (memory, pids on hybrid hosts): placement after the
	// start, before the shim may fork; it waits for the release byte.
	// The placement runs while the caller makes the identity durable:
	// it costs several ms in the kernel (measured on a hybrid host: ~9 ms
	// for Place, of which the first cgroup.procs write after an idle
	// spell ~5 ms, the next ones tens of µs), and nothing of the identity
	// depends on it (its cgroup inode is the v2 one, where the shim was
	// born). Release waits for it (Placed), so the program never runs
	// outside its v1 limits.
	sp.placing = make(chan error, 1)
	var joined *os.File
	if joining {
		joined = sp.syncW
	}
	go func(pid int) { sp.placing <- place(p, pid, joined) }(cmd.Process.Pid)
	id, err := identify(cmd.Process.Pid, p.cgInode)
	if err != nil {
		return Identity{}, fmt.Errorf("the session's identity: %w", err)
	}
	return id, nil
}

// joinWait bounds how long place waits for the shim's word that it
// joined its v1 cgroups, which its constructor says within a millisecond
// or two of its start. Threat: a shim stuck before that (a host starved
// of memory, say) holding the start, and the session's slot, forever.
const joinWait = 10 * time.Second

// syncSocket is the sync socket: the shim's end (blocking, as stage 0
// reads it with read(2) and its constructor writes it with write(2)) and
// the supervisor's (non-blocking, so that awaitJoin's read has a
// deadline). A socket, not a pipe, because it carries a byte each way.
func syncSocket() (shim, sup *os.File, err error) { return shimSocket("sync socket", "sync") }

// shimSocket is a socketpair between the shim and the supervisor: the
// shim's end blocking (its C stages use read, write and sendmsg), the
// supervisor's non-blocking so that every read of it has a deadline.
// what names it in errors, name its descriptors.
func shimSocket(what, name string) (shim, sup *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := unix.SetNonblock(fds[1], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	return os.NewFile(uintptr(fds[0]), name+"-shim"), os.NewFile(uintptr(fds[1]), name), nil
}

// awaitJoin reads the byte the shim's constructor writes on the sync
// socket once it is in every v1 session cgroup. End of file means the
// shim ended first (its constructor refused the descriptors, say: its
// message is in the session's output).
func awaitJoin(sync *os.File) error {
	if err := sync.SetReadDeadline(time.Now().Add(joinWait)); err != nil {
		return fmt.Errorf("glove-shim's join of the session's v1 cgroups: %w", err)
	}
	var b [1]byte
	n, err := sync.Read(b[:])
	if err == nil && (n != 1 || b[0] != 'j') {
		err = fmt.Errorf("unexpected byte %q", b[:n])
	}
	if err != nil {
		return fmt.Errorf("glove-shim's join of the session's v1 cgroups: %w", err)
	}
	if err := sync.SetReadDeadline(time.Time{}); err != nil {
		return fmt.Errorf("glove-shim's join of the session's v1 cgroups: %w", err)
	}
	return nil
}

// Placed waits until Spawn's placement of the shim in the session's v1
// cgroups is done and returns its error. Release calls it first; gloved
// calls it after recording the identity, before its "placed" point.
func (h *Handle) Placed() error {
	sp := h.sp
	if sp.placing != nil {
		sp.placeErr = <-sp.placing
		sp.placing = nil
	}
	return sp.placeErr
}

// Release lets the program run, once the shim is placed (Placed). From
// here on its retained images are kept.
func (h *Handle) Release() error {
	if err := h.Placed(); err != nil {
		return err
	}
	p, sp, pio := h.p, h.sp, h.pio
	// Before the program exists, so that no write of it is missed. A
	// watcher that cannot start (inotify's per-user limits) leaves the
	// end's take-back, which alone keeps a rotation unless gloved dies
	// during the session: reported with the result, not a reason to
	// refuse the session.
	if w, err := p.watchCredentials(h.l); err != nil {
		p.endErrs = append(p.endErrs, err)
	} else {
		h.watch = w
	}
	p.started = true
	if _, err := sp.syncW.Write([]byte{1}); err != nil {
		p.started = false
		return fmt.Errorf("release the shim: %w", err)
	}
	sp.syncW.Close()
	sp.syncW = nil
	if len(h.l.Egress) > 0 {
		p.startEgress(h.l, egress.NewAudit(pio.EgressAudit))
	}
	if sp.ptyMaster != nil && pio.Input != nil {
		go func() { _, _ = io.Copy(sp.ptyMaster, pio.Input) }()
	}
	if sp.ptyMaster != nil && pio.Resize != nil {
		go func() {
			for ws := range pio.Resize {
				if err := unix.IoctlSetWinsize(int(sp.ptyMaster.Fd()), unix.TIOCSWINSZ, &ws); err != nil {
					sp.s.noteRelayErr(fmt.Sprintf("resize the terminal to %d×%d", ws.Row, ws.Col), err)
				}
			}
		}()
	}
	if pio.Signals != nil {
		// Forwarded to glove-shim, which passes them to PID 1 of the
		// sandbox, which passes them to the program.
		go func() {
			for sig := range pio.Signals {
				// Not a kill: stop_session's kill after its grace does
				// not depend on this one.
				if err := sp.s.cmd.Process.Signal(sig); err != nil {
					sp.s.noteRelayErr(fmt.Sprintf("forward signal %d", sig), err)
				}
			}
		}()
	}
	return nil
}

// cgroupRetireAfter is how long a released program runs before its
// session's glove-cgroup is retired (Wait). Shorter sessions keep theirs:
// a fresh helper at the end costs a process start, which a session of a
// few seconds would pay for little.
const cgroupRetireAfter = 10 * time.Second

// Wait supervises the released program to its end, enforcing its wall
// and CPU limits; ctx ending stops the session. It waits for the
// session's cgroup to empty and reaps what was re-parented to the
// supervisor, so a session leaves no process behind, not even a zombie.
func (h *Handle) Wait(ctx context.Context) error {
	p, l, sp := h.p, h.l, h.sp
	s, cmd := sp.s, sp.s.cmd
	wall := time.AfterFunc(time.Duration(l.Limits.WallTimeMs)*time.Millisecond, func() { s.end(LimitWall) })
	defer wall.Stop()
	stopCPU := make(chan struct{})
	go s.watchCPU(stopCPU)
	// glove-cgroup has placed the program; while it runs, gloved enforces
	// every limit through descriptors it holds (cgroup.kill, cpu.stat,
	// cgroup.events, memory events) and needs the helper again only at
	// the end. A session still running after cgroupRetireAfter lets its
	// glove-cgroup go, and its end's usage and removal go to a fresh one.
	// Threat: an idle helper per long-running session, a MiB each.
	retire := time.AfterFunc(cgroupRetireAfter, func() { p.cg.retire(true) })
	var werr error
	select {
	case werr = <-sp.waited:
	case <-ctx.Done():
		s.end("")
		werr = <-sp.waited
	}
	retire.Stop()
	sp.terminated = true
	close(stopCPU)
	ended := time.Now()
	// The shim is gone; what it started dies with the PID namespace (or
	// was killed with the cgroup). Wait for that, then reap those that
	// were re-parented to this supervisor (see BecomeSubreaper).
	if !waitEmpty(p.cgroup[1], 10*time.Second) {
		s.end("")
		if !waitEmpty(p.cgroup[1], 10*time.Second) {
			p.endErrs = append(p.endErrs, fmt.Errorf("%w: the session's cgroup still holds processes 20 s after glove-shim exited", ErrKill))
		}
	}
	s.mu.Lock()
	p.endErrs = append(append(p.endErrs, s.killErrs...), s.relayErrs...)
	s.killErrs, s.relayErrs = nil, nil
	s.mu.Unlock()
	if err := reapOrphans(l.Name); err != nil {
		p.endErrs = append(p.endErrs, err)
	}
	if sp.ptySlave != nil {
		// The pty's output ends when the last process holding the slave
		// is gone; the session's processes are (cgroup kill or exit).
		sp.ptySlave.Close()
		sp.ptySlave = nil
	}
	sp.outDone.Wait()

	res := &Result{StartedAt: sp.started, EndedAt: ended}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) {
		return fmt.Errorf("wait for glove-shim: %w", werr)
	}
	s.mu.Lock()
	reason := s.reason
	res.Usage.TerminalOutputBytes = s.output
	s.mu.Unlock()
	if reason == "" && oomKilled(p.cgroup[2]) {
		reason = LimitMemory
	}
	switch {
	case reason != "":
		res.Termination = reason
	case ws.Signaled():
		res.Termination, res.Signal = Signaled, int(ws.Signal())
	case ws.ExitStatus() > 128 && ws.ExitStatus() < 128+65:
		// glove-shim reports a program killed by signal N as 128+N.
		res.Termination, res.Signal = Signaled, ws.ExitStatus()-128
	default:
		res.Termination, res.ExitCode = Exited, ws.ExitStatus()
	}
	res.Usage.WallTimeMs = uint64(ended.Sub(sp.started).Milliseconds())
	var uerr error
	if res.UsageMissing, uerr = p.usage(&res.Usage); uerr != nil {
		p.endErrs = append(p.endErrs, uerr)
	}
	res.Usage.DiskBytes = p.diskUsed(l)
	h.res = res
	return nil
}

// diskUsed is what the session's writable file systems hold.
func (p *prepared) diskUsed(l *Launch) uint64 {
	var written []*os.File
	for i, m := range l.Mounts {
		if m.Kind == EphemeralCopy || m.Kind == RetainedCopy {
			if !m.inScratch() {
				written = append(written, p.mounts[i])
			}
		}
	}
	if p.scratch != nil {
		written = append(written, p.scratch)
	}
	var used uint64
	for _, f := range written {
		var sf unix.Statfs_t
		if unix.Fstatfs(int(f.Fd()), &sf) == nil {
			used += (sf.Blocks - sf.Bfree) * uint64(sf.Bsize)
		}
	}
	return used
}

// Close ends the session wherever it stopped (cause is the first stage's
// error, or the caller's, such as a failed durable record, or nil): a
// shim that was not released is killed, and everything the session made
// is released. It returns Wait's result, if any, with the helpers lost
// and the clean-up requests a fresh helper answered; a clean-up failure
// after the program ran is an error beside the result, never instead.
func (h *Handle) Close(cause error) (*Result, error) {
	p, sp := h.p, h.sp
	res, err := h.res, cause
	if sp != nil {
		// A placement still under way ends first: it uses the session's
		// glove-cgroup, which the clean-up below asks to remove the
		// cgroups. Its failure is part of the outcome unless it is
		// already the cause (Release returned it).
		if perr := h.Placed(); perr != nil && !errors.Is(err, perr) {
			err = errors.Join(err, perr)
		}
	}
	if sp != nil && !sp.terminated && sp.s.cmd.Process != nil {
		// Not released (or released and then abandoned): end it, with
		// the session's kill and its recorded failures.
		sp.s.kill()
		<-sp.waited
		sp.terminated = true
		sp.s.mu.Lock()
		err = errors.Join(append(append([]error{err}, sp.s.killErrs...), sp.s.relayErrs...)...)
		sp.s.killErrs, sp.s.relayErrs = nil, nil
		sp.s.mu.Unlock()
	}
	if sp != nil {
		sp.close()
	}
	// Every process of the session is gone: the hand-off socket is at
	// end of file if nothing was sent, and no connection is left to
	// relay.
	if eerr := p.egress.stop(); eerr != nil {
		p.endErrs = append(p.endErrs, eerr)
	}
	p.egress = nil
	// Before the scratch goes: what the program left at each credential's
	// destination becomes the lease's next version. Only for a program
	// that was released and whose end Wait saw (res): before the release
	// nothing could have changed the copy, Wait has waited for every
	// process of the session, so nothing writes the copy while it is
	// read, and the result carries the versions into the receipt, which
	// must never say less than the lease holds.
	if err := h.watch.stop(); err != nil {
		p.endErrs = append(p.endErrs, err)
	}
	h.watch = nil
	var creds []CredentialOutcome
	if p.started && res != nil && len(h.l.Credentials) > 0 {
		if home := p.home(h.l); home != nil {
			var cerr error
			creds, cerr = returnCredentials(home, h.l, p.pins)
			if cerr != nil {
				p.endErrs = append(p.endErrs, cerr)
			}
		}
	} else if p.started {
		// No result to carry the versions: the receipt will say the
		// launched ones, so a rotation the watcher kept is said here.
		for i, c := range h.l.Credentials {
			if v := p.pins.leases[i].Version(); v != c.Version {
				p.endErrs = append(p.endErrs, fmt.Errorf("credential %s: lease %s is at version %d after a session whose end was not seen (launched with %d)", c.Handle, c.LeaseID, v, c.Version))
			}
		}
	}
	rerr := p.release()
	rerr = errors.Join(append(p.endErrs, rerr)...)
	var lost []string
	for _, hp := range []*helper{p.cg, p.mnt, p.lx} {
		if cerr := hp.checkAlive(); cerr != nil {
			rerr = errors.Join(rerr, cerr)
		}
		if le := hp.lostErr(); le != nil {
			lost = append(lost, hp.name)
			// The loss is part of the outcome even when no request of
			// the session's failed because of it (an error already
			// naming it is not repeated).
			var he *HelperLostError
			if !errors.As(err, &he) && !errors.As(rerr, &he) {
				rerr = errors.Join(rerr, le)
			}
		}
	}
	if res != nil {
		res.Credentials = creds
		res.HelpersLost = lost
		for _, hp := range []*helper{p.cg, p.lx} {
			res.ReplacedCalls = append(res.ReplacedCalls, hp.replaced()...)
		}
		for _, img := range p.images {
			res.Retained = append(res.Retained, RetainedImage{Target: img.target, Image: img.name})
		}
	}
	if rerr != nil {
		if err == nil && res != nil {
			// The program ran and ended; the clean-up failure is the
			// supervisor's to report, not a reason to lose the result.
			return res, fmt.Errorf("session %s ended, but: %w", h.l.Name, rerr)
		}
		err = errors.Join(err, rerr)
	}
	return res, err
}

// close ends the supervision: from here on the shim's pid may name
// another process and the cgroup descriptors are closed, so a late kill
// (a limit's timer firing as the session ends) must touch neither.
func (sp *spawned) close() {
	sp.s.killMu.Lock()
	sp.s.over = true
	if sp.s.shimFD >= 0 {
		unix.Close(sp.s.shimFD)
		sp.s.shimFD = -1
	}
	sp.s.killMu.Unlock()
	for _, f := range []*os.File{sp.syncR, sp.syncW, sp.ptySlave, sp.ptyMaster, sp.outR} {
		if f != nil {
			f.Close()
		}
	}
}

// Outcome is the part of a terminal receipt the launch and its result
// give: the projections the launch digest covers, spelled out, and how
// and with what use the program ended (res nil: it never ran, and those
// stay unset). gloved and glove run both build their receipts on it.
func Outcome(l *Launch, res *Result) receipt.Body {
	var b receipt.Body
	if l != nil {
		b.LibraryProjections = l.Projections
		if l.Skills != nil {
			b.SkillProjectionDigest = l.Skills.Digest
		}
		if pin := l.ExecutablePin; pin != nil && pin.Stage != nil {
			b.StageTreeDigest = pin.Stage.TreeDigest
		}
		for _, c := range l.Credentials {
			cl := receipt.CredentialLease{Handle: c.Handle, LeaseID: c.LeaseID, Version: c.Version, VersionAtEnd: c.Version}
			if res != nil {
				for _, o := range res.Credentials {
					if o.Handle == c.Handle {
						cl.VersionAtEnd = o.Version
					}
				}
			}
			b.CredentialLeases = append(b.CredentialLeases, cl)
		}
	}
	if res != nil {
		b.Termination, b.ExitCode, b.Signal = res.Termination, res.ExitCode, res.Signal
		b.Usage = receipt.Usage{CPUTimeMS: res.Usage.CPUTimeMs, MemoryPeakBytes: res.Usage.MemoryPeakBytes,
			PidsPeak: res.Usage.PidsPeak, WallTimeMS: res.Usage.WallTimeMs, DiskBytes: res.Usage.DiskBytes,
			TerminalOutputBytes: res.Usage.TerminalOutputBytes}
		b.StartedAtMS = res.StartedAt.UnixMilli()
		b.EndedAtMS = max(res.EndedAt.UnixMilli(), b.StartedAtMS)
	}
	return b
}
