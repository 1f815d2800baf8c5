// SPDX-License-Identifier: Apache-2.0

// Package trustpath walks a path the way a privileged reader must: from a
// descriptor standing for "/", one component at a time, each opened
// O_PATH|O_NOFOLLOW relative to its checked parent, and every object it
// passes owned by one uid and, but for symbolic links, writable by nobody
// else. A helper reads its bounds file this way (ReadFile) and
// glove-loopext4 finds the mkfs.ext4 it executes this way (Walk).
//
// Threat: a file the helper trusts, or any directory above it, that the
// service user (or anyone but its owner) could write would let them
// choose the helper's bounds or the program it executes. Each component
// is opened relative to the descriptor of its checked parent, so a
// rename after a check is never followed, and the caller uses the
// returned descriptor, never the path again.
package trustpath

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrUntrusted marks an object someone other than its owner could have
// written, or placed: a wrong owner, a group- or other-writable mode, a
// symbolic link where none is followed, an object of the wrong kind.
var ErrUntrusted = errors.New("not trusted")

// MaxLinks bounds the symbolic links one walk follows (the kernel's limit).
const MaxLinks = 40

// Walk resolves the absolute path p beneath root and returns an O_PATH
// descriptor of the object it names (not a directory), its resolved path
// and its stat. Every directory walked, every symbolic link followed
// (with follow; without, a link is refused) and the object must be owned
// by owner and, but for links, not writable by group or others. ".."
// climbs to the walked parent and never above root.
func Walk(root *os.File, p string, owner uint32, follow bool) (*os.File, string, unix.Stat_t, error) {
	f, st, err := walk(root, p, owner, follow)
	if err != nil {
		return nil, "", unix.Stat_t{}, fmt.Errorf("resolve %s: %w", p, err)
	}
	return f, f.Name(), st, nil
}

func walk(root *os.File, p string, owner uint32, follow bool) (*os.File, unix.Stat_t, error) {
	var st unix.Stat_t
	if !strings.HasPrefix(p, "/") {
		return nil, st, errors.New("not an absolute path")
	}
	if err := unix.Fstat(int(root.Fd()), &st); err != nil {
		return nil, st, fmt.Errorf("stat /: %w", err)
	}
	if err := check(&st, "/", owner); err != nil {
		return nil, st, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, st, fmt.Errorf("/ is not a directory: %w", ErrUntrusted)
	}
	// stack holds every descriptor opened, from root down with its path;
	// its first entry is root itself, which the caller owns. What is on it
	// above root when walk returns is closed.
	type dir struct {
		fd   int
		name string
	}
	stack := []dir{{int(root.Fd()), ""}}
	pop := func(keep int) {
		for _, d := range stack[keep:] {
			unix.Close(d.fd)
		}
		stack = stack[:keep]
	}
	defer pop(1)
	rest, links := strings.Split(p, "/"), 0
	for len(rest) > 0 {
		c := rest[0]
		if rest = rest[1:]; c == "" || c == "." {
			continue
		} else if c == ".." {
			pop(max(1, len(stack)-1))
			continue
		}
		parent := stack[len(stack)-1]
		name := parent.name + "/" + c
		fd, err := unix.Openat(parent.fd, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, st, fmt.Errorf("open %s: %w", name, err)
		}
		stack = append(stack, dir{fd, name})
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, st, fmt.Errorf("stat %s: %w", name, err)
		}
		if err := check(&st, name, owner); err != nil {
			return nil, st, err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			continue
		case unix.S_IFLNK:
			if !follow {
				return nil, st, fmt.Errorf("%s is a symbolic link, which is not followed here: %w", name, ErrUntrusted)
			}
			if links++; links > MaxLinks {
				return nil, st, fmt.Errorf("more than %d symbolic links: %w", MaxLinks, unix.ELOOP)
			}
			buf := make([]byte, unix.PathMax)
			n, err := unix.Readlinkat(fd, "", buf)
			if err == nil && n >= len(buf) {
				err = unix.ENAMETOOLONG
			}
			if err != nil {
				return nil, st, fmt.Errorf("read link %s: %w", name, err)
			}
			target := string(buf[:n])
			if pop(len(stack) - 1); strings.HasPrefix(target, "/") {
				pop(1)
			}
			rest = append(strings.Split(target, "/"), rest...)
			continue
		}
		for _, r := range rest {
			if r != "" && r != "." {
				return nil, st, fmt.Errorf("%s is not a directory: %w", name, unix.ENOTDIR)
			}
		}
		stack = stack[:len(stack)-1] // the caller's to close
		return os.NewFile(uintptr(fd), name), st, nil
	}
	return nil, st, fmt.Errorf("names a directory: %w", unix.EISDIR)
}

// check checks one object: owned by owner and, unless it is a symbolic
// link (whose mode bits mean nothing; its owner is still checked, so a
// link planted by another user in a sticky directory is refused), not
// writable by group or others.
func check(st *unix.Stat_t, name string, owner uint32) error {
	if st.Uid != owner {
		return fmt.Errorf("%s is owned by uid %d, not %d: %w", name, st.Uid, owner, ErrUntrusted)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK && st.Mode&0o022 != 0 {
		return fmt.Errorf("%s has mode %04o, writable by group or others: %w", name, st.Mode&0o7777, ErrUntrusted)
	}
	return nil
}

// ReadFile reads the regular file p (walked as Walk does, following no
// link) of at most max bytes, through the descriptor whose identity was
// checked (reopened through /proc/self/fd: the very inode Walk checked,
// never a name again), and compares its metadata again after reading.
func ReadFile(root *os.File, p string, owner uint32, max int64) ([]byte, error) {
	obj, _, before, err := Walk(root, p, owner, false)
	if errors.Is(err, unix.EISDIR) || err == nil && before.Mode&unix.S_IFMT != unix.S_IFREG {
		err = fmt.Errorf("%s: not a regular file: %w", p, ErrUntrusted)
	} else if err == nil && before.Size > max {
		err = fmt.Errorf("%s: %d bytes, more than %d", p, before.Size, max)
	}
	if obj != nil {
		defer obj.Close()
	}
	if err != nil {
		return nil, err
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", obj.Fd()), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("reopen %s: %w", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	var after unix.Stat_t
	if err := unix.Fstat(fd, &after); err != nil {
		return nil, fmt.Errorf("stat %s: %w", p, err)
	}
	if int64(len(data)) != before.Size || after.Size != before.Size || after.Mtim != before.Mtim ||
		after.Ctim != before.Ctim || after.Ino != before.Ino || after.Dev != before.Dev {
		return nil, fmt.Errorf("%s changed while it was read", p)
	}
	return data, nil
}
