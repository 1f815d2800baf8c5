/*
 * Stage 1 in C, shared between its two files: stage1.c (PID 1: the
 * steps around the mount tree, stage 2's start, the reaper) and mount.c
 * (the mount tree). Only stage 1 includes this header.
 */
#ifndef GLOVE_STAGE1_H
#define GLOVE_STAGE1_H

#include "plan.h"

/* Every error of stage 1 is built in a buffer of this size, then
 * reported with gp_fail. */
#define S1_ERRLEN 4096

/* s1_err writes a message into e; s1_wrap puts "PREFIX: " before the
 * message already there (as Go's fmt.Errorf("...: %w") does), so each
 * caller names its own step, and the report reads as the Go stage's
 * did. */
void s1_err(char *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void s1_wrap(char *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* s1_build_root builds the sandbox's mount tree as shim/stage1 always
 * has: it returns a descriptor of the new root, with every mount attached
 * and /proc masked, or -1 with the reason in e (S1_ERRLEN bytes). */
int s1_build_root(const struct glove_plan *p, char *e);

/* s1_pivot makes root the root of mount namespace 1 and detaches the
 * host's tree. 0, or -1 with the reason in e. */
int s1_pivot(int root, char *e);

#endif
