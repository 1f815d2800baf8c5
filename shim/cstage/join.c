/* SPDX-License-Identifier: Apache-2.0 */
/*
 * glove-shim's join of the session's v1 cgroups (hybrid hosts), before
 * the Go runtime starts. gloved starts the shim as
 *
 *     glove-shim --cgroup-join S:T1,T2 run ...
 *
 * where T1, T2 are the session's v1 tasks files (glove-cgroup's Join,
 * open for writing only) and S is the sync socket. The constructor
 * (cstage.c) calls glove_join while this process has its one thread:
 * writing "0" to a v1 tasks file moves the calling thread, the whole
 * process here, and takes no global lock, where a pid written to
 * cgroup.procs (glove-cgroup's Place) takes the kernel's
 * cgroup_threadgroup_rwsem for writing and waits for an RCU grace period:
 * 5 to 11 ms measured on a hybrid host, on the path of every start. It
 * then closes the tasks files, so that nothing started later holds them,
 * and writes 'j' on S: gloved asks glove-cgroup's Place only then, and
 * Place, which reads the membership itself, finds the shim in place.
 *
 * Any failure ends the shim with ExitFailed (125: nothing was executed)
 * and a one-line reason; gloved then reports the start failed. A user who
 * runs this by hand can only move their own process into cgroups whose
 * tasks files they could open.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "cstage.h"

#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif

/* join_fail ends the shim with "glove-shim: --cgroup-join: MESSAGE". */
static void join_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

static void join_fail(const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	dprintf(2, "glove-shim: %s: %s\n", GLOVE_ARG_JOIN, msg);
	_exit(GLOVE_EXIT_FAILED);
}

/* join_number parses one descriptor number of the spec, digits only,
 * 3..GLOVE_MAX_FD without a leading zero, and advances *s past it; -1 if
 * there is none. */
static int join_number(const char **s)
{
	long n = 0;
	const char *p = *s;

	if (*p < '1' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		n = n * 10 + (*p - '0');
		if (n > GLOVE_MAX_FD)
			return -1;
	}
	if (n < 3)
		return -1;
	*s = p;
	return (int)n;
}

int glove_join_parse(const char *spec, int *sync, int tasks[GLOVE_JOIN_MAX], int *n)
{
	const char *p = spec;

	*n = 0;
	if ((*sync = join_number(&p)) < 0 || *p++ != ':')
		return -1;
	for (;;) {
		if (*n == GLOVE_JOIN_MAX || (tasks[*n] = join_number(&p)) < 0 || tasks[*n] == *sync)
			return -1;
		(*n)++;
		if (*p == '\0')
			return 0;
		if (*p++ != ',')
			return -1;
	}
}

/* glove_join parses spec (glove_join_parse), checks each T is a cgroup v1
 * file open for writing only, writes "0" to it and closes it, then
 * writes 'j' on S. It returns only when all of that succeeded. */
void glove_join(const char *spec)
{
	int sync, tasks[GLOVE_JOIN_MAX], n, i;

	if (glove_join_parse(spec, &sync, tasks, &n) != 0)
		join_fail("%.64s: want S:T1[,T2...], descriptor numbers 3..%d with no leading zero, each T other than S, at most %d T", spec, GLOVE_MAX_FD, GLOVE_JOIN_MAX);
	for (i = 0; i < n; i++) {
		struct statfs fs;
		int fl;

		if (fstatfs(tasks[i], &fs) != 0)
			join_fail("descriptor %d: fstatfs: %s", tasks[i], gp_errno(errno));
		fl = fcntl(tasks[i], F_GETFL);
		if (fl < 0)
			join_fail("descriptor %d: fcntl: %s", tasks[i], gp_errno(errno));
		/* Threat: a descriptor of another kind (a file the "0" would
		 * clobber) named by mistake; which v1 file it is, Place checks
		 * by its result. */
		if (fs.f_type != CGROUP_SUPER_MAGIC || (fl & O_ACCMODE) != O_WRONLY)
			join_fail("descriptor %d is not a cgroup v1 file open for writing only", tasks[i]);
		if (write(tasks[i], "0", 1) != 1)
			join_fail("descriptor %d: write: %s", tasks[i], gp_errno(errno));
		if (close(tasks[i]) != 0)
			join_fail("descriptor %d: close: %s", tasks[i], gp_errno(errno));
	}
	/* Threat: a supervisor told of a join that did not happen would
	 * release a program outside its v1 limits; Place's own membership
	 * check stops that, and this byte is only the word to check now. */
	if (write(sync, "j", 1) != 1)
		join_fail("descriptor %d: tell the supervisor: %s", sync, gp_errno(errno));
}
