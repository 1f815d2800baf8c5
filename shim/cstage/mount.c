/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The privileged calls of stage 1: every mount of the sandbox is made
 * here, from descriptors, in mount namespace 1 (owned by user namespace
 * 1, whose root is the invoking user; with --userns-fd, whose one mapped
 * uid, process.user's, is). Rerun shim's TestShim* and
 * TestAttack* after any change to the order of these calls.
 *
 * glibc 2.36 (Debian 12) declares no wrapper for openat2, and its mount
 * API wrappers are not in every libc this may be built with: every call
 * of the new mount API and openat2 is a raw syscall(2) here, with the
 * constants of <sys/mount.h> and <linux/openat2.h>.
 *
 * Errors name the failed step in the words the Go stage 1 used, so that
 * a report reads the same whichever language built the tree.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cstage.h"
#include "stage1.h"

/* Mount kinds (shim/plan.go: kind*). */
#define KIND_BIND "bind"
#define KIND_TMPFS "tmpfs"
#define KIND_DEVPTS "devpts"

void s1_err(char *e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e, S1_ERRLEN, fmt, ap);
	va_end(ap);
}

void s1_wrap(char *e, const char *fmt, ...)
{
	char prefix[S1_ERRLEN];
	size_t pl, ol;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix) - 2, fmt, ap);
	va_end(ap);
	strcat(prefix, ": ");
	pl = strlen(prefix);
	if (pl >= S1_ERRLEN - 1)
		pl = S1_ERRLEN - 1;
	ol = strnlen(e, S1_ERRLEN - 1);
	if (pl + ol > S1_ERRLEN - 1)
		ol = S1_ERRLEN - 1 - pl;
	memmove(e + pl, e, ol);
	memcpy(e, prefix, pl);
	e[pl + ol] = 0;
}

static int sys_openat2(int dir, const char *path, const struct open_how *how)
{
	return (int)syscall(SYS_openat2, dir, path, how, sizeof(*how));
}

static int sys_open_tree(int dir, const char *path, unsigned int flags)
{
	return (int)syscall(SYS_open_tree, dir, path, flags);
}

/* move_mount from one descriptor onto another: both paths empty. */
static int sys_move_mount(int from, int to)
{
	return (int)syscall(SYS_move_mount, from, "", to, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
}

static int sys_mount_setattr(int dir, unsigned int flags, struct mount_attr *a)
{
	return (int)syscall(SYS_mount_setattr, dir, "", flags, a, sizeof(*a));
}

/* resolve_how resolves a path inside the new root: beneath it, through no
 * symlink and no magic link, so a symlink planted in a root or a writable
 * mount can never redirect a mount point to the host. */
static const struct open_how resolve_how = {
	.flags = O_PATH | O_CLOEXEC | O_NOFOLLOW,
	.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
};

/* sub_how resolves a mount's sub-path beneath its descriptor: no link, no
 * magic link, no other mount on the way, never above the descriptor (as
 * stage 0's check, shim/run_linux.go subHow). */
static const struct open_how sub_how = {
	.flags = O_PATH | O_CLOEXEC | O_NOFOLLOW,
	.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
};

/* host_how opens a host path as stage 0 did (shim/run_linux.go
 * checkSources): no symlink and no magic link anywhere on the way. */
static const struct open_how host_how = {
	.flags = O_PATH | O_CLOEXEC | O_NOFOLLOW,
	.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
};

static void close_unless_root(int fd, int root)
{
	if (fd != root)
		close(fd);
}

/* identify is shim/run_linux.go's identify: fd's identity, checking
 * whether it is a directory. */
static int identify(int fd, int dir, struct gp_ident *id, char *e)
{
	struct stat st;

	if (fstat(fd, &st) != 0) {
		s1_err(e, "fstat: %s", gp_errno(errno));
		return -1;
	}
	if (S_ISDIR(st.st_mode) != (dir != 0)) {
		s1_err(e, "file type %#o is not what was expected", (unsigned int)(st.st_mode & S_IFMT));
		return -1;
	}
	id->dev = (uint64_t)st.st_dev;
	id->ino = (uint64_t)st.st_ino;
	return 0;
}

/* open_host opens a host path in this stage's copy of the mount tree, with
 * the restrictions stage 0 used, and checks that it is the file stage 0
 * checked (threat: a path swapped, by a symlink or a rename, between
 * stage 0's check and this open would bind another host file into the
 * sandbox). */
static int open_host(const char *path, const struct gp_ident *want, int dir, char *e)
{
	struct gp_ident got;
	int fd = sys_openat2(AT_FDCWD, path, &host_how);

	if (fd < 0) {
		s1_err(e, "openat2: %s", gp_errno(errno));
		return -1;
	}
	if (identify(fd, dir, &got, e) != 0) {
		close(fd);
		return -1;
	}
	if (got.dev != want->dev || got.ino != want->ino) {
		close(fd);
		s1_err(e, "changed since glove-shim checked it");
		return -1;
	}
	return fd;
}

/* setattr sets attr on a detached mount. The attributes are only ever
 * added: a source that is read-only (a helper's read-only bind) stays so
 * whatever the bundle says. */
static int setattr(int mfd, unsigned int flags, uint64_t attr, char *e)
{
	struct mount_attr a;

	if (attr == 0)
		return 0;
	memset(&a, 0, sizeof(a));
	a.attr_set = attr;
	if (attr & (MOUNT_ATTR_NOATIME | MOUNT_ATTR_STRICTATIME))
		a.attr_clr = MOUNT_ATTR__ATIME;
	if (sys_mount_setattr(mfd, flags, &a) != 0) {
		s1_err(e, "mount_setattr %#" PRIx64 ": %s", attr, gp_errno(errno));
		return -1;
	}
	return 0;
}

/* fsmount_kind creates a filesystem of kind with the n string parameters
 * config, and returns a detached mount of it with attr. */
static int fsmount_kind(const char *kind, char *(*config)[2], size_t n, uint64_t attr, char *e)
{
	int fs, mfd;
	size_t i;

	fs = (int)syscall(SYS_fsopen, kind, FSOPEN_CLOEXEC);
	if (fs < 0) {
		s1_err(e, "fsopen %s: %s", kind, gp_errno(errno));
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, config[i][0], config[i][1], 0) != 0) {
			s1_err(e, "fsconfig %s=%s: %s", config[i][0], config[i][1], gp_errno(errno));
			close(fs);
			return -1;
		}
	}
	if (syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) != 0) {
		s1_err(e, "fsconfig create %s: %s", kind, gp_errno(errno));
		close(fs);
		return -1;
	}
	/* fsmount takes the atime mode as a value, not as flags to clear. */
	mfd = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, (unsigned int)attr);
	if (mfd < 0) {
		s1_err(e, "fsmount %s: %s", kind, gp_errno(errno));
		close(fs);
		return -1;
	}
	close(fs);
	return mfd;
}

/* mount_point opens (creating if missing) the mount point of dest beneath
 * root: directories all the way, and a file at the end when the source is
 * not a directory. Every component is resolved with resolve_how, so no
 * symlink a writable mount below holds leads it out of the root. */
static int mount_point(int root, const char *dest, int file, char *e)
{
	char *buf, *c, *next;
	int cur = root;

	if (dest[0] == '/')
		dest++;
	buf = strdup(dest);
	if (buf == NULL) {
		s1_err(e, "mount point: out of memory");
		return -1;
	}
	for (c = buf;; c = next) {
		struct stat st;
		int fd, last, isdir, er;

		next = strchr(c, '/');
		if (next != NULL)
			*next++ = 0;
		last = next == NULL;
		fd = sys_openat2(cur, c, &resolve_how);
		if (fd < 0 && errno == ENOENT) {
			int r;

			if (last && file) {
				int f = openat(cur, c, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0644);

				r = f < 0 ? -1 : 0;
				if (f >= 0)
					close(f);
			} else {
				r = mkdirat(cur, c, 0755);
			}
			if (r != 0 && errno != EEXIST) {
				er = errno;
				close_unless_root(cur, root);
				s1_err(e, "create mount point %s: %s", c, gp_errno(er));
				free(buf);
				return -1;
			}
			fd = sys_openat2(cur, c, &resolve_how);
		}
		er = errno;
		close_unless_root(cur, root);
		if (fd < 0) {
			s1_err(e, "open mount point %s: %s", c, gp_errno(er));
			free(buf);
			return -1;
		}
		if (fstat(fd, &st) != 0) {
			er = errno;
			close(fd);
			s1_err(e, "fstat %s: %s", c, gp_errno(er));
			free(buf);
			return -1;
		}
		isdir = S_ISDIR(st.st_mode);
		if ((!last || !file) && !isdir) {
			close(fd);
			s1_err(e, "mount point %s: not a directory", c);
			free(buf);
			return -1;
		}
		if (last && file && isdir) {
			close(fd);
			s1_err(e, "mount point %s: a directory, but the source is not one", c);
			free(buf);
			return -1;
		}
		cur = fd;
		if (last)
			break;
	}
	free(buf);
	return cur;
}

/* attach_detached moves a detached mount received as a descriptor onto its
 * destination, then sets the attributes on the attached mount. */
static int attach_detached(int root, const struct gp_mount *m, unsigned int set_flags, char *e)
{
	int target = mount_point(root, m->destination, m->file_target, e);
	int r;

	if (target < 0)
		return -1;
	r = sys_move_mount((int)m->source_fd, target);
	if (r != 0)
		s1_err(e, "move_mount (detached): %s", gp_errno(errno));
	close(target);
	if (r != 0)
		return -1;
	/* The descriptor now names the attached mount's root. */
	return setattr((int)m->source_fd, set_flags, m->attr, e);
}

/* attach makes one mount as a detached mount and moves it onto its
 * destination. */
static int attach(int root, const struct gp_mount *m, char *e)
{
	int mfd, target, r;

	if (strcmp(m->kind, KIND_BIND) == 0 && m->source_sub[0] != 0) {
		/* Beneath a staged mount (stage_shared): its descriptor names
		 * the attached mount's root now, and the directory is cloned
		 * alone. */
		int sub = sys_openat2((int)m->source_fd, m->source_sub, &sub_how);

		if (sub < 0) {
			s1_err(e, "source %s: openat2: %s", m->source_sub, gp_errno(errno));
			return -1;
		}
		mfd = sys_open_tree(sub, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
		r = errno;
		close(sub);
		if (mfd < 0) {
			s1_err(e, "source %s: open_tree: %s", m->source_sub, gp_errno(r));
			return -1;
		}
		if (setattr(mfd, AT_EMPTY_PATH, m->attr, e) != 0) {
			close(mfd);
			return -1;
		}
	} else if (strcmp(m->kind, KIND_BIND) == 0) {
		unsigned int flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH;
		unsigned int set_flags = AT_EMPTY_PATH;
		int src = (int)m->source_fd;

		if (m->recursive) {
			flags |= AT_RECURSIVE;
			set_flags |= AT_RECURSIVE;
		}
		if (src < 0) {
			src = open_host(m->source_path, &m->source_ident, !m->file_target, e);
			if (src < 0) {
				s1_wrap(e, "source %s", m->source_path);
				return -1;
			}
		}
		mfd = sys_open_tree(src, "", flags);
		r = errno;
		if (src != (int)m->source_fd)
			close(src);
		if (mfd < 0 && r == EINVAL && m->source_fd >= 0) {
			/* A detached mount made by glove-mounter lives in no mount
			 * namespace this stage may clone from: it is attached as it
			 * is, then given its attributes where it stands. */
			return attach_detached(root, m, set_flags, e);
		}
		if (mfd < 0) {
			s1_err(e, "open_tree: %s", gp_errno(r));
			return -1;
		}
		if (setattr(mfd, set_flags, m->attr, e) != 0) {
			close(mfd);
			return -1;
		}
	} else {
		/* A read-only tmpfs is made read-only last (seal_tmpfs): its
		 * children's mount points (the device nodes of a read-only
		 * /dev, dev_links) are made in it first. */
		uint64_t attr = m->attr;

		if (strcmp(m->kind, KIND_TMPFS) == 0)
			attr &= ~(uint64_t)MOUNT_ATTR_RDONLY;
		mfd = fsmount_kind(m->kind, m->config, m->nconfig, attr, e);
		if (mfd < 0)
			return -1;
	}
	target = mount_point(root, m->destination, m->file_target, e);
	if (target < 0) {
		close(mfd);
		return -1;
	}
	r = sys_move_mount(mfd, target);
	if (r != 0)
		s1_err(e, "move_mount: %s", gp_errno(errno));
	close(target);
	close(mfd);
	return r != 0 ? -1 : 0;
}

/* A staged descriptor: a detached mount attached at a directory of its
 * own in the root being built (stage_shared). */
struct staged {
	int fd;
	char name[64];
};

/* stage_shared attaches each descriptor that mounts name directories
 * beneath (source_sub) at a directory of its own in the root being built:
 * a detached mount cannot be cloned from, an attached one can (before
 * 6.15). It records the staging directories in st (*nst of them, in the
 * order of first use). */
static int stage_shared(int root, const struct glove_plan *p, struct staged *st, size_t *nst, char *e)
{
	size_t i, j;

	*nst = 0;
	for (i = 0; i < p->nmounts; i++) {
		const struct gp_mount *m = &p->mounts[i];
		int fd = (int)m->source_fd, dir, r, er;
		int seen = 0;

		if (m->source_sub[0] == 0)
			continue;
		for (j = 0; j < *nst; j++)
			seen |= st[j].fd == fd;
		if (seen)
			continue;
		st[*nst].fd = fd;
		snprintf(st[*nst].name, sizeof(st[*nst].name), ".glove-stage-%d", fd);
		if (mkdirat(root, st[*nst].name, 0700) != 0) {
			s1_err(e, "stage descriptor %d: mkdir: %s", fd, gp_errno(errno));
			return -1;
		}
		(*nst)++;
		dir = sys_openat2(root, st[*nst - 1].name, &resolve_how);
		if (dir < 0) {
			s1_err(e, "stage descriptor %d: %s", fd, gp_errno(errno));
			return -1;
		}
		r = sys_move_mount(fd, dir);
		er = errno;
		close(dir);
		if (r != 0) {
			s1_err(e, "stage descriptor %d (a path beneath it needs a detached mount): move_mount: %s", fd, gp_errno(er));
			return -1;
		}
	}
	return 0;
}

/* unstage detaches each staged mount once every clone is attached,
 * closes its descriptor and removes its directory, so that neither the
 * whole shared mount nor its descriptor reaches the sandbox. */
static int unstage(int root, const struct staged *st, size_t nst, char *e)
{
	size_t i;

	for (i = 0; i < nst; i++) {
		char path[64];

		snprintf(path, sizeof(path), "/proc/self/fd/%d", st[i].fd);
		if (umount2(path, MNT_DETACH) != 0) {
			s1_err(e, "unstage descriptor %d: umount: %s", st[i].fd, gp_errno(errno));
			return -1;
		}
		close(st[i].fd);
		if (unlinkat(root, st[i].name, AT_REMOVEDIR) != 0) {
			s1_err(e, "unstage descriptor %d: rmdir: %s", st[i].fd, gp_errno(errno));
			return -1;
		}
	}
	return 0;
}

/* open_existing opens path beneath root. It returns the descriptor, -2
 * when path does not exist, or -1 with the reason in e. */
static int open_existing(int root, const char *path, int *isdir, char *e)
{
	struct stat st;
	int fd;

	if (path[0] == '/')
		path++;
	fd = sys_openat2(root, path, &resolve_how);
	if (fd < 0 && errno == ENOENT)
		return -2;
	if (fd < 0) {
		s1_err(e, "openat2: %s", gp_errno(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0) {
		int er = errno;

		close(fd);
		s1_err(e, "fstat: %s", gp_errno(er));
		return -1;
	}
	*isdir = S_ISDIR(st.st_mode);
	return fd;
}

/* mask hides path: a directory under an empty read-only tmpfs, a file
 * under a read-only /dev/null. Missing paths are skipped, as runc does.
 * (Threat: the host's secrets and knobs under /proc and /sys that the
 * namespaces do not cover, such as /proc/kcore or /sys/firmware.) */
static int mask(int root, const char *path, int dev_null, char *e)
{
	const uint64_t attr = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC;
	char *size[1][2] = { { "size", "4k" } };
	int fd, isdir = 0, mfd, r;

	fd = open_existing(root, path, &isdir, e);
	if (fd == -2)
		return 0;
	if (fd < 0)
		return -1;
	if (isdir) {
		mfd = fsmount_kind(KIND_TMPFS, size, 1, attr, e);
		if (mfd < 0) {
			close(fd);
			return -1;
		}
	} else {
		mfd = sys_open_tree(dev_null, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
		if (mfd < 0) {
			s1_err(e, "open_tree /dev/null: %s", gp_errno(errno));
			close(fd);
			return -1;
		}
		if (setattr(mfd, AT_EMPTY_PATH, attr, e) != 0) {
			close(mfd);
			close(fd);
			return -1;
		}
	}
	r = sys_move_mount(mfd, fd);
	if (r != 0)
		s1_err(e, "move_mount: %s", gp_errno(errno));
	close(mfd);
	close(fd);
	return r != 0 ? -1 : 0;
}

/* readonly binds path onto itself, read-only, with everything below it. */
static int readonly(int root, const char *path, char *e)
{
	int fd, isdir = 0, mfd, r;

	fd = open_existing(root, path, &isdir, e);
	if (fd == -2)
		return 0;
	if (fd < 0)
		return -1;
	mfd = sys_open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
	if (mfd < 0) {
		s1_err(e, "open_tree: %s", gp_errno(errno));
		close(fd);
		return -1;
	}
	if (setattr(mfd, AT_EMPTY_PATH | AT_RECURSIVE, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, e) != 0) {
		close(mfd);
		close(fd);
		return -1;
	}
	r = sys_move_mount(mfd, fd);
	if (r != 0)
		s1_err(e, "move_mount: %s", gp_errno(errno));
	close(mfd);
	close(fd);
	return r != 0 ? -1 : 0;
}

/* seal_tmpfs makes each read-only tmpfs of the plan read-only, once
 * everything beneath it is attached (attach mounted it writable). This is
 * how a read-only /dev is built: a tmpfs holding only the mount points of
 * its device binds, its devpts and its links, in which the program can
 * create nothing (threat: "echo > /dev/tty" or a typo'd device name
 * silently making a file where a device was meant, or a program planting
 * files in /dev for another to trust). The attribute is set in user
 * namespace 1 and locked by stage 2's user namespace like every other
 * (the attack table's remount cases). Writes to the device nodes still
 * work: a device's open does not depend on its mount's read-only flag. */
static int seal_tmpfs(int root, const struct glove_plan *p, char *e)
{
	size_t i;

	for (i = 0; i < p->nmounts; i++) {
		const struct gp_mount *m = &p->mounts[i];
		struct mount_attr a;
		int fd, r;

		if (strcmp(m->kind, KIND_TMPFS) != 0 || !(m->attr & MOUNT_ATTR_RDONLY))
			continue;
		fd = sys_openat2(root, m->destination[0] == '/' ? m->destination + 1 : m->destination, &resolve_how);
		if (fd < 0) {
			s1_err(e, "mounts[%zu] %s: make read-only: open: %s", i, m->destination, gp_errno(errno));
			return -1;
		}
		memset(&a, 0, sizeof(a));
		a.attr_set = MOUNT_ATTR_RDONLY;
		r = sys_mount_setattr(fd, AT_EMPTY_PATH, &a);
		if (r != 0)
			s1_err(e, "mounts[%zu] %s: make read-only: mount_setattr: %s", i, m->destination, gp_errno(errno));
		close(fd);
		if (r != 0)
			return -1;
	}
	return 0;
}

/* dev_links adds the links programs expect in a fresh /dev. */
static int dev_links(int root, const struct glove_plan *p, char *e)
{
	static const char *const links[][2] = {
		{ "/proc/self/fd", "fd" },
		{ "/proc/self/fd/0", "stdin" },
		{ "/proc/self/fd/1", "stdout" },
		{ "/proc/self/fd/2", "stderr" },
		{ "pts/ptmx", "ptmx" }, /* only with a devpts at /dev/pts */
	};
	size_t i, n = 4;
	int dev;

	dev = sys_openat2(root, "dev", &resolve_how);
	if (dev < 0) {
		s1_err(e, "/dev: %s", gp_errno(errno));
		return -1;
	}
	for (i = 0; i < p->nmounts; i++)
		if (strcmp(p->mounts[i].destination, "/dev/pts") == 0 && strcmp(p->mounts[i].kind, KIND_DEVPTS) == 0)
			n = 5;
	for (i = 0; i < n; i++) {
		if (symlinkat(links[i][0], dev, links[i][1]) != 0 && errno != EEXIST) {
			s1_err(e, "/dev/%s: symlink: %s", links[i][1], gp_errno(errno));
			close(dev);
			return -1;
		}
	}
	close(dev);
	return 0;
}

/* build_tree is s1_build_root's work once the root's host directory is
 * open (root_dir) and the new root exists (root). */
static int build_tree(const struct glove_plan *p, int root_dir, int root, char *e)
{
	struct staged *st;
	size_t i, nst = 0;
	struct stat sb;
	int dev_null, rc = -1;

	if (sys_move_mount(root, root_dir) != 0) {
		s1_err(e, "root: move_mount: %s", gp_errno(errno));
		return -1;
	}
	for (i = 0; i < p->nroot_entries; i++) {
		const struct gp_root_entry *re = &p->root_entries[i];
		int r = re->dir ? mkdirat(root, re->name, 0755) : symlinkat(re->link, root, re->name);

		if (r != 0) {
			s1_err(e, "root: make %s: %s", re->name, gp_errno(errno));
			return -1;
		}
	}
	/* The masks' source: checked to be the null device, so a /dev/null
	 * the host (or a bundle's root) replaced cannot show a file. */
	dev_null = open("/dev/null", O_PATH | O_CLOEXEC | O_NOFOLLOW);
	if (dev_null < 0) {
		s1_err(e, "open /dev/null: %s", gp_errno(errno));
		return -1;
	}
	if (fstat(dev_null, &sb) != 0) {
		s1_err(e, "/dev/null is not the null device (%s)", gp_errno(errno));
		close(dev_null);
		return -1;
	}
	if (!S_ISCHR(sb.st_mode) || sb.st_rdev != makedev(1, 3)) {
		s1_err(e, "/dev/null is not the null device (<nil>)");
		close(dev_null);
		return -1;
	}
	st = calloc(p->nmounts + 1, sizeof(*st));
	if (st == NULL) {
		s1_err(e, "out of memory");
		close(dev_null);
		return -1;
	}
	if (stage_shared(root, p, st, &nst, e) != 0)
		goto out;
	for (i = 0; i < p->nmounts; i++) {
		const struct gp_mount *m = &p->mounts[i];

		if (attach(root, m, e) != 0) {
			s1_wrap(e, "mounts[%zu] %s", i, m->destination);
			goto out;
		}
		if (m->source_fd >= 0 && m->source_sub[0] == 0) {
			/* A consumed source descriptor is closed at once: it must
			 * not reach stage 2, let alone the program. */
			close((int)m->source_fd);
		}
		if (strcmp(m->destination, "/dev") == 0 && strcmp(m->kind, KIND_TMPFS) == 0 && dev_links(root, p, e) != 0)
			goto out;
	}
	if (unstage(root, st, nst, e) != 0)
		goto out;
	if (!gp_off(p, GLOVE_LAYER_PROCMASK)) {
		for (i = 0; i < p->masked.n; i++) {
			if (mask(root, p->masked.v[i], dev_null, e) != 0) {
				s1_wrap(e, "linux.maskedPaths %s", p->masked.v[i]);
				goto out;
			}
		}
		for (i = 0; i < p->readonly.n; i++) {
			if (readonly(root, p->readonly.v[i], e) != 0) {
				s1_wrap(e, "linux.readonlyPaths %s", p->readonly.v[i]);
				goto out;
			}
		}
	}
	if (seal_tmpfs(root, p, e) != 0)
		goto out;
	if (p->root_readonly) {
		struct mount_attr a;

		memset(&a, 0, sizeof(a));
		a.attr_set = MOUNT_ATTR_RDONLY;
		if (sys_mount_setattr(root, AT_EMPTY_PATH, &a) != 0) {
			s1_err(e, "root: make read-only: %s", gp_errno(errno));
			goto out;
		}
	}
	rc = 0;
out:
	free(st);
	close(dev_null);
	return rc;
}

int s1_build_root(const struct glove_plan *p, char *e)
{
	int root_dir, root;

	/* Nothing mounted from here on may propagate back to the host's
	 * tree. */
	if (mount("", "/", "", MS_REC | MS_PRIVATE, NULL) != 0) {
		s1_err(e, "make / private: %s", gp_errno(errno));
		return -1;
	}
	/* The root is a clone of root.path ("bind", not "rbind": no host
	 * submount under it comes along), or a tmpfs (root_tmpfs), attached
	 * on top of root.path so that it is a mount pivot_root accepts. */
	root_dir = open_host(p->root_path, &p->root_ident, 1, e);
	if (root_dir < 0) {
		s1_wrap(e, "root %s", p->root_path);
		return -1;
	}
	if (p->root_tmpfs) {
		/* A tmpfs of its own, so that mountinfo names "/" as the root's
		 * source rather than root.path on the host. It holds only mount
		 * points (empty directories and files) and is made read-only
		 * below (plan validation requires it), hence the small bounds. */
		char *config[3][2] = { { "mode", "0755" }, { "size", "1m" }, { "nr_inodes", "16384" } };

		root = fsmount_kind(KIND_TMPFS, config, 3, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, e);
	} else {
		root = sys_open_tree(root_dir, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
		if (root < 0)
			s1_err(e, "open_tree: %s", gp_errno(errno));
	}
	if (root < 0) {
		close(root_dir);
		s1_wrap(e, "root");
		return -1;
	}
	if (build_tree(p, root_dir, root, e) != 0) {
		close(root);
		close(root_dir);
		return -1;
	}
	close(root_dir);
	return root;
}

/* s1_pivot makes root the root of mount namespace 1 and detaches the
 * host's tree, so that nothing of the host is reachable by path any
 * more. */
int s1_pivot(int root, char *e)
{
	if (fchdir(root) != 0) {
		s1_err(e, "pivot: fchdir: %s", gp_errno(errno));
		return -1;
	}
	if (syscall(SYS_pivot_root, ".", ".") != 0) {
		s1_err(e, "pivot_root: %s", gp_errno(errno));
		return -1;
	}
	if (umount2(".", MNT_DETACH) != 0) {
		s1_err(e, "pivot: detach the old root: %s", gp_errno(errno));
		return -1;
	}
	if (chdir("/") != 0) {
		s1_err(e, "pivot: chdir /: %s", gp_errno(errno));
		return -1;
	}
	return 0;
}
