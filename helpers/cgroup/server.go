package cgroup

import (
	"errors"
	"fmt"
	"os"
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
	// parent is the configured parent this helper serves (ChooseParent).
	parent string
	// v2 is the unified hierarchy: placement, kill, events, CPU time
	// everywhere; limits too when v2Limits.
	v2 hierarchy
	// v1 are the v1 memory and pids hierarchies on a hybrid host whose v2
	// parent has no memory and pids controllers; empty otherwise.
	v1       []hierarchy
	v2Limits bool
	// uid is the service user's, read before the filter (getuid is not
	// in the allowlist).
	uid int
	// procFD is /proc and fdinfoFD /proc/self/fdinfo (O_PATH).
	procFD, fdinfoFD int
	// inodes records the v2 inode of each session this helper created,
	// so a session removed and re-created behind its back (same name,
	// new cgroup) is refused rather than acted on.
	inodes map[string]uint64
}

// killWait bounds how long Kill and Remove wait for a session to empty.
const killWait = 5 * time.Second

func newServer(cfg *Config) (*server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cgroup: configuration not loaded: %w", err)
	}
	s := &server{cfg: cfg, uid: os.Getuid(), procFD: -1, fdinfoFD: -1, v2: hierarchy{parent: -1}, inodes: map[string]uint64{}}
	if err := s.open(); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// open finds the hierarchies in mountinfo (it never mounts anything) and
// opens the delegated parent in each. A missing hierarchy or parent is a
// start-up error: serving sessions without their limits would silently
// widen the bounds.
func (s *server) open() error {
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("cgroup: read mountinfo: %w", err)
	}
	mounts := parseMountinfo(string(info))
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return fmt.Errorf("cgroup: read /proc/self/cgroup: %w", err)
	}
	if s.parent, err = ChooseParent(s.cfg.Parents(), ownV2Cgroup(string(self))); err != nil {
		return err
	}
	var mem, pids *cgMount
	for i := range mounts {
		m := &mounts[i]
		switch {
		case m.v2 && s.v2.parent < 0:
			if s.v2, err = openHierarchy("unified", *m, s.parent); err != nil {
				return err
			}
		case !m.v2 && m.opts["memory"] && mem == nil:
			mem = m
		case !m.v2 && m.opts["pids"] && pids == nil:
			pids = m
		}
	}
	if s.v2.parent < 0 {
		return errors.New("cgroup: no cgroup2 hierarchy mounted")
	}
	// cgroup.kill (Linux 5.14) is how a session is killed.
	kfd, err := openPathAt(s.v2.parent, "cgroup.kill")
	if err != nil {
		return fmt.Errorf("cgroup: v2 parent has no cgroup.kill: %w", err)
	}
	unix.Close(kfd)
	if s.v2Limits, err = enableV2(s.v2.parent, s.parent); err != nil {
		return err
	}
	if !s.v2Limits {
		if mem == nil || pids == nil {
			return errors.New("cgroup: neither v2 (memory and pids in the parent's cgroup.subtree_control) nor v1 memory and pids hierarchies")
		}
		for _, c := range []struct {
			name string
			m    *cgMount
		}{{"memory", mem}, {"pids", pids}} {
			h, err := openHierarchy(c.name, *c.m, s.parent)
			if err != nil {
				return err
			}
			s.v1 = append(s.v1, h)
		}
	}
	if s.procFD, err = openParent("/proc"); err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	if s.fdinfoFD, err = openParent("/proc/self/fdinfo"); err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	return nil
}

// v2Controllers are the controllers sessions need on cgroup v2.
var v2Controllers = []string{"memory", "pids"}

// enableV2 makes sure the v2 parent enables memory and pids for its
// children, enabling them itself when the parent has them available
// (cgroup.controllers) but not yet enabled. It reports false when the
// parent cannot offer them (a hybrid host, whose v1 hierarchies then
// hold the limits). Writing subtree_control fails with EBUSY while the
// parent holds processes of its own (cgroup v2's no-internal-processes
// rule): the supervisor must have moved into a child first
// (supervisor/internal/cgleaf).
func enableV2(parent int, name string) (bool, error) {
	ctl, err := readFile(parent, "cgroup.subtree_control")
	if err != nil {
		return false, fmt.Errorf("cgroup: v2 parent: %w", err)
	}
	if containsAll(strings.Fields(ctl), v2Controllers) {
		return true, nil
	}
	avail, err := readFile(parent, "cgroup.controllers")
	if err != nil {
		return false, fmt.Errorf("cgroup: v2 parent: %w", err)
	}
	if !containsAll(strings.Fields(avail), v2Controllers) {
		return false, nil
	}
	if err := writeFile(parent, "cgroup.subtree_control", "+memory +pids"); err != nil {
		if errors.Is(err, unix.EBUSY) {
			return false, fmt.Errorf("cgroup: enable memory and pids in %s: the cgroup holds processes of its own (cgroup v2 allows controllers only above leaves): the supervisor must run in a child such as %s/supervisor: %w", name, name, err)
		}
		return false, fmt.Errorf("cgroup: enable memory and pids in %s: %w", name, err)
	}
	ctl, err = readFile(parent, "cgroup.subtree_control")
	if err != nil {
		return false, fmt.Errorf("cgroup: v2 parent: %w", err)
	}
	if !containsAll(strings.Fields(ctl), v2Controllers) {
		return false, fmt.Errorf("cgroup: enabled memory and pids in %s, but its cgroup.subtree_control reads %q", name, strings.TrimSpace(ctl))
	}
	return true, nil
}

// ownV2Cgroup is the cgroup v2 path of a /proc/self/cgroup text, or "".
func ownV2Cgroup(text string) string {
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return rest
		}
	}
	return ""
}

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

func containsAll(xs, want []string) bool {
	for _, w := range want {
		if !contains(xs, w) {
			return false
		}
	}
	return true
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
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

// refuse is a request-level refusal: the server sends it as the reply and
// keeps serving. Messages name no peer-controlled bytes beyond a checked
// session name.
func refuse(code wire.ErrorCode, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if len(msg) > wire.MaxErrorLen {
		msg = msg[:wire.MaxErrorLen]
	}
	return &wire.Error{Code: code, Message: msg}
}

// checkName is the whole defence against a path in a session name: only
// a single component in the charset ever reaches openat/mkdirat.
func checkName(name string) error {
	if !names.Name(name) {
		return refuse(wire.ErrBadRequest, "session name outside "+names.NamePattern)
	}
	return nil
}

// all is the session's hierarchies, v2 first.
func (s *server) all() []hierarchy { return append([]hierarchy{s.v2}, s.v1...) }

func (s *server) create(_ uint32, req *cgwire.CreateRequest, _ []*os.File) (*cgwire.CreateReply, []int, error) {
	if err := checkName(req.Session); err != nil {
		return nil, nil, err
	}
	if req.MemoryBytes == 0 || req.Pids == 0 {
		return nil, nil, refuse(wire.ErrBadRequest, "zero limit (a cgroup limit of 0 is not a session)")
	}
	if req.MemoryBytes > s.cfg.MaxMemoryBytes || req.Pids > s.cfg.MaxPids {
		return nil, nil, refuse(wire.ErrRefused, "limit over max_memory_bytes or max_pids")
	}
	var made []hierarchy
	undo := func() {
		for _, h := range made {
			// Best effort on a failed create: a directory left here is
			// empty (no process was placed, so nothing is unbounded);
			// the request already fails with the first error.
			_ = rmdirSession(h.parent, req.Session)
		}
	}
	for _, h := range s.all() {
		if err := mkdirSession(h.parent, req.Session); err != nil {
			undo()
			if errors.Is(err, unix.EEXIST) {
				return nil, nil, refuse(wire.ErrRefused, "session %s exists", req.Session)
			}
			return nil, nil, fmt.Errorf("cgroup: create %s in %s: %w", req.Session, h.name, err)
		}
		made = append(made, h)
	}
	if err := s.setLimits(req); err != nil {
		undo()
		return nil, nil, err
	}
	dir, err := openSession(s.v2.parent, req.Session)
	if err != nil {
		undo()
		return nil, nil, fmt.Errorf("cgroup: open session %s: %w", req.Session, err)
	}
	st, err := fstat(dir)
	if err != nil {
		unix.Close(dir)
		undo()
		return nil, nil, fmt.Errorf("cgroup: stat session %s: %w", req.Session, err)
	}
	fds, err := s.watchFiles(dir, req.Session)
	if err != nil {
		unix.Close(dir)
		undo()
		return nil, nil, err
	}
	s.inodes[req.Session] = st.Ino
	return &cgwire.CreateReply{Inode: st.Ino}, append([]int{dir}, fds...), nil
}

// watchFiles opens, read-only, the files the supervisor watches: the v2
// cgroup.events, the memory events (v2 memory.events when v2 holds the
// limits, else the v1 memory.oom_control) and the v2 cpu.stat. On error
// nothing stays open.
func (s *server) watchFiles(v2dir int, session string) ([]int, error) {
	var fds []int
	fail := func(what string, err error) ([]int, error) {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("cgroup: open %s of %s: %w", what, session, err)
	}
	events, err := openRead(v2dir, "cgroup.events")
	if err != nil {
		return fail("cgroup.events", err)
	}
	fds = append(fds, events)
	if s.v2Limits {
		mem, err := openRead(v2dir, "memory.events")
		if err != nil {
			return fail("memory.events", err)
		}
		fds = append(fds, mem)
	} else {
		mdir, err := openSession(s.v1[0].parent, session)
		if err != nil {
			return fail("the v1 memory cgroup", err)
		}
		mem, err := openRead(mdir, "memory.oom_control")
		unix.Close(mdir)
		if err != nil {
			return fail("memory.oom_control", err)
		}
		fds = append(fds, mem)
	}
	cpu, err := openRead(v2dir, "cpu.stat")
	if err != nil {
		return fail("cpu.stat", err)
	}
	return append(fds, cpu), nil
}

func (s *server) setLimits(req *cgwire.CreateRequest) error {
	type plan struct {
		h     hierarchy
		files []limitFile
	}
	var plans []plan
	if s.v2Limits {
		plans = []plan{{s.v2, v2Limits(req.MemoryBytes, req.Pids)}}
	} else {
		// s.v1 is memory then pids (open).
		plans = []plan{{s.v1[0], v1MemoryLimits(req.MemoryBytes)}, {s.v1[1], v1PidsLimits(req.Pids)}}
	}
	for _, p := range plans {
		dir, err := openSession(p.h.parent, req.Session)
		if err != nil {
			return fmt.Errorf("cgroup: open session %s in %s: %w", req.Session, p.h.name, err)
		}
		err = writeLimits(dir, p.files)
		unix.Close(dir)
		if err != nil {
			return fmt.Errorf("cgroup: %s: %w", p.h.name, err)
		}
	}
	return nil
}

// session opens the session's v2 directory and checks it is the cgroup
// this helper created under that name, if it created one.
func (s *server) session(name string) (int, error) {
	if err := checkName(name); err != nil {
		return -1, err
	}
	dir, err := openSession(s.v2.parent, name)
	if errors.Is(err, unix.ENOENT) {
		return -1, refuse(wire.ErrRefused, "no session %s", name)
	}
	if err != nil {
		return -1, fmt.Errorf("cgroup: open session %s: %w", name, err)
	}
	st, err := fstat(dir)
	if err != nil {
		unix.Close(dir)
		return -1, fmt.Errorf("cgroup: stat session %s: %w", name, err)
	}
	if ino, ok := s.inodes[name]; ok && ino != st.Ino {
		unix.Close(dir)
		return -1, refuse(wire.ErrRefused, "session %s is not the cgroup created under that name", name)
	}
	return dir, nil
}

func (s *server) kill(_ uint32, req *cgwire.KillRequest, _ []*os.File) (*cgwire.KillReply, []int, error) {
	dir, err := s.session(req.Session)
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(dir)
	empty, err := s.killWait(dir, req.Session)
	if err != nil {
		return nil, nil, err
	}
	return &cgwire.KillReply{Empty: empty}, nil, nil
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
	deadline := time.Now().Add(killWait)
	for {
		ev, err := readFile(dir, "cgroup.events")
		if err != nil {
			return nil, nil, fmt.Errorf("cgroup: events of %s: %w", req.Session, err)
		}
		if strings.Contains("\n"+ev, "\nfrozen "+want+"\n") {
			return &cgwire.FreezeReply{Settled: true}, nil, nil
		}
		if time.Now().After(deadline) {
			return &cgwire.FreezeReply{Settled: false}, nil, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killWait writes cgroup.kill (SIGKILL to every process of the v2
// session and its descendants, including ones forked meanwhile) and
// waits, bounded, until no process is left in any hierarchy.
func (s *server) killWait(dir int, name string) (bool, error) {
	if err := writeFile(dir, "cgroup.kill", "1"); err != nil {
		return false, fmt.Errorf("cgroup: kill %s: %w", name, err)
	}
	deadline := time.Now().Add(killWait)
	for {
		empty, err := s.empty(dir, name)
		if err != nil || empty || time.Now().After(deadline) {
			return empty, err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *server) empty(dir int, name string) (bool, error) {
	ev, err := readFile(dir, "cgroup.events")
	if err != nil {
		return false, fmt.Errorf("cgroup: events of %s: %w", name, err)
	}
	if !strings.Contains("\n"+ev, "\npopulated 0\n") {
		return false, nil
	}
	for _, h := range s.v1 {
		d, err := openSession(h.parent, name)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("cgroup: open %s in %s: %w", name, h.name, err)
		}
		procs, err := readFile(d, "cgroup.procs")
		unix.Close(d)
		if err != nil {
			return false, fmt.Errorf("cgroup: %s in %s: %w", name, h.name, err)
		}
		if strings.TrimSpace(procs) != "" {
			return false, nil
		}
	}
	return true, nil
}

// sessionOrAbsent is session, with a session v2 does not have reported
// as absent (dir -1) rather than refused: the removals finish what may
// be left in v1.
func (s *server) sessionOrAbsent(name string) (dir int, absent bool, err error) {
	dir, err = s.session(name)
	var we *wire.Error
	if errors.As(err, &we) && we.Code == wire.ErrRefused && strings.HasPrefix(we.Message, "no session") {
		return -1, true, nil
	}
	return dir, false, err
}

func (s *server) remove(_ uint32, req *cgwire.RemoveRequest, _ []*os.File) (*cgwire.RemoveReply, []int, error) {
	// Absent in v2: remove what may be left in v1 (a Create that failed
	// half-way is undone already; this is recovery).
	dir, absent, err := s.sessionOrAbsent(req.Session)
	if err != nil {
		return nil, nil, err
	}
	if !absent {
		empty, err := s.killWait(dir, req.Session)
		unix.Close(dir)
		if err != nil {
			return nil, nil, err
		}
		if !empty {
			return nil, nil, fmt.Errorf("cgroup: session %s not empty after %v", req.Session, killWait)
		}
	}
	for i := len(s.all()) - 1; i >= 0; i-- {
		h := s.all()[i]
		if err := rmdirSession(h.parent, req.Session); err != nil && !errors.Is(err, unix.ENOENT) {
			return nil, nil, fmt.Errorf("cgroup: remove %s in %s: %w", req.Session, h.name, err)
		}
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
	dir, absent, err := s.sessionOrAbsent(req.Session)
	if err != nil {
		return nil, nil, err
	}
	if !absent {
		unix.Close(dir)
	}
	for _, h := range s.all() {
		err := rmdirSession(h.parent, req.Session)
		switch {
		case err == nil, errors.Is(err, unix.ENOENT):
		case errors.Is(err, unix.EBUSY):
			return nil, nil, refuse(wire.ErrRefused, "session %s is not empty in %s", req.Session, h.name)
		default:
			return nil, nil, fmt.Errorf("cgroup: remove %s in %s: %w", req.Session, h.name, err)
		}
	}
	delete(s.inodes, req.Session)
	return &cgwire.RemoveEmptyReply{}, nil, nil
}

func (s *server) stat(_ uint32, req *cgwire.StatRequest, _ []*os.File) (*cgwire.StatReply, []int, error) {
	dir, err := s.session(req.Session)
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(dir)
	var r cgwire.StatReply
	cpu, err := readFile(dir, "cpu.stat")
	if err != nil {
		return nil, nil, fmt.Errorf("cgroup: stat %s: %w", req.Session, err)
	}
	r.CPUTimeNS = keyed(cpu, "usage_usec") * 1000
	memDir, pidsDir := dir, dir
	memPeak, oomFile, oomKey := "memory.peak", "memory.events", "oom_kill"
	if !s.v2Limits {
		memPeak, oomFile = "memory.max_usage_in_bytes", "memory.oom_control"
		if memDir, err = openSession(s.v1[0].parent, req.Session); err != nil {
			return nil, nil, fmt.Errorf("cgroup: stat %s in memory: %w", req.Session, err)
		}
		defer unix.Close(memDir)
		if pidsDir, err = openSession(s.v1[1].parent, req.Session); err != nil {
			return nil, nil, fmt.Errorf("cgroup: stat %s in pids: %w", req.Session, err)
		}
		defer unix.Close(pidsDir)
	}
	for _, f := range []struct {
		dir  int
		name string
		key  string // "" for a single number
		out  *uint64
		opt  bool
	}{
		{memDir, memPeak, "", &r.MemoryPeakBytes, false},
		{memDir, oomFile, oomKey, &r.OOMKills, false},
		{pidsDir, "pids.current", "", &r.PidsCurrent, false},
		{pidsDir, "pids.peak", "", &r.PidsPeak, true},
	} {
		text, err := readFile(f.dir, f.name)
		if f.opt && isNotExist(err) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("cgroup: stat %s: %w", req.Session, err)
		}
		if f.key == "" {
			*f.out, _ = strconv.ParseUint(strings.TrimSpace(text), 10, 64)
		} else {
			*f.out = keyed(text, f.key)
		}
	}
	return &r, nil, nil
}

// keyed reads "key value" from a flat-keyed cgroup file, 0 when absent.
func keyed(text, key string) uint64 {
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
