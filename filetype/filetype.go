// SPDX-License-Identifier: Apache-2.0

// Package filetype names a file's type from its st_mode, for the one-line
// refusals of the code that checks what it opens (library bundles, staged
// trees, protected files, glove-mounter's bind sources).
package filetype

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Name is the type of mode (an st_mode) in words.
func Name(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFLNK:
		return "symbolic link"
	case unix.S_IFIFO:
		return "named pipe (fifo)"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	}
	return fmt.Sprintf("file of unknown type %#o", mode&unix.S_IFMT)
}
