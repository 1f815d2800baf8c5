// SPDX-License-Identifier: Apache-2.0

package bpf

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// victimEnv selects a victim mode when the test binary re-executes itself.
// Filters cannot be removed, so every Install happens in a child process.
const victimEnv = "GLOVE_SECCOMP_BPF_VICTIM"

// runtimeSyscalls is a generous allowlist for the Go runtime, fmt and
// os.ReadFile/ReadDir. It deliberately omits getppid and uname, which the
// victims use as the forbidden calls, and lseek, which gets conditional
// rules.
var runtimeSyscalls = []uintptr{
	unix.SYS_READ, unix.SYS_WRITE, unix.SYS_CLOSE, unix.SYS_PREAD64,
	unix.SYS_MMAP, unix.SYS_MUNMAP, unix.SYS_MADVISE, unix.SYS_MPROTECT, unix.SYS_MREMAP, unix.SYS_MINCORE,
	unix.SYS_FUTEX, unix.SYS_NANOSLEEP, unix.SYS_CLOCK_NANOSLEEP, unix.SYS_SCHED_YIELD,
	unix.SYS_RT_SIGACTION, unix.SYS_RT_SIGPROCMASK, unix.SYS_RT_SIGRETURN, unix.SYS_SIGALTSTACK,
	unix.SYS_CLONE, unix.SYS_CLONE3, unix.SYS_EXIT, unix.SYS_EXIT_GROUP,
	unix.SYS_GETTID, unix.SYS_GETPID, unix.SYS_TGKILL, unix.SYS_TKILL,
	unix.SYS_EPOLL_CREATE1, unix.SYS_EPOLL_CTL, unix.SYS_EPOLL_PWAIT, unix.SYS_EPOLL_PWAIT2,
	unix.SYS_PIPE2, unix.SYS_EVENTFD2, unix.SYS_FCNTL,
	unix.SYS_OPENAT, unix.SYS_NEWFSTATAT, unix.SYS_FSTAT, unix.SYS_GETDENTS64, unix.SYS_READLINKAT,
	unix.SYS_GETRANDOM, unix.SYS_CLOCK_GETTIME, unix.SYS_GETTIMEOFDAY,
	unix.SYS_SCHED_GETAFFINITY, unix.SYS_RESTART_SYSCALL, unix.SYS_PRLIMIT64, unix.SYS_GETRLIMIT,
	unix.SYS_SETITIMER, unix.SYS_TIMER_CREATE, unix.SYS_TIMER_SETTIME, unix.SYS_TIMER_DELETE,
}

func victimRules(extra ...Rule) []Rule {
	var rules []Rule
	for _, nr := range append(append([]uintptr{}, runtimeSyscalls...), archRuntimeSyscalls...) {
		rules = append(rules, Rule{Nr: nr})
	}
	return append(rules, extra...)
}

// TestInstallVictim is not a test on its own: it is the body of the child
// processes started by the TestInstall* tests below.
func TestInstallVictim(t *testing.T) {
	mode := os.Getenv(victimEnv)
	if mode == "" {
		t.Skip("only runs as a re-executed child of the TestInstall* tests")
	}
	// The victim never returns to the testing framework: it exits with a
	// code the parent interprets, or dies by SIGSYS.
	switch mode {
	case "kill":
		victimKill()
	case "errno":
		victimErrno()
	case "nonnp":
		victimNoNNP()
	default:
		fmt.Printf("VICTIM unknown mode %q\n", mode)
	}
	os.Exit(2)
}

func victimFail(format string, args ...any) {
	fmt.Printf("VICTIM FAIL "+format+"\n", args...)
	os.Exit(2)
}

// startWorker parks a goroutine on its own OS thread before the filter is
// installed, so the forbidden call later comes from a thread that existed
// already: it is only filtered if TSYNC really synchronized all threads.
// The caller's goroutine must be locked to its own thread.
func startWorker(work func()) (tid int, start chan<- struct{}) {
	tids := make(chan int)
	begin := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		tids <- unix.Gettid()
		<-begin
		work()
		os.Exit(0)
	}()
	return <-tids, begin
}

// lockAndSetNNP pins the goroutine and sets no_new_privs on its thread.
// Install then propagates no_new_privs to every other thread via TSYNC, so
// one prctl on the installing thread is enough.
func lockAndSetNNP() {
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		victimFail("prctl(PR_SET_NO_NEW_PRIVS): %v", err)
	}
}

func victimKill() {
	// SIGSYS dumps core by default; nobody needs the core file.
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		victimFail("setrlimit(RLIMIT_CORE): %v", err)
	}
	lockAndSetNNP()
	worker, start := startWorker(func() {
		fmt.Printf("VICTIM calling getppid tid=%d\n", unix.Gettid())
		unix.Getppid()
		fmt.Println("VICTIM survived getppid")
		os.Exit(3)
	})
	prog, err := Compile(victimRules(), Action(unix.SECCOMP_RET_KILL_PROCESS))
	if err != nil {
		victimFail("%v", err)
	}
	if err := Install(prog); err != nil {
		victimFail("%v", err)
	}
	fmt.Printf("VICTIM installed tid=%d worker=%d\n", unix.Gettid(), worker)
	close(start)
	time.Sleep(30 * time.Second)
	victimFail("worker neither died nor exited")
}

func errnoOf(err error) int {
	var e unix.Errno
	if errors.As(err, &e) {
		return int(e)
	}
	if err != nil {
		return -1
	}
	return 0
}

func victimErrno() {
	lockAndSetNNP()
	devnull, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		victimFail("open /dev/null: %v", err)
	}
	worker, start := startWorker(func() {
		var u unix.Utsname
		fmt.Printf("VICTIM uname errno=%d\n", errnoOf(unix.Uname(&u)))
		// lseek checks conditions against the real kernel's seccomp_data
		// layout: offset's high word, whence's low word.
		for _, c := range []struct {
			name   string
			off    int64
			whence int
		}{
			{"match", 1<<32 | 7, unix.SEEK_SET},
			{"high-mismatch", 7, unix.SEEK_SET},
			{"whence-mismatch", 1 << 32, unix.SEEK_CUR},
		} {
			_, err := unix.Seek(devnull, c.off, c.whence)
			fmt.Printf("VICTIM lseek %s errno=%d\n", c.name, errnoOf(err))
		}
		dir := "/proc/self/task"
		ents, err := os.ReadDir(dir)
		if err != nil {
			victimFail("read %s: %v", dir, err)
		}
		for _, e := range ents {
			st, err := os.ReadFile(filepath.Join(dir, e.Name(), "status"))
			if err != nil {
				victimFail("read status of task %s: %v", e.Name(), err)
			}
			fmt.Printf("VICTIM task %s seccomp=%s filters=%s nnp=%s\n", e.Name(),
				statusField(st, "Seccomp"), statusField(st, "Seccomp_filters"), statusField(st, "NoNewPrivs"))
		}
		st, err := os.ReadFile("/proc/self/status")
		if err != nil {
			victimFail("read /proc/self/status: %v", err)
		}
		fmt.Printf("VICTIM self seccomp=%s filters=%s\n", statusField(st, "Seccomp"), statusField(st, "Seccomp_filters"))
	})
	rules := victimRules(Rule{Name: "lseek-4GiB-set", Nr: unix.SYS_LSEEK, Conds: []Cond{
		{Arg: 1, Mask: 0xffffffff00000000, Value: 1 << 32},
		{Arg: 2, Mask: 0xffffffff, Value: unix.SEEK_SET},
	}})
	prog, err := Compile(rules, Action(unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM)))
	if err != nil {
		victimFail("%v", err)
	}
	if err := Install(prog); err != nil {
		victimFail("%v", err)
	}
	fmt.Printf("VICTIM installed tid=%d worker=%d\n", unix.Gettid(), worker)
	close(start)
	time.Sleep(30 * time.Second)
	victimFail("worker did not finish")
}

func victimNoNNP() {
	runtime.LockOSThread()
	if nnp, _ := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); nnp != 0 {
		fmt.Println("VICTIM nnp-preset")
		os.Exit(0)
	}
	prog, err := Compile(victimRules(), Action(unix.SECCOMP_RET_KILL_PROCESS))
	if err != nil {
		victimFail("%v", err)
	}
	err = Install(prog)
	st, _ := os.ReadFile("/proc/self/status")
	fmt.Printf("VICTIM nonnp is-ErrNoNewPrivs=%t seccomp=%s err=%v\n",
		errors.Is(err, ErrNoNewPrivs), statusField(st, "Seccomp"), err)
	os.Exit(0)
}

func statusField(status []byte, key string) string {
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, key+":\t"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "missing"
}

// runVictim re-executes the test binary in the given victim mode.
func runVictim(t *testing.T, mode string) (stdout string, ws syscall.WaitStatus) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestInstallVictim$", "-test.count=1")
	cmd.Env = append(os.Environ(), victimEnv+"="+mode)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("run victim %q: %v", mode, err)
	}
	ws = cmd.ProcessState.Sys().(syscall.WaitStatus)
	t.Logf("victim %q: %v\nstdout:\n%sstderr:\n%s", mode, cmd.ProcessState, out.String(), errOut.String())
	return out.String(), ws
}

var installedRE = regexp.MustCompile(`(?m)^VICTIM installed tid=(\d+) worker=(\d+)$`)

// checkInstalled asserts Install succeeded and the worker thread that will
// make the probe calls is not the installing thread.
func checkInstalled(t *testing.T, out string) {
	t.Helper()
	m := installedRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("victim never reported a successful Install")
	}
	if m[1] == m[2] {
		t.Fatalf("worker ran on the installing thread %s; TSYNC is not exercised", m[1])
	}
}

func TestInstallKillsForbiddenSyscallOnOtherThread(t *testing.T) {
	out, ws := runVictim(t, "kill")
	checkInstalled(t, out)
	if !strings.Contains(out, "VICTIM calling getppid tid=") {
		t.Fatalf("victim died before reaching the forbidden call")
	}
	if strings.Contains(out, "survived") {
		t.Fatalf("getppid returned: the filter did not apply to the worker thread")
	}
	if !ws.Signaled() || ws.Signal() != unix.SIGSYS {
		t.Fatalf("victim wait status %#x, want killed by SIGSYS", uint32(ws))
	}
}

func TestInstallErrnoDefault(t *testing.T) {
	out, ws := runVictim(t, "errno")
	checkInstalled(t, out)
	if !ws.Exited() || ws.ExitStatus() != 0 {
		t.Fatalf("victim wait status %#x, want exit 0", uint32(ws))
	}
	want := []string{
		fmt.Sprintf("VICTIM uname errno=%d", unix.EPERM),
		"VICTIM lseek match errno=0",
		fmt.Sprintf("VICTIM lseek high-mismatch errno=%d", unix.EPERM),
		fmt.Sprintf("VICTIM lseek whence-mismatch errno=%d", unix.EPERM),
	}
	for _, w := range want {
		if !strings.Contains(out, w+"\n") {
			t.Errorf("victim output lacks %q", w)
		}
	}
	self := regexp.MustCompile(`(?m)^VICTIM self seccomp=(\S+) filters=(\S+)$`).FindStringSubmatch(out)
	if self == nil || self[1] != "2" {
		t.Fatalf("/proc/self/status Seccomp not 2 (got %v)", self)
	}
	if n, err := strconv.Atoi(self[2]); err != nil || n < 1 {
		t.Errorf("/proc/self/status Seccomp_filters = %q, want >= 1", self[2])
	}
	// Every thread, not just the installing one, must carry the filter and
	// the no_new_privs bit that TSYNC copies along with it.
	tasks := regexp.MustCompile(`(?m)^VICTIM task (\d+) seccomp=(\S+) filters=(\S+) nnp=(\S+)$`).FindAllStringSubmatch(out, -1)
	if len(tasks) < 2 {
		t.Fatalf("saw %d threads, want several", len(tasks))
	}
	for _, m := range tasks {
		if n, err := strconv.Atoi(m[3]); m[2] != "2" || err != nil || n < 1 || m[4] != "1" {
			t.Errorf("thread %s: Seccomp=%s Seccomp_filters=%s NoNewPrivs=%s, want 2, >= 1, 1", m[1], m[2], m[3], m[4])
		}
	}
}

func TestInstallRequiresNoNewPrivs(t *testing.T) {
	out, ws := runVictim(t, "nonnp")
	if strings.Contains(out, "VICTIM nnp-preset") {
		t.Skip("no_new_privs is inherited already set; cannot test its absence")
	}
	if !ws.Exited() || ws.ExitStatus() != 0 {
		t.Fatalf("victim wait status %#x, want exit 0", uint32(ws))
	}
	if !strings.Contains(out, "VICTIM nonnp is-ErrNoNewPrivs=true seccomp=0 ") {
		t.Fatalf("Install without no_new_privs did not fail with ErrNoNewPrivs before filtering")
	}
}

func TestInstallRejectsBadLength(t *testing.T) {
	// Both fail before any syscall, so this is safe in the test process.
	if err := Install(nil); err == nil {
		t.Error("Install(nil) succeeded")
	}
	if err := Install(make([]unix.SockFilter, maxInsns+1)); err == nil {
		t.Error("Install of an oversized program succeeded")
	}
}
