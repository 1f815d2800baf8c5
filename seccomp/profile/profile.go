// SPDX-License-Identifier: Apache-2.0

// Package profile holds Glove's default sandbox seccomp profile as data:
// an OCI runtime-spec linux.seccomp section. It needs no cgo, so gloved
// can write it into a bundle; glove-shim compiles it with libseccomp
// (package seccomp).
//
// Offline is the default: no socket, no connect, no bind or listen. A
// session granted local services through the pathname compatibility
// transport (ProfileOptions.LocalServiceConnect) gets AF_UNIX stream
// sockets and a connect(2) that the kernel hands to gloved as a seccomp
// user notification (SCMP_ACT_NOTIFY; the listener reaches gloved through
// linux.seccomp.listenerPath, see package shim): gloved reads the address,
// refuses every path but the session's aliases, and for an alias installs
// a socket it connected itself. A filter cannot read connect's address
// (it lies in the program's memory), which is why the decision is
// gloved's and not the filter's.
package profile

import (
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// ProfileOptions are the per-session inputs of the default profile.
type ProfileOptions struct {
	// InheritedFDs is the committed inherited descriptor range (for the
	// inherited-stream-v1 transport), possibly empty. Only on these
	// descriptors may the sandbox inspect a socket, and only with
	// getsockname and getsockopt(SOL_SOCKET, SO_TYPE).
	InheritedFDs []uint32
	// LocalServiceConnect grants the pathname compatibility transport:
	// socket(2) for AF_UNIX stream sockets only, connect(2) answered by
	// gloved through a user notification (the profile then needs a
	// listener: linux.seccomp.listenerPath), and the calls a client makes
	// after connect (getsockopt SO_ERROR, getpeername, getsockname). bind,
	// listen, accept, shutdown and setsockopt stay denied.
	LocalServiceConnect bool
	// Egress grants a session with egress endpoints (package egress)
	// AF_INET stream sockets and what a TCP client does with them
	// (egressRules). The sandbox's network namespace has loopback alone,
	// where only the endpoints' listeners listen, so a connection can
	// reach nothing else. Not with LocalServiceConnect (whose connect is
	// gloved's to answer): a launch refuses the two together.
	Egress bool
}

// defaultErrno is returned for every call outside the allowlist. EPERM, as
// Docker does, rather than KILL_PROCESS: runtimes (node, glibc, Go) probe
// optional syscalls and fall back on an error, and a killed session tells
// the user nothing. The protection is the same, since the call never runs.
const defaultErrno = uint(unix.EPERM)

// allowed is the unconditional allowlist: Docker's default profile as
// resolved for a container with no capabilities on amd64 (moby/profiles
// v0.3.0), without its 32-bit-only names (the filter holds only the native
// architecture, so i386/x32 calls are killed) and without:
//   - connect, bind, listen, accept, accept4, setsockopt, shutdown,
//     getpeername: the offline network rules; socket creation is denied too,
//     and a sandbox may not reach or serve anything through a socket it
//     inherited (threat: exfiltration through, or hijacking of, the
//     supervisor's stream); LocalServiceConnect alone brings back AF_UNIX
//     stream sockets, a connect that gloved answers, getpeername and
//     getsockname (see localServiceRules);
//   - getsockname, getsockopt: allowed only on the committed inherited
//     descriptors (see DefaultProfile);
//   - socketpair: allowed only for AF_UNIX SOCK_STREAM pairs (see
//     DefaultProfile): a connected stream socket refuses an address
//     (EISCONN), whereas a datagram pair sends to any path socket the
//     sandbox can see, socket() and connect() being denied or not
//     (threat: a datagram injected into a host service whose socket file
//     lies in a read-only bind, such as /dev/log);
//   - ptrace, process_vm_readv, process_vm_writev: reading or writing
//     another process's memory (threat: a sandboxed program tampering with
//     the shim's PID 1 or a sibling);
//   - name_to_handle_at: half of the open_by_handle_at escape (CVE-2014-3519
//     "shocker"); the other half is denied by Docker already;
//   - modify_ldt: long history of kernel bugs (CVE-2015-5157, CVE-2017-17053)
//     and unused by 64-bit programs;
//   - io_setup, io_destroy, io_submit, io_cancel, io_getevents,
//     io_pgetevents (native AIO): every AIO context is charged to one
//     machine-wide budget (fs.aio-max-nr) that no namespace or cgroup
//     divides, so one io_setup(65536) made every other io_setup on the
//     host, root's included, fail with EAGAIN (threat: a session denying
//     a kernel-global resource to the host and the other sessions).
//     Programs that use it fall back to threads (glibc's POSIX AIO does
//     not use it at all); io_uring is denied as Docker denies it.
//
// Everything Docker denies (keyctl, bpf, mount, unshare, setns, io_uring,
// kexec, module loading, ...) is absent and so meets the default action;
// profile_test.go checks that against moby/profiles.
var allowed = []string{
	"access", "adjtimex", "alarm", "arch_prctl", "brk", "cachestat", "capget", "capset",
	"chdir", "chmod", "chown", "clock_adjtime", "clock_getres", "clock_gettime", "clock_nanosleep", "close",
	"close_range", "copy_file_range", "creat", "dup", "dup2", "dup3", "epoll_create", "epoll_create1",
	"epoll_ctl", "epoll_ctl_old", "epoll_pwait", "epoll_pwait2", "epoll_wait", "epoll_wait_old", "eventfd", "eventfd2",
	"execve", "execveat", "exit", "exit_group", "faccessat", "faccessat2", "fadvise64", "fallocate",
	"fanotify_mark", "fchdir", "fchmod", "fchmodat", "fchmodat2", "fchown", "fchownat", "fcntl",
	"fdatasync", "fgetxattr", "flistxattr", "flock", "fork", "fremovexattr", "fsetxattr", "fstat",
	"fstatfs", "fsync", "ftruncate", "futex", "futex_requeue", "futex_wait", "futex_waitv", "futex_wake",
	"futimesat", "get_robust_list", "get_thread_area", "getcpu", "getcwd", "getdents", "getdents64", "getegid",
	"geteuid", "getgid", "getgroups", "getitimer", "getpgid", "getpgrp", "getpid", "getppid",
	"getpriority", "getrandom", "getresgid", "getresuid", "getrlimit", "getrusage", "getsid", "gettid",
	"gettimeofday", "getuid", "getxattr", "inotify_add_watch", "inotify_init", "inotify_init1", "inotify_rm_watch",
	"ioctl", "ioprio_get", "ioprio_set",
	"kill", "landlock_add_rule", "landlock_create_ruleset", "landlock_restrict_self", "lchown", "lgetxattr", "link", "linkat",
	"listxattr", "llistxattr", "lremovexattr", "lseek", "lsetxattr", "lstat", "madvise", "map_shadow_stack",
	"membarrier", "memfd_create", "memfd_secret", "mincore", "mkdir", "mkdirat", "mknod", "mknodat",
	"mlock", "mlock2", "mlockall", "mmap", "mprotect", "mq_getsetattr", "mq_notify", "mq_open",
	"mq_timedreceive", "mq_timedsend", "mq_unlink", "mremap", "msgctl", "msgget", "msgrcv", "msgsnd",
	"msync", "munlock", "munlockall", "munmap", "nanosleep", "newfstatat", "open", "openat",
	"openat2", "pause", "pidfd_open", "pidfd_send_signal", "pipe", "pipe2", "pkey_alloc", "pkey_free",
	"pkey_mprotect", "poll", "ppoll", "prctl", "pread64", "preadv", "preadv2", "prlimit64",
	"process_mrelease", "pselect6", "pwrite64", "pwritev", "pwritev2", "read", "readahead", "readlink",
	"readlinkat", "readv", "recvfrom", "recvmmsg", "recvmsg", "remap_file_pages", "removexattr", "rename",
	"renameat", "renameat2", "restart_syscall", "rmdir", "rseq", "rt_sigaction", "rt_sigpending", "rt_sigprocmask",
	"rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait", "rt_tgsigqueueinfo", "sched_get_priority_max", "sched_get_priority_min", "sched_getaffinity",
	"sched_getattr", "sched_getparam", "sched_getscheduler", "sched_rr_get_interval", "sched_setaffinity", "sched_setattr", "sched_setparam", "sched_setscheduler",
	"sched_yield", "seccomp", "select", "semctl", "semget", "semop", "semtimedop", "sendfile",
	"sendmmsg", "sendmsg", "sendto", "set_robust_list", "set_thread_area", "set_tid_address", "setfsgid", "setfsuid",
	"setgid", "setgroups", "setitimer", "setpgid", "setpriority", "setregid", "setresgid", "setresuid",
	"setreuid", "setrlimit", "setsid", "setuid", "setxattr", "shmat", "shmctl", "shmdt",
	"shmget", "sigaltstack", "signalfd", "signalfd4", "splice", "stat", "statfs",
	"statx", "symlink", "symlinkat", "sync", "sync_file_range", "syncfs", "sysinfo", "tee",
	"tgkill", "time", "timer_create", "timer_delete", "timer_getoverrun", "timer_gettime", "timer_settime", "timerfd_create",
	"timerfd_gettime", "timerfd_settime", "times", "tkill", "truncate", "umask", "uname", "unlink",
	"unlinkat", "utime", "utimensat", "utimes", "vfork", "vmsplice", "wait4", "waitid",
	"write", "writev",
}

// cloneNamespaceFlags are the clone(2) flags that create namespaces:
// CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET, the mask Docker
// uses. A new user namespace is the start of most container escapes (it
// grants capabilities over fresh namespaces; CVE-2022-0185 and many more).
// CLONE_NEWTIME (0x80) is not here: in clone(2) that bit is part of the
// exit signal, and only clone3/unshare take it, both denied.
const cloneNamespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// socketTypeMask keeps the type of socketpair's (and socket's) second argument and
// drops the flags SOCK_NONBLOCK and SOCK_CLOEXEC: the type must then be
// SOCK_STREAM. The kernel reads the argument as a 32-bit int, so its
// upper half is ignored here too.
const socketTypeMask = 0xffffffff &^ uint64(unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)

// personalities are the personality(2) values Docker allows: PER_LINUX,
// UNAME26, PER_LINUX32, PER_LINUX32|UNAME26, and 0xffffffff (query). Others
// would, for example, set READ_IMPLIES_EXEC or ADDR_NO_RANDOMIZE.
var personalities = []uint64{0x0, 0x8, 0x20000, 0x20008, 0xffffffff}

// DefaultProfile returns Glove's sandbox profile: an allowlist for the
// native architecture whose default action is ERRNO(EPERM), clone only
// without namespace flags, clone3 answering ENOSYS (so libc and Go fall
// back to clone, whose flags a filter can see; clone3 passes them in
// memory), socketpair only for AF_UNIX SOCK_STREAM, and
// getsockname/getsockopt(SOL_SOCKET, SO_TYPE) only on the
// descriptors in o.InheritedFDs, each written as EQ conditions (never as a
// range: see the package comment), and, with o.LocalServiceConnect, the
// rules of localServiceRules.
func DefaultProfile(o ProfileOptions) *specs.LinuxSeccomp {
	errno := defaultErrno
	enosys := uint(unix.ENOSYS)
	p := &specs.LinuxSeccomp{
		DefaultAction:   specs.ActErrno,
		DefaultErrnoRet: &errno,
		Architectures:   []specs.Arch{nativeArch},
		Syscalls: []specs.LinuxSyscall{
			{Names: append([]string(nil), allowed...), Action: specs.ActAllow},
			{Names: []string{"clone"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{
				{Index: 0, Value: cloneNamespaceFlags, ValueTwo: 0, Op: specs.OpMaskedEqual},
			}},
			{Names: []string{"clone3"}, Action: specs.ActErrno, ErrnoRet: &enosys},
			{Names: []string{"socketpair"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{
				{Index: 0, Value: unix.AF_UNIX, Op: specs.OpEqualTo},
				{Index: 1, Value: socketTypeMask, ValueTwo: unix.SOCK_STREAM, Op: specs.OpMaskedEqual},
			}},
		},
	}
	for _, v := range personalities {
		p.Syscalls = append(p.Syscalls, specs.LinuxSyscall{Names: []string{"personality"}, Action: specs.ActAllow,
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: v, Op: specs.OpEqualTo}}})
	}
	for _, fd := range o.InheritedFDs {
		p.Syscalls = append(p.Syscalls,
			specs.LinuxSyscall{Names: []string{"getsockname"}, Action: specs.ActAllow,
				Args: []specs.LinuxSeccompArg{{Index: 0, Value: uint64(fd), Op: specs.OpEqualTo}}},
			specs.LinuxSyscall{Names: []string{"getsockopt"}, Action: specs.ActAllow,
				Args: []specs.LinuxSeccompArg{
					{Index: 0, Value: uint64(fd), Op: specs.OpEqualTo},
					{Index: 1, Value: unix.SOL_SOCKET, Op: specs.OpEqualTo},
					{Index: 2, Value: unix.SO_TYPE, Op: specs.OpEqualTo},
				}})
	}
	if o.LocalServiceConnect {
		p.Syscalls = append(p.Syscalls, localServiceRules()...)
	}
	if o.Egress && !o.LocalServiceConnect {
		p.Syscalls = append(p.Syscalls, egressRules()...)
	}
	return p
}

// egressRules are what Egress adds, each for a reason:
//   - socket only for AF_INET with a type of SOCK_STREAM once
//     SOCK_NONBLOCK and SOCK_CLOEXEC are masked off: a TCP client of the
//     endpoints on 127.0.0.1. No AF_UNIX socket (a path socket the sandbox
//     sees, such as one in a read-only bind, stays out of reach), no
//     datagram socket (no DNS query leaves: there is no route, and none is
//     needed for 127.0.0.1), no AF_INET6, no netlink, no packet socket;
//   - connect, unconditionally: the namespace has loopback alone, where
//     nothing but the endpoints' listeners listen (bind and listen stay
//     denied, so the program cannot serve a port of its own), so any other
//     address or port is refused by the kernel (ECONNREFUSED, or
//     ENETUNREACH off loopback);
//   - getsockopt(SOL_SOCKET, SO_ERROR), getpeername and getsockname: a
//     non-blocking client reads its connect's result and its addresses;
//   - setsockopt at level IPPROTO_TCP (TCP_NODELAY and the keep-alive
//     timers HTTP clients set) and setsockopt(SOL_SOCKET, SO_KEEPALIVE):
//     tuning of the program's own connection, nothing beyond it;
//   - shutdown: a client's half-close of its request, which an HTTP/1.1
//     client may do and the relay passes on.
//
// bind, listen, accept and every other setsockopt stay denied (threat: a
// sandbox serving a socket, or binding to a device or a mark).
func egressRules() []specs.LinuxSyscall {
	return []specs.LinuxSyscall{
		{Names: []string{"socket"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{
			{Index: 0, Value: unix.AF_INET, Op: specs.OpEqualTo},
			{Index: 1, Value: socketTypeMask, ValueTwo: unix.SOCK_STREAM, Op: specs.OpMaskedEqual},
		}},
		{Names: []string{"connect", "getpeername", "getsockname", "shutdown"}, Action: specs.ActAllow},
		{Names: []string{"getsockopt"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{
			{Index: 1, Value: unix.SOL_SOCKET, Op: specs.OpEqualTo},
			{Index: 2, Value: unix.SO_ERROR, Op: specs.OpEqualTo},
		}},
		{Names: []string{"setsockopt"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{
			{Index: 1, Value: unix.IPPROTO_TCP, Op: specs.OpEqualTo},
		}},
		{Names: []string{"setsockopt"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{
			{Index: 1, Value: unix.SOL_SOCKET, Op: specs.OpEqualTo},
			{Index: 2, Value: unix.SO_KEEPALIVE, Op: specs.OpEqualTo},
		}},
	}
}

// localServiceRules are what LocalServiceConnect adds, each for a reason:
//   - socket only for AF_UNIX with a type of SOCK_STREAM once
//     SOCK_NONBLOCK and SOCK_CLOEXEC are masked off: a datagram socket
//     could sendto(2) any path socket the sandbox sees without ever
//     calling connect, past gloved (threat: a datagram injected into a
//     host service whose socket lies in a read-only bind, such as
//     /dev/log); any other family would reach a network or the kernel
//     (netlink), which a session has no business with;
//   - connect always notifies gloved, whatever its arguments: the address
//     is in the program's memory, where a filter cannot look, so gloved
//     reads it and answers (threat: a connect to a host socket that is
//     not one of the session's aliases, such as a container runtime's or
//     a desktop bus's socket bound into the sandbox by some mount);
//   - getsockopt(fd, SOL_SOCKET, SO_ERROR) on any descriptor: a
//     non-blocking client reads the result of its connect there; SO_ERROR
//     only reads and clears the socket's pending error;
//   - getpeername and getsockname on any descriptor: they only inspect a
//     socket, and Go's net package calls both after every connect.
//
// bind, listen and accept stay denied (threat: a sandbox serving a socket
// to the host or to another session), and so do setsockopt and shutdown.
func localServiceRules() []specs.LinuxSyscall {
	return []specs.LinuxSyscall{
		{Names: []string{"socket"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{
			{Index: 0, Value: unix.AF_UNIX, Op: specs.OpEqualTo},
			{Index: 1, Value: socketTypeMask, ValueTwo: unix.SOCK_STREAM, Op: specs.OpMaskedEqual},
		}},
		{Names: []string{"connect"}, Action: specs.ActNotify},
		{Names: []string{"getsockopt"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{
			{Index: 1, Value: unix.SOL_SOCKET, Op: specs.OpEqualTo},
			{Index: 2, Value: unix.SO_ERROR, Op: specs.OpEqualTo},
		}},
		{Names: []string{"getpeername", "getsockname"}, Action: specs.ActAllow},
	}
}
