// SPDX-License-Identifier: Apache-2.0
//
// userns-probe: measures who may create and join user namespaces on a
// host (issue 35). Throwaway experiment code, not part of the product.
// One thread, no Go runtime: unshare(CLONE_NEWUSER) and setns into a user
// namespace both refuse a multi-threaded caller.
//
// Every result is one line "CASE RESULT [detail]" on stdout, RESULT being
// "ok" or the errno's name. Each attempt runs in a process forked for it,
// so a success does not change the caller.
//
//   userns-probe basic              case 1 (and the reference runs as root)
//   userns-probe helper PLAIN [dumpable|child-dumpable]
//                                   cases 2, 3, 4 (PLAIN: this binary without
//                                   file capabilities, executed for case 4),
//                                   5; dumpable: prctl(PR_SET_DUMPABLE, 1)
//                                   first; child-dumpable: each child that
//                                   holds a new namespace does that instead
//   userns-probe lock PLAIN [MODE]  case 8 (sibling namespaces, below)
//   userns-probe joiner ...         case 4's process (executed by helper)
//
// cc -static -O2 -Wall -o userns-probe probe.c
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define NS_OTHERS (CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP)

static const char *ename(int e) {
  switch (e) {
  case 0: return "ok";
  case EPERM: return "EPERM";
  case EINVAL: return "EINVAL";
  case ENOSPC: return "ENOSPC";
  case EACCES: return "EACCES";
  case EUSERS: return "EUSERS";
  case ENOMEM: return "ENOMEM";
  case EBADF: return "EBADF";
  case ENOENT: return "ENOENT";
  case ESRCH: return "ESRCH";
  case ENOSYS: return "ENOSYS";
  case EBUSY: return "EBUSY";
  case EEXIST: return "EEXIST";
  }
  static char buf[32];
  snprintf(buf, sizeof buf, "errno%d", e);
  return buf;
}

static void out(const char *id, int err, const char *fmt, ...) {
  char detail[512] = "";
  if (fmt) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
  }
  printf("%s %s%s%s\n", id, ename(err), detail[0] ? " " : "", detail);
  fflush(stdout);
}

// The named line of /proc/self/status ("CapEff", "Uid", ...), trimmed.
static const char *status(const char *key) {
  static char val[256];
  FILE *f = fopen("/proc/self/status", "r");
  char line[512];
  size_t n = strlen(key);
  strcpy(val, "?");
  if (!f) return val;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, key, n) == 0 && line[n] == ':') {
      char *p = line + n + 1;
      while (*p == ' ' || *p == '\t') p++;
      p[strcspn(p, "\n")] = 0;
      for (char *q = p; *q; q++)
        if (*q == '\t') *q = ' ';
      snprintf(val, sizeof val, "%s", p);
      break;
    }
  }
  fclose(f);
  return val;
}

static unsigned long userns_ino(void) {
  struct stat st;
  return stat("/proc/self/ns/user", &st) == 0 ? (unsigned long)st.st_ino : 0;
}

// Who this process is, as a detail string.
static const char *ident(void) {
  static char buf[512];
  char uid[128], capeff[64];
  snprintf(uid, sizeof uid, "%s", status("Uid"));
  snprintf(capeff, sizeof capeff, "%s", status("CapEff"));
  snprintf(buf, sizeof buf, "uid=[%s] CapEff=%s CapPrm=%s dumpable=%d userns=%lu", uid, capeff,
           status("CapPrm"), prctl(PR_GET_DUMPABLE), userns_ino());
  return buf;
}

// clone without a new stack: the child returns 0 like fork's.
static pid_t raw_clone(unsigned long flags) {
  return (pid_t)syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
}

static int reap(pid_t pid) {
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return st;
}

// Runs fn in a forked child (fn reports itself) and waits for it.
static void forked(void (*fn)(void *), void *arg) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    out("fork", errno, NULL);
    return;
  }
  if (pid == 0) {
    fn(arg);
    fflush(stdout);
    _exit(0);
  }
  reap(pid);
}

struct attempt {
  const char *id;
  unsigned long flags;
};

static void do_unshare(void *p) {
  struct attempt *a = p;
  int e = unshare(a->flags) == 0 ? 0 : errno;
  out(a->id, e, e == 0 && (a->flags & CLONE_NEWUSER) ? "then %s" : NULL, ident());
}

static void try_unshare(const char *id, unsigned long flags) {
  struct attempt a = {id, flags};
  forked(do_unshare, &a);
}

static void try_clone(const char *id, unsigned long flags) {
  fflush(stdout);
  pid_t pid = raw_clone(flags);
  if (pid == 0) _exit(0);
  if (pid < 0) {
    out(id, errno, NULL);
    return;
  }
  int st = reap(pid);
  out(id, 0, "child exit %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

// Every other kind of namespace, one unshare each and then all at once,
// and a clone of all at once (what stage 0's waiter does with NEWUSER).
static void others(const char *prefix) {
  static const struct {
    const char *name;
    unsigned long flag;
  } kinds[] = {{"mnt", CLONE_NEWNS}, {"pid", CLONE_NEWPID},       {"net", CLONE_NEWNET},
               {"ipc", CLONE_NEWIPC}, {"uts", CLONE_NEWUTS}, {"cgroup", CLONE_NEWCGROUP}};
  char id[128];
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    snprintf(id, sizeof id, "%s.unshare-%s", prefix, kinds[i].name);
    try_unshare(id, kinds[i].flag);
  }
  snprintf(id, sizeof id, "%s.unshare-all6", prefix);
  try_unshare(id, NS_OTHERS);
  snprintf(id, sizeof id, "%s.clone-all6", prefix);
  try_clone(id, NS_OTHERS);
}

static void nested(const char *prefix) {
  char id[128];
  snprintf(id, sizeof id, "%s.nested-unshare-user", prefix);
  try_unshare(id, CLONE_NEWUSER);
  snprintf(id, sizeof id, "%s.nested-clone-user", prefix);
  try_clone(id, CLONE_NEWUSER);
  snprintf(id, sizeof id, "%s.nested-clone-user+mnt", prefix);
  try_clone(id, CLONE_NEWUSER | CLONE_NEWNS);
}

// ---- basic: case 1 ----

static int basic(void) {
  out("1.whoami", 0, "%s", ident());
  try_unshare("1.unshare-user", CLONE_NEWUSER);
  try_clone("1.clone-user", CLONE_NEWUSER);
  try_clone("1.clone-user+all6", CLONE_NEWUSER | NS_OTHERS);
  return 0;
}

// ---- helper: cases 2, 3, 4, 5 ----

// child_dumpable: each holder makes itself dumpable after its unshare
// (the helper itself stays as exec made it).
static int child_dumpable;

// A child that has unshared its user namespace and waits on a pipe.
struct holder {
  pid_t pid;
  int go;   // write end: one byte lets it go on
  int done; // read end: the child's result of unshare, then EOF at exit
  int err;  // its unshare's errno
};

// The child's work once its maps are written (run_after may be NULL: it
// then waits for the pipe to close and exits).
static int hold(struct holder *h, void (*run_after)(void)) {
  int go[2], done[2];
  if (pipe(go) < 0 || pipe(done) < 0) return -1;
  fflush(stdout);
  h->pid = fork();
  if (h->pid < 0) return -1;
  if (h->pid == 0) {
    close(go[1]);
    close(done[0]);
    int e = unshare(CLONE_NEWUSER) == 0 ? 0 : errno;
    if (e == 0 && child_dumpable && prctl(PR_SET_DUMPABLE, 1) != 0) e = errno;
    if (write(done[1], &e, sizeof e) != sizeof e) _exit(1);
    if (e) _exit(0);
    char c;
    if (read(go[0], &c, 1) == 1 && run_after) run_after();
    fflush(stdout);
    _exit(0);
  }
  close(go[0]);
  close(done[1]);
  h->go = go[1];
  h->done = done[0];
  if (read(h->done, &h->err, sizeof h->err) != sizeof h->err) h->err = -1;
  return 0;
}

static void let_go(struct holder *h) {
  char c = 'g';
  if (write(h->go, &c, 1) != 1) {
  }
  close(h->go);
  reap(h->pid);
}

static int write_file(const char *path, const char *s) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  ssize_t n = write(fd, s, strlen(s));
  int e = n == (ssize_t)strlen(s) ? 0 : (n < 0 ? errno : EIO);
  close(fd);
  return e;
}

// Writes a one-id map of this process's euid and egid to 0 in pid's
// namespace, from outside it (as Glove's parents do), reporting each file.
static void write_maps(const char *prefix, pid_t pid) {
  char path[64], map[64], id[128];
  snprintf(path, sizeof path, "/proc/%d/setgroups", pid);
  snprintf(id, sizeof id, "%s.setgroups-deny", prefix);
  out(id, write_file(path, "deny"), NULL);
  snprintf(path, sizeof path, "/proc/%d/uid_map", pid);
  snprintf(map, sizeof map, "0 %u 1", geteuid());
  snprintf(id, sizeof id, "%s.uid_map", prefix);
  out(id, write_file(path, map), "'%s'", map);
  snprintf(path, sizeof path, "/proc/%d/gid_map", pid);
  snprintf(map, sizeof map, "0 %u 1", getegid());
  snprintf(id, sizeof id, "%s.gid_map", prefix);
  out(id, write_file(path, map), "'%s'", map);
}

static void case3(void) {
  out("3.inside-ns1", 0, "%s", ident());
  nested("3");
  others("3");
}

static int open_ns(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/ns/user", pid);
  return open(path, O_RDONLY | O_CLOEXEC);
}

static void owner_of(const char *id, int nsfd) {
  uid_t owner;
  int parent = ioctl(nsfd, NS_GET_PARENT);
  struct stat st;
  unsigned long pino = 0;
  if (parent >= 0 && fstat(parent, &st) == 0) pino = st.st_ino;
  if (parent >= 0) close(parent);
  if (ioctl(nsfd, NS_GET_OWNER_UID, &owner) < 0) {
    out(id, errno, NULL);
    return;
  }
  out(id, 0, "owner_uid=%u parent_userns=%lu (mine %lu)", owner, pino, userns_ino());
}

// Case 5a: the capability holder joins namespace 1, then tries a new one.
static int ns1fd = -1;
static void case5a(void *unused) {
  (void)unused;
  int e = setns(ns1fd, CLONE_NEWUSER) == 0 ? 0 : errno;
  out("5a.setns-ns1", e, e ? NULL : "then %s", ident());
  if (e) return;
  try_unshare("5a.then-unshare-user", CLONE_NEWUSER);
  try_clone("5a.then-clone-user", CLONE_NEWUSER);
}

// Case 5b: unshare twice in one process (no maps in between).
static void case5b(void *unused) {
  (void)unused;
  int e = unshare(CLONE_NEWUSER) == 0 ? 0 : errno;
  out("5b.first-unshare-user", e, e ? NULL : "then %s", ident());
  if (e) return;
  e = unshare(CLONE_NEWUSER) == 0 ? 0 : errno;
  out("5b.second-unshare-user", e, NULL);
}

// Case 5d: clone(NEWUSER), and the child clones (NEWUSER) again.
static void case5d(void *unused) {
  (void)unused;
  fflush(stdout);
  pid_t pid = raw_clone(CLONE_NEWUSER);
  if (pid < 0) {
    out("5d.first-clone-user", errno, NULL);
    return;
  }
  if (pid == 0) {
    try_clone("5d.second-clone-user", CLONE_NEWUSER);
    fflush(stdout);
    _exit(0);
  }
  reap(pid);
}

static void after_maps_5c(void) {
  out("5c.inside-mapped-ns1", 0, "%s", ident());
  int e = unshare(CLONE_NEWUSER) == 0 ? 0 : errno;
  out("5c.second-unshare-user", e, NULL);
}

// mode "dumpable": as a helper executed with file capabilities may choose
// to be (prctl), so that its children's /proc files belong to its uid;
// "child-dumpable": only the children that hold the new namespaces are.
static void set_mode(const char *id, const char *mode) {
  if (!mode) return;
  if (strcmp(mode, "dumpable") == 0)
    out(id, prctl(PR_SET_DUMPABLE, 1) == 0 ? 0 : errno, "prctl(PR_SET_DUMPABLE, 1)");
  else if (strcmp(mode, "child-dumpable") == 0) {
    child_dumpable = 1;
    out(id, 0, "each holder: prctl(PR_SET_DUMPABLE, 1) after its unshare");
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    exit(2);
  }
}

static int helper(const char *plain, const char *mode) {
  set_mode("2.mode", mode);
  out("2.whoami", 0, "%s", ident());

  // Case 2 (and 3 inside): the helper's child unshares; the helper writes
  // its maps and keeps a descriptor of its namespace.
  struct holder h;
  if (hold(&h, case3) < 0) {
    out("2.fork", errno, NULL);
    return 1;
  }
  out("2.unshare-user", h.err, NULL);
  if (h.err == 0) {
    ns1fd = open_ns(h.pid);
    out("2.open-ns-fd", ns1fd < 0 ? errno : 0, NULL);
    if (ns1fd >= 0) owner_of("2.ns1-owner", ns1fd);
    write_maps("2", h.pid);
  }
  let_go(&h); // runs case 3 in the child, which then exits
  try_clone("2.clone-user", CLONE_NEWUSER);
  try_clone("2.clone-user+all6", CLONE_NEWUSER | NS_OTHERS);

  // Case 4: a process of the same uid without capabilities (this binary
  // without file capabilities, executed: its permitted set is empty)
  // joins namespaces the helper made: ns1 (no process left in it, kept by
  // the descriptor), ns4 (its holder still alive, maps written by the
  // helper: by path and pidfd) and ns4m (holder alive, no maps: the joiner
  // writes them).
  struct holder h4, h4m;
  int have4 = hold(&h4, NULL) == 0 && h4.err == 0;
  if (have4) write_maps("4.helper-maps-ns4", h4.pid);
  int have4m = hold(&h4m, NULL) == 0 && h4m.err == 0;
  int ns4mfd = have4m ? open_ns(h4m.pid) : -1;
  if (ns1fd >= 0 || have4) {
    char a1[16], a2[16], a3[16], a4[16];
    snprintf(a1, sizeof a1, "%d", ns1fd);
    snprintf(a2, sizeof a2, "%d", have4 ? h4.pid : 0);
    snprintf(a3, sizeof a3, "%d", have4m ? h4m.pid : 0);
    snprintf(a4, sizeof a4, "%d", ns4mfd);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      if (ns1fd >= 0) fcntl(ns1fd, F_SETFD, 0);
      if (ns4mfd >= 0) fcntl(ns4mfd, F_SETFD, 0);
      execl(plain, plain, "joiner", a1, a2, a3, a4, (char *)NULL);
      out("4.exec-joiner", errno, "%s", plain);
      _exit(1);
    }
    reap(pid);
  } else {
    printf("4 n/a the helper made no namespace (case 2 refused)\n");
  }
  if (have4) let_go(&h4);
  if (have4m) let_go(&h4m);

  // Case 5: nesting by the capability holder itself.
  if (ns1fd >= 0) forked(case5a, NULL);
  forked(case5b, NULL);
  struct holder h5;
  if (hold(&h5, after_maps_5c) == 0) {
    out("5c.first-unshare-user", h5.err, NULL);
    if (h5.err == 0) write_maps("5c", h5.pid);
    let_go(&h5);
  }
  forked(case5d, NULL);
  return 0;
}


// ---- lock: case 8 (beyond the brief's cases) ----
//
// Without nesting, can mounts be locked with two sibling namespaces U1
// and U2 (both children of the initial one, both made by the helper)? A
// stand-in for stage 1 (S) joins U1, makes mount namespace A and mounts a
// read-only tmpfs on /mnt. The helper (CAP_SYS_ADMIN and, for setns into
// a mount namespace, CAP_SYS_CHROOT in the initial namespace) joins A,
// then U2, and unshares the mount namespace: the copy B belongs to U2,
// and its mounts came from a namespace of another owner. Then a process
// of the same uid without capabilities joins U2 and B.

static int l_u1, l_u2, l_mnt, l_bready, l_bdone;
static void l_unlock_b(void *unused);

static void try_unlock(const char *prefix) {
  char id[128];
  snprintf(id, sizeof id, "%s.remount-rw-/mnt", prefix);
  out(id, mount(NULL, "/mnt", NULL, MS_REMOUNT | MS_BIND, NULL) == 0 ? 0 : errno, NULL);
  snprintf(id, sizeof id, "%s.umount-/mnt", prefix);
  out(id, umount2("/mnt", MNT_DETACH) == 0 ? 0 : errno, NULL);
}

// In a copy of A made in U1 itself (A is shared with S and the helper's
// view of it must stay intact): the same owner, so nothing is locked.
static void l_unlock_a(void *unused) {
  (void)unused;
  int e = unshare(CLONE_NEWNS) == 0 ? 0 : errno;
  out("8.copy-of-A-in-U1", e, NULL);
  if (!e) try_unlock("8.copy-of-A-in-U1");
}

static void l_helper(void *unused) {
  (void)unused;
  int e = setns(l_mnt, CLONE_NEWNS) == 0 ? 0 : errno;
  out("8.helper-setns-A", e, "%s", ident());
  if (e) return;
  e = setns(l_u2, CLONE_NEWUSER) == 0 ? 0 : errno;
  out("8.helper-setns-U2", e, NULL);
  if (e) return;
  e = unshare(CLONE_NEWNS) == 0 ? 0 : errno;
  out("8.helper-unshare-mnt-B", e, "%s", ident());
  if (e) return;
  forked(l_unlock_b, NULL);
  // B stays while this process lives: the parent opens it and hands it
  // to a process without capabilities, then closes the pipe.
  char c = 'b';
  if (write(l_bready, &c, 1) != 1) return;
  if (read(l_bdone, &c, 1) < 0) return;
}

static void l_unlock_b(void *unused) {
  (void)unused;
  try_unlock("8.in-B-by-U2-root");
}

static const char *l_plain;

// A process of the service uid without capabilities joins U2, then B.
static int joinlock(char **argv) {
  int u2 = atoi(argv[0]), b = atoi(argv[1]);
  out("8.joiner.whoami", 0, "%s", ident());
  int e = setns(u2, CLONE_NEWUSER) == 0 ? 0 : errno;
  out("8.joiner.setns-U2", e, NULL);
  if (e) return 0;
  e = setns(b, CLONE_NEWNS) == 0 ? 0 : errno;
  out("8.joiner.setns-B", e, "%s", ident());
  if (e) return 0;
  struct stat st, root;
  e = stat("/mnt", &st) == 0 && stat("/", &root) == 0 ? 0 : errno;
  out("8.joiner.stat-/mnt", e, "a mount of its own: %s", e == 0 && st.st_dev != root.st_dev ? "yes" : "no");
  try_unlock("8.joiner-in-B");
  return 0;
}

static int lock(const char *plain, const char *mode) {
  set_mode("8.mode", mode);
  l_plain = plain;
  out("8.whoami", 0, "%s", ident());
  struct holder h1, h2;
  if (hold(&h1, NULL) < 0 || h1.err) {
    out("8.unshare-user-U1", h1.err, NULL);
    return 0;
  }
  write_maps("8.U1", h1.pid);
  if (hold(&h2, NULL) < 0 || h2.err) {
    out("8.unshare-user-U2", h2.err, NULL);
    return 0;
  }
  write_maps("8.U2", h2.pid);
  l_u1 = open_ns(h1.pid);
  l_u2 = open_ns(h2.pid);
  let_go(&h1);
  let_go(&h2);
  if (l_u1 < 0 || l_u2 < 0) {
    out("8.open-ns", errno, NULL);
    return 0;
  }
  // S: joins U1, makes A, mounts, then waits while the helper works.
  int ready[2], fin[2];
  if (pipe(ready) < 0 || pipe(fin) < 0) return 1;
  fflush(stdout);
  pid_t s = fork();
  if (s == 0) {
    close(ready[0]);
    close(fin[1]);
    int e = setns(l_u1, CLONE_NEWUSER) == 0 ? 0 : errno;
    out("8.S-setns-U1", e, NULL);
    if (!e) {
      e = unshare(CLONE_NEWNS) == 0 ? 0 : errno;
      out("8.S-unshare-mnt-A", e, NULL);
    }
    if (!e) {
      e = mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 ? 0 : errno;
      out("8.S-make-private", e, NULL);
      e = mount("glove-probe", "/mnt", "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=1m") == 0 ? 0 : errno;
      out("8.S-mount-ro-tmpfs-/mnt", e, NULL);
      forked(l_unlock_a, NULL);
    }
    char c = e ? 'x' : 'r';
    if (write(ready[1], &c, 1) != 1) _exit(1);
    if (read(fin[0], &c, 1) < 0) _exit(1);
    _exit(0);
  }
  close(ready[1]);
  close(fin[0]);
  char c = 0;
  if (read(ready[0], &c, 1) == 1 && c == 'r') {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/mnt", s);
    l_mnt = open(path, O_RDONLY | O_CLOEXEC);
    out("8.open-A", l_mnt < 0 ? errno : 0, NULL);
    int br[2], bd[2];
    if (l_mnt >= 0 && pipe(br) == 0 && pipe(bd) == 0) {
      fflush(stdout);
      pid_t hp = fork();
      if (hp == 0) {
        close(br[0]);
        close(bd[1]);
        l_bready = br[1];
        l_bdone = bd[0];
        l_helper(NULL);
        fflush(stdout);
        _exit(0);
      }
      close(br[1]);
      close(bd[0]);
      if (read(br[0], &c, 1) == 1) {
        snprintf(path, sizeof path, "/proc/%d/ns/mnt", hp);
        int bfd = open(path, O_RDONLY);
        out("8.open-B", bfd < 0 ? errno : 0, NULL);
        if (bfd >= 0 && l_plain) {
          char a1[16], a2[16];
          snprintf(a1, sizeof a1, "%d", l_u2);
          snprintf(a2, sizeof a2, "%d", bfd);
          fflush(stdout);
          pid_t jp = fork();
          if (jp == 0) {
            fcntl(l_u2, F_SETFD, 0);
            execl(l_plain, l_plain, "joinlock", a1, a2, (char *)NULL);
            out("8.exec-joinlock", errno, NULL);
            _exit(1);
          }
          reap(jp);
        }
      }
      close(bd[1]);
      reap(hp);
    }
  }
  close(fin[1]);
  reap(s);
  return 0;
}

// ---- joiner: case 4 ----

static int j_ns1fd, j_ns4mfd;
static pid_t j_pid4, j_pid4m;

static void joined(const char *prefix) {
  char id[128];
  snprintf(id, sizeof id, "%s.inside", prefix);
  out(id, 0, "%s", ident());
  nested(prefix);
  others(prefix);
}

static void j_fd(void *unused) {
  (void)unused;
  int e = setns(j_ns1fd, CLONE_NEWUSER) == 0 ? 0 : errno;
  out("4.setns-fd-ns1", e, NULL);
  if (e == 0) joined("4.fd-ns1");
}

static void j_path(void *unused) {
  (void)unused;
  int fd = open_ns(j_pid4);
  out("4.open-proc-pid-ns-user", fd < 0 ? errno : 0, "(holder %d: %s)", j_pid4, "alive, helper's child");
  if (fd < 0) return;
  int e = setns(fd, CLONE_NEWUSER) == 0 ? 0 : errno;
  out("4.setns-path-ns4", e, NULL);
  if (e == 0) out("4.path-ns4.inside", 0, "%s", ident());
}

static void j_pidfd(void *unused) {
  (void)unused;
  int fd = (int)syscall(SYS_pidfd_open, j_pid4, 0);
  out("4.pidfd_open", fd < 0 ? errno : 0, NULL);
  if (fd < 0) return;
  int e = setns(fd, CLONE_NEWUSER) == 0 ? 0 : errno;
  out("4.setns-pidfd-ns4", e, NULL);
  if (e == 0) out("4.pidfd-ns4.inside", 0, "%s", ident());
}

static void j_maps(void *unused) {
  (void)unused;
  write_maps("4.joiner-maps-ns4m", j_pid4m);
  int e = setns(j_ns4mfd, CLONE_NEWUSER) == 0 ? 0 : errno;
  out("4.setns-fd-ns4m", e, NULL);
  if (e == 0) out("4.fd-ns4m.inside", 0, "%s", ident());
}

static int joiner(char **argv) {
  j_ns1fd = atoi(argv[0]);
  j_pid4 = atoi(argv[1]);
  j_pid4m = atoi(argv[2]);
  j_ns4mfd = atoi(argv[3]);
  out("4.whoami", 0, "%s", ident());
  if (j_ns1fd >= 0) forked(j_fd, NULL);
  if (j_pid4 > 0) {
    forked(j_path, NULL);
    forked(j_pidfd, NULL);
  }
  if (j_pid4m > 0 && j_ns4mfd >= 0) forked(j_maps, NULL);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  // A holder whose unshare failed has exited: telling it to go on must
  // not end the helper.
  signal(SIGPIPE, SIG_IGN);
  if (argc == 2 && strcmp(argv[1], "basic") == 0) return basic();
  if ((argc == 3 || argc == 4) && strcmp(argv[1], "helper") == 0) return helper(argv[2], argv[3]);
  if ((argc == 3 || argc == 4) && strcmp(argv[1], "lock") == 0) return lock(argv[2], argv[3]);
  if (argc == 4 && strcmp(argv[1], "joinlock") == 0) return joinlock(argv + 2);
  if (argc == 6 && strcmp(argv[1], "joiner") == 0) return joiner(argv + 2);
  fprintf(stderr, "usage: userns-probe basic | helper PLAIN [MODE] | lock PLAIN [MODE] | joiner ... | joinlock ...\n");
  return 2;
}
