// SPDX-License-Identifier: Apache-2.0

package guest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Files the agent reads and writes.
const (
	PolicyFile = "/etc/glove/session-policy.json"
	KeyFile    = "/etc/glove/receipt.key"
	// DataDir holds the lane's own files on the guest: the aliases'
	// host trees, a copy of the agent the glove user can execute, the
	// receipts file for glove receipt verify. Removed before purge.
	DataDir = "/var/lib/glove-lane"
	// UpstreamDir holds the inherited-stream upstream's socket.
	UpstreamDir    = "/run/glove-lane-upstream"
	UpstreamSocket = UpstreamDir + "/upstream.sock"
	StreamAlias    = "lane"
)

// IntegrationLock is testenv's host-wide lock (development mode only).
const IntegrationLock = "/var/lib/glove-testenv/.lock"

// The checks, in order. Every run reports each of them.
var AllChecks = []string{
	"kernel-tests", "install", "operator-files", "unit-start", "cgroup-leaf", "status", "session-basic",
	"limit-memory", "limit-pids", "limit-cpu", "limit-wall", "limit-disk", "limit-disk-copy", "limit-output",
	"retained", "stream", "glove-run", "reboot-prep", "recovery", "purge",
}

// Config is how the agent runs.
type Config struct {
	Lane           string        // the lane disk (/lane)
	NoSystemd      bool          // development: start gloved as a child, do not reboot or power off
	Deadline       time.Duration // global, from the first boot
	SessionTimeout time.Duration // one session from start to end
	CheckTimeout   time.Duration // one check
	RebootMode     string        // "hard" or "clean"
	Only           []string      // development: run only these checks (the others are reported skipped)
	Out            io.Writer     // progress log
}

// Agent is one run of the lane agent.
type Agent struct {
	cfg Config
	st  *State
	svc Service
	lp  *LanePolicy

	mu       sync.Mutex
	finished bool
	current  string

	self     string // the agent's copy the glove user may execute
	upstream *exec.Cmd
	upDone   chan struct{}
	upOut    *capBuffer
}

func (a *Agent) logf(format string, args ...any) {
	fmt.Fprintf(a.cfg.Out, "glove-lane-guest %s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
}

func (a *Agent) statePath() string   { return filepath.Join(a.cfg.Lane, "state.json") }
func (a *Agent) resultPath() string  { return filepath.Join(a.cfg.Lane, "result") }
func (a *Agent) evidenceDir() string { return filepath.Join(a.cfg.Lane, "evidence") }
func (a *Agent) evidence(n string) string {
	return filepath.Join(a.evidenceDir(), n+".txt")
}

// Cred is the glove user's credentials (its group as the only group).
func (a *Agent) Cred() *syscall.Credential {
	return &syscall.Credential{Uid: uint32(a.st.GloveUID), Gid: uint32(a.st.GloveGID), Groups: []uint32{uint32(a.st.GloveGID)}}
}

// Dial connects to gloved as the glove user.
func (a *Agent) Dial(ev *Evidence) (*Client, error) {
	if a.self == "" {
		return nil, errors.New("no copy of the agent for the glove user (operator-files did not run)")
	}
	conn, err := DialAs(a.self, a.Cred(), SocketPath, 30*time.Second)
	if err != nil {
		return nil, err
	}
	c := NewClient(conn)
	if ev != nil {
		c.Trace = traceInto(ev, "")
	}
	return c, nil
}

func (a *Agent) noteSession(id, template string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.st.Sessions == nil {
		a.st.Sessions = map[string]string{}
	}
	a.st.Sessions[id] = template
}

// saveState writes the state file (under a.mu).
func (a *Agent) saveState() {
	if err := a.st.Save(a.statePath()); err != nil {
		a.logf("cannot save the state: %v", err)
	}
}

// record adds an outcome, writes the evidence and the state.
func (a *Agent) record(o Outcome, ev *Evidence) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.finished {
		return
	}
	a.st.Results = append(a.st.Results, o)
	head := o.Line() + "\n\n"
	if ev != nil {
		if err := os.WriteFile(a.evidence(o.Name), append([]byte(head), ev.Bytes()...), 0o644); err != nil {
			a.logf("cannot write evidence: %v", err)
		}
	}
	a.saveState()
	a.logf("== %s", o.Line())
}

// ok reports whether the named check passed.
func (a *Agent) ok(name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	o, found := a.st.Outcome(name)
	return found && o.OK
}

// Check runs one named check unless a check it needs did not pass.
func (a *Agent) Check(name string, needs []string, fn func(ev *Evidence) error) bool {
	a.mu.Lock()
	if a.finished {
		a.mu.Unlock()
		return false
	}
	a.current = name
	a.mu.Unlock()
	if len(a.cfg.Only) > 0 && !slices.Contains(a.cfg.Only, name) {
		a.record(Outcome{Name: name, Reason: "skipped, not selected (--only)"}, nil)
		return false
	}
	for _, n := range needs {
		if !a.ok(n) {
			a.record(Outcome{Name: name, Reason: "skipped, needs " + n}, nil)
			return false
		}
	}
	a.logf("-- %s", name)
	ev := &Evidence{}
	ev.Printf("check %s, started %s (boot %d)", name, time.Now().UTC().Format(time.RFC3339), a.st.Boots)
	errc := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				errc <- fmt.Errorf("panic: %v\n%s", r, debug.Stack())
			}
		}()
		errc <- fn(ev)
	}()
	var err error
	select {
	case err = <-errc:
	case <-time.After(a.cfg.CheckTimeout):
		err = fmt.Errorf("timed out after %v", a.cfg.CheckTimeout)
	}
	o := Outcome{Name: name, OK: err == nil}
	if err != nil {
		o.Reason = err.Error()
		ev.Printf("FAIL: %s", o.Reason)
	}
	a.record(o, ev)
	return o.OK
}

// finish writes the result (every check not reported is reported as
// skipped with why), syncs, and powers off (not with --no-systemd).
func (a *Agent) finish(why string) {
	a.mu.Lock()
	if a.finished {
		a.mu.Unlock()
		return
	}
	if why != "" {
		a.st.Results = append(a.st.Results, Outcome{Name: "agent", Reason: why})
	}
	reported := map[string]bool{}
	for _, o := range a.st.Results {
		reported[o.Name] = true
	}
	for _, n := range AllChecks {
		if !reported[n] {
			r := "skipped, not reached"
			if why != "" {
				r = "skipped: " + why
			}
			a.st.Results = append(a.st.Results, Outcome{Name: n, Reason: r})
		}
	}
	a.st.Phase = PhaseDone
	a.saveState()
	a.finished = true
	res := FormatResult(a.st.Results)
	a.mu.Unlock()
	if err := WriteFileSync(a.resultPath(), res, 0o644); err != nil {
		a.logf("cannot write the result: %v", err)
	}
	a.logf("result:\n%s", res)
	syscall.Sync()
	a.stopUpstream()
	if a.cfg.NoSystemd {
		return
	}
	a.logf("powering off")
	Run(nil, RunOpts{Timeout: 60 * time.Second}, "systemctl", "poweroff")
	time.Sleep(2 * time.Minute)
	Run(nil, RunOpts{Timeout: 60 * time.Second}, "systemctl", "poweroff", "--force", "--force")
}

// Main runs the agent for this boot and returns the process's exit code.
func Main(cfg Config) int {
	a := &Agent{cfg: cfg}
	if err := os.MkdirAll(a.evidenceDir(), 0o755); err != nil {
		fmt.Fprintf(cfg.Out, "glove-lane-guest: %v\n", err)
		return 1
	}
	if _, err := os.Stat(a.resultPath()); err == nil {
		a.logf("%s exists: the lane already finished; powering off", a.resultPath())
		if !cfg.NoSystemd {
			Run(nil, RunOpts{Timeout: 60 * time.Second}, "systemctl", "poweroff")
		}
		return 0
	}
	st, err := LoadState(a.statePath())
	if err != nil {
		a.st = &State{Version: StateVersion, Phase: PhaseFirst, StartedAt: time.Now()}
		a.finish("cannot read the state file: " + err.Error())
		return 1
	}
	if st == nil {
		var tag [3]byte
		_, _ = rand.Read(tag[:])
		st = &State{Version: StateVersion, Phase: PhaseFirst, StartedAt: time.Now(), RunTag: hex.EncodeToString(tag[:])}
	}
	st.Boots++
	a.st = st
	a.mu.Lock()
	a.saveState()
	a.mu.Unlock()
	if cfg.NoSystemd {
		// The host-wide lock of Glove's integration tests (testenv):
		// they install the same package and check the same cgroups.
		if err := os.MkdirAll(filepath.Dir(IntegrationLock), 0o755); err == nil {
			if lf, err := os.OpenFile(IntegrationLock, os.O_RDWR|os.O_CREATE, 0o600); err == nil {
				a.logf("dev: taking %s", IntegrationLock)
				_ = syscall.Flock(int(lf.Fd()), syscall.LOCK_EX)
				defer lf.Close()
			}
		}
		a.svc = &devService{logPath: a.evidence("gloved-dev"), ids: func() (int, int) {
			a.mu.Lock()
			defer a.mu.Unlock()
			return a.st.GloveUID, a.st.GloveGID
		}}
	} else {
		a.svc = systemdService{}
	}
	a.logf("boot %d, phase %s, run tag %s, kernel %s, deadline %s", st.Boots, st.Phase, st.RunTag, kernelRelease(),
		st.StartedAt.Add(cfg.Deadline).UTC().Format(time.RFC3339))

	deadline := time.Until(st.StartedAt.Add(cfg.Deadline))
	timer := time.AfterFunc(max(deadline, time.Second), func() {
		a.mu.Lock()
		cur := a.current
		a.mu.Unlock()
		a.finish(fmt.Sprintf("the global deadline (%v from the first boot) passed during %s", cfg.Deadline, cur))
		if cfg.NoSystemd {
			os.Exit(1)
		}
	})
	defer timer.Stop()

	switch st.Phase {
	case PhaseFirst:
		if st.Boots > 1 {
			last := "(none)"
			if n := len(st.Results); n > 0 {
				last = st.Results[n-1].Name
			}
			a.finish(fmt.Sprintf("the guest booted again during phase 1 (boot %d, last check recorded: %s)", st.Boots, last))
			return 1
		}
		rebooting := a.phase1()
		if rebooting && !cfg.NoSystemd {
			a.reboot() // does not return unless the reboot fails
			return 1
		}
		if !a.isFinished() {
			if rebooting {
				a.reboot() // development: gloved crashed instead
				a.logf("dev: continuing with phase 2 in this process")
				a.mu.Lock()
				a.st.Boots++
				a.mu.Unlock()
			}
			a.phase2()
		}
	case PhaseRebooting, PhaseSecond:
		if st.Boots > 3 {
			a.finish(fmt.Sprintf("boot %d: too many boots", st.Boots))
			return 1
		}
		a.mu.Lock()
		a.st.Phase = PhaseSecond
		a.saveState()
		a.mu.Unlock()
		a.phase2()
	default:
		a.finish("the state file says phase " + st.Phase)
	}
	if !a.isFinished() {
		a.finish("")
	}
	return 0
}

func (a *Agent) isFinished() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.finished
}

func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return "?"
	}
	return unix.ByteSliceToString(u.Release[:])
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// faults collects the failures of one check.
type faults []string

func (f *faults) add(format string, args ...any) { *f = append(*f, fmt.Sprintf(format, args...)) }

func (f faults) err() error {
	if len(f) == 0 {
		return nil
	}
	return errors.New(strings.Join(f, "; "))
}

// syncAll flushes everything (several times: a loop device's writes reach
// its backing file's page cache first).
func syncAll() {
	for range 3 {
		syscall.Sync()
		time.Sleep(500 * time.Millisecond)
	}
}
