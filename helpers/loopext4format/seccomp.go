// SPDX-License-Identifier: Apache-2.0

package loopext4format

import (
	"github.com/glove-sandbox/glove/seccomp/bpf"
	"golang.org/x/sys/unix"
)

// This file is data: two additions to helperkit.BaseSyscalls.
//
//   - Syscalls, the formatter's own: Create's file work (creating,
//     allocating and removing an image), and starting and waiting for
//     the formatting child. The formatter's filter is BaseSyscalls +
//     Syscalls + MkfsSyscalls, since the child inherits it and
//     mkfs.ext4 runs under it too; the formatter's own fstat,
//     newfstatat, fsync and non-creating openat (the root's "." for
//     its fsync, the image's O_PATH handle for the reply) are rules of
//     MkfsSyscalls.
//   - MkfsSyscalls, mkfs.ext4's (mke2fs and glibc's dynamic loader): the
//     formatting child installs BaseSyscalls + MkfsSyscalls before it
//     executes mkfs.ext4. Measured with `strace -f -qq` of mkfs.ext4
//     formatting a regular file on Debian 12 (mke2fs 1.47, glibc 2.36).
//
// A call outside a list kills only the process making it: if a future
// mke2fs needs more, Create fails, the formatter removes the half-made
// image and glove-loopext4 keeps serving.
//
// Arguments are pinned wherever the call's effect lives in a scalar
// argument (flags, modes, request numbers); path and structure arguments
// are pointers that a seccomp filter cannot read.

// openForbidden are open flags no open of mkfs.ext4 uses: creating,
// truncating, or making an unnamed file.
const openForbidden = unix.O_CREAT | unix.O_TRUNC | (unix.O_TMPFILE &^ unix.O_DIRECTORY)

// Open flags the formatter creates images with, exactly.
const createFlags = unix.O_CREAT | unix.O_EXCL | unix.O_RDWR | unix.O_NOFOLLOW | unix.O_CLOEXEC

// The two clone flag sets Go's os/exec uses (Go 1.26, Linux): the
// pidfd probe it runs once (syscall.doCheckClonePidfd, no exit signal)
// and the fork of the child that execs mkfs.ext4. Both share the
// formatter's memory until the child execs (CLONE_VM|CLONE_VFORK) and
// return a pidfd; neither carries a namespace flag. Go uses clone3 only
// for cgroup descriptors or time namespaces, which the formatter never
// asks for, so clone3 stays forbidden.
const (
	cloneProbe = unix.CLONE_VFORK | unix.CLONE_VM | unix.CLONE_PIDFD
	cloneExec  = cloneProbe | uint64(unix.SIGCHLD)
)

func eq(arg uint8, v uint64) []bpf.Cond {
	return []bpf.Cond{{Arg: arg, Mask: ^uint64(0), Value: v}}
}

// Syscalls is the formatter's addition (with MkfsSyscalls).
var Syscalls = []bpf.Rule{
	// Images, relative to the materialization root: the create of
	// Create with exactly its flags and mode 0600; fallocate mode 0,
	// allocating the whole image, never PUNCH_HOLE, which would make it
	// sparse; removing a half-made image, never a directory
	// (AT_REMOVEDIR).
	{Name: "openat", Nr: unix.SYS_OPENAT, Conds: []bpf.Cond{{Arg: 2, Mask: ^uint64(0), Value: createFlags}, {Arg: 3, Mask: ^uint64(0), Value: 0o600}}},
	{Name: "fallocate", Nr: unix.SYS_FALLOCATE, Conds: eq(1, 0)},
	{Name: "unlinkat", Nr: unix.SYS_UNLINKAT, Conds: eq(2, 0)},
	// Starting the formatting child with os/exec: the two clones above,
	// the pidfd-based wait (pidfd_open of itself in Go's probe, waitid on
	// a pidfd, pidfd_send_signal 0 in the probe and SIGKILL on timeout),
	// the pipe for its stderr and the exec error, and what the child
	// does between fork and exec (dup3 of its descriptors, chdir "/",
	// restoring RLIMIT_NOFILE of its own process with prlimit64, which
	// the child's Go runtime also raises at start).
	{Name: "clone", Nr: unix.SYS_CLONE, Conds: eq(0, cloneProbe)},
	{Name: "clone", Nr: unix.SYS_CLONE, Conds: eq(0, cloneExec)},
	{Name: "pidfd_open", Nr: unix.SYS_PIDFD_OPEN, Conds: eq(1, 0)},
	{Name: "pidfd_send_signal", Nr: unix.SYS_PIDFD_SEND_SIGNAL, Conds: eq(1, 0)},
	{Name: "pidfd_send_signal", Nr: unix.SYS_PIDFD_SEND_SIGNAL, Conds: eq(1, uint64(unix.SIGKILL))},
	{Name: "waitid", Nr: unix.SYS_WAITID, Conds: eq(0, unix.P_PIDFD)},
	{Name: "pipe2", Nr: unix.SYS_PIPE2, Conds: eq(1, unix.O_CLOEXEC)},
	{Name: "dup3", Nr: unix.SYS_DUP3},
	{Name: "chdir", Nr: unix.SYS_CHDIR},
	// The Go runtime of the formatting child names its anonymous
	// mappings while it starts (PR_SET_VMA_ANON_NAME): labels only.
	{Name: "prctl", Nr: unix.SYS_PRCTL, Conds: eq(0, unix.PR_SET_VMA)},
	// The child's confinement before it executes mkfs.ext4: it checks
	// no_new_privs and installs MkfsSyscalls (a filter only narrows).
	{Name: "prctl", Nr: unix.SYS_PRCTL, Conds: eq(0, unix.PR_GET_NO_NEW_PRIVS)},
	{Name: "seccomp", Nr: unix.SYS_SECCOMP, Conds: []bpf.Cond{{Arg: 0, Mask: ^uint64(0), Value: unix.SECCOMP_SET_MODE_FILTER}, {Arg: 1, Mask: ^uint64(0), Value: unix.SECCOMP_FILTER_FLAG_TSYNC}}},
}

// MkfsSyscalls is mkfs.ext4's addition, with the execve that starts it:
// its opens without O_CREAT, O_TRUNC or O_TMPFILE (libraries,
// mke2fs.conf, /proc/mounts, /proc/swaps, the image through
// /proc/self/fd), stat calls, zeroed ranges (FALLOC_FL_ZERO_RANGE, never
// PUNCH_HOLE) and fsync on the image, its stack limit query (prlimit64
// of itself), loading (access of ld.so.preload, brk, mprotect,
// arch_prctl, set_tid_address, set_robust_list, rseq), identity queries,
// uname, its safe_getenv check (prctl PR_GET_DUMPABLE), and positioned
// I/O on the image.
var MkfsSyscalls = []bpf.Rule{
	{Name: "execve", Nr: unix.SYS_EXECVE},
	{Name: "openat", Nr: unix.SYS_OPENAT, Conds: []bpf.Cond{{Arg: 2, Mask: openForbidden, Value: 0}}},
	{Name: "fstat", Nr: unix.SYS_FSTAT},
	{Name: "newfstatat", Nr: unix.SYS_NEWFSTATAT},
	{Name: "fallocate", Nr: unix.SYS_FALLOCATE, Conds: eq(1, unix.FALLOC_FL_ZERO_RANGE)},
	{Name: "fsync", Nr: unix.SYS_FSYNC},
	{Name: "prlimit64", Nr: unix.SYS_PRLIMIT64, Conds: eq(0, 0)},
	{Name: "access", Nr: unix.SYS_ACCESS},
	{Name: "brk", Nr: unix.SYS_BRK},
	{Name: "mprotect", Nr: unix.SYS_MPROTECT},
	{Name: "arch_prctl", Nr: unix.SYS_ARCH_PRCTL},
	{Name: "set_tid_address", Nr: unix.SYS_SET_TID_ADDRESS},
	{Name: "set_robust_list", Nr: unix.SYS_SET_ROBUST_LIST},
	{Name: "rseq", Nr: unix.SYS_RSEQ},
	{Name: "uname", Nr: unix.SYS_UNAME},
	{Name: "getuid", Nr: unix.SYS_GETUID},
	{Name: "geteuid", Nr: unix.SYS_GETEUID},
	{Name: "getgid", Nr: unix.SYS_GETGID},
	{Name: "getegid", Nr: unix.SYS_GETEGID},
	{Name: "getppid", Nr: unix.SYS_GETPPID},
	{Name: "prctl", Nr: unix.SYS_PRCTL, Conds: eq(0, unix.PR_GET_DUMPABLE)},
	{Name: "pread64", Nr: unix.SYS_PREAD64},
	{Name: "pwrite64", Nr: unix.SYS_PWRITE64},
	// mke2fs's timestamps. glibc answers gettimeofday and time from the
	// vDSO where the clock source allows it, and makes the system call
	// where it does not (a guest whose TSC is unstable runs on hpet:
	// seen in the VM lane's Debian 12 cell, where mkfs.ext4 was killed
	// on syscall 96). Both only read the clock.
	{Name: "gettimeofday", Nr: unix.SYS_GETTIMEOFDAY},
	{Name: "time", Nr: unix.SYS_TIME},
	// mkfs.ext4's ioctls, all queries, all failing with ENOTTY on the
	// regular file it formats (block device size and sector sizes,
	// floppy geometry, discard and read-only state) and on /dev/null
	// (TCGETS: is stdin a terminal).
	{Name: "ioctl", Nr: unix.SYS_IOCTL, Conds: eq(1, unix.BLKGETSIZE64)},
	{Name: "ioctl", Nr: unix.SYS_IOCTL, Conds: eq(1, unix.BLKGETSIZE)},
	{Name: "ioctl", Nr: unix.SYS_IOCTL, Conds: eq(1, fdGetPrm)},
	{Name: "ioctl", Nr: unix.SYS_IOCTL, Conds: eq(1, unix.BLKSSZGET)},
	{Name: "ioctl", Nr: unix.SYS_IOCTL, Conds: eq(1, unix.BLKPBSZGET)},
	{Name: "ioctl", Nr: unix.SYS_IOCTL, Conds: eq(1, unix.BLKDISCARDZEROES)},
	{Name: "ioctl", Nr: unix.SYS_IOCTL, Conds: eq(1, unix.BLKROGET)},
	{Name: "ioctl", Nr: unix.SYS_IOCTL, Conds: eq(1, unix.TCGETS)},
}

// fdGetPrm is FDGETPRM, _IOR(2, 4, struct floppy_struct) on a 64-bit
// ABI; golang.org/x/sys does not name it.
const fdGetPrm = 0x80200204
