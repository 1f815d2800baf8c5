// SPDX-License-Identifier: Apache-2.0

package session

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/wirecall"
	"github.com/glove-sandbox/glove/supervisor/engine/helperproc"
	"golang.org/x/sys/unix"
)

// Helper names, as the helpers answer Hello and as a lost helper is
// reported (Result.HelpersLost).
const (
	HelperCgroup   = "glove-cgroup"
	HelperMounter  = "glove-mounter"
	HelperLoopext4 = "glove-loopext4"
)

// Bounds on the helper calls of a session's end. A helper that is alive
// answers well within them (glove-cgroup's own kill and remove wait at
// most 5 s for a session to empty); one that does not is treated as lost.
// Threat: a hung helper holding the session's end, and with it every
// limit, hostage.
const (
	killCallWait   = 8 * time.Second
	statCallWait   = 5 * time.Second
	removeCallWait = 8 * time.Second
	freezeCallWait = 30 * time.Second
)

// HelperLostError is returned (wrapped) when a helper the session needed
// died or stopped answering: the request failed at the connection, not
// with the helper's own refusal.
type HelperLostError struct {
	Helper string // its name, e.g. HelperCgroup
	Op     string // the request that found it gone
	Err    error
}

func (e *HelperLostError) Error() string {
	return fmt.Sprintf("%s lost during %s: %v", e.Helper, e.Op, e.Err)
}

func (e *HelperLostError) Unwrap() error { return e.Err }

// ErrKill is wrapped by the failure of each way of killing a session that
// failed (the session may still have been killed by another).
var ErrKill = errors.New("kill the session")

// helper is one helper as a session uses it. Calls are serialized: a
// wirecall.Client has one request outstanding at a time, and a session's
// kill can come from a timer while its main path asks for usage. A
// helper found gone is never asked again (its connection may hold a late
// reply); the clean-up calls of the session's end then go to a fresh
// helper of the same name, started through Env.StartHelper, so that a
// dead helper leaves no cgroup or unfrozen image behind.
type helper struct {
	name  string
	start func(string) (*helperproc.Proc, error)

	mu   sync.Mutex
	proc *helperproc.Proc // the session's, from Env (nil: not used)
	lost error            // why proc is considered gone (a *HelperLostError)
	// retired: the session is done with proc, which was told to exit
	// (retire); it is asked nothing more and its exit is no loss.
	retired bool
	fresh   *helperproc.Proc // started for clean-up after proc was lost
	// served lists the clean-up requests the fresh helper answered, as
	// "name:op" (Result.ReplacedCalls).
	served []string
}

func newHelper(name string, p *helperproc.Proc, start func(string) (*helperproc.Proc, error)) *helper {
	return &helper{name: name, proc: p, start: start}
}

// callOpts: timeout bounds the call (0: none); replace sends it to a
// fresh helper when the session's is lost (clean-up calls only: a start
// does not continue on a replacement).
type callOpts struct {
	timeout time.Duration
	replace bool
}

// request sends one request of route r through h and returns the reply
// and its descriptors (see helper.call).
func request[Q, R any](h *helper, op string, r wire.Route[Q, R], req *Q, o callOpts, fds ...int) (*R, []*os.File, error) {
	var reply *R
	files, err := h.call(op, o, func(c *wirecall.Client) ([]*os.File, error) {
		rep, files, err := wirecall.Call(r, c, req, fds)
		reply = rep
		return files, err
	})
	return reply, files, err
}

// call runs one request (do, on a helper's client) and returns the
// reply's descriptors: on the session's helper, or, when that one is
// lost and o.replace is set, on a fresh one.
func (h *helper) call(op string, o callOpts, do func(*wirecall.Client) ([]*os.File, error)) ([]*os.File, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.proc == nil {
		return nil, fmt.Errorf("%s %s: the session has no %s", h.name, op, h.name)
	}
	if h.lost == nil && !h.retired {
		files, err := callOne(h.proc, o.timeout, do)
		if err == nil || !connectionFailed(err) {
			return files, err
		}
		h.markLost(op, err)
	}
	if !o.replace || h.start == nil {
		if h.lost == nil {
			return nil, fmt.Errorf("%s %s: the session's %s was retired after its work", h.name, op, h.name)
		}
		return nil, h.lost
	}
	if h.fresh == nil {
		p, err := h.start(h.name)
		if err != nil {
			return nil, errors.Join(h.lost, fmt.Errorf("start a fresh %s for %s: %w", h.name, op, err))
		}
		h.fresh = p
	}
	files, err := callOne(h.fresh, o.timeout, do)
	if err != nil {
		return nil, fmt.Errorf("fresh %s: %s: %w", h.name, op, err)
	}
	if h.lost != nil {
		// A replacement for a lost helper; a retired one's clean-up
		// going to a fresh helper is the plan, not a loss.
		h.served = append(h.served, h.name+":"+op)
	}
	return files, nil
}

// markLost records the loss and makes sure the process is gone: a helper
// that stopped answering is killed, so that whoever reaps it (gloved's
// Close) does not wait on it forever (h.mu held).
func (h *helper) markLost(op string, err error) {
	h.lost = &HelperLostError{Helper: h.name, Op: op, Err: err}
	if kerr := h.proc.Cmd.Process.Kill(); kerr != nil && !errors.Is(kerr, os.ErrProcessDone) {
		h.lost = errors.Join(h.lost, fmt.Errorf("kill the unanswering %s: %w", h.name, kerr))
	}
}

// retire tells the session's helper to exit, its work for the session
// being done (glove-mounter once the session's mounts are made): a
// running session holds no helper process it will not ask again. The
// connection's EOF makes the helper exit; it is reaped here, off the
// caller's path, and whoever owns it (gloved, glove run) gets the exit
// status from its own Close at the session's end, as before.
//
// later says the session will still need the helper's kind at its end
// (glove-cgroup: the usage and the removal): then it retires only when a
// fresh helper can be started for that (h.start), and the end's
// clean-up calls go to one.
func (h *helper) retire(later bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.proc == nil || h.lost != nil || h.retired || later && h.start == nil {
		return
	}
	h.retired = true
	go func(p *helperproc.Proc) {
		// Not dropped: Proc reaps once and keeps this Close's result,
		// which the helper's owner gets from its own Close at the
		// session's end (gloved's run logs a non-zero exit as
		// helper_exit; glove run returns it). Reporting it here too
		// would report one exit twice.
		_ = p.Close() // the owner's own Close reports this exit once; reporting it here would be twice
	}(h.proc)
}

// checkAlive marks the helper lost if its process has exited, although
// no request of the session's found it gone (a helper the session no
// longer calls and did not retire). The helper is the
// supervisor's unreaped child, so its pid still names it: the pidfd
// opened here is that process's.
func (h *helper) checkAlive() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.proc == nil || h.lost != nil || h.retired {
		return nil
	}
	fd, err := unix.PidfdOpen(h.proc.Pid(), 0)
	if err != nil {
		return fmt.Errorf("pidfd_open %s: %w", h.name, err)
	}
	defer unix.Close(fd)
	// A pidfd polls readable once its process has exited.
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, 0)
	if err != nil {
		return fmt.Errorf("poll the pidfd of %s: %w", h.name, err)
	}
	if n > 0 && pfd[0].Revents&unix.POLLIN != 0 {
		h.lost = &HelperLostError{Helper: h.name, Op: "the session", Err: errors.New("the helper exited")}
	}
	return nil
}

// replaced lists the requests a fresh helper answered for the session.
func (h *helper) replaced() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.served)
}

// lostErr is why the session's helper is considered gone, or nil.
func (h *helper) lostErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost
}

// close ends the fresh helper, if one was started; the session's own
// helper belongs to the caller of Run.
func (h *helper) close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fresh == nil {
		return nil
	}
	err := h.fresh.Close()
	h.fresh = nil
	if err != nil {
		return fmt.Errorf("fresh %s: %w", h.name, err)
	}
	return nil
}

// callOne is one request on p, bounded by timeout when it is not 0.
func callOne(p *helperproc.Proc, timeout time.Duration, do func(*wirecall.Client) ([]*os.File, error)) ([]*os.File, error) {
	if timeout > 0 {
		if err := p.Conn().SetDeadline(time.Now().Add(timeout)); err != nil {
			return nil, err
		}
	}
	files, err := do(p.Client)
	if timeout > 0 {
		if derr := p.Conn().SetDeadline(time.Time{}); derr != nil {
			closeAll(files)
			return nil, errors.Join(err, derr)
		}
	}
	return files, err
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// connectionFailed tells a helper that is gone (the connection failed:
// EPIPE, EOF, a reset, a timeout, a protocol error after which the helper
// exits) from one that answered with a refusal, which it would give again
// and which says nothing about its health. A request that was never sent
// because it was invalid is neither.
func connectionFailed(err error) bool {
	var we *wire.Error
	return err != nil && !errors.As(err, &we) && !errors.Is(err, wire.ErrInvalidMessage)
}
