package mounter

import (
	"fmt"
	"os"
	"strconv"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/mountwire"
	"golang.org/x/sys/unix"
)

// maxTmpfsMode is the widest root mode a tmpfs may have: permission bits
// and the sticky bit. Set-user-id and set-group-id on the root directory
// are refused: a set-group-id directory makes every file created in it
// inherit the group, which the requester did not choose.
const maxTmpfsMode = 0o1777

// checkTmpfs validates a Tmpfs request against the bounds. Malformed
// requests (undefined flags, a mode outside maxTmpfsMode, a zero or
// unaligned size, zero inodes) are ErrBadRequest; well-formed requests
// over the caps are ErrRefused.
//
// The size must be a positive multiple of the page size: tmpfs rounds
// size= up to whole pages, so an unaligned size would give a larger
// quota than asked (and possibly than the cap). Zero is refused because
// tmpfs reads size=0 and nr_inodes=0 as "unlimited".
func checkTmpfs(req *mountwire.TmpfsRequest, cfg *Config, pageSize uint64) error {
	switch {
	case req.Flags&^mountwire.TmpfsAll != 0:
		return refuse(wire.ErrBadRequest, "tmpfs: undefined flags %#x", req.Flags&^mountwire.TmpfsAll)
	case req.Mode&^maxTmpfsMode != 0:
		return refuse(wire.ErrBadRequest, "tmpfs: mode %#o has bits outside %#o (set-id or file type)", req.Mode, maxTmpfsMode)
	case req.SizeBytes == 0:
		return refuse(wire.ErrBadRequest, "tmpfs: size 0 (tmpfs would read it as unlimited)")
	case req.SizeBytes%pageSize != 0:
		return refuse(wire.ErrBadRequest, "tmpfs: size %d is not a multiple of the page size %d", req.SizeBytes, pageSize)
	case req.Inodes == 0:
		return refuse(wire.ErrBadRequest, "tmpfs: inode limit 0 (tmpfs would read it as unlimited)")
	case req.SizeBytes > cfg.MaxTmpfsBytes:
		return refuse(wire.ErrRefused, "tmpfs: size %d is over the bound %d", req.SizeBytes, cfg.MaxTmpfsBytes)
	case req.Inodes > cfg.MaxTmpfsInodes:
		return refuse(wire.ErrRefused, "tmpfs: inode limit %d is over the bound %d", req.Inodes, cfg.MaxTmpfsInodes)
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
	mfd, err := newTmpfs(tmpfsOptions{
		{"size", strconv.FormatUint(req.SizeBytes, 10)},
		{"nr_inodes", strconv.FormatUint(req.Inodes, 10)},
		{"mode", "0" + strconv.FormatUint(uint64(req.Mode), 8)},
		{"uid", strconv.FormatUint(uint64(s.uid), 10)},
		{"gid", strconv.FormatUint(uint64(s.gid), 10)},
	}, attrs)
	if err != nil {
		return nil, nil, fmt.Errorf("tmpfs: %w", err)
	}
	return &mountwire.TmpfsReply{}, []int{mfd}, nil
}
