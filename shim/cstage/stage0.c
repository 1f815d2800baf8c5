/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stage 0's C part: the waiter. Stage 0 (Go) decides everything (the
 * strict decode of config.json, Validate, the seccomp program, the
 * checks of every host source, the placement in the session's cgroups),
 * writes the plan into a memfd and executes glove-shim again as
 * `glove-shim --glove-stage0 N`; the constructor in cstage.c runs this
 * before the Go runtime. It clones stage 1 into the seven new namespaces,
 * where the child runs stage 1 itself (s1_main) without executing
 * anything, then forwards signals to it and exits with its status. With
 * --userns-fd the user namespace is not new: the waiter joins the one
 * the plan names (join_userns), which maps process.user's ids, and
 * clones stage 1 into the six others.
 *
 * Why: a Go process that waits in the session pays for what it needs to
 * stay there (docs/shim-startup.md, "Stage 0's waiter in C"): idle
 * threads made in advance, since the session's pids limit, which it
 * shares with the program, may leave it none to create later (threat: a
 * fork bomb making the runtime die, and the session end "exited 2"
 * instead of by its limit), and catching every signal through the
 * runtime, one round trip to its signal thread per signal. This process
 * has one thread, creates none but stage 1, and blocks every signal with
 * one system call.
 *
 * A signal that arrives between the Go part's execve and the blocking
 * below meets the default action: stage 0 ends before stage 1 exists,
 * and nothing of the sandbox has run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cstage.h"
#include "stage1.h"

/* s0_fail prints why the sandbox could not be built, as the Go stage 0
 * prints its errors, and exits with ExitFailed: nothing was executed. */
static void s0_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

static void s0_fail(const char *fmt, ...)
{
	char msg[S1_ERRLEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	dprintf(2, "glove-shim: %s\n", msg);
	_exit(EXIT_FAILED);
}

/* stage1_arg is what the child needs to become stage 1. */
struct stage1_arg {
	struct glove_plan *p;
	ksigset orig;
};

/* stage1_run is the child the waiter clones: it becomes stage 1. */
static void stage1_run(void *arg, int sync, int ctl) __attribute__((noreturn));

static void stage1_run(void *arg, int sync, int ctl)
{
	struct stage1_arg *a = arg;
	char go;
	ssize_t r;

	/* Threat: a stage outliving the shim that started it (a killed
	 * supervisor) would keep the program running unsupervised. The byte
	 * below comes after this is set: a parent gone before leaves end of
	 * file instead. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		_exit(1);
	/* The parent writes the ID maps, then one byte: until then this
	 * process has no identity in its new user namespace. (With
	 * --userns-fd there is no new one, and no map: the byte alone.) */
	do
		r = read(sync, &go, 1);
	while (r < 0 && errno == EINTR);
	if (r != 1 || close(sync) != 0)
		_exit(1);
	s1_main(a->p, ctl, a->orig);
}

/* userns_file_is reads a file of /proc/self (a few bytes) and says
 * whether it holds exactly want. shown receives what it holds on one
 * line, for a message: each run of blanks one space, the lines joined by
 * "; " (cut at shownlen). */
static int userns_file_is(const char *path, const char *want, char *shown, size_t shownlen)
{
	char raw[256];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t i, o = 0;
	ssize_t n;

	if (fd < 0)
		s0_fail("--userns-fd: open %s: %s", path, gp_errno(errno));
	n = s1_read_small(fd, raw, sizeof(raw));
	if (n < 0) {
		int er = errno;

		close(fd);
		s0_fail("--userns-fd: read %s: %s", path, gp_errno(er));
	}
	if (close(fd) != 0)
		s0_fail("--userns-fd: close %s: %s", path, gp_errno(errno));
	for (i = 0; raw[i] != 0 && o + 3 < shownlen; i++) {
		int blank = raw[i] == ' ' || raw[i] == '\t';

		if (raw[i] == '\n') {
			if (raw[i + 1] != 0 && o > 0) {
				shown[o++] = ';';
				shown[o++] = ' ';
			}
		} else if (!blank) {
			shown[o++] = raw[i];
		} else if (o > 0 && shown[o - 1] != ' ' && raw[i + 1] != '\n' && raw[i + 1] != 0) {
			shown[o++] = ' ';
		}
	}
	shown[o] = 0;
	return strcmp(raw, want) == 0;
}

/* join_userns makes the waiter a member of the user namespace of
 * --userns-fd (made for the service user by glove-userns, on a host whose
 * kernel lets no unprivileged process create one), and closes the
 * descriptor: stage 1, which the waiter clones next, and everything after
 * it never hold it. Stage 0's Go part checked the namespace's type, owner
 * and parent (shim/userns_linux.go: checkUserns); what only its inside
 * shows is checked here, each failure one line and exit 125 before any
 * process of the sandbox exists.
 *
 * The namespace must map exactly what the bundle's linux.uidMappings and
 * gidMappings say (stage 0 accepts one entry each or none, and the entry
 * must be process.user's id onto the service user's, length 1):
 * process.user's uid (UID) to the service user's uid, its gid (GID) to
 * the service user's gid. The waiter then is UID and GID there, and so
 * are stage 1, stage 2 and the program, which has the ids and sees the
 * owners of its files it has in the default mode, where they are those
 * of user namespace 2 (UID onto user namespace 1's 0, the service user).
 * Threat: a namespace mapping 0 gives the program uid 0 whatever
 * process.user says, and a program that behaves differently as root
 * (claude-code refuses --dangerously-skip-permissions there) runs unlike
 * in the default mode. So:
 *
 *  - the waiter is UID and GID there (in each of the real, effective and
 *    saved ids): a namespace whose maps are missing leaves it the
 *    overflow ids, one mapping another id leaves it that id;
 *  - uid_map and gid_map are exactly one line, UID and GID mapped to the
 *    service user's uid and gid, length 1, compared with the kernel's own
 *    format (kernel/user_namespace.c, "%10u %10u %10u\n"). Threat: a map
 *    wider than one id, or onto another user's id, would give the sandbox
 *    the files of that id on the host;
 *  - setgroups is "deny". Threat: the sandbox dropping a supplementary
 *    group that a host file denies access to (the maps of a namespace
 *    glove-shim makes itself always deny it).
 *
 * After setns the waiter holds every capability in the namespace,
 * whatever its uid there, and stage 1 inherits them through clone; no
 * execve lies between, which would drop them from a uid other than 0.
 *
 * The number comes from the plan, which is data: it must lie beyond the
 * preserved descriptors, which belong to the program, and not be the
 * plan's own. */
static void join_userns(const struct glove_plan *p, int planfd)
{
	char want[64], got[256];
	uid_t r, ef, sv;
	gid_t gr, ge, gs;
	int fd;

	if (p->userns_fd < 3 + p->preserve_fds || p->userns_fd > GLOVE_MAX_FD || p->userns_fd == planfd)
		s0_fail("--userns-fd %" PRId64 ": plan does not match the stage arguments", p->userns_fd);
	fd = (int)p->userns_fd;
	/* The waiter has one thread and its own file system information,
	 * as setns(CLONE_NEWUSER) requires; it gains every capability in
	 * that namespace, and none outside it. */
	if (setns(fd, CLONE_NEWUSER) != 0)
		s0_fail("--userns-fd %d: setns: %s", fd, gp_errno(errno));
	if (close(fd) != 0)
		s0_fail("--userns-fd %d: close: %s", fd, gp_errno(errno));
	if (getresuid(&r, &ef, &sv) != 0 || getresgid(&gr, &ge, &gs) != 0)
		s0_fail("--userns-fd %d: read the ids: %s", fd, gp_errno(errno));
	if (r != p->uid || ef != p->uid || sv != p->uid || gr != p->gid || ge != p->gid || gs != p->gid)
		s0_fail("--userns-fd %d: uid %u and gid %u in the user namespace, not process.user's %" PRIu32 " and %" PRIu32
			": it must map process.user's ids to the service user's (uid %" PRIu32 ", gid %" PRIu32 ") alone",
			fd, (unsigned)ef, (unsigned)ge, p->uid, p->gid, p->host_uid, p->host_gid);
	snprintf(want, sizeof(want), "%10u %10u %10u\n", (unsigned)p->uid, (unsigned)p->host_uid, 1U);
	if (!userns_file_is("/proc/self/uid_map", want, got, sizeof(got)))
		s0_fail("--userns-fd %d: uid_map \"%s\" is not one line mapping process.user's uid %" PRIu32 " to uid %" PRIu32
			" alone, length 1",
			fd, got, p->uid, p->host_uid);
	snprintf(want, sizeof(want), "%10u %10u %10u\n", (unsigned)p->gid, (unsigned)p->host_gid, 1U);
	if (!userns_file_is("/proc/self/gid_map", want, got, sizeof(got)))
		s0_fail("--userns-fd %d: gid_map \"%s\" is not one line mapping process.user's gid %" PRIu32 " to gid %" PRIu32
			" alone, length 1",
			fd, got, p->gid, p->host_gid);
	if (!userns_file_is("/proc/self/setgroups", "deny\n", got, sizeof(got)))
		s0_fail("--userns-fd %d: setgroups is \"%s\", not denied in the user namespace", fd, got);
}

/* start_stage1 clones stage 1 into the seven new namespaces. Its root in
 * user namespace 1 is the service user on the host, and nothing else is
 * mapped. With --userns-fd the waiter is in user namespace 1 already
 * (join_userns, whose maps it checked), as process.user's uid and gid
 * there with every capability: stage 1 is cloned into the six other new
 * namespaces, and no map is written. It returns stage 1's pid
 * once the program is executing, or -1 with the reason in e. */
static pid_t start_stage1(struct glove_plan *p, ksigset orig, char *e)
{
	struct stage1_arg a = { .p = p, .orig = orig };
	struct s1_child c = {
		.flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
			 CLONE_NEWCGROUP | SIGCHLD,
		.map = 1, .uid_in = 0, .uid_out = p->host_uid, .gid_in = 0, .gid_out = p->host_gid,
		.name = "stage 1", .run = stage1_run, .arg = &a,
	};
	int mine;
	pid_t pid;

	if (p->userns_fd != 0) {
		c.flags &= ~(unsigned long)CLONE_NEWUSER;
		c.map = 0;
	}
	pid = s1_start_child(&c, &mine, e);

	if (pid >= 0 && close(mine) != 0) {
		s1_err(e, "stage 1: close the control socket: %s", gp_errno(errno));
		s1_kill_child(pid, e);
		return -1;
	}
	return pid;
}

void glove_stage0(int argc, char **argv) __attribute__((noreturn));

void glove_stage0(int argc, char **argv)
{
	static char e[S1_ERRLEN];
	struct glove_plan p;
	ksigset orig = 0;
	int planfd = -1, block_err = 0;
	pid_t pid;

	/* Every signal is blocked first (see the top of this file), and
	 * stays blocked in stage 1, which inherits the mask: one sent before
	 * the program exists waits, and is forwarded once it does. */
	if (s1_block_signals(&orig) != 0)
		block_err = errno;
	/* The name the supervisor's and the operator's tools show, not the
	 * executable's descriptor's. */
	if (prctl(PR_SET_NAME, "glove-shim", 0, 0, 0) != 0)
		s0_fail("prctl(PR_SET_NAME): %s", gp_errno(errno));
	memset(&p, 0, sizeof(p));
	if (gp_read_plan(argc, argv, &p, &planfd, e, sizeof(e)) != 0)
		s0_fail("%s", e);
	if (close(planfd) != 0)
		s0_fail("close the plan: %s", gp_errno(errno));
	if (block_err != 0)
		s0_fail("block signals: %s", gp_errno(block_err));
	if (p.userns_fd != 0)
		join_userns(&p, planfd);
	pid = start_stage1(&p, orig, e);
	if (pid < 0)
		s0_fail("%s", e);
	/* The listener's descriptor is stage 2's alone: a copy kept here
	 * would hide from the handler the end of file it reads when stage 2
	 * sends no listener (no filter). Stage 1 has its own copy now. */
	if (p.process.seccomp_listener_fd != 0 && close((int)p.process.seccomp_listener_fd) != 0) {
		s1_kill_child(pid, e);
		s0_fail("close the seccomp listener's descriptor: %s", gp_errno(errno));
	}
	/* Nor any other: the waiter needs no descriptor beyond stdio from
	 * here on, and stage 1 has its own table. A copy kept here of one
	 * passed to the program (the inherited stream's guest end) would
	 * hold it open on the host side until the session's end, so that
	 * the program closing it would never reach its peer; a copy of a
	 * mount's source would keep that mount alive as long. */
	if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
		s1_kill_child(pid, e);
		s0_fail("close_range: %s", gp_errno(errno));
	}
	/* Forward and wait: stage 0 reaps nothing but stage 1. */
	for (;;) {
		int ws, sig;
		pid_t w = waitpid(pid, &ws, WNOHANG);

		if (w == pid)
			_exit(s1_exit_status(ws));
		if (w < 0 && errno != EINTR)
			s0_fail("wait for stage 1: %s", gp_errno(errno));
		sig = s1_wait_signal();
		if (sig == 0) {
			/* Cannot happen (every signal is blocked, the set is
			 * valid); were it to, stage 0 still waits, for stage 1
			 * itself instead of spinning. */
			if (waitpid(pid, &ws, 0) == pid)
				_exit(s1_exit_status(ws));
			continue;
		}
		if (s1_forwarded(sig)) {
			/* ESRCH only: stage 1 has just exited, and the next
			 * waitpid reaps it; nothing is left unbounded by a lost
			 * signal. */
			(void)kill(pid, sig);
		}
	}
}
