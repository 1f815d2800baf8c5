// SPDX-License-Identifier: Apache-2.0

package materialize

import (
	"errors"
	"fmt"
	"path"

	"golang.org/x/sys/unix"
)

// Defaults for Options.
const (
	DefaultMaxDepth   = 256
	DefaultMaxEntries = 1_000_000

	// progressStep is the number of bytes between two progress calls within
	// one file.
	progressStep = 64 << 10
	// copyChunk bounds one copy_file_range or read/write round (T5).
	copyChunk = 128 << 10
	// nameMax is NAME_MAX on Linux.
	nameMax = 255
	// linkMax bounds a symlink target (PATH_MAX).
	linkMax = 4096
)

var (
	// ErrQuota is wrapped when the destination runs out of space (ENOSPC
	// or EDQUOT): the caller reports limit:disk_bytes.
	ErrQuota = errors.New("materialize: destination quota exhausted")
	// ErrTooDeep is wrapped when the tree is deeper than Options.MaxDepth.
	ErrTooDeep = errors.New("materialize: tree deeper than the depth limit")
	// ErrTooManyEntries is wrapped when the tree holds more entries than
	// Options.MaxEntries.
	ErrTooManyEntries = errors.New("materialize: tree has more entries than the entry limit")
	// ErrChanged is wrapped when an entry changed type while it was being
	// copied (T7).
	ErrChanged = errors.New("materialize: source changed during the copy")
	// ErrName is wrapped for a directory entry name that cannot be valid.
	ErrName = errors.New("materialize: invalid entry name")
)

// Totals counts a tree. The root directory itself is not counted in Dirs.
type Totals struct {
	Files    int64 // regular files
	Dirs     int64 // directories below the root
	Symlinks int64 // symbolic links
	Bytes    int64 // bytes of regular files (Scan: st_size; Copy: bytes copied)
	Special  int64 // FIFOs, sockets, devices: skipped (T3)
	Mounts   int64 // mount points below the root: skipped (T2)
}

// Entries is the number of entries seen, skipped ones included.
func (t Totals) Entries() int64 {
	return t.Files + t.Dirs + t.Symlinks + t.Special + t.Mounts
}

// Options bound and observe a copy (or a scan).
type Options struct {
	// Progress, if not nil, is called after each regular file, within a
	// file at most every 64 KiB copied, and once at the end. done counts
	// what has been copied so far; total is Total, passed through (usually
	// the result of Scan).
	Progress func(done, total Totals)
	Total    Totals
	// MaxEntries bounds the number of entries (0: DefaultMaxEntries).
	MaxEntries int
	// MaxDepth bounds directory nesting; the root's children are at depth
	// 1 (0: DefaultMaxDepth).
	MaxDepth int
	// MaxBytes, if not 0, bounds the bytes of regular files copied: the
	// copy stops with ErrQuota once it would pass it. It is a copy's own
	// quota where the destination's space is shared with other trees (a
	// session's scratch tmpfs), so that the space cannot bound it.
	MaxBytes int64
}

// Source is a host tree opened once; Scan and CopyTo work from its
// descriptor, never from its path.
type Source struct {
	fd int
}

// resolveChild is how every source child is resolved: relative to its
// parent's descriptor, never following a link (T1), never crossing a mount
// (T2).
const resolveChild = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS |
	unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// Open opens hostPath, which must be an absolute path to a directory with
// no symbolic link in any component (T1). The error never contains
// hostPath (T6).
func Open(hostPath string) (*Source, error) {
	if !path.IsAbs(hostPath) {
		return nil, errors.New("materialize: open source: path is not absolute")
	}
	fd, err := retry(func() (int, error) {
		return unix.Openat2(unix.AT_FDCWD, hostPath, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("materialize: open source: %w", err)
	}
	return &Source{fd: fd}, nil
}

// Close releases the source descriptor.
// Fd is the source tree's descriptor (O_PATH), for a check of its
// identity; it stays the Source's.
func (s *Source) Fd() int { return s.fd }

func (s *Source) Close() error {
	if s.fd < 0 {
		return nil
	}
	err := unix.Close(s.fd)
	s.fd = -1
	return err
}

// Scan counts the tree (for progress), with the default bounds.
func (s *Source) Scan() (Totals, error) {
	return s.walk(-1, Options{})
}

// ScanWith counts the tree with the bounds of o (Progress is not called).
func (s *Source) ScanWith(o Options) (Totals, error) {
	o.Progress = nil
	return s.walk(-1, o)
}

// CopyTo copies the tree into the directory dst (a descriptor, e.g. the
// tmpfs mount's root; O_PATH is fine), which should be empty. It returns
// what was copied. On error the destination holds a partial copy that the
// caller discards with the session storage.
func (s *Source) CopyTo(dst int, o Options) (Totals, error) {
	if dst < 0 {
		return Totals{}, errors.New("materialize: invalid destination descriptor")
	}
	return s.walk(dst, o)
}

// walker holds the state of one walk; dst < 0 means scan only.
type walker struct {
	o        Options
	done     Totals
	reported int64 // done.Bytes at the last progress call
	buf      []byte
	dirents  []byte
	noCFR    bool // copy_file_range unusable between these file systems
}

// testHookBeforeOpen, if set, runs between an entry's lstat and its open.
var testHookBeforeOpen func(rel string)

func (s *Source) walk(dst int, o Options) (Totals, error) {
	if s.fd < 0 {
		return Totals{}, errors.New("materialize: source is closed")
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	w := &walker{o: o, dirents: make([]byte, 32<<10)}
	// A readable descriptor of the root: the O_PATH one cannot list.
	root, err := retry(func() (int, error) {
		return unix.Openat2(s.fd, ".", &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
			Resolve: resolveChild,
		})
	})
	if err != nil {
		return Totals{}, wrap(".", err)
	}
	defer unix.Close(root)
	var st unix.Statx_t
	if err := fstatx(root, &st); err != nil {
		return Totals{}, wrap(".", err)
	}
	if err := w.dir(root, dst, ".", 0, mountOf(&st)); err != nil {
		return w.done, err
	}
	if dst >= 0 {
		// The root's mode is the mount's (owned by the service user, set by
		// glove-mounter); only its mtime follows the source.
		if err := unix.UtimesNanoAt(dst, ".", times(&st), 0); err != nil {
			return w.done, wrapDst(".", err)
		}
	}
	w.progress(true)
	return w.done, nil
}

// dir copies the entries of the open source directory src into the open
// destination directory dst (or only counts them when dst < 0).
func (w *walker) dir(src, dst int, rel string, depth int, mnt mountID) error {
	names, err := w.readNames(src)
	if err != nil {
		return wrap(rel, err)
	}
	for _, name := range names {
		crel := join(rel, name)
		if err := checkName(name); err != nil {
			return fmt.Errorf("materialize: %q in %s: %w", name, rel, err)
		}
		if w.done.Entries() >= int64(w.o.MaxEntries) {
			return fmt.Errorf("materialize: %s: %w (%d)", crel, ErrTooManyEntries, w.o.MaxEntries)
		}
		var st unix.Statx_t
		if err := lstatx(src, name, &st); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // removed since the listing: nothing to copy (T7)
			}
			return wrap(crel, err)
		}
		if mountOf(&st) != mnt {
			// T2: another mount below the root (a mount point of any type,
			// a bind of a file included), seen without opening it.
			w.done.Mounts++
			continue
		}
		if testHookBeforeOpen != nil {
			testHookBeforeOpen(crel)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if depth+1 > w.o.MaxDepth {
				return fmt.Errorf("materialize: %s: %w (%d)", crel, ErrTooDeep, w.o.MaxDepth)
			}
			err = w.subdir(src, dst, name, crel, depth+1, mnt, &st)
		case unix.S_IFREG:
			err = w.file(src, dst, name, crel, &st)
		case unix.S_IFLNK:
			err = w.symlink(src, dst, name, crel, &st)
		default:
			w.done.Special++ // T3: never opened
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// openSrc opens a source child beneath its parent (T1, T2). It reports
// skip when the child is a mount point.
func openSrc(parent int, name string, flags uint64) (fd int, skip bool, err error) {
	fd, err = retry(func() (int, error) {
		return unix.Openat2(parent, name, &unix.OpenHow{
			Flags:   flags | unix.O_CLOEXEC | unix.O_NOFOLLOW,
			Resolve: resolveChild,
		})
	})
	switch {
	case errors.Is(err, unix.EXDEV):
		return -1, true, nil // T2: a mount point (a bind on the same device)
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		// The entry became a link, or stopped being a directory (T7).
		return -1, false, fmt.Errorf("%w: %w", ErrChanged, err)
	}
	return fd, false, err
}

func (w *walker) subdir(psrc, pdst int, name, rel string, depth int, mnt mountID, st *unix.Statx_t) error {
	src, skip, err := openSrc(psrc, name, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return wrap(rel, err)
	}
	if skip {
		w.done.Mounts++
		return nil
	}
	defer unix.Close(src)
	var fst unix.Statx_t
	if err := fstatx(src, &fst); err != nil {
		return wrap(rel, err)
	}
	if mountOf(&fst) != mountOf(st) || fst.Ino != st.Ino {
		return wrap(rel, ErrChanged) // T7: replaced between lstat and open
	}
	w.done.Dirs++
	if pdst < 0 {
		return w.dir(src, -1, rel, depth, mnt)
	}
	// u+rwx forced so the copier can fill it; setuid/setgid/sticky
	// stripped (T4).
	mode := uint32(fst.Mode)&0o777 | 0o700
	if err := unix.Mkdirat(pdst, name, 0o700); err != nil {
		return wrapDst(rel, err)
	}
	dst, err := retry(func() (int, error) {
		return unix.Openat2(pdst, name, &unix.OpenHow{
			Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
	})
	if err != nil {
		return wrapDst(rel, err)
	}
	defer unix.Close(dst)
	if err := w.dir(src, dst, rel, depth, mnt); err != nil {
		return err
	}
	if err := unix.Fchmod(dst, mode); err != nil {
		return wrapDst(rel, err)
	}
	// After the children: creating them changed the mtime.
	if err := unix.UtimesNanoAt(pdst, name, times(&fst), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return wrapDst(rel, err)
	}
	return nil
}

func (w *walker) file(psrc, pdst int, name, rel string, st *unix.Statx_t) error {
	if pdst < 0 {
		w.done.Files++
		w.done.Bytes += int64(st.Size)
		return nil
	}
	// O_NONBLOCK|O_NOCTTY: a FIFO or terminal swapped in after lstat must
	// not block or become controlling (T3, T7); fstat below rejects it.
	src, skip, err := openSrc(psrc, name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return wrap(rel, err)
	}
	if skip {
		w.done.Mounts++ // a file bind-mounted over this name (T2)
		return nil
	}
	defer unix.Close(src)
	var fst unix.Statx_t
	if err := fstatx(src, &fst); err != nil {
		return wrap(rel, err)
	}
	if fst.Mode&unix.S_IFMT != unix.S_IFREG {
		return wrap(rel, ErrChanged)
	}
	// Created 0600 and chmodded at the end: the umask does not matter, and
	// setuid/setgid/sticky are stripped (T4). No chown (T4).
	dst, err := retry(func() (int, error) {
		return unix.Openat(pdst, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	})
	if err != nil {
		return wrapDst(rel, err)
	}
	defer unix.Close(dst)
	w.done.Files++
	// Checked before copying too, so that a file that cannot fit is not
	// copied only to be refused.
	if err := w.charge(rel, int64(min(fst.Size, 1<<62))); err != nil {
		return err
	}
	if err := w.copyData(src, dst, rel); err != nil {
		return err
	}
	if err := unix.Fchmod(dst, uint32(fst.Mode)&0o777); err != nil {
		return wrapDst(rel, err)
	}
	if err := unix.UtimesNanoAt(pdst, name, times(&fst), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return wrapDst(rel, err)
	}
	w.progress(true)
	return nil
}

// copyData copies src to dst until end of file: what is read is copied
// (T7), in bounded rounds (T5).
func (w *walker) copyData(src, dst int, rel string) error {
	for !w.noCFR {
		n, err := unix.CopyFileRange(src, nil, dst, nil, copyChunk, 0)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EXDEV), errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS),
			errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EPERM), errors.Is(err, unix.EBADF):
			// Not usable between these two file systems: read and write
			// from here on. Nothing was copied by the failed call.
			w.noCFR = true
		case isQuota(err):
			return wrapDst(rel, err)
		case err != nil:
			return wrap(rel, err)
		case n == 0:
			return nil
		default:
			w.done.Bytes += int64(n)
			if err := w.charge(rel, 0); err != nil {
				return err
			}
			w.progress(false)
		}
	}
	if w.buf == nil {
		w.buf = make([]byte, copyChunk)
	}
	for {
		n, err := unix.Read(src, w.buf)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return wrap(rel, err)
		case n == 0:
			return nil
		}
		for b := w.buf[:n]; len(b) > 0; {
			m, err := unix.Write(dst, b)
			switch {
			case errors.Is(err, unix.EINTR):
				continue
			case err != nil:
				return wrapDst(rel, err)
			case m == 0:
				return wrapDst(rel, unix.EIO)
			}
			b = b[m:]
		}
		w.done.Bytes += int64(n)
		if err := w.charge(rel, 0); err != nil {
			return err
		}
		w.progress(false)
	}
}

// charge refuses, with ErrQuota, a copy whose bytes so far plus more
// pass Options.MaxBytes (a file grown since its lstat is caught as it is
// copied, chunk by chunk).
func (w *walker) charge(rel string, more int64) error {
	if w.o.MaxBytes > 0 && w.done.Bytes+more > w.o.MaxBytes {
		return fmt.Errorf("materialize: %s: %w (more than %d bytes of files)", rel, ErrQuota, w.o.MaxBytes)
	}
	return nil
}

func (w *walker) symlink(psrc, pdst int, name, rel string, st *unix.Statx_t) error {
	w.done.Symlinks++
	if pdst < 0 {
		return nil
	}
	// readlinkat never follows: the target is text, copied as text and
	// resolved only inside the sandbox (T1).
	buf := make([]byte, linkMax+1)
	n, err := unix.Readlinkat(psrc, name, buf)
	switch {
	case errors.Is(err, unix.EINVAL):
		return wrap(rel, ErrChanged) // no longer a link (T7)
	case err != nil:
		return wrap(rel, err)
	case n > linkMax:
		return wrap(rel, unix.ENAMETOOLONG)
	}
	if err := unix.Symlinkat(string(buf[:n]), pdst, name); err != nil {
		return wrapDst(rel, err)
	}
	if err := unix.UtimesNanoAt(pdst, name, times(st), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return wrapDst(rel, err)
	}
	return nil
}

// readNames lists a directory (without "." and "..").
func (w *walker) readNames(fd int) ([]string, error) {
	var names []string
	for {
		n, err := unix.Getdents(fd, w.dirents)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return nil, err
		case n <= 0:
			return names, nil
		}
		_, _, names = unix.ParseDirent(w.dirents[:n], -1, names)
		if len(names) > w.o.MaxEntries {
			return nil, fmt.Errorf("%w (%d)", ErrTooManyEntries, w.o.MaxEntries)
		}
	}
}

// progress calls Progress after a file (force) or when at least
// progressStep bytes were copied since the last call.
func (w *walker) progress(force bool) {
	if w.o.Progress == nil {
		return
	}
	if !force && w.done.Bytes-w.reported < progressStep {
		return
	}
	w.reported = w.done.Bytes
	w.o.Progress(w.done, w.o.Total)
}

// checkName rejects names the kernel never returns; checked all the same,
// since a name is used relative to a descriptor and must stay one
// component.
func checkName(name string) error {
	switch {
	case name == "", name == ".", name == "..":
		return ErrName
	case len(name) > nameMax:
		return fmt.Errorf("%w: longer than NAME_MAX", ErrName)
	}
	for i := 0; i < len(name); i++ {
		if name[i] == '/' || name[i] == 0 {
			return ErrName
		}
	}
	return nil
}

func join(rel, name string) string {
	if rel == "." {
		return name
	}
	return rel + "/" + name
}

func isQuota(err error) bool {
	return errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT)
}

// wrap names the relative path only (T6).
func wrap(rel string, err error) error {
	return fmt.Errorf("materialize: %s: %w", rel, err)
}

// wrapDst is wrap for a destination error: out of space wraps ErrQuota.
func wrapDst(rel string, err error) error {
	if isQuota(err) {
		return fmt.Errorf("materialize: %s: %w (%w)", rel, ErrQuota, err)
	}
	return fmt.Errorf("materialize: %s: destination: %w", rel, err)
}

func retry(f func() (int, error)) (int, error) {
	for {
		fd, err := f()
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// mountID identifies the mount an entry is on: the statx mount id where the
// kernel reports it (every kernel since 5.8), and the device number too.
type mountID struct {
	id, major, minor uint64
}

func mountOf(st *unix.Statx_t) mountID {
	m := mountID{major: uint64(st.Dev_major), minor: uint64(st.Dev_minor)}
	if st.Mask&unix.STATX_MNT_ID != 0 {
		m.id = st.Mnt_id
	}
	return m
}

const statxMask = unix.STATX_BASIC_STATS | unix.STATX_MNT_ID

// lstatx stats name in dir without following a link or triggering an
// automount.
func lstatx(dir int, name string, st *unix.Statx_t) error {
	return unix.Statx(dir, name, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT|unix.AT_STATX_SYNC_AS_STAT, statxMask, st)
}

// fstatx stats an open descriptor.
func fstatx(fd int, st *unix.Statx_t) error {
	return unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_STATX_SYNC_AS_STAT, statxMask, st)
}

// times is the access and modification time of st, for utimensat.
func times(st *unix.Statx_t) []unix.Timespec {
	return []unix.Timespec{
		{Sec: st.Atime.Sec, Nsec: int64(st.Atime.Nsec)},
		{Sec: st.Mtime.Sec, Nsec: int64(st.Mtime.Nsec)},
	}
}
