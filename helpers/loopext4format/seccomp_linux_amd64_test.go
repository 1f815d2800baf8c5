package loopext4format

import (
	"testing"

	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/seccomp/bpf"
	"golang.org/x/sys/unix"
)

// verdict runs a compiled filter on one system call.
func verdict(t *testing.T, prog []unix.SockFilter, nr uintptr, args ...uint64) uint32 {
	t.Helper()
	var a6 [6]uint64
	copy(a6[:], args)
	a, err := bpf.Evaluate(prog, nr, a6)
	if err != nil {
		t.Fatalf("run filter: %v", err)
	}
	return uint32(a)
}

// TestAllowlistConditions checks the argument conditions of the two
// lists do what their comments say: the calls the formatter (f) and
// mkfs.ext4 (m) make pass under their own filter, and their dangerous
// neighbours are killed (glove-loopext4's own list is checked in
// helpers/loopext4).
func TestAllowlistConditions(t *testing.T) {
	compile := func(lists ...[]bpf.Rule) []unix.SockFilter {
		rules := append([]bpf.Rule{}, helperkit.BaseSyscalls...)
		for _, l := range lists {
			rules = append(rules, l...)
		}
		prog, err := bpf.Compile(rules, bpf.Action(unix.SECCOMP_RET_KILL_PROCESS))
		if err != nil {
			t.Fatal(err)
		}
		return prog
	}
	progs := map[string][]unix.SockFilter{
		"f": compile(Syscalls, MkfsSyscalls),
		"m": compile(MkfsSyscalls),
	}
	const at = ^uint64(99) // AT_FDCWD (-100) as a 64-bit argument
	for _, c := range []struct {
		in    string // f or m
		name  string
		nr    uintptr
		args  []uint64
		allow bool
	}{
		{"f", "clone: os/exec's fork", unix.SYS_CLONE, []uint64{cloneExec}, true},
		{"f", "clone: Go's pidfd probe", unix.SYS_CLONE, []uint64{cloneProbe}, true},
		{"f", "clone: fork into a user namespace", unix.SYS_CLONE, []uint64{cloneExec | unix.CLONE_NEWUSER}, false},
		{"f", "clone: fork into a mount namespace", unix.SYS_CLONE, []uint64{cloneExec | unix.CLONE_NEWNS}, false},
		{"f", "clone: plain fork", unix.SYS_CLONE, []uint64{uint64(unix.SIGCHLD)}, false},
		{"m", "ioctl: mkfs's BLKGETSIZE64", unix.SYS_IOCTL, []uint64{3, unix.BLKGETSIZE64}, true},
		{"m", "fallocate: ZERO_RANGE", unix.SYS_FALLOCATE, []uint64{3, unix.FALLOC_FL_ZERO_RANGE, 0, 4096}, true},
		{"f", "pidfd_send_signal: SIGKILL", unix.SYS_PIDFD_SEND_SIGNAL, []uint64{7, uint64(unix.SIGKILL), 0, 0}, true},
		{"f", "pidfd_send_signal: SIGSTOP", unix.SYS_PIDFD_SEND_SIGNAL, []uint64{7, uint64(unix.SIGSTOP), 0, 0}, false},
		{"f", "waitid: P_PIDFD", unix.SYS_WAITID, []uint64{unix.P_PIDFD, 7}, true},
		{"f", "waitid: P_ALL", unix.SYS_WAITID, []uint64{unix.P_ALL, 0}, false},
		{"f", "prlimit64: itself", unix.SYS_PRLIMIT64, []uint64{0, unix.RLIMIT_NOFILE}, true},
		{"f", "prlimit64: another process", unix.SYS_PRLIMIT64, []uint64{1, unix.RLIMIT_NOFILE}, false},
		{"m", "prctl: PR_GET_DUMPABLE", unix.SYS_PRCTL, []uint64{unix.PR_GET_DUMPABLE}, true},
		{"m", "prctl: PR_SET_DUMPABLE", unix.SYS_PRCTL, []uint64{unix.PR_SET_DUMPABLE, 1}, false},
		// The formatting child's confinement, and nothing more of seccomp.
		{"f", "seccomp: a filter with TSYNC", unix.SYS_SECCOMP, []uint64{unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, 0}, true},
		{"f", "seccomp: strict mode", unix.SYS_SECCOMP, []uint64{unix.SECCOMP_SET_MODE_STRICT, 0, 0}, false},
		{"f", "seccomp: a filter without TSYNC", unix.SYS_SECCOMP, []uint64{unix.SECCOMP_SET_MODE_FILTER, 0, 0}, false},
		{"f", "prctl: PR_GET_NO_NEW_PRIVS", unix.SYS_PRCTL, []uint64{unix.PR_GET_NO_NEW_PRIVS}, true},
		{"f", "ioctl: LOOP_CONFIGURE", unix.SYS_IOCTL, []uint64{4, unix.LOOP_CONFIGURE}, false},
		{"f", "fsopen", unix.SYS_FSOPEN, []uint64{0, unix.FSOPEN_CLOEXEC}, false},
		{"m", "execve", unix.SYS_EXECVE, nil, true},
		{"m", "seccomp", unix.SYS_SECCOMP, []uint64{unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, 0}, false},
		{"m", "clone: os/exec's fork", unix.SYS_CLONE, []uint64{cloneExec}, false},
		{"m", "ioctl: LOOP_CONFIGURE", unix.SYS_IOCTL, []uint64{4, unix.LOOP_CONFIGURE}, false},
		{"m", "fallocate: PUNCH_HOLE", unix.SYS_FALLOCATE, []uint64{3, unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE, 0, 4096}, false},
		{"m", "openat: O_CREAT", unix.SYS_OPENAT, []uint64{at, 0, unix.O_CREAT | unix.O_RDWR, 0o600}, false},
	} {
		got := verdict(t, progs[c.in], c.nr, c.args...)
		if allowed := got == unix.SECCOMP_RET_ALLOW; allowed != c.allow {
			t.Errorf("%s: %s: filter returns %#x, want allowed=%v", c.in, c.name, got, c.allow)
		}
	}
}
