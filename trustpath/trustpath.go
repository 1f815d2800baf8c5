// Package trustpath walks a path the way a privileged reader must: from a
// descriptor standing for "/", one component at a time, each opened
// O_PATH|O_NOFOLLOW relative to its checked parent, and every object it
// passes owned by one uid and, but for symbolic links, writable by nobody
// else. A helper reads its bounds file this way (helperkit) and
// glove-loopext4 finds the mkfs.ext4 it executes this way.
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
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrUntrusted marks an object someone other than its owner could have
// written, or placed: a wrong owner, a group- or other-writable mode, a
// symbolic link where none is followed, an object of the wrong kind.
var ErrUntrusted = errors.New("not trusted")

// MaxLinks bounds the symbolic links one walk follows (the kernel's own
// limit).
const MaxLinks = 40

// Walk resolves the absolute path p beneath root and returns an O_PATH
// descriptor of the object it names (not a directory), its resolved path
// and its stat. Every directory walked, every symbolic link followed
// (with follow; without, a link is refused) and the object must be owned
// by owner and, but for links, not writable by group or others. ".."
// climbs to the walked parent and never above root.
func Walk(root *os.File, p string, owner uint32, follow bool) (*os.File, string, unix.Stat_t, error) {
	fail := func(err error) (*os.File, string, unix.Stat_t, error) {
		return nil, "", unix.Stat_t{}, fmt.Errorf("resolve %s: %w", p, err)
	}
	if !strings.HasPrefix(p, "/") {
		return fail(errors.New("not an absolute path"))
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(root.Fd()), &st); err != nil {
		return fail(fmt.Errorf("stat /: %w", err))
	}
	if err := Check(&st, "/", owner); err != nil {
		return fail(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fail(fmt.Errorf("/ is not a directory: %w", ErrUntrusted))
	}
	// stack holds the directories from root down; its first entry is
	// root itself, which the caller owns.
	type dir struct {
		fd   int
		name string
	}
	stack := []dir{{int(root.Fd()), ""}}
	defer func() {
		for _, d := range stack[1:] {
			unix.Close(d.fd)
		}
	}()
	where := func(name string) string {
		var b strings.Builder
		for _, d := range stack[1:] {
			b.WriteString("/" + d.name)
		}
		return b.String() + "/" + name
	}
	rest := strings.Split(p, "/")
	links := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(stack) > 1 {
				unix.Close(stack[len(stack)-1].fd)
				stack = stack[:len(stack)-1]
			}
			continue
		}
		name := where(c)
		fd, err := unix.Openat(stack[len(stack)-1].fd, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fail(fmt.Errorf("open %s: %w", name, err))
		}
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return fail(fmt.Errorf("stat %s: %w", name, err))
		}
		if err := Check(&st, name, owner); err != nil {
			unix.Close(fd)
			return fail(err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			if !follow {
				unix.Close(fd)
				return fail(fmt.Errorf("%s is a symbolic link, which is not followed here: %w", name, ErrUntrusted))
			}
			if links++; links > MaxLinks {
				unix.Close(fd)
				return fail(fmt.Errorf("more than %d symbolic links: %w", MaxLinks, unix.ELOOP))
			}
			target, err := readlink(fd)
			unix.Close(fd)
			if err != nil {
				return fail(fmt.Errorf("read link %s: %w", name, err))
			}
			if strings.HasPrefix(target, "/") {
				for _, d := range stack[1:] {
					unix.Close(d.fd)
				}
				stack = stack[:1]
			}
			rest = append(strings.Split(target, "/"), rest...)
		case unix.S_IFDIR:
			stack = append(stack, dir{fd, c})
		default:
			for _, r := range rest {
				if r != "" && r != "." {
					unix.Close(fd)
					return fail(fmt.Errorf("%s is not a directory: %w", name, unix.ENOTDIR))
				}
			}
			return os.NewFile(uintptr(fd), name), name, st, nil
		}
	}
	return fail(fmt.Errorf("names a directory: %w", unix.EISDIR))
}

// Check checks one object: owned by owner and, unless it is a symbolic
// link (whose mode bits mean nothing; its owner is still checked, so a
// link planted by another user in a sticky directory is refused), not
// writable by group or others.
func Check(st *unix.Stat_t, name string, owner uint32) error {
	if st.Uid != owner {
		return fmt.Errorf("%s is owned by uid %d, not %d: %w", name, st.Uid, owner, ErrUntrusted)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK && st.Mode&0o022 != 0 {
		return fmt.Errorf("%s has mode %04o, writable by group or others: %w", name, st.Mode&0o7777, ErrUntrusted)
	}
	return nil
}

// Reopen opens the object of an O_PATH descriptor for reading, through
// /proc/self/fd: the very inode Walk checked, never a name again.
func Reopen(f *os.File) (*os.File, error) {
	fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("reopen %s: %w", f.Name(), err)
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// readlink reads the target of the symbolic link an O_PATH|O_NOFOLLOW
// descriptor refers to.
func readlink(fd int) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", err
	}
	if n >= len(buf) {
		return "", unix.ENAMETOOLONG
	}
	return string(buf[:n]), nil
}
