// SPDX-License-Identifier: Apache-2.0

// Package materialize fills a session's ephemeral copy: it copies a host
// tree (a policy path alias's host_path with materialization "copy") into
// a destination directory descriptor, normally the root of the detached,
// size-bounded tmpfs that glove-mounter hands to gloved. The tmpfs size is
// the byte quota; running out of space there is reported as ErrQuota so
// that the caller can report limit:disk_bytes.
//
// # Threat model
//
// The copier is gloved: an unprivileged service user with no capabilities.
// The source tree is operator-granted but its contents are not trusted:
// whoever can write below host_path (including a previous session's
// retained output, or a concurrent host process) may plant symbolic links,
// special files, mount points and deep or huge trees, and may change the
// tree while it is being copied. The destination is fresh session storage
// that nothing else writes before the sandbox starts. The rules, each
// against one threat:
//
//   - T1 symlink escape: a link in the source pointing at /etc/shadow, at
//     "../../x" or at a service-user secret must never make the copier read
//     host data outside the granted tree. The source is opened once with
//     openat2(RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS), every child is
//     opened relative to its parent's descriptor with O_NOFOLLOW and
//     RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS, and no host
//     path string is ever built for a child. Links are recreated as links
//     with the same target text, which is then resolved inside the sandbox's
//     root, never on the host.
//   - T2 mount crossing: a mount below host_path (a bind of some other
//     tree, a procfs, an automount) is not part of the granted tree.
//     Each entry's statx mount id (and device) is compared with the root's
//     before anything is opened, and every open also carries
//     RESOLVE_NO_XDEV; such entries (directories and bind-mounted files
//     alike) are skipped and counted in Totals.Mounts, by Scan too.
//   - T3 special files: opening a FIFO blocks forever, opening a device can
//     have side effects (a tape rewinds, a terminal becomes controlling)
//     and reading one could be anything. FIFOs, sockets, character and
//     block devices are never opened: they are skipped and counted in
//     Totals.Special. Regular files are opened O_NONBLOCK|O_NOCTTY and
//     checked with fstat after opening, so a file swapped for a FIFO between
//     lstat and open neither blocks nor is read.
//   - T4 privilege carry-over: setuid, setgid and sticky bits are stripped
//     from everything copied, and nothing is chowned: every copy belongs to
//     the copier. A copied setuid file would not be a privilege (it is not
//     owned by root, and the sandbox is nosuid), but it is not carried.
//   - T5 resource exhaustion: MaxDepth (default 256) bounds recursion and
//     the descriptors held open at once (two per level); MaxEntries
//     (default 1,000,000) bounds the work and memory; the destination's size
//     bounds the bytes (ErrQuota). Copy buffers are bounded (128 KiB).
//   - T6 path disclosure: audit records must not contain raw host paths.
//     Errors name only the path relative to the source root ("." is the
//     root), never the host path prefix; Open's error does not repeat
//     hostPath.
//   - T7 concurrent change (TOCTOU): the tree may change during the copy.
//     What is read is copied: a file that shrinks or grows is copied as
//     read (its growth is bounded by the quota). An entry whose type changes
//     between lstat and open (a file replaced by a directory, a directory by
//     a link ...) is an error (ErrChanged): the copy would otherwise not be
//     a copy of anything that existed.
//
// Hard links are copied as separate files: the copy does not track inode
// identity (doing so costs a map per tree and hard links across a granted
// tree are rare); each name gets its own copy and counts against the
// quota. Directory modes are kept with u+rwx forced (the copier must be able
// to fill them). Regular files keep their permission bits and mtime;
// directories and symbolic links keep their mtime too.
//
// Residual risk: between lstat and open, an attacker who can write the
// source tree can swap a regular file for a device node; the open then
// happens (with O_NONBLOCK|O_NOCTTY, with the service user's permissions)
// before fstat rejects it. Linux has no way to reopen an O_PATH descriptor
// for reading without /proc magic links, which this package refuses.
//
// The destination is expected to be empty: an existing name makes the copy
// fail (EEXIST) rather than be merged.
package materialize
