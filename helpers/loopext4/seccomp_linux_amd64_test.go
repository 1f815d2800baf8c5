package loopext4

import (
	"testing"

	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/seccomp/bpf"
	"golang.org/x/sys/unix"
)

// verdict runs the helper's compiled filter on one system call.
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

// TestAllowlistConditions checks the argument conditions of the helper's
// additions do what their comments say: the calls the helper and
// mkfs.ext4 make pass, their dangerous neighbours are killed.
func TestAllowlistConditions(t *testing.T) {
	prog, err := bpf.Compile(append(append([]bpf.Rule{}, helperkit.BaseSyscalls...), Syscalls...),
		bpf.Action(unix.SECCOMP_RET_KILL_PROCESS))
	if err != nil {
		t.Fatal(err)
	}
	const at = ^uint64(99) // AT_FDCWD (-100) as a 64-bit argument
	for _, c := range []struct {
		name  string
		nr    uintptr
		args  []uint64
		allow bool
	}{
		{"openat: Create's exact flags and mode", unix.SYS_OPENAT, []uint64{3, 0, createFlags, 0o600}, true},
		{"openat: Create's flags, mode 0666", unix.SYS_OPENAT, []uint64{3, 0, createFlags, 0o666}, false},
		{"openat: O_CREAT without O_EXCL", unix.SYS_OPENAT, []uint64{3, 0, unix.O_CREAT | unix.O_RDWR, 0o600}, false},
		{"openat: O_PATH|O_NOFOLLOW (image check)", unix.SYS_OPENAT, []uint64{3, 0, unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, 0}, true},
		{"openat: O_RDWR (reopen, loop device)", unix.SYS_OPENAT, []uint64{at, 0, unix.O_RDWR | unix.O_CLOEXEC, 0}, true},
		{"openat: mkfs's O_RDWR|O_EXCL", unix.SYS_OPENAT, []uint64{at, 0, unix.O_RDWR | unix.O_EXCL, 0}, true},
		{"openat: O_TRUNC", unix.SYS_OPENAT, []uint64{at, 0, unix.O_WRONLY | unix.O_TRUNC, 0}, false},
		{"openat: O_TMPFILE", unix.SYS_OPENAT, []uint64{at, 0, unix.O_TMPFILE | unix.O_RDWR, 0o600}, false},
		{"clone: a thread", unix.SYS_CLONE, []uint64{unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS}, true},
		{"clone: os/exec's fork", unix.SYS_CLONE, []uint64{cloneExec}, true},
		{"clone: Go's pidfd probe", unix.SYS_CLONE, []uint64{cloneProbe}, true},
		{"clone: fork into a user namespace", unix.SYS_CLONE, []uint64{cloneExec | unix.CLONE_NEWUSER}, false},
		{"clone: fork into a mount namespace", unix.SYS_CLONE, []uint64{cloneExec | unix.CLONE_NEWNS}, false},
		{"clone: plain fork", unix.SYS_CLONE, []uint64{uint64(unix.SIGCHLD)}, false},
		{"clone3", unix.SYS_CLONE3, []uint64{0, 88}, false},
		{"ioctl: LOOP_CONFIGURE", unix.SYS_IOCTL, []uint64{4, unix.LOOP_CONFIGURE}, true},
		{"ioctl: mkfs's BLKGETSIZE64", unix.SYS_IOCTL, []uint64{3, unix.BLKGETSIZE64}, true},
		{"ioctl: LOOP_SET_FD", unix.SYS_IOCTL, []uint64{4, unix.LOOP_SET_FD}, false},
		{"ioctl: LOOP_CLR_FD", unix.SYS_IOCTL, []uint64{4, unix.LOOP_CLR_FD}, false},
		{"ioctl: LOOP_SET_STATUS64", unix.SYS_IOCTL, []uint64{4, unix.LOOP_SET_STATUS64}, false},
		{"ioctl: BLKDISCARD", unix.SYS_IOCTL, []uint64{4, unix.BLKDISCARD}, false},
		{"ioctl: TIOCSTI", unix.SYS_IOCTL, []uint64{0, unix.TIOCSTI}, false},
		{"ioctl: LOOP_CONFIGURE with high bits", unix.SYS_IOCTL, []uint64{4, 1<<32 | unix.LOOP_CONFIGURE}, false},
		{"fallocate: mode 0", unix.SYS_FALLOCATE, []uint64{3, 0, 0, 1 << 20}, true},
		{"fallocate: ZERO_RANGE", unix.SYS_FALLOCATE, []uint64{3, unix.FALLOC_FL_ZERO_RANGE, 0, 4096}, true},
		{"fallocate: PUNCH_HOLE", unix.SYS_FALLOCATE, []uint64{3, unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE, 0, 4096}, false},
		{"unlinkat: a file", unix.SYS_UNLINKAT, []uint64{3, 0, 0}, true},
		{"unlinkat: a directory", unix.SYS_UNLINKAT, []uint64{3, 0, unix.AT_REMOVEDIR}, false},
		{"flock: blocking", unix.SYS_FLOCK, []uint64{3, unix.LOCK_EX}, false},
		{"fsconfig: string", unix.SYS_FSCONFIG, []uint64{5, unix.FSCONFIG_SET_STRING, 0, 0, 0}, true},
		{"fsconfig: descriptor", unix.SYS_FSCONFIG, []uint64{5, unix.FSCONFIG_SET_FD, 0, 0, 3}, false},
		{"fsconfig: path", unix.SYS_FSCONFIG, []uint64{5, unix.FSCONFIG_SET_PATH, 0, 0, at}, false},
		{"fsconfig: reconfigure", unix.SYS_FSCONFIG, []uint64{5, unix.FSCONFIG_CMD_RECONFIGURE, 0, 0, 0}, true},
		{"fspick: a descriptor", unix.SYS_FSPICK, []uint64{5, 0, unix.FSPICK_CLOEXEC | unix.FSPICK_EMPTY_PATH}, true},
		{"fspick: a path", unix.SYS_FSPICK, []uint64{at, 0, unix.FSPICK_CLOEXEC}, false},
		{"mount_setattr", unix.SYS_MOUNT_SETATTR, []uint64{5, 0, unix.AT_EMPTY_PATH | unix.AT_RECURSIVE, 0, 32}, false},
		{"pidfd_send_signal: SIGKILL", unix.SYS_PIDFD_SEND_SIGNAL, []uint64{7, uint64(unix.SIGKILL), 0, 0}, true},
		{"pidfd_send_signal: SIGSTOP", unix.SYS_PIDFD_SEND_SIGNAL, []uint64{7, uint64(unix.SIGSTOP), 0, 0}, false},
		{"waitid: P_PIDFD", unix.SYS_WAITID, []uint64{unix.P_PIDFD, 7}, true},
		{"waitid: P_ALL", unix.SYS_WAITID, []uint64{unix.P_ALL, 0}, false},
		{"prlimit64: itself", unix.SYS_PRLIMIT64, []uint64{0, unix.RLIMIT_NOFILE}, true},
		{"prlimit64: another process", unix.SYS_PRLIMIT64, []uint64{1, unix.RLIMIT_NOFILE}, false},
		{"prctl: PR_GET_DUMPABLE", unix.SYS_PRCTL, []uint64{unix.PR_GET_DUMPABLE}, true},
		{"prctl: PR_SET_DUMPABLE", unix.SYS_PRCTL, []uint64{unix.PR_SET_DUMPABLE, 1}, false},
		{"mount", unix.SYS_MOUNT, nil, false},
		{"move_mount", unix.SYS_MOVE_MOUNT, nil, false},
		{"open_tree", unix.SYS_OPEN_TREE, nil, false},
		{"unshare", unix.SYS_UNSHARE, nil, false},
		{"setns", unix.SYS_SETNS, nil, false},
		{"ptrace", unix.SYS_PTRACE, nil, false},
		// capset: helperkit.Raised raises and lowers the permitted (OnDemand)
		// capabilities around each call that uses them.
		{"capset", unix.SYS_CAPSET, nil, true},
		{"socket", unix.SYS_SOCKET, nil, false},
		{"mknodat", unix.SYS_MKNODAT, nil, false},
		{"linkat", unix.SYS_LINKAT, nil, false},
		{"renameat2", unix.SYS_RENAMEAT2, nil, false},
		{"fchownat", unix.SYS_FCHOWNAT, nil, false},
		{"kill", unix.SYS_KILL, nil, false},
	} {
		got := verdict(t, prog, c.nr, c.args...)
		if allowed := got == unix.SECCOMP_RET_ALLOW; allowed != c.allow {
			t.Errorf("%s: filter returns %#x, want allowed=%v", c.name, got, c.allow)
		}
	}
}
