// SPDX-License-Identifier: Apache-2.0

package mounter

import (
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/glove-sandbox/glove/filetype"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/mountwire"
	"golang.org/x/sys/unix"
)

// maxWalk bounds the identity walk: a deeper source is refused.
const maxWalk = 4096

// checkBindFlags refuses undefined flag bits: a bit this helper does not
// know could be one a newer supervisor meant as a restriction, and
// ignoring it would hand out a mount with less protection than asked.
func checkBindFlags(flags uint32) error {
	if flags&^mountwire.BindAll != 0 {
		return refuse(wire.ErrBadRequest, "bind: undefined flags %#x", flags&^mountwire.BindAll)
	}
	return nil
}

// bindAttr is what every mount of the clone gets: nosuid and nodev
// always, read-only and noexec on request, and private propagation (no
// later mount or unmount propagates between the host and the clone).
func bindAttr(flags uint32) *unix.MountAttr {
	set := uint64(alwaysAttrs)
	if flags&mountwire.BindReadOnly != 0 {
		set |= unix.MOUNT_ATTR_RDONLY
	}
	if flags&mountwire.BindNoExec != 0 {
		set |= unix.MOUNT_ATTR_NOEXEC
	}
	return &unix.MountAttr{Attr_set: set, Propagation: unix.MS_PRIVATE}
}

// bind answers Bind: a detached recursive clone of the source, once it
// is shown to lie beneath a source root by identity. The server closes
// the received descriptor.
func (s *server) bind(_ uint32, req *mountwire.BindRequest, fds []*os.File) (*mountwire.BindReply, []int, error) {
	if err := checkBindFlags(req.Flags); err != nil {
		return nil, nil, err
	}
	src, clone := int(fds[0].Fd()), cloneTree
	if s.fallback {
		local, err := s.localize(src)
		if err != nil {
			return nil, nil, err
		}
		defer unix.Close(local)
		src, clone = local, cloneTreeSetattr
	}
	if err := s.checkSource(src); err != nil {
		return nil, nil, err
	}
	mfd, err := clone(src, bindAttr(req.Flags))
	if err != nil {
		return nil, nil, fmt.Errorf("bind: %w", err)
	}
	return &mountwire.BindReply{}, []int{mfd}, nil
}

// sourceIdent stats src, accepting only a directory or a regular file: a
// socket, FIFO or device node is not something to bind into a sandbox,
// and an O_PATH|O_NOFOLLOW symbolic link's target could be anywhere.
func sourceIdent(src int) (ident, error) {
	si, err := identOf(src)
	if err != nil {
		return si, refuse(wire.ErrRefused, "bind: source: %v", err)
	}
	if t := si.mode & unix.S_IFMT; t != unix.S_IFDIR && t != unix.S_IFREG {
		return si, refuse(wire.ErrRefused, "bind: source is a %s, not a directory or regular file", filetype.Name(uint32(si.mode)))
	}
	return si, nil
}

// checkSource decides whether src lies beneath a root by identity, never
// by a path the supervisor names: sourceIdent; from the directory (or the
// one holding a file, parentOf) walk up, comparing each directory's device
// and inode with the roots'; statx src again, which must not have changed.
// Every step must stay on the source's mount: ".." at a mount's root leads
// into the parent mount, so a source on another mount than its root's (a
// bind mount inside a root leading elsewhere, a file system mounted
// beneath a root, a mount of another namespace, a detached mount) is
// refused, as the supervisor's RESOLVE_NO_XDEV would. Mount ids are
// compared while both mounts are pinned by open descriptors (root's and
// source's), so no id can be freed and reused in between.
func (s *server) checkSource(src int) error {
	si, err := sourceIdent(src)
	if err != nil {
		return err
	}
	dir, dirID := src, si
	if si.mode&unix.S_IFMT == unix.S_IFREG {
		if dir, err = s.parentOf(src, si); err != nil {
			return err
		}
		defer unix.Close(dir)
		if dirID, err = identOf(dir); err != nil {
			return refuse(wire.ErrRefused, "bind: walk: %v", err)
		}
	}
	if err := s.walk(dir, dirID, si.mnt); err != nil {
		return err
	}
	if again, err := identOf(src); err != nil || again != si {
		return refuse(wire.ErrRefused, "bind: source changed or vanished while it was checked")
	}
	return nil
}

// walk climbs from directory dir, of identity id, and succeeds when it
// meets a root on mount mnt, the mount of every directory on the way;
// reaching the top ("..": itself) refuses. It closes what it opens, never
// dir. The caller stats dir (for a directory source, sourceIdent's statx
// of the very descriptor: the mount and inode a descriptor refers to never
// change, so a second statx here could only repeat them, issue 19); every
// directory the walk opens it stats itself, through the descriptor it
// climbs from next, so a rename cannot slip another directory in between.
func (s *server) walk(dir int, id ident, mnt uint64) error {
	cur := dir
	defer func() {
		if cur != dir {
			unix.Close(cur)
		}
	}()
	var prev ident
	for step := 0; ; step++ {
		if step > 0 && id.sameObject(prev) {
			return refuse(wire.ErrRefused, "bind: source is outside every source root")
		}
		if id.mnt != mnt {
			return refuse(wire.ErrRefused, "bind: source is not on the mount of a source root (the walk up leaves mount %d for %d)", mnt, id.mnt)
		}
		for _, r := range s.roots {
			if id.sameObject(r.id) {
				if r.id.mnt != id.mnt {
					return refuse(wire.ErrRefused, "bind: source reaches a source root through another mount (%d, not %d)", id.mnt, r.id.mnt)
				}
				return nil
			}
		}
		if step == maxWalk {
			return refuse(wire.ErrRefused, "bind: source lies more than %d directories deep", maxWalk)
		}
		up, err := openDir(cur, "..")
		if err != nil {
			return refuse(wire.ErrRefused, "bind: walk up: %v", err)
		}
		if cur != dir {
			unix.Close(cur)
		}
		cur, prev = up, id
		if id, err = identOf(cur); err != nil {
			return refuse(wire.ErrRefused, "bind: walk: %v", err)
		}
	}
}

// rootOf returns the root beneath which the kernel's name for src lies
// (/proc/self/fd, never a name the supervisor sends) and the name relative
// to it: a hint only, looked up beneath the root and checked by identity,
// so a stale or forged one misses and refuses. No name (memfd, anonymous
// inode, unreachable) refuses.
func (s *server) rootOf(src int) (root, string, error) {
	name, err := fdName(s.procFD, src)
	if err != nil {
		return root{}, "", refuse(wire.ErrRefused, "bind: source: %v", err)
	}
	for _, r := range s.roots {
		if rel, ok := beneathPath(r.name, name); ok {
			return r, rel, nil
		}
	}
	return root{}, "", refuse(wire.ErrRefused, "bind: source is outside every source root")
}

// parentOf opens the directory holding regular file src (which has no
// ".."), by its name (rootOf), accepted only if the file's name in it
// leads to the same inode on the same mount: a file bind-mounted over
// another is on another mount than its directory and is refused.
func (s *server) parentOf(src int, si ident) (int, error) {
	r, rel, err := s.rootOf(src)
	if err != nil {
		return -1, err
	}
	pfd, err := openDir(r.fd, path.Dir(rel))
	if err != nil {
		return -1, refuse(wire.ErrRefused, "bind: source file's directory: %v", err)
	}
	if bi, err := identAt(pfd, path.Base(rel)); err != nil || !bi.sameObject(si) || bi.mnt != si.mnt {
		unix.Close(pfd)
		return -1, refuse(wire.ErrRefused, "bind: source file is not the file its name leads to beneath a source root")
	}
	return pfd, nil
}

// localize finds the supervisor's source src again in the helper's copy
// of the mount namespace (fallback: open_tree clones only mounts of the
// caller's), by its name (rootOf); it must be src's object (device, inode
// and type), and checkSource decides on it as on any source.
func (s *server) localize(src int) (int, error) {
	si, err := sourceIdent(src)
	if err != nil {
		return -1, err
	}
	r, rel, err := s.rootOf(src)
	if err != nil {
		return -1, err
	}
	open := openDir
	if si.mode&unix.S_IFMT == unix.S_IFREG {
		open = openFile
	}
	fd, err := open(r.fd, rel)
	if err != nil {
		return -1, refuse(wire.ErrRefused, "bind: source in the helper's mount namespace: %v", err)
	}
	if li, err := identOf(fd); err != nil || !li.sameObject(si) || li.mode != si.mode {
		unix.Close(fd)
		return -1, refuse(wire.ErrRefused, "bind: source is not the object its name leads to beneath a source root")
	}
	return fd, nil
}

// beneathPath returns dir relative to rootPath when dir is rootPath or
// lies beneath it (both absolute kernel names).
func beneathPath(rootPath, dir string) (string, bool) {
	if dir == rootPath {
		return ".", true
	}
	if rel, ok := strings.CutPrefix(dir, strings.TrimSuffix(rootPath, "/")+"/"); ok {
		return rel, true
	}
	return "", false
}
