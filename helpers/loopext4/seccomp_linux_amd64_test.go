// SPDX-License-Identifier: Apache-2.0

package loopext4

import (
	"testing"

	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/loopext4format"
	"github.com/glove-sandbox/glove/seccomp/bpf"
	"github.com/glove-sandbox/glove/seccomp/bpf/bpftest"
	"golang.org/x/sys/unix"
)

// verdict runs the helper's compiled filter on one system call.
func verdict(t *testing.T, prog []unix.SockFilter, nr uintptr, args ...uint64) uint32 {
	t.Helper()
	var a6 [6]uint64
	copy(a6[:], args)
	a, err := bpftest.Evaluate(prog, nr, a6)
	if err != nil {
		t.Fatalf("run filter: %v", err)
	}
	return uint32(a)
}

// The two clone flag sets of Go's os/exec that the formatter's list
// admits, and the flags it creates images with
// (helpers/loopext4format/seccomp.go).
const (
	cloneProbe  = unix.CLONE_VFORK | unix.CLONE_VM | unix.CLONE_PIDFD
	cloneExec   = cloneProbe | uint64(unix.SIGCHLD)
	createFlags = unix.O_CREAT | unix.O_EXCL | unix.O_RDWR | unix.O_NOFOLLOW | unix.O_CLOEXEC
)

// TestAllowlistConditions checks the argument conditions of the three
// lists do what their comments say: the calls the helper (h), its
// formatter (f, glove-loopext4-format) and mkfs.ext4 (m) make pass under
// their own filter,
// their dangerous neighbours are killed, and the helper's own filter
// holds none of what only the formatter or mkfs.ext4 needs (Create's
// file work, creating, allocating, syncing and removing an image, is the
// formatter's), nor mkfs.ext4's any of the formatter's file work.
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
		"h": compile(Syscalls),
		"f": compile(loopext4format.Syscalls, loopext4format.MkfsSyscalls),
		"m": compile(loopext4format.MkfsSyscalls),
	}
	const at = ^uint64(99) // AT_FDCWD (-100) as a 64-bit argument
	for _, c := range []struct {
		in    string // h, f or m
		name  string
		nr    uintptr
		args  []uint64
		allow bool
	}{
		{"h", "openat: Create's exact flags and mode", unix.SYS_OPENAT, []uint64{3, 0, createFlags, 0o600}, false},
		{"f", "openat: Create's exact flags and mode", unix.SYS_OPENAT, []uint64{3, 0, createFlags, 0o600}, true},
		{"f", "openat: Create's flags, mode 0666", unix.SYS_OPENAT, []uint64{3, 0, createFlags, 0o666}, false},
		{"f", "openat: O_CREAT without O_EXCL", unix.SYS_OPENAT, []uint64{3, 0, unix.O_CREAT | unix.O_RDWR, 0o600}, false},
		{"f", "openat: O_TRUNC", unix.SYS_OPENAT, []uint64{at, 0, unix.O_WRONLY | unix.O_TRUNC, 0}, false},
		{"f", "openat: O_PATH (the image's handle, the root's \".\")", unix.SYS_OPENAT, []uint64{at, 0, unix.O_PATH | unix.O_CLOEXEC, 0}, true},
		{"h", "openat: Create's flags, mode 0666", unix.SYS_OPENAT, []uint64{3, 0, createFlags, 0o666}, false},
		{"h", "openat: O_CREAT without O_EXCL", unix.SYS_OPENAT, []uint64{3, 0, unix.O_CREAT | unix.O_RDWR, 0o600}, false},
		{"h", "openat: O_PATH|O_NOFOLLOW (image check)", unix.SYS_OPENAT, []uint64{3, 0, unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, 0}, true},
		{"h", "openat: O_RDWR (reopen, loop device)", unix.SYS_OPENAT, []uint64{at, 0, unix.O_RDWR | unix.O_CLOEXEC, 0}, true},
		{"h", "openat: mkfs's O_RDWR|O_EXCL", unix.SYS_OPENAT, []uint64{at, 0, unix.O_RDWR | unix.O_EXCL, 0}, true},
		{"h", "openat: O_TRUNC", unix.SYS_OPENAT, []uint64{at, 0, unix.O_WRONLY | unix.O_TRUNC, 0}, false},
		{"h", "openat: O_TMPFILE", unix.SYS_OPENAT, []uint64{at, 0, unix.O_TMPFILE | unix.O_RDWR, 0o600}, false},
		{"h", "clone: a thread", unix.SYS_CLONE, []uint64{unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS}, true},
		{"f", "clone: os/exec's fork", unix.SYS_CLONE, []uint64{cloneExec}, true},
		{"f", "clone: Go's pidfd probe", unix.SYS_CLONE, []uint64{cloneProbe}, true},
		{"f", "clone: fork into a user namespace", unix.SYS_CLONE, []uint64{cloneExec | unix.CLONE_NEWUSER}, false},
		{"f", "clone: fork into a mount namespace", unix.SYS_CLONE, []uint64{cloneExec | unix.CLONE_NEWNS}, false},
		{"f", "clone: plain fork", unix.SYS_CLONE, []uint64{uint64(unix.SIGCHLD)}, false},
		{"h", "clone3", unix.SYS_CLONE3, []uint64{0, 88}, false},
		{"h", "ioctl: LOOP_CONFIGURE", unix.SYS_IOCTL, []uint64{4, unix.LOOP_CONFIGURE}, true},
		{"m", "ioctl: mkfs's BLKGETSIZE64", unix.SYS_IOCTL, []uint64{3, unix.BLKGETSIZE64}, true},
		{"h", "ioctl: LOOP_SET_FD", unix.SYS_IOCTL, []uint64{4, unix.LOOP_SET_FD}, false},
		{"h", "ioctl: LOOP_CLR_FD", unix.SYS_IOCTL, []uint64{4, unix.LOOP_CLR_FD}, false},
		{"h", "ioctl: LOOP_SET_STATUS64", unix.SYS_IOCTL, []uint64{4, unix.LOOP_SET_STATUS64}, false},
		{"h", "ioctl: BLKDISCARD", unix.SYS_IOCTL, []uint64{4, unix.BLKDISCARD}, false},
		{"h", "ioctl: TIOCSTI", unix.SYS_IOCTL, []uint64{0, unix.TIOCSTI}, false},
		{"h", "ioctl: LOOP_CONFIGURE with high bits", unix.SYS_IOCTL, []uint64{4, 1<<32 | unix.LOOP_CONFIGURE}, false},
		{"h", "fallocate: mode 0", unix.SYS_FALLOCATE, []uint64{3, 0, 0, 1 << 20}, false},
		{"f", "fallocate: mode 0", unix.SYS_FALLOCATE, []uint64{3, 0, 0, 1 << 20}, true},
		{"f", "fallocate: PUNCH_HOLE", unix.SYS_FALLOCATE, []uint64{3, unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE, 0, 4096}, false},
		{"m", "fallocate: ZERO_RANGE", unix.SYS_FALLOCATE, []uint64{3, unix.FALLOC_FL_ZERO_RANGE, 0, 4096}, true},
		{"h", "fallocate: PUNCH_HOLE", unix.SYS_FALLOCATE, []uint64{3, unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE, 0, 4096}, false},
		{"h", "unlinkat: a file", unix.SYS_UNLINKAT, []uint64{3, 0, 0}, false},
		{"h", "unlinkat: a directory", unix.SYS_UNLINKAT, []uint64{3, 0, unix.AT_REMOVEDIR}, false},
		{"f", "unlinkat: a file", unix.SYS_UNLINKAT, []uint64{3, 0, 0}, true},
		{"f", "unlinkat: a directory", unix.SYS_UNLINKAT, []uint64{3, 0, unix.AT_REMOVEDIR}, false},
		{"h", "fsync", unix.SYS_FSYNC, []uint64{3}, false},
		{"f", "fsync", unix.SYS_FSYNC, []uint64{3}, true},
		{"m", "unlinkat: a file", unix.SYS_UNLINKAT, []uint64{3, 0, 0}, false},
		{"m", "fallocate: mode 0", unix.SYS_FALLOCATE, []uint64{3, 0, 0, 1 << 20}, false},
		{"h", "flock: blocking", unix.SYS_FLOCK, []uint64{3, unix.LOCK_EX}, false},
		{"h", "fsconfig: string", unix.SYS_FSCONFIG, []uint64{5, unix.FSCONFIG_SET_STRING, 0, 0, 0}, true},
		{"h", "fsconfig: descriptor", unix.SYS_FSCONFIG, []uint64{5, unix.FSCONFIG_SET_FD, 0, 0, 3}, false},
		{"h", "fsconfig: path", unix.SYS_FSCONFIG, []uint64{5, unix.FSCONFIG_SET_PATH, 0, 0, at}, false},
		{"h", "fsconfig: reconfigure", unix.SYS_FSCONFIG, []uint64{5, unix.FSCONFIG_CMD_RECONFIGURE, 0, 0, 0}, true},
		{"h", "fspick: a descriptor", unix.SYS_FSPICK, []uint64{5, 0, unix.FSPICK_CLOEXEC | unix.FSPICK_EMPTY_PATH}, true},
		{"h", "fspick: a path", unix.SYS_FSPICK, []uint64{at, 0, unix.FSPICK_CLOEXEC}, false},
		{"h", "mount_setattr", unix.SYS_MOUNT_SETATTR, []uint64{5, 0, unix.AT_EMPTY_PATH | unix.AT_RECURSIVE, 0, 32}, false},
		{"f", "pidfd_send_signal: SIGKILL", unix.SYS_PIDFD_SEND_SIGNAL, []uint64{7, uint64(unix.SIGKILL), 0, 0}, true},
		{"f", "pidfd_send_signal: SIGSTOP", unix.SYS_PIDFD_SEND_SIGNAL, []uint64{7, uint64(unix.SIGSTOP), 0, 0}, false},
		{"f", "waitid: P_PIDFD", unix.SYS_WAITID, []uint64{unix.P_PIDFD, 7}, true},
		{"f", "waitid: P_ALL", unix.SYS_WAITID, []uint64{unix.P_ALL, 0}, false},
		{"f", "prlimit64: itself", unix.SYS_PRLIMIT64, []uint64{0, unix.RLIMIT_NOFILE}, true},
		{"f", "prlimit64: another process", unix.SYS_PRLIMIT64, []uint64{1, unix.RLIMIT_NOFILE}, false},
		{"m", "prctl: PR_GET_DUMPABLE", unix.SYS_PRCTL, []uint64{unix.PR_GET_DUMPABLE}, true},
		{"m", "prctl: PR_SET_DUMPABLE", unix.SYS_PRCTL, []uint64{unix.PR_SET_DUMPABLE, 1}, false},
		{"h", "mount", unix.SYS_MOUNT, nil, false},
		{"h", "move_mount", unix.SYS_MOVE_MOUNT, nil, false},
		{"h", "open_tree", unix.SYS_OPEN_TREE, nil, false},
		{"h", "unshare", unix.SYS_UNSHARE, nil, false},
		{"h", "setns", unix.SYS_SETNS, nil, false},
		{"h", "ptrace", unix.SYS_PTRACE, nil, false},
		// capset: helperkit.Raised raises and lowers the permitted (OnDemand)
		// capabilities around each call that uses them.
		{"h", "capset", unix.SYS_CAPSET, nil, true},
		{"h", "socket", unix.SYS_SOCKET, nil, false},
		{"h", "mknodat", unix.SYS_MKNODAT, nil, false},
		{"h", "linkat", unix.SYS_LINKAT, nil, false},
		{"h", "renameat2", unix.SYS_RENAMEAT2, nil, false},
		{"h", "fchownat", unix.SYS_FCHOWNAT, nil, false},
		{"h", "kill", unix.SYS_KILL, nil, false},
		// What moved out of the helper's own list.
		{"h", "execve", unix.SYS_EXECVE, nil, false},
		{"h", "clone: os/exec's fork", unix.SYS_CLONE, []uint64{cloneExec}, false},
		{"h", "ioctl: mkfs's BLKGETSIZE64", unix.SYS_IOCTL, []uint64{3, unix.BLKGETSIZE64}, false},
		{"h", "fallocate: ZERO_RANGE", unix.SYS_FALLOCATE, []uint64{3, unix.FALLOC_FL_ZERO_RANGE, 0, 4096}, false},
		{"h", "pwrite64", unix.SYS_PWRITE64, nil, false},
		{"h", "prctl: PR_GET_DUMPABLE", unix.SYS_PRCTL, []uint64{unix.PR_GET_DUMPABLE}, false},
		{"h", "waitid: P_PIDFD (reaping the formatter)", unix.SYS_WAITID, []uint64{unix.P_PIDFD, 7}, true},
		{"h", "waitid: P_ALL", unix.SYS_WAITID, []uint64{unix.P_ALL, 0}, false},
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
