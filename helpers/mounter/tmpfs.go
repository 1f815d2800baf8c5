// SPDX-License-Identifier: Apache-2.0

package mounter

import (
	"fmt"
	"os"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/mountwire"
	"golang.org/x/sys/unix"
)

// maxTmpfsMode is the widest root mode of a tmpfs: permission bits and
// sticky. Set-id bits are refused: every file created in a set-group-id
// directory inherits its group, which the requester did not choose.
const maxTmpfsMode = 0o1777

// checkTmpfs: ErrBadRequest if malformed, ErrRefused over the caps. The
// size must be a positive multiple of the page size: tmpfs rounds size=
// up to whole pages (a larger quota than asked, maybe than the cap), and
// reads size=0 and nr_inodes=0 as "unlimited".
func checkTmpfs(req *mountwire.TmpfsRequest, cfg *Config, pageSize uint64) error {
	switch {
	case req.Flags&^mountwire.TmpfsAll != 0:
		return refuse(wire.ErrBadRequest, "tmpfs: undefined flags %#x", req.Flags&^mountwire.TmpfsAll)
	case req.Mode&^maxTmpfsMode != 0:
		return refuse(wire.ErrBadRequest, "tmpfs: mode %#o has bits outside %#o (set-id or file type)", req.Mode, maxTmpfsMode)
	case req.SizeBytes == 0 || req.Inodes == 0:
		return refuse(wire.ErrBadRequest, "tmpfs: size or inode limit 0 (tmpfs would read it as unlimited)")
	case req.SizeBytes%pageSize != 0:
		return refuse(wire.ErrBadRequest, "tmpfs: size %d is not a multiple of the page size %d", req.SizeBytes, pageSize)
	}
	return cfg.CheckTmpfsBounds(req.SizeBytes, req.Inodes)
}

// CheckTmpfsBounds refuses (ErrRefused) a tmpfs over max_tmpfs_bytes or
// max_tmpfs_inodes, naming the one bound exceeded (the size's if both)
// and both values; packaging's shipped-bounds test judges profiles with
// it too.
func (c *Config) CheckTmpfsBounds(size, inodes uint64) error {
	if size > c.MaxTmpfsBytes {
		return refuse(wire.ErrRefused, "tmpfs: size %d is over mounter.json's max_tmpfs_bytes %d", size, c.MaxTmpfsBytes)
	} else if inodes > c.MaxTmpfsInodes {
		return refuse(wire.ErrRefused, "tmpfs: inode limit %d is over mounter.json's max_tmpfs_inodes %d", inodes, c.MaxTmpfsInodes)
	}
	return nil
}

// tmpfs answers Tmpfs: a detached tmpfs of exactly the requested size and
// inode limit, its root directory of the requested mode and owned by the
// control socket's peer (SO_PEERCRED at start-up, never an id from the
// request), mounted nosuid,nodev and noexec on request.
func (s *server) tmpfs(_ uint32, req *mountwire.TmpfsRequest, _ []*os.File) (*mountwire.TmpfsReply, []int, error) {
	if err := checkTmpfs(req, s.cfg, s.pageSize); err != nil {
		return nil, nil, err
	}
	attrs := alwaysAttrs
	if req.Flags&mountwire.TmpfsNoExec != 0 {
		attrs |= unix.MOUNT_ATTR_NOEXEC
	}
	mfd, err := newTmpfs([][2]string{
		{"size", fmt.Sprint(req.SizeBytes)}, {"nr_inodes", fmt.Sprint(req.Inodes)},
		{"mode", fmt.Sprintf("0%o", req.Mode)}, {"uid", fmt.Sprint(s.uid)}, {"gid", fmt.Sprint(s.gid)},
	}, attrs)
	if err != nil {
		return nil, nil, fmt.Errorf("tmpfs: %w", err)
	}
	return &mountwire.TmpfsReply{}, []int{mfd}, nil
}
