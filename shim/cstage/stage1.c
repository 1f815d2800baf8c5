/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stage 1 in C: PID 1 of the sandbox, in the seven new namespaces stage 0
 * cloned it into (user, mount, pid, net, ipc, uts, cgroup). It shares
 * the per-user budgets, builds the mount tree (mount.c), pivots, names
 * the host, brings lo up, then starts stage 2 in a new user and mount
 * namespace (in its own with --userns-fd: start_stage2), forwards
 * signals to it, reaps every process that ends in the sandbox and exits
 * with the program's status. With --userns-fd, user namespace 1 is the
 * one stage 0's waiter joined, which another process made.
 *
 * It runs from the constructor in cstage.c, before the Go runtime
 * exists, and never returns: no Go start-up is paid for PID 1, and PID 1
 * has one thread and creates none. Threat: a Go PID 1 needs new OS
 * threads at times the program decides (a fork bomb holding the
 * session's pids limit made the runtime die with "failed to create new
 * OS thread", and the session end "exited 2"); this one never asks the
 * kernel for a task after stage 2 exists, so the limit cannot stop it.
 *
 * Every step, its order and its error text are those of the Go stage 1
 * this replaces (shim/stage1_linux.go and shim/mount_linux.go before
 * this file); rerun shim's TestShim* and TestAttack* after any change to
 * the order of the calls.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <net/if.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cstage.h"
#include "stage1.h"

int s1_block_signals(ksigset *old)
{
	ksigset all = ~(ksigset)0;

	return (int)syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, old, sizeof(all));
}

/* s1_wait_signal returns the next pending signal, waiting for one; 0 when
 * waiting failed for a reason other than an interruption. */
int s1_wait_signal(void)
{
	ksigset all = ~(ksigset)0;
	siginfo_t si;
	long s;

	do
		s = syscall(SYS_rt_sigtimedwait, &all, &si, NULL, sizeof(all));
	while (s < 0 && errno == EINTR);
	return s < 0 ? 0 : (int)s;
}

/* s1_forwarded says which signals PID 1 passes on to the program: all but
 * the one about its own children (SIGCHLD) and SIGURG, which stage 0,
 * being Go, never forwards (the Go runtime's preemption signal), as
 * shim/run_linux.go's s1_forwarded. */
int s1_forwarded(int sig)
{
	return sig != SIGCHLD && sig != SIGURG;
}

/* s1_exit_status is shim/run_linux.go's exitStatus: the program's status, or
 * 128+N when signal N killed it. */
int s1_exit_status(int ws)
{
	if (WIFEXITED(ws))
		return WEXITSTATUS(ws);
	if (WIFSIGNALED(ws))
		return 128 + WTERMSIG(ws);
	return EXIT_FAILED;
}

/* s1_write_file writes s to path, which must take it whole. */
int s1_write_file(const char *path, const char *s, char *e)
{
	size_t n = strlen(s);
	ssize_t w;
	int fd, er;

	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0) {
		s1_err(e, "open %s: %s", path, gp_errno(errno));
		return -1;
	}
	w = write(fd, s, n);
	er = errno;
	if (w != (ssize_t)n) {
		close(fd);
		s1_err(e, "write %s: %s", path, w < 0 ? gp_errno(er) : "short write");
		return -1;
	}
	if (close(fd) != 0) {
		s1_err(e, "close %s: %s", path, gp_errno(errno));
		return -1;
	}
	return 0;
}

/* s1_read_small reads up to max-1 bytes of fd until end of file into buf,
 * NUL-terminated; it returns the length, or -1. */
ssize_t s1_read_small(int fd, char *buf, size_t max)
{
	size_t n = 0;

	while (n < max - 1) {
		ssize_t r = read(fd, buf + n, max - 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		n += (size_t)r;
	}
	buf[n] = 0;
	return (ssize_t)n;
}

/* share_budgets gives user namespace 1, this stage's, a share of each of
 * the service user's per-user budgets: everything the program takes is
 * counted in this namespace and every ancestor, so with the namespace's
 * own limit below the host's, one sandbox cannot use up what gloved and
 * the other sessions of the same user need (threat: 128 inotify_init1 in
 * a sandbox made the host user's fail with EMFILE, attack case
 * inotify-user-budget; the namespaces, watches and fanotify marks are
 * the same kind of count). A new user namespace starts unlimited
 * (bounded by its ancestors only); stage 1 holds CAP_SYS_RESOURCE in it,
 * and the files under /proc/sys/user are those of the opener's user
 * namespace. The kernel lets whoever holds that capability there write
 * them, whatever its uid (kernel/ucount.c: set_permissions), so this
 * works with --userns-fd too, where stage 1 is process.user's uid.
 * Stage 0 computed the shares in its own namespace
 * (readBudgetShares); the plan lists them by name, sorted. Stage 2's own
 * user and mount namespaces are the first charged against these shares.
 * Each value is read back: a write the kernel took only in part would
 * leave the namespace unlimited. */
static int share_budgets(const struct glove_plan *p, char *e)
{
	size_t i;

	for (i = 0; i < p->nbudgets; i++) {
		char path[256], share[32], got[64];
		ssize_t n;
		int fd;

		snprintf(path, sizeof(path), "/proc/sys/user/%s", p->budgets[i].name);
		snprintf(share, sizeof(share), "%" PRId64, p->budgets[i].value);
		if (s1_write_file(path, share, e) != 0) {
			s1_wrap(e, "per-user budget");
			return -1;
		}
		fd = open(path, O_RDONLY | O_CLOEXEC);
		n = fd < 0 ? -1 : s1_read_small(fd, got, sizeof(got));
		if (n < 0) {
			int er = errno;

			if (fd >= 0)
				close(fd);
			s1_err(e, "per-user budget: %s reads \"\" after writing %s (%s)", path, share, gp_errno(er));
			return -1;
		}
		close(fd);
		while (n > 0 && (got[n - 1] == '\n' || got[n - 1] == ' ' || got[n - 1] == '\t'))
			got[--n] = 0;
		if (strcmp(got, share) != 0) {
			s1_err(e, "per-user budget: %s reads \"%s\" after writing %s (<nil>)", path, got, share);
			return -1;
		}
	}
	return 0;
}

/* lo_up brings the loopback interface up. A new network namespace has
 * only lo, and it is down: programs that talk to themselves over
 * 127.0.0.1 need it up. Nothing else exists. */
static int lo_up(char *e)
{
	struct ifreq ifr;
	int s, er;

	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		s1_err(e, "set lo up: socket: %s", gp_errno(errno));
		return -1;
	}
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0) {
		er = errno;
		close(s);
		s1_err(e, "set lo up: SIOCGIFFLAGS: %s", gp_errno(er));
		return -1;
	}
	ifr.ifr_flags |= IFF_UP;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) {
		er = errno;
		close(s);
		s1_err(e, "set lo up: SIOCSIFFLAGS: %s", gp_errno(er));
		return -1;
	}
	close(s);
	return 0;
}

/* egress_listen opens one listening TCP socket for each egress port of
 * the plan, bound to 127.0.0.1 of the sandbox's own network namespace
 * (lo is up by now), and sends them all to the supervisor on the hand-off
 * descriptor in one message: one byte per socket, the sockets in
 * SCM_RIGHTS in the plan's order. It then closes them and the hand-off
 * descriptor, so that neither the program nor PID 1 holds a listener
 * (threat: a program accepting the connections meant for the relay, or
 * sending the supervisor descriptors of its choice). The supervisor
 * accepts on them from the host's side; each accepted connection stays
 * in this namespace, and nothing of the host's network is reachable from
 * here. This process binds the port, holding every capability in user
 * namespace 1, which owns the network namespace: the program, without
 * capability, could not take a port below 1024 from it, and finds this
 * one taken. */
static int egress_listen(const struct glove_plan *p, char *e)
{
	int fds[8], n = 0, er, i, sock = (int)p->egress_handoff_fd, ok = -1;
	unsigned char bytes[8];
	union {
		char buf[CMSG_SPACE(sizeof(fds))];
		struct cmsghdr align;
	} u;
	struct msghdr msg;
	struct iovec iov;
	struct cmsghdr *c;
	ssize_t w;

	if (p->negress_ports == 0 || p->negress_ports > 8) {
		s1_err(e, "egress: %zu ports (1..8)", p->negress_ports);
		return -1;
	}
	for (n = 0; n < (int)p->negress_ports; n++) {
		struct sockaddr_in sa;
		int one = 1;

		fds[n] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fds[n] < 0) {
			s1_err(e, "egress: socket: %s", gp_errno(errno));
			goto out;
		}
		if (setsockopt(fds[n], SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
			er = errno;
			n++;
			s1_err(e, "egress: SO_REUSEADDR: %s", gp_errno(er));
			goto out;
		}
		memset(&sa, 0, sizeof(sa));
		sa.sin_family = AF_INET;
		sa.sin_port = htons(p->egress_ports[n]);
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (bind(fds[n], (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			er = errno;
			n++;
			s1_err(e, "egress: bind 127.0.0.1:%u: %s", (unsigned)p->egress_ports[n - 1], gp_errno(er));
			goto out;
		}
		if (listen(fds[n], 64) != 0) {
			er = errno;
			n++;
			s1_err(e, "egress: listen 127.0.0.1:%u: %s", (unsigned)p->egress_ports[n - 1], gp_errno(er));
			goto out;
		}
		bytes[n] = 0;
	}
	memset(&msg, 0, sizeof(msg));
	memset(&u, 0, sizeof(u));
	iov.iov_base = bytes;
	iov.iov_len = (size_t)n;
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = u.buf;
	msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
	do
		w = sendmsg(sock, &msg, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	if (w != (ssize_t)n) {
		s1_err(e, "egress: send the listeners on descriptor %d: %s", sock, w < 0 ? gp_errno(errno) : "short write");
		goto out;
	}
	ok = 0;
out:
	for (i = 0; i < n; i++)
		if (fds[i] >= 0 && close(fds[i]) != 0 && ok == 0) {
			s1_err(e, "egress: close a listener: %s", gp_errno(errno));
			ok = -1;
		}
	if (close(sock) != 0 && ok == 0) {
		s1_err(e, "egress: close the hand-off descriptor: %s", gp_errno(errno));
		ok = -1;
	}
	return ok;
}

/* child_fail reports why stage 2 could not be executed on the start-up
 * socket, which the parent reads until the execve closes it, and ends
 * the child. */
static void child_fail(int sync, const char *fmt, ...) __attribute__((noreturn, format(printf, 2, 3)));

static void child_fail(int sync, const char *fmt, ...)
{
	char msg[S1_ERRLEN];
	va_list ap;
	int off;
	ssize_t w;

	off = snprintf(msg, sizeof(msg), "start %s: ", "stage 2");
	va_start(ap, fmt);
	vsnprintf(msg + off, sizeof(msg) - (size_t)off, fmt, ap);
	va_end(ap);
	/* Nothing is left to do if the parent cannot hear it: it then sees
	 * end of file without the program's report, and the exit status. */
	w = write(sync, msg, strlen(msg));
	(void)w;
	_exit(1);
}

/* stage2_child is stage 2: the child stage 1 cloned into user namespace 2
 * and mount namespace 2. It runs stage 2's steps (gp_stage2, stage2.c)
 * itself and execve's the program: glove-shim is not executed again, so
 * stage 2 pays for no execve of the shim, no libc start-up and no plan
 * decoding (it has stage 1's decoded plan, as a copy). Until the program's
 * execve it runs only code of this binary, on memory nothing of the
 * sandbox has touched. It calls nothing of glibc that keeps state (the
 * raw clone left glibc's idea of the thread as the parent's): system
 * calls and snprintf.
 *
 * The child has every capability in user namespace 2, which it created
 * (clone(CLONE_NEWUSER)); gp_stage2 leaves it with exactly the bundle's,
 * none for Glove's own bundles, before the program's execve. */
static void stage2_child(const struct glove_plan *p, int sync, int theirs, ksigset orig) __attribute__((noreturn));

static void stage2_child(const struct glove_plan *p, int sync, int theirs, ksigset orig)
{
	char go;
	ssize_t r;

	/* The parent writes the ID maps, then one byte: until then this
	 * process has no identity in its new user namespace. End of file
	 * means the parent gave up (and kills this process). */
	do
		r = read(sync, &go, 1);
	while (r < 0 && errno == EINTR);
	if (r != 1)
		_exit(1);
	/* A new session: the program has no controlling terminal unless
	 * process.terminal gives it its standard input (threat: TIOCSTI
	 * pushing input into a terminal outside the sandbox, and signals to
	 * the caller's process group). */
	if (setsid() < 0)
		child_fail(sync, "setsid: %s", gp_errno(errno));
	/* Threat: a stage outliving PID 1 would run the program without the
	 * process that reaps and forwards to it. PID 1's death kills the
	 * whole PID namespace anyway; this says so for stage 2 explicitly,
	 * and a parent already gone (the parent is PID 1 of this namespace)
	 * ends the child here. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		child_fail(sync, "prctl(PR_SET_PDEATHSIG): %s", gp_errno(errno));
	if (getppid() != 1)
		_exit(1);
	if (p->process.terminal && ioctl(0, TIOCSCTTY, 1) != 0)
		child_fail(sync, "TIOCSCTTY: %s", gp_errno(errno));
	/* Stage 2 and the program start with the signal mask stage 1 was
	 * started with, as a Go parent's child did. */
	if (syscall(SYS_rt_sigprocmask, SIG_SETMASK, &orig, NULL, sizeof(orig)) != 0)
		child_fail(sync, "restore the signal mask: %s", gp_errno(errno));
	/* From here every failure is stage 2's, reported on its control
	 * socket; the parent reads that once this end of the start-up
	 * socket is closed. */
	if (close(sync) != 0)
		_exit(1);
	gp_stage2(theirs, p);
}

/* s1_kill_child ends a stage 2 that failed or refused its plan, and reaps
 * it. ESRCH means it has exited already; waitpid then reaps it. Any
 * other failure to kill is added to e. */
void s1_kill_child(pid_t pid, char *e)
{
	int ws;

	if (kill(pid, SIGKILL) != 0 && errno != ESRCH) {
		size_t n = strlen(e);

		snprintf(e + n, S1_ERRLEN - n, "\nkill %s: %s", "stage 2", gp_errno(errno));
	}
	while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
		;
}

/* s1_send_all writes n bytes of b on the stream socket s. MSG_NOSIGNAL: a
 * stage 2 that died leaves EPIPE here, not a SIGPIPE queued for the
 * program. */
int s1_send_all(int s, const unsigned char *b, size_t n)
{
	while (n > 0) {
		ssize_t w = send(s, b, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

pid_t s1_start_child(const struct s1_child *c, int *mine, char *e)
{
	char report[REPORT_MAX + 1], path[64], map[64];
	int ctl[2], sync[2];
	ssize_t n;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) != 0) {
		s1_err(e, "socketpair: %s", gp_errno(errno));
		return -1;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sync) != 0) {
		s1_err(e, "socketpair: %s", gp_errno(errno));
		close(ctl[0]);
		close(ctl[1]);
		return -1;
	}
	/* A raw clone, as fork with namespace flags: this process has one
	 * thread and no Go runtime, so the child may run C for as long as it
	 * lives. */
	pid = (pid_t)syscall(SYS_clone, c->flags, NULL, NULL, NULL, NULL);
	if (pid < 0) {
		s1_err(e, "start %s: clone: %s", c->name, gp_errno(errno));
		close(ctl[0]);
		close(ctl[1]);
		close(sync[0]);
		close(sync[1]);
		return -1;
	}
	if (pid == 0) {
		close(ctl[0]);
		close(sync[0]);
		c->run(c->arg, sync[1], ctl[1]);
	}
	close(ctl[1]);
	close(sync[1]);
	if (c->map) {
		/* The child's identity in its new user namespace: one user and
		 * one group, mapped to one of this namespace's; setgroups stays
		 * denied (threat: the program dropping a supplementary group
		 * that a host file denies access to), and must be written before
		 * gid_map. */
		snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
		snprintf(map, sizeof(map), "%" PRIu32 " %" PRIu32 " 1\n", c->uid_in, c->uid_out);
		if (s1_write_file(path, map, e) != 0)
			goto maps;
		snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)pid);
		if (s1_write_file(path, "deny", e) != 0)
			goto maps;
		snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
		snprintf(map, sizeof(map), "%" PRIu32 " %" PRIu32 " 1\n", c->gid_in, c->gid_out);
		if (s1_write_file(path, map, e) != 0)
			goto maps;
	}
	if (s1_send_all(sync[0], (const unsigned char *)"g", 1) != 0) {
		s1_err(e, "start %s: release the child: %s", c->name, gp_errno(errno));
		goto fail;
	}
	/* Until the child closes its end: empty, or why it failed. */
	n = s1_read_small(sync[0], report, sizeof(report));
	if (n != 0) {
		if (n < 0)
			s1_err(e, "start %s: read the start-up report: %s", c->name, gp_errno(errno));
		else
			s1_err(e, "%s", report);
		goto fail;
	}
	close(sync[0]);
	sync[0] = -1;
	/* Until the program's execve closes the last copy of the child's end:
	 * empty, or the child's own words. */
	n = s1_read_small(ctl[0], report, sizeof(report));
	if (n < 0) {
		s1_err(e, "%s: read report: %s", c->name, gp_errno(errno));
		goto fail;
	}
	if (n > 0) {
		s1_err(e, "%s", report);
		goto fail;
	}
	*mine = ctl[0];
	return pid;
maps:
	s1_wrap(e, "start %s", c->name);
fail:
	/* The socket closes after the kill, so that a child still waiting
	 * is gone before it could read end of file and print an error of its
	 * own. */
	s1_kill_child(pid, e);
	if (sync[0] >= 0)
		close(sync[0]);
	close(ctl[0]);
	return -1;
}

/* stage2_run is stage2_child's shape for s1_start_child. */
struct stage2_arg {
	const struct glove_plan *p;
	ksigset orig;
};

static void stage2_run(void *arg, int sync, int ctl) __attribute__((noreturn));

static void stage2_run(void *arg, int sync, int ctl)
{
	struct stage2_arg *a = arg;

	stage2_child(a->p, sync, ctl, a->orig);
}

/* start_stage2 starts stage 2 (stage2_child) in user namespace 2 and mount
 * namespace 2, where every mount stage 1 built is locked (threat: the
 * program unmounting a mask or a bind to reveal what is below, or
 * clearing a read-only attribute), unless the mountlock layer is off in a
 * test build. The sandbox user and group map to user namespace 1's root,
 * which is the invoking user on the host, and to nothing else.
 *
 * With --userns-fd (the plan's userns_fd) there is no user namespace 2:
 * the kernels that need that mode (Debian's unprivileged_userns_clone=0)
 * let nobody create a user namespace nested in user namespace 1
 * (docs/hardened-hosts-measured.md, "Consequences", 1). Stage 2 then
 * starts as with the mountlock layer off, in stage 1's namespaces, with
 * stage 1's ids and capabilities: process.user's uid and gid, the only
 * ids user namespace 1 maps there (stage0.c: join_userns), so the
 * program has the ids, and sees the owners, it has in user namespace 2
 * in the default mode; gp_stage2 drops the capabilities as there. The
 * other layers stop what the lock would (SECURITY.md, "The sandbox"; the
 * attack table's --userns-fd variant).
 * The plan decides it, not a clone that failed: a kernel that would
 * allow the nesting builds the same sandbox in this mode as one that
 * does not. */
static pid_t start_stage2(const struct glove_plan *p, ksigset orig, int *mine, char *e)
{
	struct stage2_arg a = { .p = p, .orig = orig };
	struct s1_child c = { .flags = SIGCHLD, .name = "stage 2", .run = stage2_run, .arg = &a };

	if (!gp_off(p, GLOVE_LAYER_MOUNTLOCK) && p->userns_fd == 0) {
		c.flags |= CLONE_NEWUSER | CLONE_NEWNS;
		c.map = 1;
		c.uid_in = p->uid;
		c.gid_in = p->gid;
	}
	return s1_start_child(&c, mine, e);
}

/* reap is PID 1's loop. When the program (pid) ends, PID 1 exits with its
 * status, and the kernel kills what is left in the namespace. Every other
 * process that ends in the sandbox is reaped as it ends. */
static void reap(pid_t pid) __attribute__((noreturn));

static void reap(pid_t pid)
{
	for (;;) {
		int sig;

		for (;;) {
			int ws;
			pid_t w = waitpid(-1, &ws, WNOHANG);

			if (w < 0 && errno == ECHILD)
				_exit(EXIT_FAILED);
			if (w <= 0)
				break;
			if (w == pid)
				_exit(s1_exit_status(ws));
		}
		sig = s1_wait_signal();
		if (sig == 0) {
			/* Cannot happen (every signal is blocked, the set is
			 * valid); were it to, PID 1 still reaps, waiting for a
			 * child instead of spinning. */
			int ws;
			pid_t w = waitpid(-1, &ws, 0);

			if (w == pid)
				_exit(s1_exit_status(ws));
			continue;
		}
		if (s1_forwarded(sig)) {
			/* ESRCH only: the program has just exited, and the next
			 * waitpid reaps it; nothing is left unbounded by a lost
			 * signal. */
			(void)kill(pid, sig);
		}
	}
}

void s1_main(struct glove_plan *p, int ctl, ksigset orig)
{
	static char e[S1_ERRLEN];
	size_t i;
	int root, mine = -1;
	pid_t pid;

	/* Every signal is blocked already: stage 0 blocked them before it
	 * cloned this process, which inherits its mask. A signal forwarded
	 * to PID 1 before the program exists would otherwise meet the
	 * default action and end the session as "killed" instead of reaching
	 * the program (seen with a SIGTERM sent right after the program's
	 * first output). Blocked, a signal stays pending, and reap forwards
	 * it once the program exists. */
	{
		/* And blocked again here, so that PID 1's reaping, which waits
		 * for signals (SIGCHLD included) with rt_sigtimedwait, never
		 * depends on the mask it was given: an unblocked SIGCHLD is
		 * discarded, and PID 1 would wait for the program's end
		 * forever. */
		ksigset inherited;

		if (s1_block_signals(&inherited) != 0)
			gp_fail(ctl, "stage 1", "block signals: %s", gp_errno(errno));
	}
	if (getpid() != 1)
		gp_fail(ctl, "stage 1", "not PID 1 of a new PID namespace");
	if (share_budgets(p, e) != 0)
		gp_fail(ctl, "stage 1", "%s", e);
	root = s1_build_root(p, e);
	if (root < 0)
		gp_fail(ctl, "stage 1", "%s", e);
	if (s1_pivot(root, e) != 0)
		gp_fail(ctl, "stage 1", "%s", e);
	close(root);
	if (sethostname(p->hostname, strlen(p->hostname)) != 0)
		gp_fail(ctl, "stage 1", "sethostname: %s", gp_errno(errno));
	if (lo_up(e) != 0)
		gp_fail(ctl, "stage 1", "%s", e);
	/* Before stage 2 exists, which then inherits neither the listeners
	 * nor the hand-off descriptor. */
	if (p->egress_handoff_fd != 0 && egress_listen(p, e) != 0)
		gp_fail(ctl, "stage 1", "%s", e);
	pid = start_stage2(p, orig, &mine, e);
	/* The passed descriptors belong to the program now: PID 1 keeps no
	 * copy (a stream socket must have one holder inside the sandbox). */
	for (i = 0; i < p->process.npass_fds; i++)
		close((int)p->process.pass_fds[i]);
	/* Nor of the listener's descriptor, stage 2's alone: the handler
	 * reads end of file on its end when stage 2 sends nothing. */
	if (p->process.seccomp_listener_fd != 0 && close((int)p->process.seccomp_listener_fd) != 0 && pid >= 0)
		gp_fail(ctl, "stage 1", "close the seccomp listener's descriptor: %s", gp_errno(errno));
	if (pid < 0)
		gp_fail(ctl, "stage 1", "%s", e);
	close(mine);
	close(ctl); /* tells stage 0 that the program is executing */
	reap(pid);
}
