package loopext4

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// mkfsCandidates are where mkfs.ext4 is looked for, in order. The path is
// fixed here, never taken from the configuration, argv, the environment
// or a request: the helper executes it, and who chooses the program
// chooses what runs under the helper's seccomp filter with the service
// user's authority over every image.
var mkfsCandidates = []string{"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"}

// maxSymlinks bounds symbolic links followed while resolving mkfs.ext4
// (the kernel's own limit).
const maxSymlinks = 40

// errUntrusted marks an executable or a directory above it that someone
// other than its owner could have written.
var errUntrusted = errors.New("not trusted")

// findMkfs opens the first of mkfsCandidates that exists, checked by
// openTrustedExecutable from the real root directory with owner root. A
// candidate that exists but fails the check is an error, not a reason to
// try the next one: the operator must hear that the host is wrong.
func findMkfs() (*os.File, string, error) {
	root, err := os.Open("/")
	if err != nil {
		return nil, "", fmt.Errorf("find mkfs.ext4: open /: %w", err)
	}
	defer root.Close()
	var tried []string
	for _, p := range mkfsCandidates {
		f, resolved, err := openTrustedExecutable(root, p, 0)
		if errors.Is(err, unix.ENOENT) {
			tried = append(tried, p)
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("find mkfs.ext4: %w", err)
		}
		return f, resolved, nil
	}
	return nil, "", fmt.Errorf("find mkfs.ext4: none of %s exists: %w", strings.Join(tried, ", "), unix.ENOENT)
}

// openTrustedExecutable resolves the absolute path p beneath root (a
// directory descriptor standing for "/"), following symbolic links
// itself, and returns an O_PATH descriptor of the regular file it names
// with the resolved path. Every directory walked through, every symbolic
// link followed and the file itself must be owned by owner and, for
// directories and the file, not writable by group or others.
//
// Threat: the helper executes this file under its own identity, and a
// binary or any directory above it that the service user (or anyone but
// root) could write would let them choose the program. Each component is
// opened relative to the descriptor of its checked parent with
// O_NOFOLLOW, so a rename after a check is never followed, and the caller
// executes the returned descriptor, never the path again, so swapping the
// file after the check substitutes nothing.
func openTrustedExecutable(root *os.File, p string, owner uint32) (*os.File, string, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, "", fmt.Errorf("resolve %q: not an absolute path", p)
	}
	st, err := fstat(int(root.Fd()))
	if err != nil {
		return nil, "", fmt.Errorf("resolve %s: stat /: %w", p, err)
	}
	if err := checkTrusted(&st, "/", owner, unix.S_IFDIR); err != nil {
		return nil, "", fmt.Errorf("resolve %s: %w", p, err)
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
		fd, err := openPathAt(stack[len(stack)-1].fd, c)
		if err != nil {
			return nil, "", fmt.Errorf("resolve %s: open %s: %w", p, name, err)
		}
		if st, err = fstat(fd); err != nil {
			unix.Close(fd)
			return nil, "", fmt.Errorf("resolve %s: stat %s: %w", p, name, err)
		}
		kind := st.Mode & unix.S_IFMT
		if err := checkTrusted(&st, name, owner, kind); err != nil {
			unix.Close(fd)
			return nil, "", fmt.Errorf("resolve %s: %w", p, err)
		}
		switch kind {
		case unix.S_IFLNK:
			links++
			if links > maxSymlinks {
				unix.Close(fd)
				return nil, "", fmt.Errorf("resolve %s: more than %d symbolic links: %w", p, maxSymlinks, unix.ELOOP)
			}
			target, err := readlinkFD(fd)
			unix.Close(fd)
			if err != nil {
				return nil, "", fmt.Errorf("resolve %s: read link %s: %w", p, name, err)
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
		case unix.S_IFREG:
			for _, r := range rest {
				if r != "" && r != "." {
					unix.Close(fd)
					return nil, "", fmt.Errorf("resolve %s: %s is not a directory: %w", p, name, unix.ENOTDIR)
				}
			}
			if st.Mode&0o111 == 0 {
				unix.Close(fd)
				return nil, "", fmt.Errorf("resolve %s: %s is not executable: %w", p, name, unix.EACCES)
			}
			return os.NewFile(uintptr(fd), name), name, nil
		default:
			unix.Close(fd)
			return nil, "", fmt.Errorf("resolve %s: %s is neither a directory, a regular file nor a symbolic link: %w", p, name, errUntrusted)
		}
	}
	return nil, "", fmt.Errorf("resolve %s: names a directory, not an executable: %w", p, unix.EISDIR)
}

// checkTrusted checks one walked component. A symbolic link's own mode
// bits mean nothing; its owner is checked so that a link planted by
// another user in a sticky directory is refused too.
func checkTrusted(st *unix.Stat_t, name string, owner uint32, kind uint32) error {
	if st.Uid != owner {
		return fmt.Errorf("%s is owned by uid %d, not %d: %w", name, st.Uid, owner, errUntrusted)
	}
	if kind != unix.S_IFLNK && st.Mode&0o022 != 0 {
		return fmt.Errorf("%s has mode %04o, writable by group or others: %w", name, st.Mode&0o7777, errUntrusted)
	}
	return nil
}

// Descriptors of the formatting child. The image is its descriptor 3 and
// the checked mkfs.ext4 its descriptor 4, so the program executed is
// /proc/self/fd/4 in the child, whatever numbers the helper's own
// descriptors have.
const (
	mkfsImageFD = 3
	mkfsExecFD  = 4
)

// mkfsTimeout bounds one format. mkfs.ext4 writes only metadata
// (nodiscard, lazy inode tables), so even a 1 TiB image takes seconds; a
// format that hangs must not wedge the helper for ever.
const mkfsTimeout = 10 * time.Minute

// maxMkfsStderr bounds what is kept of mkfs.ext4's diagnostics: they go
// into an Error reply of at most wire.MaxErrorLen bytes anyway.
const maxMkfsStderr = 1024

// mkfsArgs is the whole command line of mkfs.ext4, fixed:
//
//   - argv[0] "mkfs.ext4" and "-t ext4": mke2fs picks its defaults by
//     the name it runs under, and the binary is executed by descriptor;
//   - "-q": no progress output; "-F": format a regular file without asking;
//   - "-m 0": no blocks reserved for root, whom nothing in a sandbox is;
//   - "-E nodiscard": mke2fs would otherwise "discard" a regular file by
//     punching holes, undoing the allocation that makes the size hard;
//   - "-E root_owner=UID:GID": the file system's root directory belongs to
//     the service user, so the supervisor can use it without privilege;
//   - the image as /proc/self/fd/3: the descriptor the helper created, not
//     a name the supervisor could swap.
//
// Nothing in it comes from a request: the name chooses only the file,
// the size only its length.
func mkfsArgs(uid, gid uint32) []string {
	return []string{
		"mkfs.ext4", "-q", "-F", "-t", "ext4", "-m", "0",
		"-E", "nodiscard,root_owner=" + strconv.FormatUint(uint64(uid), 10) + ":" + strconv.FormatUint(uint64(gid), 10),
		"/proc/self/fd/" + strconv.Itoa(mkfsImageFD),
	}
}

// boundedBuffer keeps the first max bytes written to it and counts the
// rest, so a chatty or hostile child cannot grow the helper's memory.
type boundedBuffer struct {
	buf     []byte
	max     int
	dropped int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	room := min(b.max-len(b.buf), len(p))
	b.buf = append(b.buf, p[:room]...)
	b.dropped += len(p) - room
	return len(p), nil
}

func (b *boundedBuffer) String() string {
	s := strings.TrimSpace(string(b.buf))
	if b.dropped > 0 {
		s += fmt.Sprintf(" [%d more bytes]", b.dropped)
	}
	return s
}
