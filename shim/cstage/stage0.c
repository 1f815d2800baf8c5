/*
 * Stage 0's C part: the waiter. Stage 0 (Go) decides everything (the
 * strict decode of config.json, Validate, the seccomp program, the
 * checks of every host source, the placement in the session's cgroups),
 * writes the plan into a memfd and executes glove-shim again as
 * `glove-shim --glove-stage0 N`; the constructor in cstage.c runs this
 * before the Go runtime. It clones stage 1 into the seven new namespaces,
 * where the child runs stage 1 itself (s1_main) without executing
 * anything, then forwards signals to it and exits with its status.
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

/* write_maps gives stage 1 its identity in user namespace 1: its root is
 * the service user on the host, and nothing else is mapped. setgroups
 * stays denied (threat: the program dropping a supplementary group that
 * a host file denies access to); it must be written before gid_map. */
static int write_maps(const struct glove_plan *p, pid_t pid, char *e)
{
	char path[64], map[64];

	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
	snprintf(map, sizeof(map), "0 %" PRIu32 " 1\n", p->host_uid);
	if (s1_write_file(path, map, e) != 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)pid);
	if (s1_write_file(path, "deny", e) != 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
	snprintf(map, sizeof(map), "0 %" PRIu32 " 1\n", p->host_gid);
	return s1_write_file(path, map, e);
}

/* start_stage1 clones stage 1 and waits for its report, read until end of
 * file: empty means the program is executing (stage 1 closes its end
 * then), anything else is why the sandbox could not be built. It returns
 * stage 1's pid, or -1 with the reason in e, stage 1 then killed and
 * reaped. */
static pid_t start_stage1(struct glove_plan *p, ksigset orig, char *e)
{
	const unsigned long flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
				    CLONE_NEWUTS | CLONE_NEWCGROUP | SIGCHLD;
	char report[REPORT_MAX + 1];
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
	 * thread and no Go runtime, so the child may run C (stage 1) for as
	 * long as it lives. */
	pid = (pid_t)syscall(SYS_clone, flags, NULL, NULL, NULL, NULL);
	if (pid < 0) {
		s1_err(e, "start stage 1: clone: %s", gp_errno(errno));
		close(ctl[0]);
		close(ctl[1]);
		close(sync[0]);
		close(sync[1]);
		return -1;
	}
	if (pid == 0) {
		char go;
		ssize_t r;

		close(ctl[0]);
		close(sync[0]);
		/* Threat: a stage outliving the shim that started it (a killed
		 * supervisor) would keep the program running unsupervised. The
		 * byte below comes after this is set: a parent gone before
		 * leaves end of file instead. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
			_exit(1);
		/* The parent writes the ID maps, then one byte: until then this
		 * process has no identity in its new user namespace. */
		do
			r = read(sync[1], &go, 1);
		while (r < 0 && errno == EINTR);
		if (r != 1)
			_exit(1);
		close(sync[1]);
		s1_main(p, ctl[1], orig);
	}
	close(ctl[1]);
	close(sync[1]);
	if (write_maps(p, pid, e) != 0) {
		s1_wrap(e, "start stage 1");
		goto fail;
	}
	if (s1_send_all(sync[0], (const unsigned char *)"g", 1) != 0) {
		s1_err(e, "start stage 1: release the child: %s", gp_errno(errno));
		goto fail;
	}
	close(sync[0]);
	sync[0] = -1;
	n = s1_read_small(ctl[0], report, sizeof(report));
	if (n < 0) {
		s1_err(e, "stage 1: read report: %s", gp_errno(errno));
		goto fail;
	}
	if (n > 0) {
		/* Stage 1 or 2 could not build the sandbox: their own words. */
		s1_err(e, "%s", report);
		goto fail;
	}
	close(ctl[0]);
	return pid;
fail:
	s1_kill_child(pid, e);
	if (sync[0] >= 0)
		close(sync[0]);
	close(ctl[0]);
	return -1;
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
	pid = start_stage1(&p, orig, e);
	if (pid < 0)
		s0_fail("%s", e);
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
