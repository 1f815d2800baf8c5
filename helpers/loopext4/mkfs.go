package loopext4

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/glove-sandbox/glove/trustpath"
	"golang.org/x/sys/unix"
)

// mkfsCandidates are where mkfs.ext4 is looked for, in order. The path is
// fixed here, never taken from the configuration, argv, the environment
// or a request: the helper executes it, and who chooses the program
// chooses what runs under the helper's seccomp filter with the service
// user's authority over every image.
var mkfsCandidates = []string{"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"}

// errUntrusted marks an executable or a directory above it that someone
// other than its owner could have written.
var errUntrusted = trustpath.ErrUntrusted

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
// itself (trustpath.Walk: every directory walked, every link followed
// and the file owned by owner, none but the links group- or
// other-writable), and returns an O_PATH descriptor of the executable
// regular file it names, with the resolved path.
//
// Threat: the helper executes this file under its own identity, and a
// binary or any directory above it that the service user (or anyone but
// root) could write would let them choose the program. The caller
// executes the returned descriptor, never the path again, so swapping
// the file after the check substitutes nothing.
func openTrustedExecutable(root *os.File, p string, owner uint32) (*os.File, string, error) {
	f, name, st, err := trustpath.Walk(root, p, owner, true)
	if err != nil {
		return nil, "", err
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		f.Close()
		return nil, "", fmt.Errorf("resolve %s: %s is not a regular file: %w", p, name, errUntrusted)
	case st.Mode&0o111 == 0:
		f.Close()
		return nil, "", fmt.Errorf("resolve %s: %s is not executable: %w", p, name, unix.EACCES)
	}
	return f, name, nil
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
