// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/library"
	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/engine/discovery"
	"github.com/glove-sandbox/glove/supervisor/engine/helperproc"
	"github.com/glove-sandbox/glove/supervisor/engine/materialize"
	"github.com/glove-sandbox/glove/supervisor/engine/session"
	"github.com/glove-sandbox/glove/supervisor/engine/usermode"
	"github.com/glove-sandbox/glove/supervisor/internal/ownpaths"
	"github.com/glove-sandbox/glove/supervisor/state/journal"
	"github.com/glove-sandbox/glove/supervisor/state/lease"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/supervisor/state/store"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// Bounds of the session runtime.
const (
	// MaxSessions bounds the sessions running at once: each has its own
	// helper pair, shim and cgroups.
	MaxSessions     = 32
	TranscriptBytes = 64 << 10 // kept for late attachers
	MaxPendingInput = 64 << 10 // written but not yet read by the program
	chunkBytes      = 16 << 10 // transcript notifications
	watcherQueue    = 1024     // notifications queued per attachment
	DefaultGraceMs  = 5000
	startWait       = 30 * time.Second // the longest stop_session waits for a starting session
	MaxGraceMs      = 60000
	// ExitFailed is an ended session's status when the program never ran.
	ExitFailed = 125
)

// signals are the names signal accepts.
var signals = map[string]syscall.Signal{
	"INT": unix.SIGINT, "TERM": unix.SIGTERM, "HUP": unix.SIGHUP, "QUIT": unix.SIGQUIT,
	"USR1": unix.SIGUSR1, "USR2": unix.SIGUSR2, "WINCH": unix.SIGWINCH,
}

// End is the "ended" notification's params.
type End struct {
	SessionID   string `json:"session_id"`
	State       string `json:"state"`
	Termination string `json:"termination"`
	ExitCode    int    `json:"exit_code"`
	Signal      int    `json:"signal"`
	// Status is the exit status `glove run` would have (128+N for signal
	// N, 125 when the program never ran).
	Status int `json:"status"`
}

// Output is the "output" notification's params.
type Output struct {
	SessionID string `json:"session_id"`
	Data      []byte `json:"data"` // base64
	Offset    uint64 `json:"offset"`
}

// live is a session this gloved started.
type live struct {
	d  *Daemon
	id string

	mu       sync.Mutex
	ring     []byte // the last TranscriptBytes of output
	total    uint64 // bytes of output so far
	watchers map[*conn]chan notification
	end      *End
	stopping bool

	input   *inputQueue
	resizes chan unix.Winsize
	signals chan syscall.Signal
	cancel  context.CancelFunc
	// egressAudit is the session's egress audit file (egress-ID.audit in
	// the store) when its launch has egress endpoints; run closes it.
	egressAudit *os.File
	size        unix.Winsize // the pty's size at start (start_session's rows and cols)
}

// Write is the session's output: kept in the ring, fanned out.
func (l *live) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	off := l.total
	l.total += uint64(len(p))
	l.ring = append(l.ring, p...)
	if len(l.ring) > TranscriptBytes {
		l.ring = append(l.ring[:0:0], l.ring[len(l.ring)-TranscriptBytes:]...)
	}
	for c, ch := range l.watchers {
		l.enqueue(c, ch, notification{JSONRPC: "2.0", Method: "output",
			Params: Output{SessionID: l.id, Data: append([]byte(nil), p...), Offset: off}})
	}
	return len(p), nil
}

// enqueue queues a notification; a connection that does not keep up is
// closed (l.mu held).
func (l *live) enqueue(c *conn, ch chan notification, n notification) {
	select {
	case ch <- n:
	default:
		l.unwatch(c)
		close(ch)
		go c.close()
	}
}

// unwatch ends c's attachment on both sides (l.mu held; c.mu is taken
// after it, the order watch keeps). Threat: a controller's connection
// that lives for months, attaching to every session it runs, keeping
// each session's state and transcript ring after its end: gloved's
// memory then grows with every session ever attached (issue 33).
func (l *live) unwatch(c *conn) {
	delete(l.watchers, c)
	c.mu.Lock()
	if c.watching != nil {
		delete(c.watching, l)
	}
	c.mu.Unlock()
}

func (l *live) ended() *End {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.end
}

// watch attaches c: the transcript from offset from (or the ring's
// start), then live output, then "ended".
func (l *live) watch(c *conn, from *uint64) {
	ch := make(chan notification, watcherQueue)
	go func() {
		for n := range ch {
			if err := c.send(n); err != nil {
				c.close()
				for range ch {
				}
				return
			}
		}
	}()
	l.mu.Lock()
	defer l.mu.Unlock()
	start := l.total - uint64(len(l.ring))
	if from != nil && *from > start {
		start = min(*from, l.total)
	}
	data := l.ring[start-(l.total-uint64(len(l.ring))):]
	for len(data) > 0 {
		k := min(len(data), chunkBytes)
		ch <- notification{JSONRPC: "2.0", Method: "output",
			Params: Output{SessionID: l.id, Data: append([]byte(nil), data[:k]...), Offset: start}}
		start += uint64(k)
		data = data[k:]
	}
	if l.end != nil {
		ch <- notification{JSONRPC: "2.0", Method: "ended", Params: *l.end}
		close(ch)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Not twice (checked by attach, but a second attach may have raced
	// here), and not for a connection already closed.
	if l.watchers[c] != nil || c.watching == nil {
		close(ch)
		return
	}
	l.watchers[c] = ch
	c.watching[l] = true
}

// detach removes c's attachment; it reports whether there was one.
func (l *live) detach(c *conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch, ok := l.watchers[c]
	if ok {
		l.unwatch(c)
		close(ch)
	}
	return ok
}

// finish records the end and tells every attachment.
func (l *live) finish(e End) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.end = &e
	for c, ch := range l.watchers {
		l.enqueue(c, ch, notification{JSONRPC: "2.0", Method: "ended", Params: e})
		if l.watchers[c] != nil {
			close(ch)
		}
		l.unwatch(c)
	}
	l.input.Close()
	close(l.resizes)
	close(l.signals)
}

// stop asks the program to end (SIGTERM), then kills the session after
// grace. It reports false when the session has already ended.
func (l *live) stop(grace time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.end != nil {
		return false
	}
	if l.stopping {
		return true
	}
	l.stopping = true
	select {
	case l.signals <- unix.SIGTERM:
	default:
	}
	time.AfterFunc(grace, l.cancel)
	return true
}

// inputQueue is the program's input: write_stdin appends (bounded),
// the session reads.
type inputQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    []byte
	closed bool
}

var errInputFull = errors.New("input queue full")

func newInputQueue() *inputQueue {
	q := &inputQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *inputQueue) Read(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.buf) == 0 && !q.closed {
		q.cond.Wait()
	}
	if len(q.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, q.buf)
	q.buf = q.buf[n:]
	return n, nil
}

func (q *inputQueue) add(p []byte) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return io.ErrClosedPipe
	}
	if len(q.buf)+len(p) > MaxPendingInput {
		return errInputFull
	}
	q.buf = append(q.buf, p...)
	q.cond.Signal()
	return nil
}

func (q *inputQueue) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cond.Broadcast()
}

type startParams struct {
	SessionID  string `json:"session_id"`
	StartToken string `json:"start_token"`
	// Rows and Cols are the pty's size at start, both or neither
	// (session.DefaultRows × DefaultCols).
	Rows *uint32 `json:"rows,omitempty"`
	Cols *uint32 `json:"cols,omitempty"`
}

// startSize is the pty's size a start_session asks for: checked before
// anything of the session changes, so that a bad size is a plain
// invalid-params error and the session stays created.
func startSize(ps *startParams) (unix.Winsize, *Error) {
	switch {
	case ps.Rows == nil && ps.Cols == nil:
		return unix.Winsize{Row: session.DefaultRows, Col: session.DefaultCols}, nil
	case ps.Rows == nil || ps.Cols == nil:
		return unix.Winsize{}, errorf(CodeInvalidParams, "rows and cols go together (neither: %d×%d)", session.DefaultRows, session.DefaultCols)
	}
	ws, err := session.TermSize(*ps.Rows, *ps.Cols)
	if err != nil {
		return unix.Winsize{}, errorf(CodeInvalidParams, "%s", err.Error())
	}
	return ws, nil
}

func (d *Daemon) startSession(_ *conn, k *call, ps *startParams) (any, *Error) {
	// The test builds' start-path points (faults.go): nil in production.
	hook := faultHook()
	point := func(p string) {
		if hook != nil {
			hook(p)
		}
	}
	point("start")
	size, e := startSize(ps)
	if e != nil {
		return nil, e
	}
	sess, e := d.lookup(k, ps.SessionID)
	if e != nil {
		return nil, e
	}
	if sess.State != store.Created {
		return nil, errorf(CodeConflict, "session is %s, not created", sess.State)
	}
	if err := d.auth.Verify(ps.StartToken, sess); err != nil {
		return nil, errorf(CodeUnauthorized, "start authorization rejected")
	}
	d.mu.Lock()
	switch {
	case d.closing:
		d.mu.Unlock()
		return nil, errorf(CodeUnavailable, "gloved is shutting down")
	case d.claims[sess.ID]:
		d.mu.Unlock()
		return nil, errorf(CodeConflict, "session is being started")
	case d.running() >= MaxSessions:
		d.mu.Unlock()
		return nil, errorf(CodeUnavailable, "%d sessions are running", MaxSessions)
	}
	d.claims[sess.ID] = true
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.claims, sess.ID)
		d.mu.Unlock()
	}()
	if _, err := d.store.Transition(sess.ID, store.Preparing, ""); err != nil {
		if errors.Is(err, store.ErrTransition) {
			return nil, errorf(CodeConflict, "session is no longer created")
		}
		return nil, d.storeError(sess.ID, "prepare", err)
	}
	fail := func(reason string, e *Error) (any, *Error) {
		if _, err := d.store.Transition(sess.ID, store.Failed, reason); err != nil {
			d.log.WithField("session_id", sess.ID).Error("session store failure")
		}
		return nil, e
	}
	pl, err := plan.Decode(sess.Plan)
	if err != nil {
		return fail("plan_corrupt", errorf(CodeInternal, "stored plan does not decode"))
	}
	if err := plan.Validate(pl, d.pol, time.Now()); err != nil {
		return fail("plan_rejected", errorf(CodeRejected, "plan rejected: %s", oneLine(err.Error())))
	}
	point("validated")
	launch, pins, err := session.Resolve(d.pol, pl, sess.ID, session.Sources{Libraries: d.libraries, Leases: d.leases})
	if err != nil {
		// The reason names the class only: the error itself may carry
		// host paths, which neither the controller nor the store gets.
		d.log.WithField("session_id", sess.ID).WithField("event", "resolve").Warn(resolveClass(err))
		return fail(resolveClass(err), errorf(CodeRejected, "the plan cannot be launched: %s", resolveClass(err)))
	}
	launched := false
	defer func() {
		if !launched {
			d.closePins(sess.ID, pins)
		}
	}()
	launch.Terminal = true
	// Before the launch digest below, which covers the environment.
	launch.SetTerm(session.DefaultTerm)
	var sp *helperproc.Proc
	var transport *session.Transport
	if d.streamFor(pl) {
		// No grant may hand the sandbox the upstream socket another way:
		// d.guard checks each grant's very descriptor at materialization.
		guest, tr, p, err := d.openStream(sess.ID)
		transport = tr
		if err != nil {
			d.log.WithField("session_id", sess.ID).WithField("event", "stream").Warn("inherited stream unavailable")
			return fail("stream", errorf(CodeUnavailable, "inherited stream unavailable"))
		}
		launch.Stream, pins.Stream, sp = &session.Stream{Alias: d.stream.alias}, guest, p
	}
	var serveServices func(session.ServiceHandles) (func() error, error)
	if eps := d.pathnameFor(pl); len(eps) > 0 {
		// The pathname transport: the alias directory, served by gloved
		// for the session's life (pathname.go).
		tr, aliases, err := pathnameTransport(eps)
		if err != nil {
			d.log.WithField("session_id", sess.ID).WithField("event", "stream").WithField("error", oneLine(err.Error())).Warn("local services unavailable")
			return fail("stream", errorf(CodeUnavailable, "local services unavailable"))
		}
		transport = tr
		launch.Services = &session.Services{Aliases: aliases}
		launch.Mounts = append(launch.Mounts, session.Mount{Target: session.ServiceDirTarget, Kind: session.ServiceDir, ReadOnly: true})
		if err := launch.Check(); err != nil {
			d.log.WithField("session_id", sess.ID).WithField("event", "resolve").WithField("error", oneLine(err.Error())).Warn("local services do not fit the launch")
			return fail("unsupported", errorf(CodeRejected, "the plan cannot be launched: unsupported"))
		}
		serveServices = d.serveServices(sess.ID, eps)
	}
	// The egress endpoints' audit: created before anything is made, so
	// that a store that cannot hold it refuses the session (fail closed:
	// no connection may be relayed unrecorded).
	var egressAudit *os.File
	if len(launch.Egress) > 0 {
		f, err := d.createAudit(egressAuditPrefix, sess.ID)
		if err == nil {
			// The file's entry is durable before its first record.
			if err = syncDir(d.cfg.StoreDir); err != nil {
				err = errors.Join(err, f.Close())
			}
		}
		if err != nil {
			d.log.WithField("session_id", sess.ID).WithField("event", "egress").WithField("error", oneLine(err.Error())).Warn("egress audit unavailable")
			if sp != nil {
				if err := endStream(sp); err != nil {
					d.log.WithField("session_id", sess.ID).WithField("event", "stream").WithField("error", oneLine(err.Error())).Warn("closing an unused inherited stream failed")
				}
			}
			return fail("egress", errorf(CodeUnavailable, "egress audit unavailable"))
		}
		egressAudit = f
		defer func() {
			if !launched {
				if err := f.Close(); err != nil {
					d.log.WithField("session_id", sess.ID).WithField("event", "egress").WithField("error", oneLine(err.Error())).Warn("closing an unused egress audit failed")
				}
			}
		}()
	}
	// releaseStream ends the stream's helper if the session does not run
	// (its guest end is a pin, closed with the others).
	releaseStream := func() {
		if sp != nil {
			// The session never ran: a failed close only ends a
			// stream nothing used, but it is logged, not dropped.
			if err := endStream(sp); err != nil {
				d.log.WithField("session_id", sess.ID).WithField("event", "stream").WithField("error", oneLine(err.Error())).Warn("closing an unused inherited stream failed")
			}
		}
	}
	// Bundles and retained images both live in the materialization root:
	// glove-loopext4 must be configured with the same directory
	// (loopext4.json materialization_root), which it checks by identity.
	env := &session.Env{ShimPath: filepath.Join(d.cfg.Libexec, "glove-shim"), RuntimeDir: d.cfg.MaterializationRoot,
		MaterializationRoot: d.cfg.MaterializationRoot, SeccompCache: d.seccompCache, ServeServices: serveServices}
	if d.userMode == usermode.Helper {
		env.UserNamespace = func(id string, uid, gid uint32) (*os.File, error) {
			ns, err := usermode.Namespace(d.startHelper, id, uid, gid)
			if err != nil {
				return nil, err
			}
			// The namespace's identity in gloved's log: the inode
			// /proc/PID/ns/user of the session's processes names.
			var st unix.Stat_t
			if err := unix.Fstat(int(ns.Fd()), &st); err != nil {
				return nil, errors.Join(fmt.Errorf("fstat the session's user namespace: %w", err), ns.Close())
			}
			d.log.WithFields(logrus.Fields{"event": "user_namespace", "session_id": id, "inode": st.Ino}).Info("glove-userns made the session's user namespace")
			return ns, nil
		}
	}
	// Helpers of the session's own: each serves one request at a time
	// on one connection, and sessions stay isolated (pool.go: a pooled
	// helper is given to one session only). The session holds the pool
	// until its helpers are closed (run, or closeHelpers here).
	point("resolved")
	d.pool.hold()
	names := []string{"glove-mounter", "glove-cgroup"}
	if launch.Retains() {
		names = append(names, "glove-loopext4") // only retained_write grants need images
	}
	helpers, herr := d.takeHelpers(names)
	closeHelpers := func() {
		for _, p := range helpers {
			// Helpers of a session that never ran: they hold nothing
			// of it (the cgroups are not made yet), so a failed exit
			// is only logged.
			if err := p.Close(); err != nil {
				d.log.WithField("session_id", sess.ID).WithField("helper", p.Name).WithField("error", oneLine(err.Error())).Warn("helper exit")
			}
		}
		d.pool.letGo()
	}
	if herr != nil {
		closeHelpers()
		releaseStream()
		return fail("helpers", errorf(CodeUnavailable, "helpers unavailable"))
	}
	env.Mounter, env.Cgroup = helpers[0], helpers[1]
	if len(helpers) > 2 {
		env.Loopext4 = helpers[2]
	}
	for _, p := range helpers {
		point("helper:" + p.Name)
	}
	if err := d.receipts.Reserve(sess.ID, d.pol.Revision); err != nil {
		closeHelpers()
		releaseStream()
		switch {
		case errors.Is(err, receipt.ErrFull):
			return fail("receipt_capacity", d.storeError(sess.ID, "receipt reserve", err))
		case errors.Is(err, journal.ErrNoSpace):
			return fail("receipt_no_space", d.storeError(sess.ID, "receipt reserve", err))
		case errors.Is(err, receipt.ErrReplay):
			// The id was used again after its earlier session left the
			// store, and that session's receipt is not archived yet.
			return fail("receipt_replay", errorf(CodeConflict, "session %s: the receipt of an earlier session of this id is not acknowledged; acknowledge it (receipts_ack) before using the id again", sess.ID))
		}
		d.log.WithField("session_id", sess.ID).WithField("error", oneLine(err.Error())).Error("receipt reservation failed")
		return fail("receipt_reserve", errorf(CodeInternal, "receipt reservation failed"))
	}
	point("reserved")
	ctx, cancel := context.WithCancel(context.Background())
	l := &live{d: d, id: sess.ID, watchers: map[*conn]chan notification{}, input: newInputQueue(),
		resizes: make(chan unix.Winsize, 8), signals: make(chan syscall.Signal, 8), cancel: cancel, egressAudit: egressAudit, size: size}
	// From here the session is starting, which the store does not record
	// (no fdatasync of its own on the start path): the store still says
	// preparing, and session_status reports starting for a session this
	// gloved runs (reportedState). A crash from here until drive records
	// the session running is recovered exactly as a crash just after the
	// reservation: the same clean-up (cgroups, images, bundles), the
	// failed receipt, and no runtime to check, so nothing it could have
	// released is left unbounded.
	// The managed-launch digest (recorded with the runtime identity, see
	// drive): the resolved launch and, with a stream,
	// its transport, descriptor map, both endpoint identities and the
	// upstream manifest; recorded with the runtime identity.
	launchDigest := session.LaunchDigest(launch, pl.AdapterCommandDigest, transport)
	point("starting")
	env.Fault = hook
	env.Guard = d.guard
	env.Hidden = []string{d.cfg.Libexec}
	d.mu.Lock()
	d.sessions[sess.ID] = l
	d.wg.Add(1)
	d.mu.Unlock()
	launched = true
	go d.run(ctx, l, sess, env, launch, pins, launchDigest, helpers, sp)
	return map[string]any{"session_id": sess.ID, "state": store.Starting}, nil
}

// takeHelpers takes one helper of each name for a session, all at once
// (each from the pool or, when it has none, started now): the starts do
// not depend on one another. On an error the helpers taken are returned
// too, for the caller to close.
func (d *Daemon) takeHelpers(names []string) ([]*helperproc.Proc, error) {
	procs := make([]*helperproc.Proc, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { procs[i], errs[i] = d.pool.take(name) })
	}
	wg.Wait()
	var got []*helperproc.Proc
	for _, p := range procs {
		if p != nil {
			got = append(got, p)
		}
	}
	return got, errors.Join(errs...)
}

// guard is every launch's check of the host trees it materializes
// (session.Env.Guard), on the descriptor each is opened at: none may be
// or hold Glove's own state (ownpaths), and none may expose the
// inherited stream's upstream (exposedBy).
func (d *Daemon) guard(fd int) error {
	if err := d.own.Check(fd); err != nil {
		return err
	}
	if exposureCheckOff() {
		return nil
	}
	if d.stream != nil {
		if err := d.stream.exposedBy(fd); err != nil {
			return err
		}
	}
	for _, e := range d.pathname {
		if err := e.exposedBy(fd); err != nil {
			return err
		}
	}
	return nil
}

// closePins releases a session's pins once it has ended or will not
// run. They were only read (bundles) or are the stream's guest end: a
// failed close is logged, and changes nothing the session did.
func (d *Daemon) closePins(id string, pins *session.Pins) {
	if err := pins.Close(); err != nil {
		d.log.WithField("session_id", id).WithField("error", oneLine(err.Error())).Warn("closing the session's pinned descriptors failed")
	}
}

// running counts the sessions that have not ended (d.mu held).
func (d *Daemon) running() int {
	n := len(d.claims)
	for _, l := range d.sessions {
		if l.ended() == nil {
			n++
		}
	}
	return n
}

// run runs one session to its end, seals its receipt, then records the
// terminal state: the receipt is durable before the session is exited.
func (d *Daemon) run(ctx context.Context, l *live, sess store.Session, env *session.Env, launch *session.Launch, pins *session.Pins, launchDigest string, helpers []*helperproc.Proc, sp *helperproc.Proc) {
	defer d.wg.Done()
	defer l.cancel()
	defer d.closePins(sess.ID, pins)
	// A helper that dies during the session is replaced by a fresh one
	// for the session's clean-up (its cgroups removed, its images frozen):
	// nothing a dead helper would have undone is left behind.
	env.StartHelper = d.startHelper
	res, err := d.drive(ctx, sess.ID, env, launch, pins, launchDigest, session.IO{Input: l.input, Output: l, Resize: l.resizes, Signals: l.signals, EgressAudit: l.egressAudit, Size: l.size})
	if l.egressAudit != nil {
		// Every record was synced as it was written (egress.Audit).
		if cerr := l.egressAudit.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close the egress audit: %w", cerr))
		}
	}
	log := d.log.WithField("session_id", sess.ID)
	for _, p := range helpers {
		// Close reaps the helper after its socket's EOF: an error is its
		// exit status, a helper that was killed or failed meanwhile.
		if cerr := p.Close(); cerr != nil {
			log.WithFields(logrus.Fields{"event": "helper_exit", "helper": p.Name, "status": cerr.Error()}).Warn("a helper of the session did not exit cleanly")
		}
	}
	d.pool.letGo()
	if sp != nil {
		// The program is gone: the stream's last exchange is over or
		// was cut, and its audit says which.
		settleStreams([]*helperproc.Proc{sp})
		if serr := endStream(sp); serr != nil {
			err = errors.Join(err, serr)
		}
	}
	d.endSession(l, sess, launch, res, err)
}

// drive runs the session's stages. The program is released only once
// its identity is durable and the session is recorded as running, both
// in one record: a gloved killed at any point finds, on restart, either
// a session still preparing with no runtime (nothing was released) or a
// running one whose runtime it can check. The identity is recorded with
// the managed-launch digest.
func (d *Daemon) drive(ctx context.Context, id string, env *session.Env, launch *session.Launch, pins *session.Pins, launchDigest string, pio session.IO) (*session.Result, error) {
	h, err := session.Prepare(env, launch, pins, pio)
	if h == nil {
		return nil, err
	}
	fault := func(point string) {
		if env.Fault != nil {
			env.Fault(point)
		}
	}
	var who session.Identity
	if err == nil {
		who, err = h.Spawn()
	}
	if err == nil {
		fault("spawned")
		// Made durable while the shim is placed in the v1 hierarchies
		// (Spawn started that; Placed waits for it).
		if err = d.recordRuntime(id, who, launchDigest); err != nil {
			err = fmt.Errorf("record the session's identity: %w", err)
		}
	}
	if err == nil {
		fault("recorded")
		err = h.Placed()
	}
	if err == nil {
		fault("placed")
		err = h.Release()
	}
	if err == nil {
		fault("released")
		err = h.Wait(ctx)
	}
	return h.Close(err)
}

// recordRuntime makes the session's identity durable and moves it to
// running: one store record, one fdatasync.
func (d *Daemon) recordRuntime(id string, who session.Identity, launchDigest string) error {
	_, err := d.store.Run(id, store.Runtime{BootID: who.BootID, PID: who.PID,
		StartTicks: who.StartTicks, CgroupInode: who.CgroupInode, LaunchDigest: launchDigest})
	return err
}

// helperLostPrefix begins the store reason of a session during which a
// helper it depended on died: "helper_lost:" and the helper's name.
const helperLostPrefix = "helper_lost:"

// lostHelper names the first helper the session lost, from the result
// (helpers lost while the program ran) or the error (a helper found gone
// by a request), or "".
func lostHelper(res *session.Result, runErr error) string {
	if res != nil && len(res.HelpersLost) > 0 {
		return res.HelpersLost[0]
	}
	var he *session.HelperLostError
	if errors.As(runErr, &he) {
		return he.Helper
	}
	return ""
}

// endSession seals the receipt and records the terminal state.
func (d *Daemon) endSession(l *live, sess store.Session, launch *session.Launch, res *session.Result, runErr error) {
	log := d.log.WithField("session_id", sess.ID)
	now := time.Now()
	end := End{SessionID: sess.ID, Termination: "failed", State: string(store.Failed), Status: ExitFailed}
	to, reason := store.Failed, "failed"
	if res != nil {
		end.Termination, end.ExitCode, end.Signal, end.Status = res.Termination, res.ExitCode, res.Signal, res.Status()
		end.State = string(store.Exited)
		to, reason = store.Exited, res.Termination
	}
	if runErr != nil {
		log.WithFields(logrus.Fields{"event": "session_error", "error": oneLine(d.redact(runErr.Error()))}).Warn("the session engine reported an error")
		switch {
		case res == nil && errors.Is(runErr, discovery.ErrChanged):
			// The pinned executable was not the file found at resolution
			// when the program was about to be released.
			reason = "runtime_changed"
		case res == nil && errors.Is(runErr, ownpaths.ErrOwn):
			// A host tree of the launch turned out, by identity, to be
			// or hold Glove's own state (a name swapped since start-up).
			reason = "own_state"
		case res == nil && errors.Is(runErr, ErrExposed):
			// A host tree of the launch turned out, by identity, to be
			// the inherited stream's upstream socket, its directory or
			// an ancestor of it (stream.go: exposedBy).
			reason = "stream_exposed"
		case res == nil && errors.Is(runErr, library.ErrDigest):
			// A verified bundle's bytes changed before they were copied.
			reason = "library_bundle_rejected"
		case res == nil && errors.Is(runErr, materialize.ErrQuota):
			// A copy did not fit its grant's quota: the disk limit ended
			// the launch before the program existed (docs/sessions.md).
			reason, end.Termination = session.LimitDisk, session.LimitDisk
		}
	}
	if h := lostHelper(res, runErr); h != "" {
		// The termination (End, the receipt) still says what ended the
		// program; the store's reason says the session ran without a
		// helper it depended on, which an operator must look into.
		reason = helperLostPrefix + h
		var all []string
		if res != nil {
			all = res.HelpersLost
		}
		log.WithFields(logrus.Fields{"event": "helper_lost", "helper": h, "helpers_lost": all, "termination": end.Termination}).Warn("a helper of the session died during it")
	}
	if res != nil && len(res.ReplacedCalls) > 0 {
		// What a fresh helper did in the lost one's place: an operator
		// reading helper_lost sees that the clean-up still happened.
		log.WithFields(logrus.Fields{"event": "helper_replaced", "calls": res.ReplacedCalls}).Info("a fresh helper finished the session's clean-up")
	}
	if res != nil && len(res.UsageMissing) > 0 {
		log.WithFields(logrus.Fields{"event": "usage_missing", "fields": res.UsageMissing}).Warn("usage figures of the session could not be read")
	}
	if errors.Is(runErr, session.ErrKill) {
		log.WithField("event", "kill_path_failed").Warn("a way of killing the session failed")
	}
	if res != nil {
		for _, c := range res.Credentials {
			// The handle, the lease and its versions: never the
			// credential, never its source's path.
			f := logrus.Fields{"event": "credential_lease", "handle": c.Handle, "lease_id": c.LeaseID, "version": c.Version, "rotated": c.Rotated}
			if c.Kept != "" {
				log.WithFields(f).WithField("kept", c.Kept).Warn("the session's credential copy was not taken back; the lease keeps its version")
			} else {
				log.WithFields(f).Info("credential lease after the session")
			}
		}
		for _, r := range res.Retained {
			// The image's name only: never a raw host path in the log.
			log.WithFields(logrus.Fields{"event": "retained", "target": r.Target, "image": filepath.Base(r.Image)}).Info("staged change kept")
		}
	}
	if err := d.finalize(sess, now, launch, res, end.Termination); err != nil {
		log.WithField("event", "receipt").Error("terminal receipt not sealed")
		end.State, to, reason = string(store.Failed), store.Failed, "receipt"
	}
	if to == store.Exited {
		if _, err := d.store.Transition(sess.ID, store.Stopping, ""); err != nil {
			log.Error("session store failure")
		}
	}
	if _, err := d.store.Transition(sess.ID, to, reason); err != nil {
		log.Error("session store failure")
	}
	log.WithFields(logrus.Fields{"event": "ended", "termination": end.Termination, "state": end.State}).Info("session ended")
	l.finish(end)
}

// finalize durably appends the session's terminal receipt.
// finalize seals the terminal receipt: the result's termination, or, for
// a session that never ran, failed (the termination given).
func (d *Daemon) finalize(sess store.Session, now time.Time, launch *session.Launch, res *session.Result, failed string) error {
	// The launch the receipt attests: the digest recorded when the
	// program was released (the caller's copy of the session predates
	// it); without one, the launch's projections are not spelled out.
	cur, err := d.store.Get(sess.ID)
	released := err == nil && cur.Runtime != nil
	if !released {
		launch = nil
	}
	b := session.Outcome(launch, res)
	b.SessionID, b.ControllerPlanDigest, b.PlanContentDigest = sess.ID, sess.ControllerPlanDigest, sess.PlanContentDigest
	b.PolicyRevision = d.pol.Revision
	if released {
		b.LaunchDigest = cur.Runtime.LaunchDigest
	}
	if res == nil {
		b.Termination, b.StartedAtMS, b.EndedAtMS = failed, now.UnixMilli(), now.UnixMilli()
	}
	_, err = d.receipts.Finalize(b)
	return err
}

// liveSession returns a running session of this gloved.
func (d *Daemon) liveSession(k *call, id string) (*live, *Error) {
	sess, e := d.lookup(k, id)
	if e != nil {
		return nil, e
	}
	d.mu.Lock()
	l := d.sessions[sess.ID]
	d.mu.Unlock()
	if l == nil {
		return nil, errorf(CodeConflict, "session is %s and not running in this gloved", sess.State)
	}
	return l, nil
}

type attachParams struct {
	SessionID string  `json:"session_id"`
	From      *uint64 `json:"from,omitempty"`
}

func (d *Daemon) attach(c *conn, k *call, ps *attachParams) (any, *Error) {
	l, e := d.liveSession(k, ps.SessionID)
	if e != nil {
		return nil, e
	}
	l.mu.Lock()
	dup := l.watchers[c] != nil
	l.mu.Unlock()
	if dup {
		return nil, errorf(CodeConflict, "already attached")
	}
	k.after = func() { l.watch(c, ps.From) }
	return map[string]any{"attached": true}, nil
}

type stdinParams struct {
	SessionID string `json:"session_id"`
	Data      []byte `json:"data"`
}

func (d *Daemon) writeStdin(_ *conn, k *call, ps *stdinParams) (any, *Error) {
	l, e := d.liveSession(k, ps.SessionID)
	if e != nil {
		return nil, e
	}
	switch err := l.input.add(ps.Data); {
	case errors.Is(err, errInputFull):
		return nil, errorf(CodeUnavailable, "more than %d bytes of input pending", MaxPendingInput)
	case err != nil:
		return nil, errorf(CodeConflict, "session has ended")
	}
	return map[string]any{"written": len(ps.Data)}, nil
}

type resizeParams struct {
	SessionID string `json:"session_id"`
	Rows      uint16 `json:"rows"`
	Cols      uint16 `json:"cols"`
}

func (d *Daemon) resize(_ *conn, k *call, ps *resizeParams) (any, *Error) {
	if ps.Rows == 0 || ps.Cols == 0 {
		return nil, errorf(CodeInvalidParams, "rows and cols must be 1..65535")
	}
	l, e := d.liveSession(k, ps.SessionID)
	if e != nil {
		return nil, e
	}
	if e := enqueue(l, l.resizes, unix.Winsize{Row: ps.Rows, Col: ps.Cols}, "resizes"); e != nil {
		return nil, e
	}
	return map[string]any{"resized": true}, nil
}

// enqueue hands v to a running session's engine through ch, without ever
// blocking the connection: a full queue is the peer's problem to retry.
func enqueue[T any](l *live, ch chan<- T, v T, what string) *Error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.end != nil {
		return errorf(CodeConflict, "session has ended")
	}
	select {
	case ch <- v:
		return nil
	default:
		return errorf(CodeUnavailable, "too many pending %s", what)
	}
}

type signalParams struct {
	SessionID string `json:"session_id"`
	Signal    string `json:"signal"`
}

func (d *Daemon) signal(_ *conn, k *call, ps *signalParams) (any, *Error) {
	sig, ok := signals[ps.Signal]
	if !ok {
		return nil, errorf(CodeInvalidParams, "signal must be one of INT, TERM, HUP, QUIT, USR1, USR2, WINCH")
	}
	l, e := d.liveSession(k, ps.SessionID)
	if e != nil {
		return nil, e
	}
	if e := enqueue(l, l.signals, sig, "signals"); e != nil {
		return nil, e
	}
	return map[string]any{"signaled": true}, nil
}

func (d *Daemon) detach(c *conn, k *call, ps *sessionParams) (any, *Error) {
	l, e := d.liveSession(k, ps.SessionID)
	if e != nil {
		return nil, e
	}
	ok := l.detach(c)
	return map[string]any{"detached": ok}, nil
}

type stopParams struct {
	SessionID string  `json:"session_id"`
	GraceMs   *uint64 `json:"grace_ms,omitempty"`
}

func (d *Daemon) stopSession(_ *conn, k *call, ps *stopParams) (any, *Error) {
	grace := uint64(DefaultGraceMs)
	if ps.GraceMs != nil {
		grace = *ps.GraceMs
	}
	if grace > MaxGraceMs {
		return nil, errorf(CodeInvalidParams, "grace_ms must be 0..%d", MaxGraceMs)
	}
	l, e := d.liveSession(k, ps.SessionID)
	if e != nil {
		return nil, e
	}
	// A session still starting (its store state still preparing: this
	// gloved runs it, so it is past its claim) becomes running as soon
	// as its program is released (or fails): wait for that, boundedly,
	// then stop it.
	for deadline := time.Now().Add(startWait); ; {
		sess, err := d.store.Get(l.id)
		if err != nil || sess.State != store.Preparing || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := d.store.Transition(l.id, store.Stopping, "stop"); err != nil {
		return nil, errorf(CodeConflict, "session is not running")
	}
	if !l.stop(time.Duration(grace) * time.Millisecond) {
		return nil, errorf(CodeConflict, "session has ended")
	}
	return map[string]any{"session_id": l.id, "state": store.Stopping}, nil
}

func (d *Daemon) cleanupSession(_ *conn, k *call, ps *sessionParams) (any, *Error) {
	sess, e := d.lookup(k, ps.SessionID)
	if e != nil {
		return nil, e
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.sessions[sess.ID]
	if sess.State == store.Created && !d.claims[sess.ID] {
		// A session never started is given up: it ends as failed
		// (cancelled), so that a controller can release what it holds
		// in the store (the room reserved for its lifecycle) without
		// running it. A start that races this finds it no longer
		// created; one already claimed makes this a conflict below.
		cur, err := d.store.Transition(sess.ID, store.Failed, "cancelled")
		switch {
		case errors.Is(err, store.ErrTransition):
			return nil, errorf(CodeConflict, "session is being started")
		case err != nil:
			return nil, d.storeError(sess.ID, "cancel", err)
		}
		sess = cur
	}
	if !sess.State.Terminal() || (l != nil && l.ended() == nil) {
		return nil, errorf(CodeConflict, "session has not ended")
	}
	// The engine removed its cgroups, mounts and bundle when the session
	// ended: what is left is the store's record of it, which from now on
	// is kept only for the idempotency retention window (compaction
	// lets it go after that), and this process's.
	if _, err := d.store.Cleanup(sess.ID); err != nil {
		return nil, d.storeError(sess.ID, "cleanup", err)
	}
	delete(d.sessions, sess.ID)
	return map[string]any{"session_id": sess.ID, "cleaned": true}, nil
}

// resolveClass names why a plan could not be turned into a launch, as a
// store reason and for the controller: a class, never a host path.
func resolveClass(err error) string {
	switch {
	case errors.Is(err, discovery.ErrNotInstalled):
		return "runtime_not_installed"
	case errors.Is(err, discovery.ErrChanged):
		return "runtime_changed"
	case errors.Is(err, library.ErrDigest), errors.Is(err, library.ErrMode), errors.Is(err, library.ErrLinks),
		errors.Is(err, library.ErrSize), errors.Is(err, library.ErrKind), errors.Is(err, library.ErrFormat),
		errors.Is(err, library.ErrOwner), errors.Is(err, library.ErrType), errors.Is(err, os.ErrNotExist):
		return "library_bundle_rejected"
	case errors.Is(err, session.ErrUnsupported):
		return "unsupported"
	case errors.Is(err, lease.ErrBusy):
		// Another session holds the handle's lease: a retry later may
		// start.
		return "credential_busy"
	case errors.Is(err, session.ErrCredential):
		return "credential_unavailable"
	}
	return "unlaunchable"
}
