// SPDX-License-Identifier: Apache-2.0

package loopext4

import (
	"fmt"
	"strings"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/loopwire"
	"github.com/glove-sandbox/glove/names"
)

// BlockSize is the granularity of an image size. Sizes are whole 4 KiB
// pages so the loop device, whose size is the file's, never ends inside
// a block of the file system mkfs.ext4 lays out on it.
const BlockSize = 4096

// imageSuffix ends every image name, so nothing else the service user
// keeps in the materialization root can be named in a request.
const imageSuffix = ".img"

// validName checks an image name: names.IdentifierPattern
// ([a-z0-9][a-z0-9._-]{0,63}, at most loopwire.MaxImageName bytes),
// ending in ".img". Threat: the name comes from a possibly compromised
// supervisor and is used relative to the materialization root; a '/' or
// a ".." component would walk out of it, and a leading '.' or '-' could
// be taken for a hidden file or an option. A name is one path component
// by construction.
func validName(name string) error {
	if !names.Identifier(name) || len(name) > loopwire.MaxImageName {
		return fmt.Errorf("image name %q is not %s of at most %d bytes", name, names.IdentifierPattern, loopwire.MaxImageName)
	}
	if !strings.HasSuffix(name, imageSuffix) { // ".img" alone starts with a dot
		return fmt.Errorf("image name %q does not end in %q", name, imageSuffix)
	}
	return nil
}

// checkSize checks an image size against the bound: more than zero, a
// whole number of blocks and at most max. A malformed size is a bad
// request, a size beyond the operator's bound a refusal.
func checkSize(size, max uint64) *wire.Error {
	switch {
	case size == 0:
		return &wire.Error{Code: wire.ErrBadRequest, Message: "image size is 0"}
	case size%BlockSize != 0:
		return &wire.Error{Code: wire.ErrBadRequest, Message: fmt.Sprintf("image size %d is not a multiple of %d", size, BlockSize)}
	case size > max:
		return &wire.Error{Code: wire.ErrRefused, Message: fmt.Sprintf("image size %d is over the bound max_image_bytes %d", size, max)}
	}
	return nil
}
