/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `glove-shim probe`: the user-namespace steps of a start, alone, as the
 * calling user, so that gloved, glove run and glove status can learn
 * whether glove-shim itself may build a sandbox here. Run by the
 * constructor in cstage.c before the Go runtime, with one thread, as the
 * waiter is.
 *
 * Why glove-shim and not another program: what decides is who asks. On
 * Ubuntu 24.04 an unconfined program gets a user namespace but no
 * capability in it, while glove-shim under its AppArmor profile
 * (packaging/apparmor/glove-shim) gets both; a profile that denies
 * capabilities makes glove-shim fail where /bin/true in a new namespace
 * passes. Only glove-shim, under whatever confines it on this host,
 * answers for glove-shim.
 *
 * The steps, each printed on standard output as it passes ("STEP ok"),
 * the first that fails as "STEP FAIL: ENAME: strerror" and then nothing
 * more (exit 1; 0 when every step passed):
 *
 *  userns  clone(CLONE_NEWUSER|CLONE_NEWNS), as the waiter clones stage 1
 *          (stage0.c, start_stage1; stage 1's five other namespaces
 *          are left out: once the user namespace exists, its
 *          capabilities are all they ask for);
 *  maps    the parent writes the child's uid_map "0 EUID 1", setgroups
 *          "deny" and gid_map "0 EGID 1", in the waiter's order
 *          (stage1.c, s1_start_child);
 *  mount   the child makes its mount tree private (mount.c,
 *          s1_build_root) and attaches a tmpfs made with fsopen and
 *          fsmount, as stage 1 makes every tmpfs, by move_mount onto
 *          /proc: a directory every root glove-shim can work in has,
 *          since glove-shim relies on it there (/proc/self/exe, the
 *          maps under /proc/PID, /proc/sys/user, /proc/self/fd). Not
 *          "/": a process whose root is covered by a mount counts as
 *          chrooted, and the kernel refuses it a user namespace (EPERM),
 *          so the next step would fail for that alone. The maps are
 *          written through a descriptor of /proc opened first;
 *  nested  the child clones a grandchild with CLONE_NEWUSER|CLONE_NEWNS
 *          and writes its maps "0 0 1" (one id onto the child's uid 0,
 *          the shape stage 1 gives stage 2's, whose inside id is
 *          process.user's), setgroups denied before the gid map as
 *          there; the grandchild then exits. On Debian's
 *          kernel.unprivileged_userns_clone=0 this is where even a
 *          namespace a helper made refuses (docs/hardened-hosts-measured.md).
 *
 * Nothing outlives the probe: each child dies with its parent
 * (PR_SET_PDEATHSIG) and is reaped by it; the namespaces, and the tmpfs
 * in the child's private mount namespace, go with the last process in
 * them; nothing is mounted in the caller's namespace, and nothing is
 * executed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/mount.h>

#include "cstage.h"

/* Exit statuses: every step passed, a step failed (or the probe itself
 * could not go on: a message on standard error). 2 is the usage error,
 * which Go reports (shim/run_linux.go, Main). */
#define PROBE_OK 0
#define PROBE_FAIL 1

/* say writes one line on standard output: "STEP ok" when er is 0,
 * "STEP FAIL: ENAME: strerror" otherwise. A line that cannot be written
 * ends the probe with PROBE_FAIL (the caller reads no verdict). */
static void say(const char *step, int er)
{
	char line[256];
	const char *name;
	size_t n, off = 0;
	int len;

	if (er == 0) {
		len = snprintf(line, sizeof(line), "%s ok\n", step);
	} else {
		name = strerrorname_np(er);
		if (name != NULL)
			len = snprintf(line, sizeof(line), "%s FAIL: %s: %s\n", step, name, strerror(er));
		else
			len = snprintf(line, sizeof(line), "%s FAIL: errno %d: %s\n", step, er, strerror(er));
	}
	if (len < 0 || (size_t)len >= sizeof(line))
		_exit(PROBE_FAIL);
	n = (size_t)len;
	while (off < n) {
		ssize_t w = write(1, line + off, n - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			_exit(PROBE_FAIL);
		off += (size_t)w;
	}
}

/* write_proc writes s whole to PID/NAME beneath proc, a descriptor of
 * /proc; 0, or the errno. */
static int write_proc(int proc, pid_t pid, const char *name, const char *s)
{
	char path[64];
	size_t n = strlen(s);
	ssize_t w;
	int fd, er;

	snprintf(path, sizeof(path), "%d/%s", (int)pid, name);
	fd = openat(proc, path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	w = write(fd, s, n);
	er = w < 0 ? errno : (w == (ssize_t)n ? 0 : EIO);
	if (close(fd) != 0 && er == 0)
		er = errno;
	return er;
}

/* write_maps gives the child pid its identity in its new user namespace
 * (its files beneath proc, a descriptor of /proc): inside id 0 mapped
 * onto uid and gid, one id each, setgroups denied before the gid map
 * (the kernel requires it of an unprivileged writer); 0, or the errno of
 * the first write that failed. */
static int write_maps(int proc, pid_t pid, unsigned uid, unsigned gid)
{
	char map[64];
	int er;

	snprintf(map, sizeof(map), "0 %u 1\n", uid);
	if ((er = write_proc(proc, pid, "uid_map", map)) != 0)
		return er;
	if ((er = write_proc(proc, pid, "setgroups", "deny")) != 0)
		return er;
	snprintf(map, sizeof(map), "0 %u 1\n", gid);
	return write_proc(proc, pid, "gid_map", map);
}

/* start_child clones a child in a new user and mount namespace that
 * waits for one byte on *sync before it calls run; the child dies with
 * this process. It returns the child's pid (with this end of the socket
 * in *sync), 0 in the child, or -1 with errno set. */
static pid_t start_child(int *sync)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return -1;
	/* A raw clone, as the waiter's: one thread, no runtime to fork. */
	pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNS | SIGCHLD, NULL, NULL, NULL, NULL);
	if (pid < 0) {
		int er = errno;

		close(sv[0]);
		close(sv[1]);
		errno = er;
		return -1;
	}
	if (pid == 0) {
		char go;
		ssize_t r;

		/* Threat: a probe killed midway leaving a process, and its
		 * namespaces, behind. A parent gone before this is set leaves
		 * end of file below instead of the byte. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
			_exit(PROBE_FAIL);
		close(sv[0]);
		do
			r = read(sv[1], &go, 1);
		while (r < 0 && errno == EINTR);
		/* End of file: the parent failed to write the maps, and said
		 * so; this process has no identity to go on with. */
		if (r != 1 || close(sv[1]) != 0)
			_exit(PROBE_FAIL);
		return 0;
	}
	close(sv[1]);
	*sync = sv[0];
	return pid;
}

/* release sends the child its byte and closes this end; 0 or the errno. */
static int release(int sync)
{
	ssize_t w;
	int er;

	do
		w = send(sync, "g", 1, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	er = w == 1 ? 0 : (w < 0 ? errno : EIO);
	if (close(sync) != 0 && er == 0)
		er = errno;
	return er;
}

/* reap waits for pid and returns its wait status, or -1 with errno. */
static int reap(pid_t pid)
{
	int ws;
	pid_t w;

	do
		w = waitpid(pid, &ws, 0);
	while (w < 0 && errno == EINTR);
	return w == pid ? ws : -1;
}

/* kill_reap ends a child whose step failed: the kill only fails for a
 * child already gone (ESRCH), which the reap then collects. */
static void kill_reap(pid_t pid)
{
	(void)kill(pid, SIGKILL);
	(void)reap(pid);
}

/* mount_step is step 3, in the child: 0 or the errno. */
static int mount_step(void)
{
	int fs, mfd, er = 0;

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		return errno;
	fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
	if (fs < 0)
		return errno;
	if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", "4k", 0) != 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "nr_inodes", "4", 0) != 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) != 0) {
		er = errno;
		close(fs);
		return er;
	}
	mfd = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	if (mfd < 0)
		er = errno;
	if (close(fs) != 0 && er == 0)
		er = errno;
	if (er != 0) {
		if (mfd >= 0)
			close(mfd);
		return er;
	}
	if (syscall(SYS_move_mount, mfd, "", AT_FDCWD, "/proc", MOVE_MOUNT_F_EMPTY_PATH) != 0)
		er = errno;
	if (close(mfd) != 0 && er == 0)
		er = errno;
	return er;
}

/* nested_step is step 4, in the child: 0 or the errno. proc is a
 * descriptor of /proc, opened before the tmpfs covered it. */
static int nested_step(int proc)
{
	int sync, er, ws;
	pid_t pid = start_child(&sync);

	if (pid < 0)
		return errno;
	if (pid == 0)
		_exit(PROBE_OK); /* the grandchild: its namespace existed */
	if ((er = write_maps(proc, pid, 0, 0)) != 0) {
		close(sync);
		kill_reap(pid);
		return er;
	}
	if ((er = release(sync)) != 0) {
		kill_reap(pid);
		return er;
	}
	ws = reap(pid);
	if (ws < 0)
		return errno;
	/* The grandchild exits 0 once it has its byte; anything else (it
	 * cannot read the byte just sent, or a signal from outside ended
	 * it) is reported as its loss. */
	return WIFEXITED(ws) && WEXITSTATUS(ws) == PROBE_OK ? 0 : ECHILD;
}

void glove_probe(void) __attribute__((noreturn));

void glove_probe(void)
{
	int proc, sync, er, ws;
	pid_t pid;

	/* Every map is written through this descriptor: the child's mount
	 * step covers /proc with its tmpfs. */
	proc = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (proc < 0) {
		dprintf(2, "glove-shim: probe: open /proc: %s\n", strerror(errno));
		_exit(PROBE_FAIL);
	}
	pid = start_child(&sync);
	if (pid < 0) {
		say("userns", errno);
		_exit(PROBE_FAIL);
	}
	if (pid == 0) {
		/* The child, in the new user and mount namespaces, as uid 0
		 * there with every capability of that namespace. */
		if ((er = mount_step()) != 0) {
			say("mount", er);
			_exit(PROBE_FAIL);
		}
		say("mount", 0);
		if ((er = nested_step(proc)) != 0) {
			say("nested", er);
			_exit(PROBE_FAIL);
		}
		say("nested", 0);
		_exit(PROBE_OK);
	}
	say("userns", 0);
	if ((er = write_maps(proc, pid, (unsigned)geteuid(), (unsigned)getegid())) != 0) {
		close(sync);
		kill_reap(pid);
		say("maps", er);
		_exit(PROBE_FAIL);
	}
	say("maps", 0);
	if ((er = release(sync)) != 0) {
		kill_reap(pid);
		dprintf(2, "glove-shim: probe: release the child: %s\n", strerror(er));
		_exit(PROBE_FAIL);
	}
	ws = reap(pid);
	if (ws < 0) {
		dprintf(2, "glove-shim: probe: wait for the child: %s\n", strerror(errno));
		_exit(PROBE_FAIL);
	}
	if (WIFSIGNALED(ws)) {
		dprintf(2, "glove-shim: probe: the child was killed by signal %d\n", WTERMSIG(ws));
		_exit(PROBE_FAIL);
	}
	_exit(WIFEXITED(ws) && WEXITSTATUS(ws) == PROBE_OK ? PROBE_OK : PROBE_FAIL);
}
