// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"

	"github.com/glove-sandbox/glove/supervisor/engine/helperproc"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// pooledHelpers are the helpers every session needs, which gloved starts
// ahead of demand. glove-loopext4 is not among them: only sessions with
// a retained copy use it, and they start theirs on demand.
var pooledHelpers = []string{"glove-mounter", "glove-cgroup"}

// helperPool holds, for each pooled helper name, at most one helper
// started ahead of demand: started, Hello-checked against its capability
// table row (helperproc.StartReady), and given to exactly one session,
// which closes it at its end like any helper it started itself. A pooled
// helper has served no request before a session takes it, and no helper
// ever goes back to the pool: the isolation of sessions from one another
// (each session's requests on helper processes of its own) is the same as
// with helpers started on demand.
//
// The pool is refilled only while no session holds helpers (gloved is
// idle between sessions): the next session's helpers are started in that
// idle time rather than on its start path, and while sessions run,
// gloved's helper processes are exactly theirs (an operator or a test
// looking at gloved's children finds one glove-cgroup per running
// session, and a glove-mounter only for a session still starting: the
// session retires it once its mounts are made). A session that finds the pool empty starts its helpers
// on demand; one that finds a pooled start under way waits for it rather
// than starting a second helper of that name.
//
// An idle helper that dies (killed, or out of memory) is reaped at once
// and its slot stays empty until the next refill: no dead helper is
// handed to a session and nothing restarts in a loop. Shutdown closes the
// idle helpers and waits for the starts under way.
type helperPool struct {
	start func(name string) (*helperproc.Proc, error)
	log   *logrus.Logger

	mu       sync.Mutex
	idle     map[string]*idleHelper
	starting map[string]chan struct{} // closed when that start ends
	holders  int                      // sessions holding helpers
	closed   bool
	wg       sync.WaitGroup // starts under way and watchers
}

// idleHelper is a pooled helper and the pidfd its watcher waits on.
type idleHelper struct {
	p     *helperproc.Proc
	pidfd *os.File // nil: not watched (pidfd_open failed)
}

func newHelperPool(start func(string) (*helperproc.Proc, error), log *logrus.Logger) *helperPool {
	return &helperPool{start: start, log: log, idle: map[string]*idleHelper{}, starting: map[string]chan struct{}{}}
}

// hold marks a session as holding helpers: no refill until it lets go.
func (hp *helperPool) hold() {
	hp.mu.Lock()
	hp.holders++
	hp.mu.Unlock()
}

// letGo ends a hold (the session's helpers are closed, or it never got
// them); the last one refills the pool.
func (hp *helperPool) letGo() {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	hp.holders--
	if hp.holders == 0 {
		hp.refill()
	}
}

// fill starts filling the pool (gloved is about to serve).
func (hp *helperPool) fill() {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	if hp.holders == 0 {
		hp.refill()
	}
}

// refill starts, in the background, each pooled helper that is neither
// idle nor being started (hp.mu held).
func (hp *helperPool) refill() {
	if hp.closed {
		return
	}
	for _, name := range pooledHelpers {
		if hp.idle[name] != nil || hp.starting[name] != nil {
			continue
		}
		done := make(chan struct{})
		hp.starting[name] = done
		hp.wg.Add(1)
		go hp.startOne(name, done)
	}
}

func (hp *helperPool) startOne(name string, done chan struct{}) {
	defer hp.wg.Done()
	p, err := hp.start(name)
	hp.mu.Lock()
	defer hp.mu.Unlock()
	delete(hp.starting, name)
	defer close(done)
	if err != nil {
		// The session that needs it starts one on demand and fails
		// with its own error if that fails too.
		hp.log.WithFields(logrus.Fields{"event": "helper_pool", "helper": name, "error": oneLine(err.Error())}).Warn("starting a helper ahead of demand failed")
		return
	}
	if hp.closed {
		hp.closeHelper(p, "shutdown")
		return
	}
	ih := &idleHelper{p: p}
	fd, err := unix.PidfdOpen(p.Pid(), unix.PIDFD_NONBLOCK)
	if err != nil {
		// Unwatched, it is still checked when taken (alive).
		hp.log.WithFields(logrus.Fields{"event": "helper_pool", "helper": name, "error": err.Error()}).Warn("pidfd_open of a pooled helper failed")
	} else {
		ih.pidfd = os.NewFile(uintptr(fd), name+"-pidfd")
		hp.wg.Add(1)
		go hp.watch(name, ih)
	}
	hp.idle[name] = ih
	// Which helper processes are idle (no session's), by pid: an
	// operator listing gloved's children can tell them from the
	// sessions' helpers.
	hp.log.WithFields(logrus.Fields{"event": "helper_pool", "helper": name, "pid": p.Pid(), "state": "idle"}).Info("helper started ahead of demand")
}

// watch waits, without a thread of its own (the pidfd is in the
// runtime's poller), until the idle helper exits or is taken (its pidfd
// closed). One that exits while idle is reaped and its slot emptied.
func (hp *helperPool) watch(name string, ih *idleHelper) {
	defer hp.wg.Done()
	rc, err := ih.pidfd.SyscallConn()
	if err == nil {
		err = rc.Read(func(fd uintptr) bool { return exited(int(fd)) })
	}
	if err != nil {
		return // taken (the pidfd closed) or not pollable
	}
	hp.mu.Lock()
	defer hp.mu.Unlock()
	if hp.idle[name] != ih {
		return // taken meanwhile
	}
	delete(hp.idle, name)
	hp.closeHelper(ih.p, "died idle")
	hp.closePidfd(ih)
}

// exited reports whether the pidfd's process has exited (POLLIN).
func exited(pidfd int) bool {
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents != 0
}

// take returns a helper for one session: the pooled one, the one being
// started for the pool (waited for), or one started now.
func (hp *helperPool) take(name string) (*helperproc.Proc, error) {
	hp.mu.Lock()
	for {
		if ih := hp.idle[name]; ih != nil {
			delete(hp.idle, name)
			// Stops the watcher (Close waits for it to let go of the
			// descriptor).
			hp.closePidfd(ih)
			// Asked by pid whether watched or not: an unwatched
			// helper (pidfd_open failed) that died idle must not
			// reach a session either.
			if !ih.dead() {
				hp.mu.Unlock()
				return ih.p, nil
			}
			hp.closeHelper(ih.p, "died idle")
			continue
		}
		done := hp.starting[name]
		if done == nil {
			break
		}
		hp.mu.Unlock()
		<-done
		hp.mu.Lock()
	}
	hp.mu.Unlock()
	return hp.start(name)
}

// dead reports whether a taken helper exited before it was taken (its
// pidfd, closed by closePidfd, is not used: the process is asked by pid,
// which cannot have been reused, as gloved has not reaped it).
func (ih *idleHelper) dead() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, ih.p.Pid(), &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err != nil || info.Signo != 0
}

// closePidfd stops an idle helper's watcher (hp.mu held; the watcher
// takes hp.mu only after its read returns, so the close cannot wait on
// it).
func (hp *helperPool) closePidfd(ih *idleHelper) {
	if ih.pidfd == nil {
		return
	}
	// A pidfd only names the process: its close loses nothing.
	_ = ih.pidfd.Close()
}

// closeHelper ends a pooled helper no session used: Close reaps it after
// its socket's EOF; an exit status other than 0 is logged (it held no
// session's state).
func (hp *helperPool) closeHelper(p *helperproc.Proc, why string) {
	if err := p.Close(); err != nil {
		f := logrus.Fields{"event": "helper_pool", "helper": p.Name, "why": why, "status": err.Error()}
		if !errors.As(err, new(*exec.ExitError)) {
			f["status"] = fmt.Sprintf("reap: %v", err)
		}
		hp.log.WithFields(f).Warn("a pooled helper did not exit cleanly")
	}
}

// close ends the pool: the idle helpers are closed and the starts under
// way waited for (each closes its helper, the pool being closed).
func (hp *helperPool) close() {
	hp.mu.Lock()
	hp.closed = true
	for name, ih := range hp.idle {
		delete(hp.idle, name)
		hp.closePidfd(ih)
		hp.closeHelper(ih.p, "shutdown")
	}
	hp.mu.Unlock()
	hp.wg.Wait()
}
