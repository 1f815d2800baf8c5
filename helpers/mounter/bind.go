package mounter

import (
	"fmt"
	"os"
	"path"
	"runtime"
	"strings"

	"github.com/glove-sandbox/glove/filetype"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/mountwire"
	"golang.org/x/sys/unix"
)

// maxWalk bounds the identity walk. Each step is one openat and one statx;
// a tree deeper than this is refused rather than walked without end.
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
// always, read-only and noexec on request, and private propagation so
// that nothing mounted or unmounted later beneath the source (or in the
// sandbox) propagates between the host and the clone.
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

// bind answers Bind: a detached recursive clone of the source descriptor,
// once the source is shown to lie beneath a source root by identity. The
// server closes the received descriptor.
func (s *server) bind(_ uint32, req *mountwire.BindRequest, fds []*os.File) (*mountwire.BindReply, []int, error) {
	if err := checkBindFlags(req.Flags); err != nil {
		return nil, nil, err
	}
	src, clone, view := int(fds[0].Fd()), cloneTree, s
	if s.fallback {
		// The whole request on one thread, in that thread's copy of the
		// mount namespace (enterPrivateMountNS).
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		roots, err := s.threadRoots()
		if err != nil {
			return nil, nil, err
		}
		defer closeRoots(roots)
		v := *s
		v.roots, view, clone = roots, &v, cloneTreeSetattr
		if src, err = view.localize(src); err != nil {
			return nil, nil, err
		}
		defer unix.Close(src)
	}
	if err := view.checkSource(src); err != nil {
		return nil, nil, err
	}
	mfd, err := clone(src, bindAttr(req.Flags))
	if err != nil {
		return nil, nil, fmt.Errorf("bind: %w", err)
	}
	return &mountwire.BindReply{}, []int{mfd}, nil
}

// sourceIdent stats src and accepts only a directory or a regular file.
// A socket, FIFO or device node is not something to bind into a sandbox,
// and an O_PATH|O_NOFOLLOW descriptor of a symbolic link is the link,
// whose target could be anywhere.
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

// checkSource decides whether the object src refers to lies beneath one
// of the roots, by identity, never by a path the supervisor names:
//
//  1. statx the descriptor itself (sourceIdent).
//  2. From the directory (or, for a file, the directory holding it) walk
//     up with openat(.., "..") and compare each directory's device and
//     inode with the roots'. Every step must stay on the source's mount:
//     ".." at the root of a mount leads into the parent mount, so a source
//     on any other mount than its root's (a bind mount inside a root that
//     leads elsewhere, another file system mounted beneath a root, a mount
//     of another namespace, a detached mount) is refused. This is the
//     supervisor's own openat2 RESOLVE_NO_XDEV rule. Reaching the top
//     ("..": itself) without meeting a root refuses.
//  3. statx the descriptor again: nothing it refers to may have changed
//     while it was checked.
//
// Mount ids are compared while both mounts are pinned by open
// descriptors (the root's and the source's), so an id cannot have been
// freed and reused in between.
func (s *server) checkSource(src int) error {
	si, err := sourceIdent(src)
	if err != nil {
		return err
	}
	dir := src
	if si.mode&unix.S_IFMT == unix.S_IFREG {
		if dir, err = s.parentOf(src, si); err != nil {
			return err
		}
		defer unix.Close(dir)
	}
	if err := s.walk(dir, si.mnt); err != nil {
		return err
	}
	again, err := identOf(src)
	if err != nil {
		return refuse(wire.ErrRefused, "bind: source: %v", err)
	}
	if again != si {
		return refuse(wire.ErrRefused, "bind: source changed while it was checked")
	}
	return nil
}

// walk climbs from directory dir to the top and succeeds when it meets a
// root on mount mnt, which must also be the mount of every directory on
// the way. dir stays open; every directory the walk opens is closed.
func (s *server) walk(dir int, mnt uint64) error {
	cur := dir
	defer func() {
		if cur != dir {
			unix.Close(cur)
		}
	}()
	var prev ident
	for step := 0; ; step++ {
		id, err := identOf(cur)
		if err != nil {
			return refuse(wire.ErrRefused, "bind: walk: %v", err)
		}
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
	}
}

// rootOf returns the root beneath which the kernel's name for src lies
// (read through /proc/self/fd, never a name the supervisor sends) and the
// name relative to it. The name is only a hint, looked up beneath the
// root and checked by identity: a stale or forged one makes the lookup
// miss and the request refused. A name unreachable from this process's
// root, or of no file system object (memfd, anonymous inode), is refused.
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

// parentOf returns an O_PATH descriptor of the directory holding regular
// file src (a file descriptor has no ".."): the directory its kernel name
// names (rootOf), accepted only if the file's name in it leads to the same
// inode on the same mount. The walk from the directory still decides. A
// file reached through a bind mount of the file itself is on another
// mount than its directory and is refused.
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

// threadRoots opens every source root again in the calling thread's
// copy of the mount namespace (fallback mode: each thread has its own),
// by the kernel name recorded at start-up, and accepts each only if it
// is the same directory. The caller closes them (closeRoots).
func (s *server) threadRoots() ([]root, error) {
	var out []root
	for _, r := range s.roots {
		fd, err := openDir(unix.AT_FDCWD, r.name)
		if err != nil {
			closeRoots(out)
			return nil, refuse(wire.ErrRefused, "bind: source root in the helper's mount namespace: %v", err)
		}
		id, err := identOf(fd)
		out = append(out, root{name: r.name, fd: fd, id: id})
		if err != nil || !id.sameObject(r.id) || id.mode != r.id.mode {
			closeRoots(out)
			return nil, refuse(wire.ErrRefused, "bind: a source root is no longer the directory opened at start-up")
		}
	}
	return out, nil
}

func closeRoots(rs []root) {
	for _, r := range rs {
		unix.Close(r.fd)
	}
}

// localize finds the supervisor's source src again in the helper's own
// copy of the mount namespace (fallback mode only: open_tree clones only
// mounts of the caller's namespace), by its kernel name beneath a root
// (rootOf). The object found must be src's (device, inode and type), and
// checkSource then decides on it as on any source.
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
