package helperkit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// MaxConfigBytes bounds a helper configuration file. Bounds are a few
// lists and numbers; anything larger is not a configuration we wrote.
const MaxConfigBytes = 64 << 10

// ErrUntrusted marks a configuration whose file or an ancestor directory
// could have been written by someone other than its owner.
var ErrUntrusted = errors.New("not trusted")

// ReadTrusted reads root/rel, where rel is a slash-separated relative
// path, after checking that every directory from root down, and the file
// itself, is owned by owner and not writable by group or others, and that
// no component is a symbolic link.
//
// Threat: a helper's bounds decide what a compromised supervisor can make
// it do. If the service user (or anyone but root) could write the file, or
// rename a directory anywhere above it, it could widen those bounds. Each
// component is opened relative to the descriptor of its checked parent
// (O_NOFOLLOW), so a path swapped after a check is never followed; the
// file is read through the one descriptor whose identity was checked, and
// its metadata is compared again after reading.
//
// root must itself be a directory descriptor; production passes "/" and
// owner 0, tests pass a private directory and their own uid.
func ReadTrusted(root *os.File, rel string, owner uint32, max int64) ([]byte, error) {
	if err := checkTrusted(root, "/", owner, true); err != nil {
		return nil, err
	}
	parts := strings.Split(rel, "/")
	for _, p := range parts {
		if p == "" || p == "." || p == ".." {
			return nil, fmt.Errorf("read configuration %q: component %q: %w", rel, p, ErrUntrusted)
		}
	}
	dir := root
	walked := ""
	for _, p := range parts[:len(parts)-1] {
		walked += "/" + p
		fd, err := unix.Openat(int(dir.Fd()), p, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if dir != root {
				dir.Close()
			}
			return nil, fmt.Errorf("open configuration directory %s: %w", walked, err)
		}
		next := os.NewFile(uintptr(fd), walked)
		if dir != root {
			dir.Close()
		}
		dir = next
		if err := checkTrusted(dir, walked, owner, true); err != nil {
			dir.Close()
			return nil, err
		}
	}
	if dir != root {
		defer dir.Close()
	}
	name := parts[len(parts)-1]
	// O_NONBLOCK: a FIFO planted at the name must not hang the helper;
	// it is then refused as not a regular file.
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open configuration %s: %w", rel, err)
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	var before unix.Stat_t
	if err := unix.Fstat(fd, &before); err != nil {
		return nil, fmt.Errorf("stat configuration %s: %w", rel, err)
	}
	if before.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("configuration %s: not a regular file: %w", rel, ErrUntrusted)
	}
	if err := checkStat(&before, "/"+rel, owner, false); err != nil {
		return nil, err
	}
	if before.Size > max {
		return nil, fmt.Errorf("configuration %s: %d bytes, more than %d", rel, before.Size, max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read configuration %s: %w", rel, err)
	}
	var after unix.Stat_t
	if err := unix.Fstat(fd, &after); err != nil {
		return nil, fmt.Errorf("stat configuration %s: %w", rel, err)
	}
	if int64(len(data)) != before.Size || after.Size != before.Size ||
		after.Mtim != before.Mtim || after.Ctim != before.Ctim ||
		after.Ino != before.Ino || after.Dev != before.Dev {
		return nil, fmt.Errorf("configuration %s changed while it was read", rel)
	}
	return data, nil
}

func checkTrusted(f *os.File, name string, owner uint32, dir bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("stat %s: %w", name, err)
	}
	if dir && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s: not a directory: %w", name, ErrUntrusted)
	}
	return checkStat(&st, name, owner, dir)
}

func checkStat(st *unix.Stat_t, name string, owner uint32, dir bool) error {
	kind := "file"
	if dir {
		kind = "directory"
	}
	if st.Uid != owner {
		return fmt.Errorf("%s %s is owned by uid %d, not %d: %w", kind, name, st.Uid, owner, ErrUntrusted)
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("%s %s has mode %04o, writable by group or others: %w", kind, name, st.Mode&0o7777, ErrUntrusted)
	}
	return nil
}
