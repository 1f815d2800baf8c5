/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stages 0 (its C part) and 1 in C, shared between their files: stage0.c
 * (the waiter that starts stage 1, forwards signals and reports its
 * status), stage1.c (PID 1: the steps around the mount tree, stage 2's
 * start, the reaper) and mount.c (the mount tree).
 */
#ifndef GLOVE_STAGE1_H
#define GLOVE_STAGE1_H

#include <stdint.h>
#include <sys/types.h>

#include "plan.h"

/* shim/run_linux.go: ExitFailed, the status when nothing was executed. */
#define EXIT_FAILED 125

/* How much of a child stage's report is read. */
#define REPORT_MAX 4096

/* The kernel's signal set, one bit per signal 1..64, as rt_sigprocmask
 * and rt_sigtimedwait take it. They are called raw, not through glibc,
 * because glibc leaves its two internal real-time signals (32 and 33)
 * out of every set it passes: stages 0 and 1 must block and forward
 * those too. */
typedef uint64_t ksigset;

/* s1_block_signals blocks every signal, returning the old mask in *old;
 * s1_wait_signal waits for the next pending one (0: waiting failed);
 * s1_forwarded says which a stage passes on (all but SIGCHLD and
 * SIGURG); s1_exit_status is a wait status as the shim's exit status
 * (the program's, or 128+N when signal N killed it). */
int s1_block_signals(ksigset *old);
int s1_wait_signal(void);
int s1_forwarded(int sig);
int s1_exit_status(int ws);

/* s1_write_file writes s to path whole; s1_read_small reads fd until end
 * of file into buf (max bytes, NUL-terminated) and returns the length or
 * -1; s1_send_all writes n bytes on a stream socket without SIGPIPE;
 * s1_kill_child kills and reaps a child stage, adding a failed kill to
 * e. */
int s1_write_file(const char *path, const char *s, char *e);
ssize_t s1_read_small(int fd, char *buf, size_t max);
int s1_send_all(int s, const unsigned char *b, size_t n);
void s1_kill_child(pid_t pid, char *e);

/* s1_child describes a child stage for s1_start_child: the clone flags
 * (SIGCHLD included), whether to write its ID maps (uid_in and gid_in
 * inside mapped to uid_out and gid_out outside, one each), its name in
 * errors, and run, which the child calls with its ends of the start-up
 * socket (a failure before the stage proper; closed once that starts)
 * and of the control socket (the stage's own failure; closed at the
 * program's execve). */
struct s1_child {
	unsigned long flags;
	int map;
	uint32_t uid_in, uid_out, gid_in, gid_out;
	const char *name;
	void (*run)(void *arg, int sync, int ctl) __attribute__((noreturn));
	void *arg;
};

/* s1_start_child clones the child, writes its maps, releases it and reads
 * both sockets until end of file: empty means the program is executing.
 * It returns the child's pid, with this end of its control socket in
 * *mine, or -1 with the reason in e, the child then killed and reaped. */
pid_t s1_start_child(const struct s1_child *c, int *mine, char *e);

/* s1_main is stage 1, PID 1 of the sandbox, in the child stage 0 cloned
 * into the seven new namespaces, with every signal blocked: p is the
 * plan, ctl the control socket on which a failure is reported and
 * which is closed once the program executes, orig the signal mask to
 * give the program. It never returns. */
void s1_main(struct glove_plan *p, int ctl, ksigset orig) __attribute__((noreturn));

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
