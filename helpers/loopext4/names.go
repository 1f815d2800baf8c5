package loopext4

import (
	"fmt"
	"strings"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/loopwire"
)

// BlockSize is the granularity of an image size. Sizes are whole 4 KiB
// pages so the loop device, whose size is the file's, never ends inside
// a block of the file system mkfs.ext4 lays out on it.
const BlockSize = 4096

// imageSuffix ends every image name, so nothing else the service user
// keeps in the materialization root can be named in a request.
const imageSuffix = ".img"

// validName checks an image name: [a-z0-9][a-z0-9._-]{0,63}, ending in
// ".img". Threat: the name comes from a possibly compromised supervisor
// and is used relative to the materialization root; a '/' or a ".."
// component would walk out of it, and a leading '.' or '-' could be
// taken for a hidden file or an option. A name is one path component by
// construction.
func validName(name string) error {
	if len(name) == 0 || len(name) > loopwire.MaxImageName {
		return fmt.Errorf("image name is %d bytes, want 1..%d", len(name), loopwire.MaxImageName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return fmt.Errorf("image name %q: byte %d (%q) is outside [a-z0-9._-] or starts the name", name, i, c)
		}
	}
	if !strings.HasSuffix(name, imageSuffix) || len(name) == len(imageSuffix) {
		return fmt.Errorf("image name %q does not end in %q", name, imageSuffix)
	}
	return nil
}

// sizeError says why a size is refused and with which wire code: a
// malformed size is a bad request, a size beyond the operator's bound is
// a refusal.
type sizeError struct {
	code wire.ErrorCode
	msg  string
}

func (e *sizeError) Error() string { return e.msg }

// checkSize checks an image size against the bound: more than zero, a
// whole number of blocks and at most max.
func checkSize(size, max uint64) *sizeError {
	switch {
	case size == 0:
		return &sizeError{wire.ErrBadRequest, "image size is 0"}
	case size%BlockSize != 0:
		return &sizeError{wire.ErrBadRequest, fmt.Sprintf("image size %d is not a multiple of %d", size, BlockSize)}
	case size > max:
		return &sizeError{wire.ErrRefused, fmt.Sprintf("image size %d is over the bound max_image_bytes %d", size, max)}
	}
	return nil
}
