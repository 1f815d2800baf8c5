package loopext4

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/glove-sandbox/glove/trustpath"
	"golang.org/x/sys/unix"
)

// mkfsCandidates are where mkfs.ext4 is looked for, in order. The path is
// fixed here, never taken from the configuration, argv, the environment
// or a request: the helper has it executed, and who chooses the program
// chooses what runs with the service user's authority over every image.
var mkfsCandidates = []string{"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"}

// errUntrusted marks an executable or a directory above it that someone
// other than its owner could have written.
var errUntrusted = trustpath.ErrUntrusted

// findMkfs opens the first of mkfsCandidates that exists.
func findMkfs() (*os.File, string, error) { return findTrusted("mkfs.ext4", mkfsCandidates) }

// findTrusted opens the first of candidates that exists, checked by
// openTrustedExecutable from the real root directory with owner root. A
// candidate that exists but fails the check is an error, not a reason to
// try the next one: the operator must hear that the host is wrong.
func findTrusted(what string, candidates []string) (*os.File, string, error) {
	root, err := os.Open("/")
	if err != nil {
		return nil, "", fmt.Errorf("find %s: open /: %w", what, err)
	}
	defer root.Close()
	for _, p := range candidates {
		f, resolved, err := openTrustedExecutable(root, p, 0)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("find %s: %w", what, err)
		}
		return f, resolved, nil
	}
	return nil, "", fmt.Errorf("find %s: none of %s exists: %w", what, strings.Join(candidates, ", "), unix.ENOENT)
}

// openTrustedExecutable resolves the absolute path p beneath root (a
// directory descriptor standing for "/"), following symbolic links
// itself (trustpath.Walk: every directory walked, every link followed
// and the file owned by owner, none but the links group- or
// other-writable), and returns an O_PATH descriptor of the executable
// regular file it names, with the resolved path.
//
// Threat: this file is executed with the service user's authority over
// every image, and a binary or any directory above it that the service
// user (or anyone but root) could write would let them choose the
// program. The returned descriptor is what is executed, never the path
// again, so swapping the file after the check substitutes nothing.
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
