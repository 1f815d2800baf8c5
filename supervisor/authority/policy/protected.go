// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/glove-sandbox/glove/filetype"
	"golang.org/x/sys/unix"
)

// ErrUnprotected marks a file that fails the protected-file rules: it
// could have been written, swapped or shared by someone other than its
// owner.
var ErrUnprotected = errors.New("file is not protected")

// ReadProtected reads a protected file (reference table "Protected
// files"): a regular file, owned by the current effective uid, mode
// exactly 0600, one hard link, whose final component is not a symbolic
// link, of at most max bytes.
//
// Threats, and the rule that stops each:
//   - another local user edits the policy to widen what a plan may get:
//     owner must be us and the mode exactly 0600 (not 0640, not even
//     0400: the rule is one exact value, so an unusual mode is never
//     mistaken for a safe one, and setuid/setgid/sticky bits are refused);
//   - a second hard link elsewhere (perhaps in a directory others can
//     write) aliases the same inode under weaker protection: nlink must
//     be 1;
//   - a symbolic link planted at the name redirects the read to a file
//     the operator never reviewed: O_NOFOLLOW;
//   - a FIFO or device planted at the name blocks or streams forever:
//     O_NONBLOCK at open, then only a regular file is read, and no more
//     than max+1 bytes;
//   - the file is replaced or rewritten while it is read (time of check
//     against time of use): everything is done through ONE descriptor,
//     and its identity (device, inode) and metadata (size, mtime, ctime,
//     mode, link count) are compared before and after reading; the bytes
//     read must equal the size seen before.
//
// Ancestor directories are not checked here: the operator chooses where
// the policy lives (the runtime directory rules apply to gloved's own
// directories).
func ReadProtected(path string, max int64) ([]byte, error) {
	return ReadProtectedOwnedBy(path, max, os.Geteuid())
}

// ReadProtectedOwnedBy is ReadProtected for a file that must be owned by
// uid rather than by the caller: root checking, before it starts the
// service, a file the service user will read (glove setup service), by
// the very rules gloved will apply to it.
func ReadProtectedOwnedBy(path string, max int64, uid int) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("read protected file %s: final component is a symbolic link: %w: %w", path, ErrUnprotected, err)
		}
		return nil, fmt.Errorf("read protected file %s: open: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var before unix.Stat_t
	if err := unix.Fstat(fd, &before); err != nil {
		return nil, fmt.Errorf("read protected file %s: stat: %w", path, err)
	}
	if err := checkProtected(&before, max, uint32(uid)); err != nil {
		return nil, fmt.Errorf("read protected file %s: %w", path, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read protected file %s: read: %w", path, err)
	}
	var after unix.Stat_t
	if err := unix.Fstat(fd, &after); err != nil {
		return nil, fmt.Errorf("read protected file %s: stat after reading: %w", path, err)
	}
	if !sameFile(&before, &after) || int64(len(data)) != before.Size {
		return nil, fmt.Errorf("read protected file %s: changed while it was read (%d bytes read, size %d then %d): %w",
			path, len(data), before.Size, after.Size, ErrUnprotected)
	}
	return data, nil
}

// checkProtected applies the rules to one stat result.
func checkProtected(st *unix.Stat_t, max int64, uid uint32) error {
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("not a regular file (%s): %w", filetype.Name(st.Mode), ErrUnprotected)
	}
	if st.Uid != uid {
		whose := "uid"
		if uid == uint32(os.Geteuid()) {
			whose = "the current uid"
		}
		return fmt.Errorf("owned by uid %d, not %s %d: %w", st.Uid, whose, uid, ErrUnprotected)
	}
	if perm := st.Mode & 0o7777; perm != 0o600 {
		return fmt.Errorf("mode %04o, want exactly 0600: %w", perm, ErrUnprotected)
	}
	if st.Nlink != 1 {
		return fmt.Errorf("%d hard links, want exactly 1: %w", st.Nlink, ErrUnprotected)
	}
	if st.Size > max {
		return fmt.Errorf("%d bytes, more than the %d allowed: %w", st.Size, max, ErrUnprotected)
	}
	return nil
}

// sameFile compares identity and the metadata a writer would change.
func sameFile(a, b *unix.Stat_t) bool {
	return a.Dev == b.Dev && a.Ino == b.Ino && a.Size == b.Size &&
		a.Mtim == b.Mtim && a.Ctim == b.Ctim && a.Mode == b.Mode && a.Nlink == b.Nlink
}
