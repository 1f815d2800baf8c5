// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/cgwire"
	"github.com/glove-sandbox/glove/names"
	"golang.org/x/sys/unix"
)

// server holds what the handlers need, all of it opened before the
// helper restricts itself: once the filter is installed it can only
// resolve names relative to these descriptors.
type server struct {
	cfg *Config
	// v2 is the unified hierarchy: placement, kill, events, CPU time
	// everywhere. v1 are the v1 memory and pids hierarchies on a hybrid
	// host whose v2 parent has no memory and pids controllers; empty
	// otherwise. mem and pids are the hierarchies holding the limits, v2
	// or v1's, and memEvents and memPeak the memory files there.
	v2, mem, pids      hierarchy
	v1                 []hierarchy
	memEvents, memPeak string
	// uid is the service user's, read before the filter (getuid is not
	// in the allowlist); procFD is /proc and fdinfoFD /proc/self/fdinfo.
	uid, procFD, fdinfoFD int
	// inodes records the v2 inode of each session this helper created,
	// so a session removed and re-created behind its back (same name,
	// new cgroup) is refused rather than acted on.
	inodes map[string]uint64
}

// killWait bounds how long Kill, Remove and Freeze wait for the kernel.
const killWait = 5 * time.Second

// newServer opens the delegated parent in each hierarchy the sessions
// need (openHierarchy), /proc and /proc/self/fdinfo. A missing hierarchy
// or parent is a start-up error: serving sessions without their limits
// would silently widen the bounds.
func newServer(cfg *Config) (_ *server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cgroup: configuration not loaded: %w", err)
	}
	s := &server{cfg: cfg, uid: os.Getuid(), procFD: -1, fdinfoFD: -1, v2: hierarchy{parent: -1}, inodes: map[string]uint64{}}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("cgroup: read /proc/self/cgroup: %w", err)
	}
	parent, err := ChooseParent(cfg.Parents(), ownV2Cgroup(string(self)))
	if err != nil {
		return nil, err
	}
	h, err := openHierarchy(v2Mount, parent)
	if err != nil {
		return nil, err
	}
	s.v2, s.mem, s.pids, s.memEvents, s.memPeak = h, h, h, "memory.events", "memory.peak"
	v2Limits, err := enableV2(h.parent, parent)
	if err != nil {
		return nil, err
	}
	if !v2Limits {
		for _, m := range v1Mounts {
			if h, err = openHierarchy(m, parent); err != nil {
				return nil, fmt.Errorf("cgroup: neither v2 (memory and pids in the parent's cgroup.controllers) nor v1 memory and pids: %w", err)
			}
			s.v1 = append(s.v1, h)
		}
		s.mem, s.pids, s.memEvents, s.memPeak = s.v1[0], s.v1[1], "memory.oom_control", "memory.max_usage_in_bytes"
	}
	if s.procFD, err = openParent("/proc"); err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	if s.fdinfoFD, err = openParent("/proc/self/fdinfo"); err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	return s, nil
}

// enableV2 makes sure the v2 parent enables memory and pids for its
// children, enabling them itself when the parent has them available
// (cgroup.controllers) but not yet enabled. It reports false when the
// parent cannot offer them (a hybrid host, whose v1 hierarchies then
// hold the limits). Writing subtree_control fails with EBUSY while the
// parent holds processes of its own (cgroup v2's no-internal-processes
// rule): the supervisor must have moved into a child first
// (supervisor/internal/cgleaf).
func enableV2(parent int, name string) (bool, error) {
	lists := func(file string) (bool, error) {
		text, err := readFile(parent, file)
		if err != nil {
			return false, fmt.Errorf("cgroup: v2 parent %s: %w", name, err)
		}
		f := strings.Fields(text)
		return slices.Contains(f, "memory") && slices.Contains(f, "pids"), nil
	}
	if on, err := lists("cgroup.subtree_control"); on || err != nil {
		return on, err
	}
	if avail, err := lists("cgroup.controllers"); !avail || err != nil {
		return false, err
	}
	if err := writeFile(parent, "cgroup.subtree_control", "+memory +pids"); err != nil {
		why := ""
		if errors.Is(err, unix.EBUSY) {
			why = ": the cgroup holds processes of its own (cgroup v2 allows controllers only above leaves): the supervisor must run in a child such as " + name + "/supervisor"
		}
		return false, fmt.Errorf("cgroup: enable memory and pids in %s%s: %w", name, why, err)
	}
	on, err := lists("cgroup.subtree_control")
	if err == nil && !on {
		err = fmt.Errorf("cgroup: enabled memory and pids in %s, but its cgroup.subtree_control does not show them", name)
	}
	return on, err
}

// ownV2Cgroup is the cgroup v2 path of a /proc/self/cgroup text, or "".
func ownV2Cgroup(text string) string { return field(text, "0::") }

// ChooseParent is the configured parent the helper's own cgroup (its
// supervisor's) lies beneath. With a single parent configured it is that
// parent wherever the supervisor lives (placement then fails if the
// supervisor is outside it); with several, a supervisor beneath none of
// them is refused: nothing says which one it may use.
func ChooseParent(parents []string, own string) (string, error) {
	for _, p := range parents {
		if own == p || strings.HasPrefix(own, p+"/") {
			return p, nil
		}
	}
	if len(parents) == 1 {
		return parents[0], nil
	}
	return "", fmt.Errorf("cgroup: the supervisor's cgroup %q is beneath none of the configured parents %v", own, parents)
}

func (s *server) close() {
	for _, fd := range []int{s.v2.parent, s.procFD, s.fdinfoFD} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	for _, h := range s.v1 {
		unix.Close(h.parent)
	}
}

// all is the session's hierarchies, v2 first.
func (s *server) all() []hierarchy { return append([]hierarchy{s.v2}, s.v1...) }

// refuse is a request-level refusal: the server sends it as the reply and
// keeps serving. Messages name no peer-controlled bytes beyond a checked
// session name, so they stay far below wire.MaxErrorLen.
func refuse(code wire.ErrorCode, format string, args ...any) error {
	return &wire.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// checkName is the whole defence against a path in a session name: only
// a single component in the charset ever reaches openat/mkdirat.
func checkName(name string) error {
	if !names.Name(name) {
		return refuse(wire.ErrBadRequest, "session name outside "+names.NamePattern)
	}
	return nil
}

// session opens the session's v2 directory and checks it is the cgroup
// this helper created under that name, if it created one. A session v2
// does not have is refused with unix.ENOENT in the chain: the removals
// go on to remove what may be left in v1.
func (s *server) session(name string) (int, error) {
	if err := checkName(name); err != nil {
		return -1, err
	}
	dir, err := openSession(s.v2.parent, name)
	if isNotExist(err) {
		return -1, fmt.Errorf("%w (%w)", refuse(wire.ErrRefused, "no session %s", name), err)
	}
	if err != nil {
		return -1, fmt.Errorf("cgroup: open session %s: %w", name, err)
	}
	st, err := fstat(dir)
	if err != nil {
		err = fmt.Errorf("cgroup: stat session %s: %w", name, err)
	} else if ino, ok := s.inodes[name]; ok && ino != st.Ino {
		err = refuse(wire.ErrRefused, "session %s is not the cgroup created under that name", name)
	}
	if err != nil {
		unix.Close(dir)
		return -1, err
	}
	return dir, nil
}

// in runs fn in the session's directory in hierarchy h: dir, the
// session's checked v2 directory, when h is v2.
func (s *server) in(h hierarchy, dir int, session string, fn func(dir int) error) error {
	var err error
	if h == s.v2 {
		err = fn(dir)
	} else if dir, err = openSession(h.parent, session); err == nil {
		err = fn(dir)
		unix.Close(dir)
	}
	if err != nil {
		return fmt.Errorf("%s in %s: %w", session, h.name, err)
	}
	return nil
}

// create makes the session in every hierarchy, sets its limits and
// opens the reply's descriptors (cgwire.CreateReply): its v2 directory,
// cgroup.events, memory events and cpu.stat. On error nothing stays open
// and the directories it made are removed (empty: no process was placed,
// so nothing is unbounded).
func (s *server) create(_ uint32, req *cgwire.CreateRequest, _ []*os.File) (_ *cgwire.CreateReply, _ []int, err error) {
	if err := checkName(req.Session); err != nil {
		return nil, nil, err
	}
	if req.MemoryBytes == 0 || req.Pids == 0 {
		return nil, nil, refuse(wire.ErrBadRequest, "zero limit (a cgroup limit of 0 is not a session)")
	}
	if err := s.cfg.CheckLimits(req.MemoryBytes, req.Pids); err != nil {
		return nil, nil, err
	}
	var made []hierarchy
	var fds []int
	defer func() {
		if err != nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
			err = errors.Join(err, rmdirs(req.Session, made))
		}
	}()
	for _, h := range s.all() {
		if err := mkdirSession(h.parent, req.Session); errors.Is(err, unix.EEXIST) {
			return nil, nil, refuse(wire.ErrRefused, "session %s exists", req.Session)
		} else if err != nil {
			return nil, nil, fmt.Errorf("cgroup: create %s in %s: %w", req.Session, h.name, err)
		}
		made = append(made, h)
	}
	dir, err := openSession(s.v2.parent, req.Session)
	if err != nil {
		return nil, nil, fmt.Errorf("cgroup: open session %s: %w", req.Session, err)
	}
	fds = []int{dir}
	st, err := fstat(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("cgroup: stat session %s: %w", req.Session, err)
	}
	limits := func(h hierarchy, files []limitFile) error {
		return s.in(h, dir, req.Session, func(d int) error { return writeLimits(d, files) })
	}
	if s.mem == s.v2 {
		err = limits(s.v2, v2Limits(req.MemoryBytes, req.Pids))
	} else if err = limits(s.mem, v1MemoryLimits(req.MemoryBytes)); err == nil {
		err = limits(s.pids, v1PidsLimits(req.Pids))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("cgroup: limits of %w", err)
	}
	for _, f := range []struct {
		h    hierarchy
		name string
	}{{s.v2, "cgroup.events"}, {s.mem, s.memEvents}, {s.v2, "cpu.stat"}} {
		if err := s.in(f.h, dir, req.Session, func(d int) error {
			fd, err := openRead(d, f.name)
			if err == nil {
				fds = append(fds, fd)
			}
			return err
		}); err != nil {
			return nil, nil, fmt.Errorf("cgroup: open %s of %w", f.name, err)
		}
	}
	s.inodes[req.Session] = st.Ino
	return &cgwire.CreateReply{Inode: st.Ino, V1: len(s.v1) > 0}, fds, nil
}

// join opens the session's v1 tasks files for writing (cgwire.JoinRequest
// says why glove-shim asks). The session is checked as every request's
// is (its v2 directory is the one this helper created under the name).
func (s *server) join(_ uint32, req *cgwire.JoinRequest, _ []*os.File) (_ *cgwire.JoinReply, _ []int, err error) {
	if len(s.v1) == 0 {
		return nil, nil, refuse(wire.ErrRefused, "no v1 hierarchies: a process born in the session's v2 cgroup is in all of it")
	}
	dir, err := s.session(req.Session)
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(dir)
	var fds []int
	for _, h := range s.v1 {
		if err := s.in(h, dir, req.Session, func(d int) error {
			fd, err := openWrite(d, "tasks")
			if err == nil {
				fds = append(fds, fd)
			}
			return err
		}); err != nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
			return nil, nil, fmt.Errorf("cgroup: join: open tasks of %w", err)
		}
	}
	return &cgwire.JoinReply{}, fds, nil
}

func (s *server) kill(_ uint32, req *cgwire.KillRequest, _ []*os.File) (*cgwire.KillReply, []int, error) {
	dir, err := s.session(req.Session)
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(dir)
	empty, err := s.killWait(dir, req.Session)
	return &cgwire.KillReply{Empty: empty}, nil, err
}

// freeze writes the v2 cgroup.freeze and waits, bounded, until
// cgroup.events reports the state: the kernel freezes tasks
// asynchronously, and the supervisor must know the session is really
// stopped before it inspects it.
func (s *server) freeze(_ uint32, req *cgwire.FreezeRequest, _ []*os.File) (*cgwire.FreezeReply, []int, error) {
	dir, err := s.session(req.Session)
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(dir)
	want := "0"
	if req.Frozen {
		want = "1"
	}
	if err := writeFile(dir, "cgroup.freeze", want); err != nil {
		return nil, nil, fmt.Errorf("cgroup: freeze %s: %w", req.Session, err)
	}
	settled, err := settle(func() (bool, error) { return events(dir, req.Session, "frozen "+want) })
	return &cgwire.FreezeReply{Settled: settled}, nil, err
}

// killWait writes cgroup.kill (SIGKILL to every process of the v2
// session and its descendants, including ones forked meanwhile) and
// waits, bounded, until no process is left in any hierarchy.
func (s *server) killWait(dir int, name string) (bool, error) {
	if err := writeFile(dir, "cgroup.kill", "1"); err != nil {
		return false, fmt.Errorf("cgroup: kill %s: %w", name, err)
	}
	return settle(func() (bool, error) {
		empty, err := events(dir, name, "populated 0")
		for _, h := range s.v1 {
			if !empty || err != nil {
				break
			}
			err = s.in(h, dir, name, func(d int) error {
				procs, err := readFile(d, "cgroup.procs")
				empty = strings.TrimSpace(procs) == ""
				return err
			})
			if isNotExist(err) {
				empty, err = true, nil // a removal finishing a half-made session
			}
		}
		return empty, err
	})
}

// settle polls done until it reports true or fails, or killWait passes.
func settle(done func() (bool, error)) (bool, error) {
	for deadline := time.Now().Add(killWait); ; time.Sleep(10 * time.Millisecond) {
		ok, err := done()
		if err != nil || ok || time.Now().After(deadline) {
			return ok, err
		}
	}
}

// events reports whether the session's cgroup.events has line.
func events(dir int, session, line string) (bool, error) {
	ev, err := readFile(dir, "cgroup.events")
	if err != nil {
		return false, fmt.Errorf("cgroup: events of %s: %w", session, err)
	}
	return strings.Contains("\n"+ev, "\n"+line+"\n"), nil
}

func (s *server) remove(_ uint32, req *cgwire.RemoveRequest, _ []*os.File) (*cgwire.RemoveReply, []int, error) {
	// Absent in v2: remove what may be left in v1 (a Create that failed
	// half-way is undone already; this is recovery).
	dir, err := s.session(req.Session)
	if err != nil && !isNotExist(err) {
		return nil, nil, err
	}
	if err == nil {
		empty, err := s.killWait(dir, req.Session)
		unix.Close(dir)
		if err == nil && !empty {
			err = fmt.Errorf("cgroup: session %s not empty after %v", req.Session, killWait)
		}
		if err != nil {
			return nil, nil, err
		}
	}
	all := s.all()
	slices.Reverse(all)
	if err := rmdirs(req.Session, all); err != nil {
		return nil, nil, err
	}
	delete(s.inodes, req.Session)
	return &cgwire.RemoveReply{}, nil, nil
}

// removeEmpty removes the session's cgroups if they hold no process,
// and never kills: v2 first, whose rmdir the kernel refuses (EBUSY)
// while a process or a child cgroup is in it, so emptiness is checked
// and acted on in one step; then v1, where the same holds. Threat: a
// sweep of left-over cgroups (gloved's recovery) turned into a kill of a
// session it does not know, such as another supervisor's being started.
func (s *server) removeEmpty(_ uint32, req *cgwire.RemoveEmptyRequest, _ []*os.File) (*cgwire.RemoveEmptyReply, []int, error) {
	dir, err := s.session(req.Session)
	if err == nil {
		unix.Close(dir)
	} else if !isNotExist(err) {
		return nil, nil, err
	}
	if err := rmdirs(req.Session, s.all()); errors.Is(err, unix.EBUSY) {
		return nil, nil, refuse(wire.ErrRefused, "session %s is not empty (%v)", req.Session, err)
	} else if err != nil {
		return nil, nil, err
	}
	delete(s.inodes, req.Session)
	return &cgwire.RemoveEmptyReply{}, nil, nil
}

// rmdirs removes the session's directory in each of hs in turn (one
// already gone counts as removed), stopping at the first failure.
func rmdirs(session string, hs []hierarchy) error {
	for _, h := range hs {
		if err := rmdirSession(h.parent, session); err != nil && !isNotExist(err) {
			return fmt.Errorf("cgroup: remove %s in %s: %w", session, h.name, err)
		}
	}
	return nil
}

func (s *server) stat(_ uint32, req *cgwire.StatRequest, _ []*os.File) (*cgwire.StatReply, []int, error) {
	dir, err := s.session(req.Session)
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(dir)
	var r cgwire.StatReply
	for _, f := range []struct {
		h         hierarchy
		name, key string // key "" for a single number
		out       *uint64
	}{
		{s.v2, "cpu.stat", "usage_usec", &r.CPUTimeNS},
		{s.mem, s.memPeak, "", &r.MemoryPeakBytes},
		{s.mem, s.memEvents, "oom_kill", &r.OOMKills},
		{s.pids, "pids.current", "", &r.PidsCurrent},
		{s.pids, "pids.peak", "", &r.PidsPeak}, // not on every kernel: 0
	} {
		err := s.in(f.h, dir, req.Session, func(d int) error {
			text, err := readFile(d, f.name)
			*f.out = keyed(text, f.key)
			return err
		})
		if err != nil && !(f.out == &r.PidsPeak && isNotExist(err)) {
			return nil, nil, fmt.Errorf("cgroup: stat %w", err)
		}
	}
	r.CPUTimeNS *= 1000
	return &r, nil, nil
}

// keyed reads "key value" from a flat-keyed cgroup file, or the number
// a single-value file holds when key is "", 0 when absent.
func keyed(text, key string) uint64 {
	if key != "" {
		key += " "
	}
	n, _ := strconv.ParseUint(field(text, key), 10, 64)
	return n
}
