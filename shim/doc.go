// SPDX-License-Identifier: Apache-2.0

// Package shim is glove-shim: a small OCI runtime that executes the
// config.json gloved writes (or any bundle within the subset below), with
// a command line compatible with runc's:
//
//	glove-shim run --bundle DIR [--preserve-fds N] ID
//
// and one command of Glove's own, glove-shim probe: the user-namespace
// steps of a start alone (a new user and mount namespace, its maps, a
// private mount tree and a tmpfs, a nested user namespace), each
// printed as it passes or fails, for gloved's choice of how sessions get
// their user namespace (shim/cstage/probe.c; docs/shim.md).
//
// # Stages
//
//	stage 0 (host: the service user, no capability)
//	  reads DIR/config.json strictly, refuses every field it does not
//	  implement, compiles linux.seccomp to BPF, opens every path source
//	  once with openat2, checks every inherited descriptor, writes the
//	  plan into a sealed memfd and executes glove-shim again as its
//	  waiter (C before the Go runtime starts, shim/cstage/stage0.c),
//	  which blocks every signal, stays, forwards them and reports the
//	  program's status
//	    │ clone(NEWUSER|NEWNS|NEWPID|NEWNET|NEWIPC|NEWUTS|NEWCGROUP),
//	    │ uid 0 ↦ service uid
//	    ▼
//	stage 1 (PID 1 of the sandbox; root of user namespace 1; C, the
//	waiter's child, shim/cstage/stage1.c)
//	  makes the mount tree private, clones the root and attaches every
//	  mount from a descriptor (open_tree/fsmount + mount_setattr +
//	  move_mount), masks and write-protects /proc paths, makes the root
//	  read-only, pivot_root, hostname, lo up; then stays as PID 1:
//	  forwards signals, reaps, exits with the program's status
//	    │ clone(NEWUSER|NEWNS), sandbox uid ↦ 0 of namespace 1
//	    ▼
//	stage 2 (user namespace 2: every mount is now locked), C, stage 1's
//	child (shim/cstage/stage2.c)
//	  working directory re-checked inside the root, rlimits, umask, no
//	  capability (bounding set emptied, SECBIT_NOROOT), no_new_privs,
//	  every descriptor but stdio and the passed ones close-on-exec,
//	  Landlock (as the kernel's ABI allows), the terminal ioctl filter,
//	  the bundle's seccomp filter last (with linux.seccomp.listenerPath,
//	  its listener then sent on that descriptor), execve
//
// Why two user namespaces: a mount that a process attached in a user
// namespace it owns can still be made writable (mount_setattr clearing
// MOUNT_ATTR_RDONLY) or unmounted to reveal what is below. Once a further
// user and mount namespace is entered, the copied mounts are locked:
// clearing read-only fails with EPERM and unmounting with EINVAL. Stage 2
// exists only to cross that line before the program runs.
//
// With --userns-fd N (hosts whose kernel refuses unprivileged user
// namespaces) user namespace 1 is not new: stage 0 checks that N is a
// user namespace of the effective uid and a child of its own
// (checkUserns), the waiter joins it, closes N and checks its maps
// (process.user's uid and gid to the service user's alone, as the
// bundle's linux.uidMappings and gidMappings say; setgroups denied), and
// clones stage 1 without NEWUSER and without writing maps: stage 1 is
// process.user's ids there, with every capability, and the program has
// the ids and sees the owners it has in the default mode. Such kernels
// let nobody nest a user namespace, so stage 2 is cloned without
// NEWUSER|NEWNS, as with the mountlock layer off: no mount lock in that
// mode, and the other layers stop what it stops (the attack table's
// userns- configurations).
//
// Why clone flags and not unshare: unshare(CLONE_NEWUSER) fails in a
// multi-threaded process, and every Go program is one. The waiter and
// stage 1 have one thread and clone the next stage with a raw clone; no
// stage after stage 0's Go part starts a Go runtime (one Go start-up on
// the path), and none needs a new task once the program runs, so a
// program using up the pids limit cannot make one fail.
//
// Descriptors: the bundle may name a preserved descriptor as a bind
// source (/proc/self/fd/N, 3 <= N < 3+preserve-fds), or a directory
// beneath it (/proc/self/fd/N/SUB: N is then a detached mount several
// mounts may share, staged by stage 1 in the root being built and
// detached again once each directory is cloned). Such a descriptor is
// consumed by stage 1 and never reaches the program (threat: a directory
// descriptor of the host would let the program walk out of its root with
// openat(N, "..")). The other preserved descriptors are passed at their
// numbers; a directory or O_PATH descriptor among them is refused.
//
// linux.seccomp.listenerPath may only be /proc/self/fd/N, N a preserved
// descriptor no mount uses, which stage 0 refuses unless it is a
// connected AF_UNIX stream socket. Stage 2 loads the bundle's filter with
// SECCOMP_FILTER_FLAG_NEW_LISTENER and sends the listener on N
// (SCM_RIGHTS, one byte), so that gloved can answer the program's
// notified calls (connect, for local services); a failed send fails the
// stage. N never reaches the program (threat: a program answering its
// own filter's notifications), and the waiter and stage 1 keep no copy.
// With the seccomp layer off (test builds) stage 2 closes N and sends
// nothing: the holder reads end of file, meaning no filter.
//
// The egress annotations (spec.EgressListenAnnotation,
// spec.EgressHandoffAnnotation) name loopback ports and a preserved
// descriptor N, which stage 0 refuses unless it is a connected AF_UNIX
// stream socket that no mount and not the seccomp listener uses. Stage 1,
// once lo is up, listens on 127.0.0.1:PORT of the sandbox's network
// namespace for each port, sends the listeners on N in one message (one
// byte each, SCM_RIGHTS) and closes them and N before stage 2 exists: the
// program never holds a listener or N, and the waiter keeps no copy
// (close_range after stage 1's start).
//
// Every layer is tested on its own by the attack table in
// shim/attack_test.go; the test-only switches that turn layers off exist
// only in binaries built with the glove_testlayers build tag.
package shim
