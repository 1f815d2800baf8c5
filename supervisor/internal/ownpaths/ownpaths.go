// SPDX-License-Identifier: Apache-2.0

// Package ownpaths keeps Glove's own state out of every sandbox: the
// session store, the receipt key, the policy file, the runtime directory
// and the materialization root. A host tree that is one of them, lies
// beneath one, or contains one is refused, compared by identity (device
// and inode) rather than by name, so another name for the same directory
// (a bind mount, a symbolic link, "..") does not get around it.
//
// Threat: a policy alias (or a template's read-only path) covering the
// receipt key hands the sandbox the HMAC authority of every receipt; one
// covering the store or the runtime directory lets it read or forge
// other sessions' records, and the sandbox runs as the service user, who
// owns all of them.
package ownpaths

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// ErrOwn is wrapped by every refusal.
var ErrOwn = errors.New("cannot grant Glove's own state")

// maxDepth bounds a walk up a directory tree (a loop of ".." cannot
// happen, but a bound costs nothing and fails closed).
const maxDepth = 512

// Named is one of Glove's own files or directories.
type Named struct {
	What string // what it is, for the message: "the session store"
	Path string
}

type item struct {
	what string
	f    *os.File // O_PATH
	dev  uint64
	ino  uint64
	dir  bool
}

// Set is Glove's own files and directories, each opened once.
type Set struct {
	items []item
}

// Open opens each named path (O_PATH; an empty path is skipped). The
// paths are the operator's configuration, opened as given.
func Open(named []Named) (*Set, error) {
	s := &Set{}
	for _, n := range named {
		if n.Path == "" {
			continue
		}
		fd, err := unix.Open(n.Path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("own state: open %s: %w", n.What, err)
		}
		f := os.NewFile(uintptr(fd), n.Path)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			f.Close()
			s.Close()
			return nil, fmt.Errorf("own state: stat %s: %w", n.What, err)
		}
		s.items = append(s.items, item{what: n.What, f: f, dev: st.Dev, ino: st.Ino, dir: st.Mode&unix.S_IFMT == unix.S_IFDIR})
	}
	return s, nil
}

// Close closes the descriptors.
func (s *Set) Close() {
	if s == nil {
		return
	}
	for _, it := range s.items {
		it.f.Close()
	}
	s.items = nil
}

// CheckPath opens path (O_PATH, following links as a grant's source
// would be resolved by name) and checks it; a path that does not exist
// holds nothing of Glove's.
func (s *Set) CheckPath(path string) error {
	if s == nil || len(s.items) == 0 {
		return nil
	}
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("own state: open %s: %w", path, err)
	}
	defer unix.Close(fd)
	return s.Check(fd)
}

// Check refuses the host tree open at fd (any kind of descriptor, O_PATH
// included) if it is one of Glove's own files or directories, lies
// beneath one, or contains one.
func (s *Set) Check(fd int) error {
	if s == nil || len(s.items) == 0 {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("own state: stat the tree: %w", err)
	}
	// Is it, or does it lie beneath, one of ours? Its ancestors, from
	// itself up to the root.
	start, err := dirOf(fd, &st)
	if err != nil {
		return err
	}
	for _, it := range s.items {
		if it.dev == st.Dev && it.ino == st.Ino {
			unix.Close(start)
			return fmt.Errorf("%w: the tree is %s", ErrOwn, it.what)
		}
	}
	err = walkUp(start, func(dev, ino uint64) error {
		for _, it := range s.items {
			if it.dir && it.dev == dev && it.ino == ino {
				return fmt.Errorf("%w: the tree lies in %s", ErrOwn, it.what)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// Does it contain one of ours? Only a directory can.
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil
	}
	// Glove's paths share most of their ancestors (all of gloved's state
	// is usually in one directory): a walk that reaches a directory an
	// earlier walk of this same check passed stops there, as the rest of
	// the way up was just compared. Nothing is remembered from one check
	// to the next.
	seen := map[[2]uint64]bool{}
	for _, it := range s.items {
		from, err := dirOf(int(it.f.Fd()), nil)
		if err != nil {
			return err
		}
		err = walkUp(from, func(dev, ino uint64) error {
			if dev == st.Dev && ino == st.Ino {
				return fmt.Errorf("%w: the tree contains %s", ErrOwn, it.what)
			}
			if seen[[2]uint64{dev, ino}] {
				return errWalked
			}
			seen[[2]uint64{dev, ino}] = true
			return nil
		})
		if err != nil && !errors.Is(err, errWalked) {
			return err
		}
	}
	return nil
}

// errWalked stops a walk up at a directory already walked from.
var errWalked = errors.New("already walked from here")

// dirOf returns a new O_PATH descriptor of fd's directory: fd itself for
// a directory, its parent for anything else (found through the name the
// kernel keeps for the descriptor, and confirmed to hold the same inode).
func dirOf(fd int, st *unix.Stat_t) (int, error) {
	var own unix.Stat_t
	if st == nil {
		if err := unix.Fstat(fd, &own); err != nil {
			return -1, fmt.Errorf("own state: stat: %w", err)
		}
		st = &own
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		d, err := unix.Openat(fd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, fmt.Errorf("own state: reopen a directory: %w", err)
		}
		return d, nil
	}
	name, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return -1, fmt.Errorf("own state: name of a file: %w", err)
	}
	d, err := unix.Open(filepath.Dir(name), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("own state: open a file's directory: %w", err)
	}
	var in unix.Stat_t
	if err := unix.Fstatat(d, filepath.Base(name), &in, unix.AT_SYMLINK_NOFOLLOW); err != nil || in.Dev != st.Dev || in.Ino != st.Ino {
		unix.Close(d)
		// Renamed or unlinked since it was opened: cannot tell, so
		// fail closed.
		return -1, fmt.Errorf("%w: cannot find the directory of a file (moved since it was opened)", ErrOwn)
	}
	return d, nil
}

// walkUp calls visit with the identity of dir and of each ancestor up to
// the root, stopping at visit's first error; it closes dir.
func walkUp(dir int, visit func(dev, ino uint64) error) error {
	cur := dir
	defer func() { unix.Close(cur) }()
	// Each directory is stat'ed once, as the parent of the one before
	// (the stat of an open descriptor is that of the directory it names):
	// a launch checks every mount's tree and walks from each of Glove's
	// own paths, so a second stat per level was a quarter of the calls.
	var st unix.Stat_t
	if err := unix.Fstat(cur, &st); err != nil {
		return fmt.Errorf("own state: stat an ancestor: %w", err)
	}
	for range maxDepth {
		if err := visit(st.Dev, st.Ino); err != nil {
			return err
		}
		up, err := unix.Openat(cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("own state: open an ancestor: %w", err)
		}
		var ust unix.Stat_t
		if err := unix.Fstat(up, &ust); err != nil {
			unix.Close(up)
			return fmt.Errorf("own state: stat an ancestor: %w", err)
		}
		if ust.Dev == st.Dev && ust.Ino == st.Ino {
			unix.Close(up)
			return nil // the root is its own parent
		}
		unix.Close(cur)
		cur, st = up, ust
	}
	return fmt.Errorf("%w: a directory more than %d levels deep", ErrOwn, maxDepth)
}
