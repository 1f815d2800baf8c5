/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stage 2 of glove-shim, in C: it runs in user namespace 2, where every
 * mount stage 1 built is locked, restricts itself as the plan says and
 * execve's the program. Stage 1 (stage1.c) calls gp_stage2 in the child
 * it cloned into user namespace 2: no Go start-up, and no execve of
 * glove-shim, on this stage's path (docs/shim-startup.md, "Stage 2 in
 * C").
 *
 * The process has one thread and creates none: every restriction below
 * applies to the thread that calls execve, and so to the program, which
 * inherits exactly its credentials, filters and Landlock domain. The
 * order matters; rerun shim's TestAttack* after any change to it.
 *
 * Every step's failure ends the stage with a report to stage 1 (gp_fail)
 * before anything is executed, naming the operation; the texts are those
 * of the Go stage 2 this file replaced wherever tests or docs match them.
 *
 * Raw system calls where glibc 2.36 (Debian 12) declares no wrapper:
 * openat2, close_range, landlock_*, seccomp, capget/capset, getcwd (see
 * enter_cwd).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cstage.h"

#define STAGE "stage 2"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* Landlock rights and scopes newer than Debian 12's kernel headers (6.1):
 * the values are the kernel's ABI and never change. */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_RESOLVE_UNIX
#define LANDLOCK_ACCESS_FS_RESOLVE_UNIX (1ULL << 16) /* ABI 9 */
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

/* The highest capability number the plan's 64-bit masks can hold. Stage 0
 * knows 0 to 40 (shim/plan.go: capNames), so a bundle never keeps a
 * higher one; the bounding set is still emptied up to here, so that a
 * newer kernel's capabilities are dropped too (threat: a capability
 * added after this code was written, left in the bounding set of a
 * program whose uid is 0). PR_CAPBSET_DROP answers EINVAL for numbers
 * the kernel does not have. */
#define GLOVE_CAP_MAX 63

/* The PATH searched when the sandbox's environment has none. */
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* prctl with every argument as the kernel reads it (unsigned long): glibc's
 * prctl is variadic, and an int passed there would leave the upper half of
 * the register undefined. */
static int xprctl(int op, unsigned long a, unsigned long b)
{
	return prctl(op, a, b, 0UL, 0UL);
}

/* quote writes s in double quotes with backslash escapes for quotes,
 * backslashes and control bytes, as Go's %q prints the ASCII strings of
 * a plan (other bytes are copied as they are). */
static const char *quote(char *dst, size_t n, const char *s)
{
	size_t o = 0;

	if (n < 3) {
		if (n > 0)
			dst[0] = 0;
		return dst;
	}
	dst[o++] = '"';
	for (; *s && o + 6 < n; s++) {
		unsigned char c = (unsigned char)*s;
		const char *esc = NULL;

		switch (c) {
		case '"': esc = "\\\""; break;
		case '\\': esc = "\\\\"; break;
		case '\a': esc = "\\a"; break;
		case '\b': esc = "\\b"; break;
		case '\f': esc = "\\f"; break;
		case '\n': esc = "\\n"; break;
		case '\r': esc = "\\r"; break;
		case '\t': esc = "\\t"; break;
		case '\v': esc = "\\v"; break;
		}
		if (esc != NULL)
			o += (size_t)snprintf(dst + o, n - o, "%s", esc);
		else if (c < 0x20 || c == 0x7f)
			o += (size_t)snprintf(dst + o, n - o, "\\x%02x", c);
		else
			dst[o++] = (char)c;
	}
	dst[o++] = '"';
	dst[o] = 0;
	return dst;
}

/* enter_cwd changes to the working directory, resolved inside the root,
 * and checks that the kernel agrees it is inside: a working directory
 * outside the root reads back from getcwd(2) as "(unreachable)/...". The
 * raw system call, since glibc's getcwd turns that answer into ENOENT. */
static void enter_cwd(int ctl, const char *cwd)
{
	struct open_how how = {
		.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	char wd[4096], q[sizeof(wd) * 4 + 3];
	int root, fd;
	long n;

	root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		gp_fail(ctl, STAGE, "process.cwd: open /: %s", gp_errno(errno));
	fd = (int)syscall(SYS_openat2, root, cwd, &how, sizeof(how));
	if (fd < 0)
		gp_fail(ctl, STAGE, "process.cwd %s: %s", cwd, gp_errno(errno));
	if (close(root) != 0)
		gp_fail(ctl, STAGE, "process.cwd: close /: %s", gp_errno(errno));
	if (fchdir(fd) != 0)
		gp_fail(ctl, STAGE, "process.cwd %s: fchdir: %s", cwd, gp_errno(errno));
	if (close(fd) != 0)
		gp_fail(ctl, STAGE, "process.cwd %s: close: %s", cwd, gp_errno(errno));
	n = syscall(SYS_getcwd, wd, sizeof(wd));
	if (n < 0)
		gp_fail(ctl, STAGE, "process.cwd %s: getcwd: %s", cwd, gp_errno(errno));
	if (n < 1 || (size_t)n > sizeof(wd) || wd[n - 1] != 0)
		gp_fail(ctl, STAGE, "process.cwd %s: getcwd: %s", cwd, gp_errno(EINVAL));
	if (wd[0] != '/')
		gp_fail(ctl, STAGE, "process.cwd %s: outside the root (%s)", cwd, quote(q, sizeof(q), wd));
}

/* look_path finds the program: a name with a slash is taken as it is,
 * anything else is searched in the sandbox's own PATH (never the host's):
 * the last PATH= of the program's environment, or the usual default. */
static const char *look_path(int ctl, const char *name, const struct gp_strs *env)
{
	static char cand[8192];
	const char *path = DEFAULT_PATH, *dir, *end;
	char qn[1024], qp[4096];
	size_t i;

	if (strchr(name, '/') != NULL)
		return name;
	for (i = 0; i < env->n; i++)
		if (strncmp(env->v[i], "PATH=", 5) == 0)
			path = env->v[i] + 5;
	for (dir = path;; dir = end + 1) {
		struct stat st;
		size_t len;

		end = strchr(dir, ':');
		len = end != NULL ? (size_t)(end - dir) : strlen(dir);
		/* A relative PATH entry would depend on the cwd. */
		if (len > 0 && dir[0] == '/' &&
		    (size_t)snprintf(cand, sizeof(cand), "%.*s/%s", (int)len, dir, name) < sizeof(cand) &&
		    stat(cand, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0)
			return cand;
		if (end == NULL)
			break;
	}
	gp_fail(ctl, STAGE, "process.args[0] %s: not found in PATH %s", quote(qn, sizeof(qn), name),
		quote(qp, sizeof(qp), path));
}

/* set_capabilities leaves this thread, and so the program, with exactly
 * the bundle's capabilities, which for Glove's own bundles is none at all.
 * Emptying the bounding set and setting SECBIT_NOROOT matter when the
 * program's uid is 0 in its namespace: execve would otherwise grant it
 * every capability again. A bundle that asks for capabilities gets runc's
 * semantics instead (root's execve grants the bounding set; others keep
 * the ambient set), limited to what it listed. */
static void set_capabilities(int ctl, const struct gp_process *pp)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2];
	int c;

	if (syscall(SYS_capget, &hdr, data) != 0)
		gp_fail(ctl, STAGE, "capget: %s", gp_errno(errno));
	if (data[0].effective & (1U << CAP_SETPCAP)) {
		for (c = 0; c <= GLOVE_CAP_MAX; c++) {
			if (pp->cap_bounding & (1ULL << c))
				continue;
			/* EINVAL: a capability this kernel does not have. */
			if (xprctl(PR_CAPBSET_DROP, (unsigned long)c, 0) != 0 && errno != EINVAL)
				gp_fail(ctl, STAGE, "prctl(PR_CAPBSET_DROP, %d): %s", c, gp_errno(errno));
		}
		if ((pp->cap_bounding | pp->cap_effective | pp->cap_inheritable | pp->cap_permitted | pp->cap_ambient) == 0) {
			unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
					     SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED;

			if (xprctl(PR_SET_SECUREBITS, bits, 0) != 0)
				gp_fail(ctl, STAGE, "prctl(PR_SET_SECUREBITS): %s", gp_errno(errno));
		}
	} else if (pp->cap_bounding != 0) {
		gp_fail(ctl, STAGE, "process.capabilities: no CAP_SETPCAP to set the bounding set");
	}
	if (xprctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0) != 0)
		gp_fail(ctl, STAGE, "prctl(PR_CAP_AMBIENT_CLEAR_ALL): %s", gp_errno(errno));
	data[0].effective = (uint32_t)pp->cap_effective;
	data[0].permitted = (uint32_t)pp->cap_permitted;
	data[0].inheritable = (uint32_t)pp->cap_inheritable;
	data[1].effective = (uint32_t)(pp->cap_effective >> 32);
	data[1].permitted = (uint32_t)(pp->cap_permitted >> 32);
	data[1].inheritable = (uint32_t)(pp->cap_inheritable >> 32);
	if (syscall(SYS_capset, &hdr, data) != 0)
		gp_fail(ctl, STAGE, "capset: %s", gp_errno(errno));
	for (c = 0; c <= GLOVE_CAP_MAX; c++)
		if ((pp->cap_ambient & (1ULL << c)) &&
		    xprctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, (unsigned long)c) != 0)
			gp_fail(ctl, STAGE, "prctl(PR_CAP_AMBIENT_RAISE, capability %d): %s", c, gp_errno(errno));
}

/* Landlock write rights by ABI: what "modify the filesystem" means at each
 * version. Reads and execution are not handled: the mounts already decide
 * what is visible, and Landlock here is one more wall around writes. */
#define WRITE_V1                                                                                           \
	(LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |   \
	 LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |         \
	 LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |      \
	 LANDLOCK_ACCESS_FS_MAKE_SYM)
#define WRITE_V2 (WRITE_V1 | LANDLOCK_ACCESS_FS_REFER)
#define WRITE_V3 (WRITE_V2 | LANDLOCK_ACCESS_FS_TRUNCATE)
#define FILE_ONLY (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE)

/* The ruleset attribute up to the members this stage sets; older kernel
 * headers lack the later ones. The size handed to the kernel says which
 * members exist (see landlock). */
struct ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net; /* ABI 4 */
	uint64_t scoped;             /* ABI 6 */
};

/* landlock_terminals grants writes to the terminal the program was given
 * on its standard descriptors, and to nothing else of the host's ttys.
 * gloved opens its pty on the host's devpts (TIOCGPTPEER), which the
 * sandbox cannot see by path (its /dev/pts is a new instance), so the
 * only way to it by name is the magic link /proc/self/fd/N, as
 * /dev/stdout, /dev/stderr and /dev/fd/N are: Landlock checks the file
 * it reaches, beneath no writable mount, and refused such a re-open with
 * EACCES ("echo x > /dev/stderr" in a script). A rule on exactly that
 * file's inode (a non-directory rule, file rights only: Landlock ABI 1)
 * lets the program re-open what it already holds for writing, which
 * gives it nothing new. The threat refused stays refused: any other
 * host tty or pts (another session's, the operator's), reached through
 * a magic link to a descriptor that does not allow writing (O_PATH,
 * read-only), has no rule and fails with EACCES (shim's attack case
 * reopen-other-pts). A descriptor that is not a terminal gets no rule
 * (a pipe or socket needs none: Landlock does not check those). */
static void landlock_terminals(int ctl, int rs, uint64_t access)
{
	struct landlock_path_beneath_attr rule = { .allowed_access = access };
	struct stat st;
	int fd;

	for (fd = 0; fd <= 2; fd++) {
		if (fstat(fd, &st) != 0) {
			if (errno == EBADF)
				continue;
			gp_fail(ctl, STAGE, "landlock: fstat descriptor %d: %s", fd, gp_errno(errno));
		}
		if (!S_ISCHR(st.st_mode) || !isatty(fd))
			continue;
		rule.parent_fd = fd;
		if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &rule, 0U) != 0)
			gp_fail(ctl, STAGE, "landlock_add_rule terminal on descriptor %d: %s", fd, gp_errno(errno));
	}
}

static void landlock_add(int ctl, int rs, const char *path, uint64_t access)
{
	struct landlock_path_beneath_attr rule = { .allowed_access = access };
	int fd;

	fd = open(path, O_PATH | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		gp_fail(ctl, STAGE, "landlock: open %s: %s", path, gp_errno(errno));
	rule.parent_fd = fd;
	if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &rule, 0U) != 0)
		gp_fail(ctl, STAGE, "landlock_add_rule %s: %s", path, gp_errno(errno));
	if (close(fd) != 0)
		gp_fail(ctl, STAGE, "landlock: close %s: %s", path, gp_errno(errno));
}

/* landlock limits writes to the writable mounts, the device binds and the
 * program's own terminal (landlock_terminals), from ABI 6 scopes
 * abstract unix sockets and signals to the sandbox, and from ABI 9 the
 * resolution of pathname unix sockets to the writable mounts. What it handles
 * grows with the kernel's ABI (glove status lists the gaps of older
 * ones); a kernel with none fails the sandbox, as in stage 0
 * (shim/landlock_unsafe.go: landlockABI): the sandbox is never built
 * without one of its layers, silently weaker than the attack table shows
 * it. */
static void landlock(int ctl, const struct gp_process *pp)
{
	struct ruleset_attr attr = { .handled_access_fs = WRITE_V1 };
	size_t size, i;
	long abi;
	int rs;

	abi = syscall(SYS_landlock_create_ruleset, NULL, 0UL, LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 0)
		gp_fail(ctl, STAGE,
			"landlock: not available on this kernel (landlock_create_ruleset: %s): refusing to build a sandbox without it; boot with landlock in the LSM list",
			gp_errno(errno));
	if (abi < 1)
		gp_fail(ctl, STAGE, "landlock: ABI %ld reported: refusing to build a sandbox without it", abi);
	if (abi >= 3)
		attr.handled_access_fs = WRITE_V3;
	else if (abi == 2)
		attr.handled_access_fs = WRITE_V2;
	if (abi >= 9)
		/* Threat: connect(2) or sendmsg(2) reaching a host service
		 * by the path of its socket, seen in a read-only bind (a
		 * world-writable one, such as a log or bus socket); a read-only
		 * mount does not stop that. Only beneath the writable mounts
		 * (their rules grant every handled right) and for sockets made
		 * in the sandbox's own domain does a path resolve. The pathname
		 * transport's connects are gloved's own, made outside. */
		attr.handled_access_fs |= LANDLOCK_ACCESS_FS_RESOLVE_UNIX;
	if (abi >= 6)
		/* Threat: reaching a host service on an abstract socket, or
		 * signalling a process outside the sandbox. */
		attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
	/* The attribute's size tells the kernel which members exist; older
	 * kernels know only handled_access_fs (ABI 1-3) or also
	 * handled_access_net (4-5); the quiet members (ABI 10) are not used. */
	if (abi < 4)
		size = offsetof(struct ruleset_attr, handled_access_net);
	else if (abi < 6)
		size = offsetof(struct ruleset_attr, scoped);
	else
		size = sizeof(attr);
	rs = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0U);
	if (rs < 0)
		gp_fail(ctl, STAGE, "landlock_create_ruleset: %s", gp_errno(errno));
	for (i = 0; i < pp->writable.n; i++)
		landlock_add(ctl, rs, pp->writable.v[i], attr.handled_access_fs);
	for (i = 0; i < pp->writable_file.n; i++)
		landlock_add(ctl, rs, pp->writable_file.v[i], attr.handled_access_fs & FILE_ONLY);
	landlock_terminals(ctl, rs, attr.handled_access_fs & FILE_ONLY);
	if (syscall(SYS_landlock_restrict_self, rs, 0U) != 0)
		gp_fail(ctl, STAGE, "landlock_restrict_self: %s", gp_errno(errno));
	if (close(rs) != 0)
		gp_fail(ctl, STAGE, "landlock: close the ruleset: %s", gp_errno(errno));
}

/* load_filter installs a classic BPF program with the given
 * SECCOMP_FILTER_FLAG_* flags; no_new_privs is already set. The program's
 * bytes are the kernel's struct sock_filter array as stage 0 wrote it, and
 * the plan decoder's allocations are aligned for it (plan.c: galloc). With
 * SECCOMP_FILTER_FLAG_NEW_LISTENER it returns the listener, else 0. */
static int load_filter(int ctl, const char *what, const unsigned char *prog, size_t len, uint64_t flags)
{
	struct sock_fprog fprog;
	long r;

	if (len == 0 || len % sizeof(struct sock_filter) != 0 || len / sizeof(struct sock_filter) > 0xffff)
		gp_fail(ctl, STAGE, "seccomp: %smalformed program", what);
	fprog.len = (unsigned short)(len / sizeof(struct sock_filter));
	fprog.filter = (struct sock_filter *)(uintptr_t)prog;
	r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, (unsigned long)flags, &fprog);
	if (r < 0)
		gp_fail(ctl, STAGE, "seccomp(SET_MODE_FILTER): %s%s", what, gp_errno(errno));
	/* With NEW_LISTENER (and so TSYNC_ESRCH, see shim/run_linux.go:
	 * seccompFlags) a positive result is the listener. */
	if (flags & SECCOMP_FILTER_FLAG_NEW_LISTENER) {
		if (r == 0)
			gp_fail(ctl, STAGE, "seccomp(SET_MODE_FILTER): %sno listener returned", what);
		return (int)r;
	}
	/* With TSYNC a positive result names a thread that could not be
	 * synchronized, and nothing was installed; this process has one
	 * thread, so it cannot happen, but it would mean no filter. */
	if (r > 0)
		gp_fail(ctl, STAGE, "seccomp(SET_MODE_FILTER): %sthread %ld could not be synchronized", what, r);
	return 0;
}

/* send_listener hands the bundle's filter's listener to whoever holds
 * the other end of the descriptor listenerPath named (gloved's
 * local-service handler): one byte (0) with the listener in SCM_RIGHTS,
 * then closes both. It runs after the filter is loaded, since the
 * listener only exists then; sendmsg and close are among the calls
 * Glove's default profile allows. A failure ends the stage: a program
 * whose notified calls nobody answers would hang in them. */
static void send_listener(int ctl, int sock, int listener)
{
	char byte = 0;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *c;
	ssize_t n;

	memset(&u, 0, sizeof(u));
	c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &listener, sizeof(int));
	do
		n = sendmsg(sock, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n != 1)
		gp_fail(ctl, STAGE, "seccomp: send the listener on descriptor %d: %s", sock,
			n < 0 ? gp_errno(errno) : "short write");
	if (close(listener) != 0)
		gp_fail(ctl, STAGE, "seccomp: close the listener: %s", gp_errno(errno));
	if (close(sock) != 0)
		gp_fail(ctl, STAGE, "seccomp: close descriptor %d: %s", sock, gp_errno(errno));
}

/* prepare applies every restriction, in this order, and returns the
 * program's path. */
static const char *prepare(int ctl, const struct glove_plan *p)
{
	const struct gp_process *pp = &p->process;
	const char *path;
	int sock, listener = -1;
	size_t i;

	if (pp->args.n == 0)
		gp_fail(ctl, STAGE, "process.args: empty");
	enter_cwd(ctl, pp->cwd);
	for (i = 0; i < pp->nrlimits; i++) {
		const struct gp_rlimit *r = &pp->rlimits[i];
		struct rlimit rl = { .rlim_cur = r->soft, .rlim_max = r->hard };

		if (setrlimit((__rlimit_resource_t)r->resource, &rl) != 0)
			gp_fail(ctl, STAGE, "process.rlimits: setrlimit %lld %llu/%llu: %s", (long long)r->resource,
				(unsigned long long)r->soft, (unsigned long long)r->hard, gp_errno(errno));
	}
	if (pp->has_umask)
		umask((mode_t)pp->umask); /* returns the previous mask; it cannot fail */
	path = look_path(ctl, pp->args.v[0], &pp->env);
	if (!gp_off(p, GLOVE_LAYER_CAPS))
		set_capabilities(ctl, pp);
	/* Threat: a setuid or file-capability binary (one the program wrote,
	 * or the host's) raising privileges at execve. */
	if (xprctl(PR_SET_NO_NEW_PRIVS, 1, 0) != 0)
		gp_fail(ctl, STAGE, "prctl(PR_SET_NO_NEW_PRIVS): %s", gp_errno(errno));
	/* Every descriptor the program is not meant to have closes at execve:
	 * the plan's socket, and anything inherited by mistake (threat: a
	 * leaked host directory descriptor as a way out of the root, as in
	 * CVE-2024-21626). gp_read_plan did the same before reading; this
	 * covers whatever was opened since. */
	if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
		gp_fail(ctl, STAGE, "close_range: %s", gp_errno(errno));
	for (i = 0; i < pp->npass_fds; i++)
		if (fcntl((int)pp->pass_fds[i], F_SETFD, 0) != 0)
			gp_fail(ctl, STAGE, "pass descriptor %lld: %s", (long long)pp->pass_fds[i], gp_errno(errno));
	if (!gp_off(p, GLOVE_LAYER_LANDLOCK))
		landlock(ctl, pp);
	/* The listener's descriptor: never the program's, whether a filter
	 * is loaded or not (it is close-on-exec since close_range above, and
	 * closed explicitly below). Stage 0 checked it; a plan that pairs it
	 * with no NEW_LISTENER filter (or the reverse) is refused. */
	sock = (int)pp->seccomp_listener_fd;
	if ((sock != 0) != (pp->has_seccomp && (pp->seccomp_flags & SECCOMP_FILTER_FLAG_NEW_LISTENER)) ||
	    (sock != 0 && (sock < 3 || sock >= 3 + p->preserve_fds)))
		gp_fail(ctl, STAGE, "seccomp: plan: listener descriptor %lld and filter flags %#llx disagree",
			(long long)pp->seccomp_listener_fd, (unsigned long long)pp->seccomp_flags);
	if (!gp_off(p, GLOVE_LAYER_SECCOMP)) {
		/* The terminal ioctls refused whatever the bundle's profile says
		 * (shim/seccomp_extra.go: deniedIoctls names them and the
		 * threats), built by stage 0; stacked under the bundle's filter.
		 * Flags 0: this process has one thread. A plan without it is
		 * refused rather than run without the filter. */
		if (pp->deny_ioctls_len == 0)
			gp_fail(ctl, STAGE, "seccomp: deny ioctls: the plan carries no program");
		load_filter(ctl, "deny ioctls: ", pp->deny_ioctls, pp->deny_ioctls_len, 0);
		/* The bundle's filter last: after it, nothing but the
		 * listener's hand-over and execve is called. */
		if (pp->has_seccomp)
			listener = load_filter(ctl, "", pp->seccomp, pp->seccomp_len, pp->seccomp_flags);
		if (sock != 0)
			send_listener(ctl, sock, listener);
	} else if (sock != 0 && close(sock) != 0) {
		/* No filter (a test build's layer switch): no listener, and the
		 * handler sees end of file on its end. */
		gp_fail(ctl, STAGE, "seccomp: close descriptor %d: %s", sock, gp_errno(errno));
	}
	return path;
}

void gp_stage2(int ctl, const struct glove_plan *p)
{
	const char *path = prepare(ctl, p);

	execve(path, p->process.args.v, p->process.env.v);
	gp_fail(ctl, STAGE, "execve %s: %s", path, gp_errno(errno));
}
