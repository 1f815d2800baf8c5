package helperkit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/glove-sandbox/glove/trustpath"
	"golang.org/x/sys/unix"
)

// MaxConfigBytes bounds a helper configuration file. Bounds are a few
// lists and numbers; anything larger is not a configuration we wrote.
const MaxConfigBytes = 64 << 10

// ErrUntrusted marks a configuration whose file or an ancestor directory
// could have been written by someone other than its owner.
var ErrUntrusted = trustpath.ErrUntrusted

// ReadTrusted reads root/rel, where rel is a slash-separated relative
// path, after checking that every directory from root down, and the file
// itself, is owned by owner and not writable by group or others, and that
// no component is a symbolic link (trustpath.Walk).
//
// Threat: a helper's bounds decide what a compromised supervisor can make
// it do. If the service user (or anyone but root) could write the file, or
// rename a directory anywhere above it, it could widen those bounds. The
// file is read through the one descriptor whose identity was checked, and
// its metadata is compared again after reading.
//
// root must itself be a directory descriptor; production passes "/" and
// owner 0, tests pass a private directory and their own uid.
func ReadTrusted(root *os.File, rel string, owner uint32, max int64) ([]byte, error) {
	for _, p := range strings.Split(rel, "/") {
		if p == "" || p == "." || p == ".." {
			return nil, fmt.Errorf("read configuration %q: component %q: %w", rel, p, ErrUntrusted)
		}
	}
	obj, _, before, err := trustpath.Walk(root, "/"+rel, owner, false)
	if errors.Is(err, unix.EISDIR) {
		return nil, fmt.Errorf("configuration %s: not a regular file: %w", rel, ErrUntrusted)
	}
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	defer obj.Close()
	if before.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("configuration %s: not a regular file: %w", rel, ErrUntrusted)
	}
	if before.Size > max {
		return nil, fmt.Errorf("configuration %s: %d bytes, more than %d", rel, before.Size, max)
	}
	f, err := trustpath.Reopen(obj)
	if err != nil {
		return nil, fmt.Errorf("configuration %s: %w", rel, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read configuration %s: %w", rel, err)
	}
	var after unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &after); err != nil {
		return nil, fmt.Errorf("stat configuration %s: %w", rel, err)
	}
	if int64(len(data)) != before.Size || after.Size != before.Size ||
		after.Mtim != before.Mtim || after.Ctim != before.Ctim ||
		after.Ino != before.Ino || after.Dev != before.Dev {
		return nil, fmt.Errorf("configuration %s changed while it was read", rel)
	}
	return data, nil
}
