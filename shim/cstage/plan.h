/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plan of glove-shim's stages as C sees it: the same fields as
 * shim.Plan (shim/plan.go), decoded from the same bytes (shim/plancodec.go
 * writes them). It is the only decoder production runs: the C stages run
 * before any Go runtime exists. It must refuse exactly what the Go
 * reference decoder of the tests refuses (shim/plandecode_test.go;
 * FuzzCDecodePlan compares the two on every input).
 */
#ifndef GLOVE_PLAN_H
#define GLOVE_PLAN_H

#include <stddef.h>
#include <stdint.h>

/* A list of strings, each NUL-terminated; v[n] is NULL, so args and env
 * can be handed to execve as they are. */
struct gp_strs {
	size_t n;
	char **v;
};

struct gp_ident {
	uint64_t dev, ino;
};

struct gp_mount {
	char *destination;
	char *kind;
	char *source_path;
	struct gp_ident source_ident;
	int64_t source_fd;
	char *source_sub;
	int recursive;
	uint64_t attr;
	size_t nconfig;
	char *(*config)[2];
	int writable;
	int file_target;
};

struct gp_rlimit {
	int64_t resource;
	uint64_t soft, hard;
};

struct gp_budget {
	char *name;
	int64_t value;
};

struct gp_root_entry {
	char *name;
	char *link;
	int dir;
};

struct gp_process {
	struct gp_strs args, env;
	char *cwd;
	int terminal;
	int has_umask;
	uint32_t umask;
	size_t nrlimits;
	struct gp_rlimit *rlimits;
	int has_seccomp;
	unsigned char *seccomp; /* classic BPF, seccomp_len bytes */
	size_t seccomp_len;
	uint64_t seccomp_flags;
	int64_t seccomp_listener_fd; /* 0: none; see shim.ProcessPlan */
	unsigned char *deny_ioctls; /* classic BPF, deny_ioctls_len bytes; 0: none */
	size_t deny_ioctls_len;
	size_t npass_fds;
	int64_t *pass_fds;
	uint64_t cap_bounding, cap_effective, cap_inheritable, cap_permitted, cap_ambient;
	struct gp_strs writable, writable_file;
};

struct gp_alloc; /* every allocation of one decoded plan, freed together */

struct glove_plan {
	int64_t preserve_fds;
	char *hostname;
	uint32_t uid, gid, host_uid, host_gid;
	int root_readonly;
	int root_tmpfs;
	size_t nmounts;
	struct gp_mount *mounts;
	struct gp_strs masked, readonly;
	struct gp_process process;
	struct gp_strs off;
	char *root_path;
	struct gp_ident root_ident;
	size_t nbudgets;
	struct gp_budget *budgets;
	size_t nroot_entries;
	struct gp_root_entry *root_entries;
	int64_t egress_handoff_fd; /* 0: none; see shim.Plan */
	size_t negress_ports;
	uint16_t *egress_ports;
	int64_t userns_fd; /* 0: none; see shim.Plan */
	struct gp_alloc *allocs;
};

/* glove_plan_decode fills p from the n bytes at b. On success it returns
 * 0; otherwise -1, with a one-line reason in err (errlen bytes, always
 * NUL-terminated) and nothing left allocated. A decoded plan is released
 * with glove_plan_free. */
int glove_plan_decode(const unsigned char *b, size_t n, struct glove_plan *p, char *err, size_t errlen);
void glove_plan_free(struct glove_plan *p);

#endif
