/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The C stages' entry: a constructor that glibc runs before the Go
 * runtime starts (before any Go thread exists). When glove-shim is
 * executed as one of its stages, the constructor runs that stage in C and
 * never returns (the stage execve's the next program or exits); for any
 * other command line it returns and Go starts as usual.
 *
 * Why: every Go start-up on the path from `glove-shim run` to the
 * program costs 1.5 ms or more (docs/shim-startup.md). A stage that is
 * run here pays for none.
 *
 * Only stage 0's waiter and `glove-shim probe` are entered here (stage
 * 1 runs in the child the waiter clones, stage 2 in the child stage 1
 * clones). A user who runs
 * `glove-shim --glove-stage0 N` by hand gains nothing: the stages only
 * restrict themselves, in namespaces any user may create, then execute
 * what the plan read from descriptor N names, as that user.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cstage.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* The waiter's entry (stage0.c). Stages 1 and 2 have none: each runs in
 * the child the stage before it clones, and glove-shim is never executed
 * as either. */
extern void glove_stage0(int argc, char **argv) __attribute__((noreturn));

/* `glove-shim probe` (probe.c): the user-namespace steps of a start,
 * alone. Any other argument after it reaches Go, which reports the usage
 * error. */
extern void glove_probe(void) __attribute__((noreturn));

__attribute__((constructor)) static void glove_cstage(int argc, char **argv, char **envp)
{
	(void)envp;
	if (argc == 2 && argv != NULL && argv[1] != NULL && strcmp(argv[1], GLOVE_ARG_PROBE) == 0)
		glove_probe();
	if (argc < 3 || argv == NULL || argv[1] == NULL || argv[2] == NULL)
		return;
	/* gloved's start of the shim on a hybrid host: join the v1 session
	 * cgroups while this process has one thread (join.c), then let Go
	 * run the rest of the command line. */
	if (strcmp(argv[1], GLOVE_ARG_JOIN) == 0) {
		glove_join(argv[2]);
		return;
	}
	if (argc == 3 && strcmp(argv[1], GLOVE_ARG_STAGE0) == 0)
		glove_stage0(argc, argv);
}

const char *gp_errno(int e)
{
	static char buf[128];

	snprintf(buf, sizeof(buf), "%s", strerror(e));
	buf[0] = (char)tolower((unsigned char)buf[0]);
	return buf;
}

void gp_fail(int ctl, const char *stage, const char *fmt, ...)
{
	char msg[4096];
	va_list ap;
	int off;
	size_t len;

	off = snprintf(msg, sizeof(msg), "%s: ", stage);
	if (off < 0)
		off = 0;
	va_start(ap, fmt);
	vsnprintf(msg + off, sizeof(msg) - (size_t)off, fmt, ap);
	va_end(ap);
	len = strlen(msg);
	if (ctl >= 0 && write(ctl, msg, len) == (ssize_t)len)
		_exit(1);
	dprintf(2, "glove-shim: %s\n", msg);
	_exit(1);
}

int gp_off(const struct glove_plan *p, const char *layer)
{
#ifdef GLOVE_TESTLAYERS
	size_t i;

	for (i = 0; i < p->off.n; i++)
		if (strcmp(p->off.v[i], layer) == 0)
			return 1;
#else
	(void)p;
	(void)layer;
#endif
	return 0;
}

static int parse_fd(const char *s)
{
	long v = 0;

	if (*s == 0)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > 100000)
			return -1;
		v = v * 10 + (*s - '0');
	}
	return (int)v;
}

int gp_read_plan(int argc, char **argv, struct glove_plan *p, int *ctl, char *err, size_t errlen)
{
	unsigned char *buf;
	size_t len = 0, cap = 64 << 10;
	int n;

	*ctl = -1;
	if (argc != 3 || (n = parse_fd(argv[2])) < 3) {
		snprintf(err, errlen, "bad stage arguments");
		return -1;
	}
	/* Nothing the stage did not choose to pass reaches the next one. */
	if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
		snprintf(err, errlen, "close_range: %s", gp_errno(errno));
		return -1;
	}
	*ctl = n;
	buf = malloc(cap);
	if (buf == NULL) {
		snprintf(err, errlen, "read plan: out of memory");
		return -1;
	}
	for (;;) {
		ssize_t r;

		if (len == cap) {
			unsigned char *nb;

			if (cap > GLOVE_MAX_PLAN) {
				free(buf);
				snprintf(err, errlen, "read plan: too large");
				return -1;
			}
			cap *= 2;
			nb = realloc(buf, cap);
			if (nb == NULL) {
				free(buf);
				snprintf(err, errlen, "read plan: out of memory");
				return -1;
			}
			buf = nb;
		}
		r = read(n, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;

			free(buf);
			snprintf(err, errlen, "read plan: %s", gp_errno(e));
			return -1;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	if (len > GLOVE_MAX_PLAN) {
		free(buf);
		snprintf(err, errlen, "read plan: too large");
		return -1;
	}
	if (glove_plan_decode(buf, len, p, err, errlen) != 0) {
		char reason[256];

		free(buf);
		snprintf(reason, sizeof(reason), "%s", err);
		snprintf(err, errlen, "decode plan: %s", reason);
		return -1;
	}
	/* The plan's descriptor lies beyond the preserved ones, which belong
	 * to the program. */
	if (p->preserve_fds < 0 || p->preserve_fds > GLOVE_MAX_PRESERVE_FDS || n < 3 + p->preserve_fds) {
		free(buf);
		glove_plan_free(p);
		snprintf(err, errlen, "plan does not match the stage arguments");
		return -1;
	}
	free(buf);
	return 0;
}
