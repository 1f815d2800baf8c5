// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/cgwire"
	"github.com/glove-sandbox/glove/helpers/wire/wirecall"
	"github.com/glove-sandbox/glove/helpers/wire/wiretest"
	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

// cgHelper is a running glove-cgroup seen from the supervisor's side.
type cgHelper struct {
	t   testing.TB
	env *testenv.Env
	c   *wirecall.Client
	log *testenv.SyncBuffer
	// lastFiles are the descriptors of the last Create reply (directory,
	// cgroup.events, memory events, cpu.stat); closed when the test ends.
	lastFiles []*os.File
}

func startCgroup(t testing.TB, env *testenv.Env) *cgHelper {
	t.Helper()
	p, log := env.StartServing(t, "glove-cgroup")
	return &cgHelper{t: t, env: env, c: p.Client, log: log}
}

func (h *cgHelper) call(req wire.Message, fds ...int) (wire.Message, error) {
	reply, files, err := wirecall.CallAny(cgwire.Protocol, h.c, req, fds)
	closeAll(files)
	return reply, err
}

// create makes a session and removes it when the test ends.
func (h *cgHelper) create(name string, mem, pids uint64) *cgwire.CreateReply {
	h.t.Helper()
	reply, files, err := wirecall.Call(cgwire.Create, h.c, &cgwire.CreateRequest{Session: name, MemoryBytes: mem, Pids: pids}, nil)
	if err != nil {
		h.t.Fatalf("create %s: %v\nhelper log: %s", name, err, h.log)
	}
	h.lastFiles = files
	h.t.Cleanup(func() { closeAll(files) })
	if len(files) != 4 {
		h.t.Fatalf("create reply carries %d descriptors, want 4", len(files))
	}
	h.t.Cleanup(func() {
		if _, err := h.call(&cgwire.RemoveRequest{Session: name}); err != nil {
			h.t.Errorf("remove %s: %v\nhelper log: %s", name, err, h.log)
		}
	})
	return reply
}

func (h *cgHelper) mustCall(req wire.Message, fds ...int) wire.Message {
	h.t.Helper()
	r, err := h.call(req, fds...)
	if err != nil {
		h.t.Fatalf("%T: %v\nhelper log: %s", req, err, h.log)
	}
	return r
}

// hierarchies maps "unified" and each v1 controller this machine mounts
// to its mount point.
func hierarchies(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, l := range strings.Split(mountinfo(t), "\n") {
		f := strings.Fields(l)
		i := slicesIndex(f, "-")
		if i < 0 || i+3 >= len(f) {
			continue
		}
		switch f[i+1] {
		case "cgroup2":
			out["unified"] = f[4]
		case "cgroup":
			for _, o := range strings.Split(f[i+3], ",") {
				if o == "memory" || o == "pids" || o == "cpuacct" || o == "freezer" {
					out[o] = f[4]
				}
			}
		}
	}
	return out
}

func slicesIndex(xs []string, x string) int {
	for i, y := range xs {
		if y == x {
			return i
		}
	}
	return -1
}

// sessionPath is a session's directory in hierarchy h. A controller with
// no v1 hierarchy of its own is served by the unified one (a pure v2
// host, such as the VM lane's guests).
func sessionPath(t testing.TB, env *testenv.Env, h, session string) string {
	t.Helper()
	hs := hierarchies(t)
	mp, ok := hs[h]
	if !ok {
		mp, ok = hs["unified"]
	}
	if !ok {
		t.Fatalf("no %s hierarchy and no cgroup v2 mounted", h)
	}
	return filepath.Join(mp, testenv.CgroupParent(env.Base), session)
}

// pureV2 reports whether memory and pids have no v1 hierarchy: the
// helper then limits both in the unified one, with its file names.
func pureV2(t testing.TB) bool {
	t.Helper()
	hs := hierarchies(t)
	_, mem := hs["memory"]
	_, pids := hs["pids"]
	return !mem && !pids
}

func readTrim(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// target is a process of the service user the test controls through its
// stdin and stdout.
type target struct {
	cmd   *exec.Cmd
	pidfd int
	in    io.WriteCloser
	out   *bufio.Reader
	done  chan struct{}
}

// startTarget runs argv as the service user, started as the supervisor
// would be, in the leaf "supervisor" of its delegated v2 parent, so that
// the helper may move it: v2 requires write access to the common
// ancestor's cgroup.procs. Not in the parent itself: once the helper has
// enabled memory and pids in the parent's subtree_control (a pure v2
// host), no process may live there (the no-internal-processes rule,
// EBUSY at clone).
func startTarget(t testing.TB, env *testenv.Env, argv ...string) *target {
	t.Helper()
	return startTargetIn(t, env, filepath.Join(hierarchies(t)["unified"], testenv.CgroupParent(env.Base), "supervisor"), argv...)
}

// startTargetIn is startTarget with the process born in the v2 cgroup
// directory leaf, as gloved starts glove-shim in the session's.
func startTargetIn(t testing.TB, env *testenv.Env, leaf string, argv ...string) *target {
	t.Helper()
	cg, err := unix.Open(leaf, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(cg)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: env.Credential(), UseCgroupFD: true, CgroupFD: cg}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	tg := &target{cmd: cmd, pidfd: pidfd, in: in, out: bufio.NewReader(outR), done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(tg.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-tg.done
		unix.Close(pidfd)
	})
	return tg
}

func (tg *target) wait(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case <-tg.done:
	case <-time.After(d):
		t.Fatalf("target %d still running after %v", tg.cmd.Process.Pid, d)
	}
}

// waitReaped waits until the killed processes are reaped: orphans of a
// killed session are zombies until init collects them, and the leak
// check lists them until then.
func waitReaped(t testing.TB, pids []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for {
			if _, err := os.Stat("/proc/" + pid); errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("process %s not reaped after its session was killed", pid)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestCgroupPlaceAndLimits: a process placed by pidfd lands in the
// session in every hierarchy; a fork bomb stops at the pids limit.
func TestCgroupPlaceAndLimits(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	h := startCgroup(t, env)
	const pids = 16
	rep := h.create("bomb", 64<<20, pids)
	var st unix.Stat_t
	if err := unix.Stat(sessionPath(t, env, "unified", "bomb"), &st); err != nil || st.Ino != rep.Inode {
		t.Errorf("reply inode %d, directory inode %d (%v)", rep.Inode, st.Ino, err)
	}
	if got := readTrim(t, filepath.Join(sessionPath(t, env, "pids", "bomb"), "pids.max")); got != strconv.Itoa(pids) {
		t.Errorf("pids.max %s", got)
	}
	mem := sessionPath(t, env, "memory", "bomb")
	// The memory limit, and no swap beyond it (v2: swap.max 0; v1: the
	// kernel needs memsw ≥ the limit, so memsw = the limit).
	memFiles := map[string]string{"memory.limit_in_bytes": strconv.Itoa(64 << 20), "memory.memsw.limit_in_bytes": strconv.Itoa(64 << 20)}
	if pureV2(t) {
		memFiles = map[string]string{"memory.max": strconv.Itoa(64 << 20), "memory.swap.max": "0", "memory.oom.group": "1"}
	}
	for file, want := range memFiles {
		if got := readTrim(t, filepath.Join(mem, file)); got != want {
			t.Errorf("%s %s, want %s", file, got, want)
		}
	}

	tg := startTarget(t, env, "/bin/sh", "-c", `read x; i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i+1)); done 2>/dev/null; echo forked; read x`)
	h.mustCall(&cgwire.PlaceRequest{Session: "bomb"}, tg.pidfd)
	cg := readTrim(t, fmt.Sprintf("/proc/%d/cgroup", tg.cmd.Process.Pid))
	parent := testenv.CgroupParent(env.Base)
	wantLines := []string{"0::" + parent + "/bomb", "memory:" + parent + "/bomb", "pids:" + parent + "/bomb"}
	if pureV2(t) {
		wantLines = wantLines[:1]
	}
	for _, want := range wantLines {
		if !strings.Contains(cg, want) {
			t.Errorf("/proc/PID/cgroup lacks %q:\n%s", want, cg)
		}
	}
	fmt.Fprintln(tg.in)
	line, _ := tg.out.ReadString('\n')
	if line != "forked\n" {
		t.Logf("shell said %q (it may stop at the first failed fork)", line)
	}
	stat := h.mustCall(&cgwire.StatRequest{Session: "bomb"}).(*cgwire.StatReply)
	events := readTrim(t, filepath.Join(sessionPath(t, env, "pids", "bomb"), "pids.events"))
	t.Logf("fork bomb: pids limit %d, Stat PidsCurrent %d PidsPeak %d, pids.events %q", pids, stat.PidsCurrent, stat.PidsPeak, events)
	if stat.PidsPeak != pids || stat.PidsCurrent > pids {
		t.Errorf("PidsPeak %d PidsCurrent %d, want peak = limit %d", stat.PidsPeak, stat.PidsCurrent, pids)
	}
	if n := strings.TrimPrefix(events, "max "); n == events || n == "0" {
		t.Errorf("no fork refused: pids.events %q", events)
	}
	procs := strings.Fields(readTrim(t, filepath.Join(sessionPath(t, env, "unified", "bomb"), "cgroup.procs")))
	kill := h.mustCall(&cgwire.KillRequest{Session: "bomb"}).(*cgwire.KillReply)
	if !kill.Empty {
		t.Error("Kill: session not empty")
	}
	tg.wait(t, 5*time.Second)
	waitReaped(t, procs)
	for _, hier := range []string{"unified", "memory", "pids"} {
		if procs := readTrim(t, filepath.Join(sessionPath(t, env, hier, "bomb"), "cgroup.procs")); procs != "" {
			t.Errorf("%s: processes left after Kill: %s", hier, procs)
		}
	}
}

// TestCgroupPlaceBornInSession: a process born in the session's v2
// cgroup (gloved starts glove-shim there with CLONE_INTO_CGROUP) is
// placed without a v2 write, which would only wait for an RCU grace
// period in the kernel; one born elsewhere is still written. Shown with
// the session's v2 cgroup.procs made read-only: the first Place succeeds
// (and places it in the v1 hierarchies of a hybrid host), the second
// fails on the write.
func TestCgroupPlaceBornInSession(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	h := startCgroup(t, env)
	h.create("born", 64<<20, 16)
	dir := sessionPath(t, env, "unified", "born")
	procs := filepath.Join(dir, "cgroup.procs")
	var st unix.Stat_t
	if err := unix.Stat(procs, &st); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(procs, 0o444); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Chmod(procs, os.FileMode(st.Mode&0o777)); err != nil {
			t.Errorf("restore the mode of %s: %v", procs, err)
		}
		if k := h.mustCall(&cgwire.KillRequest{Session: "born"}).(*cgwire.KillReply); !k.Empty {
			t.Error("Kill: session not empty")
		}
	})
	in := startTargetIn(t, env, dir, "/bin/sleep", "60")
	if _, err := h.call(&cgwire.PlaceRequest{Session: "born"}, in.pidfd); err != nil {
		t.Fatalf("Place of a process born in the session: %v (a v2 write was attempted)", err)
	}
	cg := readTrim(t, fmt.Sprintf("/proc/%d/cgroup", in.cmd.Process.Pid))
	parent := testenv.CgroupParent(env.Base)
	want := []string{"0::" + parent + "/born", "memory:" + parent + "/born", "pids:" + parent + "/born"}
	if pureV2(t) {
		want = want[:1]
	}
	for _, w := range want {
		if !strings.Contains(cg, w) {
			t.Errorf("/proc/PID/cgroup lacks %q:\n%s", w, cg)
		}
	}
	out := startTarget(t, env, "/bin/sleep", "60")
	if _, err := h.call(&cgwire.PlaceRequest{Session: "born"}, out.pidfd); err == nil {
		t.Error("Place of a process born elsewhere succeeded with the session's v2 cgroup.procs read-only")
	}
}

// TestCgroupJoin: Join hands out the session's v1 tasks files, and a
// single-threaded process born in the v2 session that writes "0" to them
// (as glove-shim's constructor does) is then in every session cgroup:
// Place finds it there and writes nothing, which the test shows by making
// each v1 cgroup.procs read-only. A process that did not join is still
// refused with the same read-only files, so Place reads membership and
// does not just skip v1. On a pure v2 host Create says V1 false and Join
// is refused: there is nothing to join.
func TestCgroupJoin(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	h := startCgroup(t, env)
	cr := h.create("joined", 64<<20, 16)
	if pureV2(t) {
		if cr.V1 {
			t.Error("Create on a pure v2 host says V1")
		}
		if _, err := h.call(&cgwire.JoinRequest{Session: "joined"}); wireCode(err) != wire.ErrRefused {
			t.Errorf("Join on a pure v2 host: %v, want refused", err)
		}
		return
	}
	if !cr.V1 {
		t.Fatal("Create on a hybrid host does not say V1")
	}
	if _, err := h.call(&cgwire.JoinRequest{Session: "nosuch"}); wireCode(err) != wire.ErrRefused {
		t.Errorf("Join of a session that does not exist: %v, want refused", err)
	}
	_, files, err := wirecall.Call(cgwire.Join, h.c, &cgwire.JoinRequest{Session: "joined"}, nil)
	if err != nil {
		t.Fatalf("Join: %v\nhelper log: %s", err, h.log)
	}
	defer closeAll(files)
	parent := testenv.CgroupParent(env.Base)
	for i, hier := range []string{"memory", "pids"} {
		var fs unix.Statfs_t
		if err := unix.Fstatfs(int(files[i].Fd()), &fs); err != nil {
			t.Fatal(err)
		}
		fl, err := unix.FcntlInt(files[i].Fd(), unix.F_GETFL, 0)
		if err != nil {
			t.Fatal(err)
		}
		link, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", files[i].Fd()))
		if err != nil {
			t.Fatal(err)
		}
		if fs.Type != unix.CGROUP_SUPER_MAGIC || fl&unix.O_ACCMODE != unix.O_WRONLY || !strings.HasSuffix(link, parent+"/joined/tasks") {
			t.Errorf("Join descriptor %d (%s): fs %#x, flags %#o, %s: want the session's v1 tasks, write-only", i, hier, fs.Type, fl, link)
		}
		procs := filepath.Join(sessionPath(t, env, hier, "joined"), "cgroup.procs")
		if err := os.Chmod(procs, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if k := h.mustCall(&cgwire.KillRequest{Session: "joined"}).(*cgwire.KillReply); !k.Empty {
			t.Error("Kill: session not empty")
		}
	})
	// The joining process: a shell (one thread) writes "0" to each
	// descriptor, closes them, and says so.
	leaf, err := unix.Open(sessionPath(t, env, "unified", "joined"), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(leaf)
	cmd := exec.Command("/bin/sh", "-c", "echo 0 >&3 && echo 0 >&4 && exec 3>&- 4>&- && echo joined && exec sleep 60")
	cmd.Env, cmd.Dir, cmd.ExtraFiles = []string{"PATH=/usr/bin:/bin"}, "/", files
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: env.Credential(), UseCgroupFD: true, CgroupFD: leaf}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	defer func() {
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("kill the joining process: %v", err)
		}
		<-done
	}()
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "joined\n" {
		t.Fatalf("the joining process said %q (%v)", line, err)
	}
	pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	if _, err := h.call(&cgwire.PlaceRequest{Session: "joined"}, pidfd); err != nil {
		t.Fatalf("Place of a process that joined: %v (a write was attempted)", err)
	}
	cg := readTrim(t, fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid))
	for _, w := range []string{"0::" + parent + "/joined", "memory:" + parent + "/joined", "pids:" + parent + "/joined"} {
		if !strings.Contains(cg, w) {
			t.Errorf("/proc/PID/cgroup lacks %q:\n%s", w, cg)
		}
	}
	other := startTargetIn(t, env, sessionPath(t, env, "unified", "joined"), "/bin/sleep", "60")
	if _, err := h.call(&cgwire.PlaceRequest{Session: "joined"}, other.pidfd); err == nil {
		t.Error("Place of a process that did not join succeeded with the session's v1 cgroup.procs read-only")
	}
}

// TestCgroupOOM: a process allocating past the memory limit is
// OOM-killed and Stat counts it.
func TestCgroupOOM(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	h := startCgroup(t, env)
	const limit = 32 << 20
	h.create("hog", limit, 32)
	tg := startTarget(t, env, "/usr/bin/python3", "-c", "import sys\nsys.stdin.readline()\nx = b'\\x01' * (256 << 20)\nprint('survived')")
	h.mustCall(&cgwire.PlaceRequest{Session: "hog"}, tg.pidfd)
	fmt.Fprintln(tg.in)
	tg.wait(t, 30*time.Second)
	ws := tg.cmd.ProcessState.Sys().(syscall.WaitStatus)
	stat := h.mustCall(&cgwire.StatRequest{Session: "hog"}).(*cgwire.StatReply)
	t.Logf("memory hog: limit %d, signal %v, Stat OOMKills %d MemoryPeakBytes %d", limit, ws.Signal(), stat.OOMKills, stat.MemoryPeakBytes)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("hog ended with %v, want SIGKILL", ws)
	}
	if stat.OOMKills < 1 {
		t.Errorf("OOMKills %d, want ≥ 1", stat.OOMKills)
	}
	if stat.MemoryPeakBytes > limit || stat.MemoryPeakBytes < limit/2 {
		t.Errorf("MemoryPeakBytes %d, want near the limit %d", stat.MemoryPeakBytes, limit)
	}
	// The memory-events descriptor of the Create reply tells the same
	// without asking the helper: its oom_kill line counts the kill.
	if n := counter(t, h.lastFiles[2], "oom_kill"); n < 1 {
		t.Errorf("memory events descriptor: oom_kill %d, want ≥ 1", n)
	}
}

// counter reads "name value" from a cgroup key-value file through a
// descriptor the helper handed out.
func counter(t *testing.T, f *os.File, name string) uint64 {
	t.Helper()
	buf := make([]byte, 4096)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("read %s: %v", name, err)
	}
	for _, l := range strings.Split(string(buf[:n]), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok && k == name {
			x, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", name, l)
			}
			return x
		}
	}
	t.Fatalf("no %s line in %q", name, buf[:n])
	return 0
}

// TestCgroupCPUTime: the CPU time of a ~1 s busy loop, reported by Stat,
// is within 10% of the kernel's per-process utime+stime.
func TestCgroupCPUTime(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	h := startCgroup(t, env)
	h.create("cpu", 64<<20, 8)
	tg := startTarget(t, env, "/usr/bin/python3", "-c",
		"import sys, time\nsys.stdin.readline()\nt = time.process_time()\nwhile time.process_time() - t < 1: pass\nprint('done', flush=True)\nsys.stdin.readline()")
	h.mustCall(&cgwire.PlaceRequest{Session: "cpu"}, tg.pidfd)
	fmt.Fprintln(tg.in)
	if line, err := tg.out.ReadString('\n'); err != nil || line != "done\n" {
		t.Fatalf("busy loop: %q %v", line, err)
	}
	stat := readTrim(t, fmt.Sprintf("/proc/%d/stat", tg.cmd.Process.Pid))
	f := strings.Fields(stat[strings.LastIndexByte(stat, ')')+2:])
	utime, _ := strconv.ParseUint(f[11], 10, 64)
	stime, _ := strconv.ParseUint(f[12], 10, 64)
	procNS := float64(utime+stime) * 1e9 / 100 // USER_HZ is 100 on Linux
	reply := h.mustCall(&cgwire.StatRequest{Session: "cpu"}).(*cgwire.StatReply)
	ratio := float64(reply.CPUTimeNS) / procNS
	t.Logf("busy loop: Stat CPUTimeNS %d, /proc utime+stime %.0f ns, ratio %.3f", reply.CPUTimeNS, procNS, ratio)
	if ratio < 0.9 || ratio > 1.1 {
		t.Errorf("CPU time ratio %.3f, want within 10%%", ratio)
	}
	// The cpu.stat descriptor of the Create reply, read by the
	// supervisor for the CPU budget, agrees.
	usec := counter(t, h.lastFiles[3], "usage_usec")
	if r := float64(usec*1000) / procNS; r < 0.9 || r > 1.1 {
		t.Errorf("cpu.stat usage_usec %d through the descriptor: ratio %.3f to /proc", usec, r)
	}
	fmt.Fprintln(tg.in)
	tg.wait(t, 5*time.Second)
}

// TestCgroupRemove: Remove kills what is left, removes the session in
// every hierarchy and is idempotent.
func TestCgroupRemove(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	h := startCgroup(t, env)
	if _, err := h.call(&cgwire.CreateRequest{Session: "rm", MemoryBytes: 64 << 20, Pids: 8}); err != nil {
		t.Fatal(err)
	}
	tg := startTarget(t, env, "/bin/sh", "-c", "read x; sleep 30 & sleep 30 & echo started; read x")
	h.mustCall(&cgwire.PlaceRequest{Session: "rm"}, tg.pidfd)
	fmt.Fprintln(tg.in)
	if line, _ := tg.out.ReadString('\n'); line != "started\n" {
		t.Fatalf("target said %q", line)
	}
	procs := strings.Fields(readTrim(t, filepath.Join(sessionPath(t, env, "unified", "rm"), "cgroup.procs")))
	if len(procs) != 3 {
		t.Errorf("session holds %v, want the shell and two sleeps", procs)
	}
	h.mustCall(&cgwire.RemoveRequest{Session: "rm"})
	tg.wait(t, 5*time.Second)
	waitReaped(t, procs)
	for _, hier := range []string{"unified", "memory", "pids"} {
		if _, err := os.Stat(sessionPath(t, env, hier, "rm")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: session directory after Remove: %v", hier, err)
		}
	}
	h.mustCall(&cgwire.RemoveRequest{Session: "rm"})
	if _, err := h.call(&cgwire.StatRequest{Session: "rm"}); wireCode(err) != wire.ErrRefused {
		t.Errorf("Stat of a removed session: %v", err)
	}
}

// TestCgroupRemoveEmpty: RemoveEmpty refuses a session that holds a
// process and kills nothing (the process is still there, in every
// hierarchy), removes an empty one in every hierarchy, and is idempotent.
func TestCgroupRemoveEmpty(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	h := startCgroup(t, env)
	h.create("busy", 64<<20, 8)
	h.create("idle", 64<<20, 8)
	tg := startTarget(t, env, "/bin/sh", "-c", "read x; echo started; read x")
	h.mustCall(&cgwire.PlaceRequest{Session: "busy"}, tg.pidfd)
	fmt.Fprintln(tg.in)
	if line, _ := tg.out.ReadString('\n'); line != "started\n" {
		t.Fatalf("target said %q", line)
	}
	if _, err := h.call(&cgwire.RemoveEmptyRequest{Session: "busy"}); wireCode(err) != wire.ErrRefused {
		t.Errorf("RemoveEmpty of a populated session: %v, want refused", err)
	}
	for _, hier := range []string{"unified", "memory", "pids"} {
		p := sessionPath(t, env, hier, "busy")
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			continue // a hierarchy the host does not limit with
		}
		if procs := strings.Fields(readTrim(t, filepath.Join(p, "cgroup.procs"))); len(procs) != 1 {
			t.Errorf("%s: after a refused RemoveEmpty the session holds %v, want the shell", hier, procs)
		}
	}
	h.mustCall(&cgwire.RemoveEmptyRequest{Session: "idle"})
	for _, hier := range []string{"unified", "memory", "pids"} {
		if _, err := os.Stat(sessionPath(t, env, hier, "idle")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: session directory after RemoveEmpty: %v", hier, err)
		}
	}
	h.mustCall(&cgwire.RemoveEmptyRequest{Session: "idle"})
	if _, err := h.call(&cgwire.RemoveEmptyRequest{Session: "../x"}); wireCode(err) != wire.ErrBadRequest {
		t.Errorf("RemoveEmpty of a path: %v, want bad request", err)
	}
	h.mustCall(&cgwire.RemoveRequest{Session: "busy"})
	tg.wait(t, 5*time.Second)
}

// TestCgroupCompromisedSupervisor plays a compromised supervisor: every
// request is refused with the right code, creates nothing (the leak
// check compares the cgroup tree) and the helper keeps serving.
func TestCgroupCompromisedSupervisor(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	h := startCgroup(t, env)
	h.create("live", 64<<20, 8)

	// Descriptors a supervisor could pass instead of its own process's
	// pidfd.
	rootPidfd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rootPidfd)
	gone := startTarget(t, env, "/bin/true")
	gone.wait(t, 5*time.Second)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	file := openFD(t, "/etc/hostname", unix.O_RDONLY)
	ok := startTarget(t, env, "/bin/sh", "-c", "read x")

	long := strings.Repeat("a", 65)
	cases := []struct {
		name string
		req  wire.Message
		fd   int
		want wire.ErrorCode
	}{
		{"name ..", &cgwire.CreateRequest{Session: "..", MemoryBytes: 1 << 20, Pids: 1}, -1, wire.ErrBadRequest},
		{"name with /", &cgwire.CreateRequest{Session: "a/b", MemoryBytes: 1 << 20, Pids: 1}, -1, wire.ErrBadRequest},
		{"name ../x", &cgwire.CreateRequest{Session: "../x", MemoryBytes: 1 << 20, Pids: 1}, -1, wire.ErrBadRequest},
		{"name uppercase", &cgwire.CreateRequest{Session: "Abc", MemoryBytes: 1 << 20, Pids: 1}, -1, wire.ErrBadRequest},
		{"name empty", &cgwire.CreateRequest{Session: "", MemoryBytes: 1 << 20, Pids: 1}, -1, wire.ErrBadRequest},
		{"name leading dash", &cgwire.CreateRequest{Session: "-a", MemoryBytes: 1 << 20, Pids: 1}, -1, wire.ErrBadRequest},
		{"name 64 bytes, too long with a dot", &cgwire.CreateRequest{Session: long[:63] + ".", MemoryBytes: 1 << 20, Pids: 1}, -1, wire.ErrBadRequest},
		{"memory over the bound", &cgwire.CreateRequest{Session: "x", MemoryBytes: 1<<30 + 1, Pids: 1}, -1, wire.ErrRefused},
		{"pids over the bound", &cgwire.CreateRequest{Session: "x", MemoryBytes: 1 << 20, Pids: 257}, -1, wire.ErrRefused},
		{"zero memory", &cgwire.CreateRequest{Session: "x", MemoryBytes: 0, Pids: 1}, -1, wire.ErrBadRequest},
		{"zero pids", &cgwire.CreateRequest{Session: "x", MemoryBytes: 1 << 20, Pids: 0}, -1, wire.ErrBadRequest},
		{"existing session", &cgwire.CreateRequest{Session: "live", MemoryBytes: 1 << 20, Pids: 1}, -1, wire.ErrRefused},
		{"place root's process", &cgwire.PlaceRequest{Session: "live"}, rootPidfd, wire.ErrRefused},
		{"place an exited process", &cgwire.PlaceRequest{Session: "live"}, gone.pidfd, wire.ErrRefused},
		{"place a pipe", &cgwire.PlaceRequest{Session: "live"}, int(r.Fd()), wire.ErrBadRequest},
		{"place a regular file", &cgwire.PlaceRequest{Session: "live"}, file, wire.ErrBadRequest},
		{"place into a missing session", &cgwire.PlaceRequest{Session: "nosuch"}, ok.pidfd, wire.ErrRefused},
		{"place into session ..", &cgwire.PlaceRequest{Session: ".."}, ok.pidfd, wire.ErrBadRequest},
		{"kill a missing session", &cgwire.KillRequest{Session: "nosuch"}, -1, wire.ErrRefused},
		{"kill the parent", &cgwire.KillRequest{Session: "."}, -1, wire.ErrBadRequest},
		{"stat session /", &cgwire.StatRequest{Session: "/"}, -1, wire.ErrBadRequest},
		{"remove ..", &cgwire.RemoveRequest{Session: ".."}, -1, wire.ErrBadRequest},
	}
	for _, c := range cases {
		var fds []int
		if c.fd >= 0 {
			fds = []int{c.fd}
		}
		if _, err := h.call(c.req, fds...); wireCode(err) != c.want {
			t.Errorf("%s: %v, want code %d", c.name, err, c.want)
		}
	}
	// Still serving; root's process was not moved.
	h.mustCall(&cgwire.StatRequest{Session: "live"})
	if cg := readTrim(t, "/proc/self/cgroup"); strings.Contains(cg, "/live") {
		t.Errorf("the test process was moved: %s", cg)
	}
	if procs := readTrim(t, filepath.Join(sessionPath(t, env, "unified", "live"), "cgroup.procs")); procs != "" {
		t.Errorf("processes placed by refused requests: %s", procs)
	}
}

// TestCgroupDescriptorCounts: a request with the wrong number of
// descriptors is a protocol error and the helper exits 2.
func TestCgroupDescriptorCounts(t *testing.T) {
	env := testenv.Get(t)
	for _, c := range []struct {
		name  string
		typ   wire.MsgType
		nfds  int
		valid wire.Message
	}{
		{"place without a pidfd", cgwire.Place.Type(), 0, &cgwire.PlaceRequest{Session: "s"}},
		{"place with two", cgwire.Place.Type(), 2, &cgwire.PlaceRequest{Session: "s"}},
		{"create with one", cgwire.Create.Type(), 1, &cgwire.CreateRequest{Session: "s", MemoryBytes: 1 << 20, Pids: 1}},
		{"kill with one", cgwire.Kill.Type(), 1, &cgwire.KillRequest{Session: "s"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			testenv.CheckLeaks(t, env.UID)
			p, log := env.StartHelper(t, "glove-cgroup")
			if _, err := p.Hello(); err != nil {
				t.Fatal(err)
			}
			good, err := wiretest.FrameOf(cgwire.Protocol, 2, c.valid)
			if err != nil {
				t.Fatal(err)
			}
			// Same payload, header declaring the descriptors actually sent.
			frame := append(wiretest.EncodeRawHeader(wire.Version, uint16(c.typ), 2, uint32(len(good)-wire.HeaderSize), uint16(c.nfds), 0), good[wire.HeaderSize:]...)
			var fds []int
			for i := 0; i < c.nfds; i++ {
				fds = append(fds, openFD(t, "/etc/hostname", unix.O_RDONLY))
			}
			if err := p.Conn().SendRaw(frame, fds); err != nil {
				t.Fatal(err)
			}
			if fr, err := p.Conn().Recv(wiretest.OnlyErrors); err == nil {
				closeAll(fr.FDs)
			}
			code, sig := testenv.WaitExit(t, p, 10*time.Second)
			if code != helperkit.ExitProtocol {
				t.Errorf("exit %d (signal %v), want %d\nhelper log: %s", code, sig, helperkit.ExitProtocol, log)
			}
		})
	}
}

// TestCgroupStartupParent: a missing delegated parent is a start-up
// error.
func TestCgroupStartupParent(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	const file = "cgroup.json"
	good := testenv.DefaultConfigs(env.Base)[file]
	t.Cleanup(func() {
		if err := env.WriteConfig(file, good); err != nil {
			t.Fatal(err)
		}
	})
	if err := env.WriteConfig(file, []byte(`{"schema_version":1,"parent":"/glove-no-such-parent","max_memory_bytes":1048576,"max_pids":4}`)); err != nil {
		t.Fatal(err)
	}
	p, log := env.StartHelper(t, "glove-cgroup")
	code, sig := testenv.WaitExit(t, p, 10*time.Second)
	if code != helperkit.ExitStartup || !strings.Contains(log.String(), "parent") {
		t.Errorf("exit %d (signal %v), log %s; want %d naming the parent", code, sig, log, helperkit.ExitStartup)
	}
}

// TestCgroupFreeze: a frozen session makes no progress (a process
// printing every 10 ms falls silent) and resumes when thawed; the helper
// answers only once the kernel reports the state. Exercised on the v2
// unified hierarchy, which this host has without controllers.
func TestCgroupFreeze(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	h := startCgroup(t, env)
	h.create("frz", 64<<20, 8)
	tg := startTarget(t, env, "/usr/bin/python3", "-c",
		"import sys, time\nsys.stdin.readline()\nwhile True:\n  print('tick', flush=True)\n  time.sleep(0.01)")
	h.mustCall(&cgwire.PlaceRequest{Session: "frz"}, tg.pidfd)
	fmt.Fprintln(tg.in)
	ticks := make(chan struct{}, 1024)
	go func() {
		for {
			if _, err := tg.out.ReadString('\n'); err != nil {
				return
			}
			ticks <- struct{}{}
		}
	}()
	count := func(d time.Duration) int {
		n := 0
		deadline := time.After(d)
		for {
			select {
			case <-ticks:
				n++
			case <-deadline:
				return n
			}
		}
	}
	// The first tick waits for the interpreter to start, which takes
	// seconds in an emulated guest (the VM lane); then it ticks often.
	first := func(what string) {
		select {
		case <-ticks:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no tick in 30 s", what)
		}
	}
	first("before the freeze")
	if r := h.mustCall(&cgwire.FreezeRequest{Session: "frz", Frozen: true}).(*cgwire.FreezeReply); !r.Settled {
		t.Fatal("freeze did not settle")
	}
	count(300 * time.Millisecond) // lines already in the pipe (slow to drain in an emulated guest)
	if n := count(500 * time.Millisecond); n != 0 {
		t.Errorf("frozen session printed %d ticks in 500 ms", n)
	}
	if r := h.mustCall(&cgwire.FreezeRequest{Session: "frz", Frozen: false}).(*cgwire.FreezeReply); !r.Settled {
		t.Fatal("thaw did not settle")
	}
	first("thawed")
	if _, err := h.call(&cgwire.FreezeRequest{Session: "nope", Frozen: true}); wireCodeOf(err) == 0 {
		t.Errorf("freeze of an unknown session: %v, want a refusal", err)
	}
	if _, err := h.call(&cgwire.FreezeRequest{Session: "../frz", Frozen: true}); wireCodeOf(err) != wire.ErrBadRequest {
		t.Errorf("freeze of ../frz: %v, want ErrBadRequest", err)
	}
}

func wireCodeOf(err error) wire.ErrorCode {
	var e *wire.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}
