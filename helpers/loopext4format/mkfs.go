// SPDX-License-Identifier: Apache-2.0

package loopext4format

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/glove-sandbox/glove/helpers/wire/formatwire"
)

// Descriptors of the formatting child. The image is its descriptor 3 and
// the checked mkfs.ext4 its descriptor 4, so the program executed is
// /proc/self/fd/4 in the child, whatever numbers the formatter's own
// descriptors have.
const (
	mkfsImageFD = 3
	mkfsExecFD  = 4
)

// maxMkfsStderr bounds what is kept of mkfs.ext4's diagnostics: they go
// into an Error reply of at most wire.MaxErrorLen bytes anyway (the
// server makes the text valid UTF-8 without NUL and cuts it to fit).
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
//   - the image as /proc/self/fd/3: the descriptor the formatter created,
//     not a name the supervisor could swap.
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
// rest, so a chatty or hostile child cannot grow the formatter's memory.
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

// runMkfs runs one formatting child on img with exe, the checked
// mkfs.ext4, and waits for it, at most formatwire.Timeout.
func runMkfs(img, exe *os.File, uid, gid uint32) error {
	ctx, cancel := context.WithTimeout(context.Background(), formatwire.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/proc/self/exe")
	cmd.Args = []string{MkfsName, strconv.FormatUint(uint64(uid), 10), strconv.FormatUint(uint64(gid), 10)}
	cmd.Env = []string{}
	cmd.Dir = "/"
	stderr := &boundedBuffer{max: maxMkfsStderr}
	cmd.Stderr = stderr
	cmd.ExtraFiles = []*os.File{img, exe} // mkfsImageFD, mkfsExecFD
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("run mkfs.ext4: %v: %s", err, stderr)
	}
	return nil
}
