/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the C stages of glove-shim share: reading the plan from the
 * control socket, reporting a failure to the parent stage, and the layer
 * switches of test builds. See cstage.c.
 */
#ifndef GLOVE_CSTAGE_H
#define GLOVE_CSTAGE_H

#include <stddef.h>

#include "plan.h"

/* The argument of stage 0's waiter (shim/run_linux.go: argStage0). */
#define GLOVE_ARG_STAGE0 "--glove-stage0"

/* The subcommand that runs the user-namespace steps of a start alone
 * (probe.c; shim/run_linux.go: argProbe). */
#define GLOVE_ARG_PROBE "probe"

/* glove-shim's first argument when gloved asks it to join the session's
 * v1 cgroups before the Go runtime starts (join.c; shim/run_linux.go:
 * argJoin); its second is "S:T1,T2". */
#define GLOVE_ARG_JOIN "--cgroup-join"

/* Stage 0's status when nothing was executed (shim/run_linux.go:
 * ExitFailed), and the largest descriptor number a command line names. */
#define GLOVE_EXIT_FAILED 125
#define GLOVE_MAX_FD (1 << 20)

/* glove_join joins the v1 cgroups its argument names, or ends the
 * process (join.c). glove_join_parse is its parser of "S:T1[,T2...]":
 * 0, with S in *sync and the Ts in tasks[0..*n), or -1. */
#define GLOVE_JOIN_MAX 8
void glove_join(const char *spec);
int glove_join_parse(const char *spec, int *sync, int tasks[GLOVE_JOIN_MAX], int *n);

/* The largest plan a stage reads, and the bound shared with the Go side
 * on preserved descriptors (shim/plan.go: maxPreserveFDs). */
#define GLOVE_MAX_PLAN (8 << 20)
#define GLOVE_MAX_PRESERVE_FDS 1024

/* Layer names (shim/run_linux.go: Layer*). */
#define GLOVE_LAYER_MOUNTLOCK "mountlock"
#define GLOVE_LAYER_SECCOMP "seccomp"
#define GLOVE_LAYER_LANDLOCK "landlock"
#define GLOVE_LAYER_CAPS "caps"
#define GLOVE_LAYER_PROCMASK "procmask"

/* gp_read_plan checks the stage arguments, makes every inherited
 * descriptor close-on-exec, reads the plan from the descriptor named by
 * argv[2] (beyond the preserved ones) until end of file and decodes it.
 * It returns 0, or -1 with a reason in err. *ctl is that descriptor, or
 * -1 when the arguments did not name one. */
int gp_read_plan(int argc, char **argv, struct glove_plan *p, int *ctl, char *err, size_t errlen);

/* gp_fail reports "STAGE: message" to the parent stage on ctl (or, when
 * that fails, "glove-shim: STAGE: message" on standard error) and exits
 * with status 1, as the Go stages' fail does. */
void gp_fail(int ctl, const char *stage, const char *fmt, ...)
	__attribute__((noreturn, format(printf, 3, 4)));

/* gp_errno is errno's text as the Go stages print it ("no such file or
 * directory"), so that a stage's report reads the same whichever
 * language made it. */
const char *gp_errno(int e);

/* gp_stage2 is stage 2 (stage2.c): it applies every restriction of the
 * plan's process to this process, which must have one thread, and
 * execve's the program; any failure is reported on ctl. Stage 1 calls it
 * in the child it cloned into user namespace 2, without executing
 * glove-shim again. */
void gp_stage2(int ctl, const struct glove_plan *p) __attribute__((noreturn));

/* gp_off reports whether a layer is switched off. Always 0 in production
 * builds: only a glove-shim built with the glove_testlayers tag (which
 * defines GLOVE_TESTLAYERS for this C code) reads the plan's list. */
int gp_off(const struct glove_plan *p, const char *layer);

#endif
