// SPDX-License-Identifier: Apache-2.0

package loopext4format

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/formatwire"
	"github.com/glove-sandbox/glove/names"
	"golang.org/x/sys/unix"
)

// imageSuffix ends every image name (glove-loopext4's grammar).
const imageSuffix = ".img"

// serveFormat handles Format, a Create's file work, which needs no
// capability and so is done here, not in glove-loopext4: a new image of
// exactly the requested size in the carried materialization root,
// allocated, mode 0600, formatted ext4, its directory entry made
// durable; the reply carries an O_PATH handle of it, which glove-loopext4
// checks before it answers the supervisor. On any failure after the file
// was made, the file is removed again.
func serveFormat(_ uint32, req *formatwire.FormatRequest, fds []*os.File) (_ *formatwire.FormatReply, _ []int, err error) {
	root, exe := fds[0], fds[1]
	if err := checkRequest(req, root, exe); err != nil {
		return nil, nil, err
	}
	dir := int(root.Fd())
	// O_EXCL|O_NOFOLLOW: an existing name, a symbolic link included, is
	// refused, never reused or followed.
	fd, err := createImage(dir, req.Name)
	if errors.Is(err, unix.EEXIST) {
		return nil, nil, &wire.Error{Code: wire.ErrRefused, Message: "the name exists"}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("open: %w", err)
	}
	img := os.NewFile(uintptr(fd), req.Name)
	defer img.Close()
	defer func() {
		// A half-made image that stays is said in the reply: the
		// supervisor must not take the name for free.
		if err != nil {
			if rerr := removeImage(dir, img, req.Name); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
	}()
	if err := allocateAll(fd, req.SizeBytes); err != nil {
		return nil, nil, fmt.Errorf("fallocate %d bytes: %w", req.SizeBytes, err)
	}
	if err := checkAllocated(fd, req.SizeBytes); err != nil {
		return nil, nil, err
	}
	if err := runMkfs(img, exe, req.UID, req.GID); err != nil {
		return nil, nil, err
	}
	// mkfs.ext4 must have left the file as it found it: same size, still
	// allocated (nodiscard).
	if err := checkAllocated(fd, req.SizeBytes); err != nil {
		return nil, nil, fmt.Errorf("after mkfs.ext4: %w", err)
	}
	// The new entry made durable: a retained image must survive a crash
	// of the host as well as of the helper.
	if err := syncDir(dir); err != nil {
		return nil, nil, fmt.Errorf("the materialization root: %w", err)
	}
	// A handle of its own for the reply, which the server closes once
	// sent; img stays this function's to close.
	h, err := reopenPath(fd)
	if err != nil {
		return nil, nil, fmt.Errorf("reopen O_PATH: %w", err)
	}
	return &formatwire.FormatReply{}, []int{h}, nil
}

// checkRequest checks what the formatter is handed before it uses any of
// it, though glove-loopext4 checked it too: the formatter is its own
// boundary. The name is one component of glove-loopext4's grammar
// (names.Identifier ending in ".img", so no '/', "..", hidden file or
// option), the root a directory, mkfs.ext4 a regular file.
func checkRequest(req *formatwire.FormatRequest, root, exe *os.File) error {
	if !names.Identifier(req.Name) || !strings.HasSuffix(req.Name, imageSuffix) {
		return &wire.Error{Code: wire.ErrBadRequest, Message: fmt.Sprintf("image name %q is not %s ending in %q", req.Name, names.IdentifierPattern, imageSuffix)}
	}
	for _, c := range []struct {
		f    *os.File
		what string
		typ  uint32
	}{{root, "the materialization root", unix.S_IFDIR}, {exe, "mkfs.ext4", unix.S_IFREG}} {
		if st, err := fstat(int(c.f.Fd())); err != nil || st.Mode&unix.S_IFMT != c.typ {
			return &wire.Error{Code: wire.ErrRefused, Message: fmt.Sprintf("the descriptor of %s is not of its type (mode %06o, %v)", c.what, st.Mode, err)}
		}
	}
	return nil
}

// checkAllocated checks the image is exactly size bytes, backed by
// allocated blocks for all of it. Threat: a sparse image would let the
// sandbox's writes fail with ENOSPC of the host file system instead of
// its own, long after the size was granted.
func checkAllocated(fd int, size uint64) error {
	st, err := fstat(fd)
	if err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	if uint64(st.Size) != size || uint64(st.Blocks)*512 < size {
		return fmt.Errorf("size is %d with %d bytes allocated, want %d, all allocated", st.Size, st.Blocks*512, size)
	}
	return nil
}

// removeImage unlinks a half-made image, but only if the name still
// refers to the file the formatter created: the service user owns the
// directory and may have renamed something else into place meanwhile
// (then nothing is removed, and that is no error).
func removeImage(dir int, img *os.File, name string) error {
	mine, err := fstat(int(img.Fd()))
	if err != nil {
		return fmt.Errorf("remove the half-made image %s: fstat: %w", name, err)
	}
	now, err := lstatAt(dir, name)
	switch {
	case errors.Is(err, unix.ENOENT) || err == nil && (now.Dev != mine.Dev || now.Ino != mine.Ino):
		return nil
	case err != nil:
		return fmt.Errorf("remove the half-made image %s: stat: %w", name, err)
	}
	if err := unlinkFile(dir, name); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("remove the half-made image %s: %w", name, err)
	}
	return nil
}
