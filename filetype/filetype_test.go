// SPDX-License-Identifier: Apache-2.0

package filetype

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestName(t *testing.T) {
	for mode, want := range map[uint32]string{
		unix.S_IFREG | 0o644: "regular file", unix.S_IFDIR: "directory", unix.S_IFLNK: "symbolic link",
		unix.S_IFIFO: "named pipe (fifo)", unix.S_IFSOCK: "socket", unix.S_IFCHR: "character device",
		unix.S_IFBLK: "block device", 0: "file of unknown type 0",
	} {
		if got := Name(mode); got != want {
			t.Errorf("Name(%#o) = %q, want %q", mode, got, want)
		}
	}
}
