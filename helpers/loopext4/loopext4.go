// SPDX-License-Identifier: Apache-2.0

// Package loopext4 is glove-loopext4: it creates hard-sized ext4 images
// under the materialization root (Create, whose file work, needing no
// capability, its unprivileged formatter does: helpers/loopext4format),
// attaches them to autoclear loop devices and hands back detached mount
// descriptors (Attach), and makes such a mount's file system read-only
// (Freeze). It holds CAP_SYS_ADMIN (loop configuration, fsmount, fspick
// reconfigure) and CAP_DAC_OVERRIDE (to open the root-only
// /dev/loop-control and /dev/loopN).
//
// The supervisor is treated as possibly compromised: every request is
// checked against the operator's bounds (Config) and the identities
// recorded at start-up, and what a request names is only ever looked up
// relative to the helper's own descriptor of the materialization root.
package loopext4

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/loopwire"
	"github.com/glove-sandbox/glove/mountinfo"
	"golang.org/x/sys/unix"
)

// Name is the executable and wire name.
const Name = "glove-loopext4"

// HardMaxImageBytes is the ceiling no configuration may exceed (1 TiB).
const HardMaxImageBytes = 1 << 40

// Config is glove-loopext4's bounds.
type Config struct {
	SchemaVersion int `json:"schema_version"`
	// MaterializationRoot is the only directory images are created in.
	// It must be owned by the service user (the helper's uid), mode 0700.
	MaterializationRoot string `json:"materialization_root"`
	// MaxImageBytes caps each image.
	MaxImageBytes uint64 `json:"max_image_bytes"`
}

// Validate checks the bounds.
func (c *Config) Validate() error {
	if err := helperkit.CheckSchema(c.SchemaVersion); err != nil {
		return err
	}
	if err := helperkit.CheckAbsPath("materialization_root", c.MaterializationRoot); err != nil {
		return err
	}
	return helperkit.CheckRange("max_image_bytes", c.MaxImageBytes, HardMaxImageBytes)
}

// Spec is glove-loopext4 for helperkit.Main.
func Spec() helperkit.Spec {
	cfg := &Config{}
	var h *helper
	return helperkit.Spec{
		Name: Name, Config: cfg, Syscalls: Syscalls, Protocol: loopwire.Protocol,
		Handlers: func(*unix.Ucred) (_ []wire.Handler, err error) {
			if h, err = newHelper(cfg); err != nil {
				return nil, err
			}
			return []wire.Handler{loopwire.Create.Handle(h.create), loopwire.Attach.Handle(h.attach), loopwire.Freeze.Handle(h.freeze)}, nil
		},
		Done: func() error {
			if h == nil {
				return nil
			}
			return h.format.stop()
		},
	}
}

// helper is what start-up opened and recorded, while the calls to do so
// were still allowed.
type helper struct {
	maxImage uint64
	// uid and gid are the service user's: the helper runs as it, images
	// and their file systems' root directories belong to it.
	uid, gid uint32
	// root is an O_PATH descriptor of the materialization root, and
	// rootDev/rootIno its identity: a request's root descriptor must
	// name the same directory, and names are then resolved relative to
	// root, never to the request's descriptor.
	root             *os.File
	rootDev, rootIno uint64
	// loopCtl is /dev/loop-control, opened once.
	loopCtl *os.File
	// mkfs is an O_PATH descriptor of the checked mkfs.ext4, the one
	// executed.
	mkfs *os.File
	// format does Create's file work, mkfs.ext4 included, outside the
	// helper's allowlist (format.go).
	format *formatter
}

// newHelper runs before the helper restricts itself (see helperkit.Spec):
// it opens the materialization root, /dev/loop-control and mkfs.ext4,
// each checked, and starts the formatter; it refuses to start when any
// of them fails.
func newHelper(cfg *Config) (_ *helper, err error) {
	h := &helper{maxImage: cfg.MaxImageBytes, uid: uint32(os.Getuid()), gid: uint32(os.Getgid())}
	defer func() {
		if err != nil {
			for _, f := range []*os.File{h.root, h.loopCtl, h.mkfs} {
				f.Close() // nil for what was not opened: ErrInvalid
			}
		}
	}()
	if h.root, h.rootDev, h.rootIno, err = openRoot(cfg.MaterializationRoot, h.uid); err != nil {
		return nil, err
	}
	if h.loopCtl, err = openLoopControl(); err != nil {
		return nil, err
	}
	if h.mkfs, _, err = findMkfs(); err != nil {
		return nil, err
	}
	if h.format, err = startFormatter(); err != nil {
		return nil, err
	}
	return h, nil
}

// openRoot opens the materialization root and checks it is a directory
// owned by uid with mode 0700. Threat: a root anyone else could write, or
// read, would let them plant or read images; a symbolic link as its last
// component would let whoever owns the link's directory redirect it.
func openRoot(p string, uid uint32) (_ *os.File, dev, ino uint64, err error) {
	fd, err := openDirPath(p)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("open materialization root %s: %w", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	st, err := fstat(fd)
	switch {
	case err != nil:
		err = fmt.Errorf("stat materialization root %s: %w", p, err)
	case st.Uid != uid:
		err = fmt.Errorf("materialization root %s is owned by uid %d, not the service user %d", p, st.Uid, uid)
	case st.Mode&0o7777 != 0o700:
		err = fmt.Errorf("materialization root %s has mode %04o, not 0700", p, st.Mode&0o7777)
	default:
		return f, st.Dev, st.Ino, nil
	}
	f.Close()
	return nil, 0, 0, err
}

// refuse is a request-level refusal: the helper answers and keeps
// serving.
func refuse(code wire.ErrorCode, format string, args ...any) error {
	return &wire.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// checkRequest applies the checks Create and Attach share: the name, and
// that the request's descriptor is the materialization root. Threat: a
// compromised supervisor passes another directory (/tmp, the root's
// parent, a directory it owns elsewhere) to get images made or mounted
// outside the operator's bound.
func (h *helper) checkRequest(op, name string, root *os.File) error {
	if err := validName(name); err != nil {
		return refuse(wire.ErrBadRequest, "%s: %v", op, err)
	}
	st, err := fstat(int(root.Fd()))
	if err != nil {
		return refuse(wire.ErrRefused, "%s: stat the root descriptor: %v", op, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Dev != h.rootDev || st.Ino != h.rootIno {
		return refuse(wire.ErrRefused, "%s: the descriptor is not the materialization root", op)
	}
	return nil
}

// create handles Create: a new image of exactly the requested size,
// allocated, owned by the service user, mode 0600, formatted ext4. The
// request checked, the file work, which needs no capability, is the
// formatter's (loopext4format: create, allocate, format, sync, or remove
// again); the helper checks the image it gets back before it answers.
func (h *helper) create(_ uint32, req *loopwire.CreateRequest, fds []*os.File) (*loopwire.CreateReply, []int, error) {
	const op = "create"
	if err := h.checkRequest(op, req.Name, fds[0]); err != nil {
		return nil, nil, err
	}
	if serr := checkSize(req.SizeBytes, h.maxImage); serr != nil {
		return nil, nil, refuse(serr.Code, "%s %s: %s", op, req.Name, serr.Message)
	}
	// The helper's own descriptor of the root, never the request's.
	img, err := h.format.create(h.root, h.mkfs, req.Name, req.SizeBytes, h.uid, h.gid)
	var e *wire.Error
	if errors.As(err, &e) {
		return nil, nil, refuse(e.Code, "%s %s: %s", op, req.Name, e.Message)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", op, req.Name, err)
	}
	defer img.Close()
	// Threat: the formatter runs as the service user, as the supervisor
	// does, and either could have put anything there. What fails here is
	// left in place (the helper removes nothing) and said in the reply:
	// the supervisor must not take the name for free.
	if err := h.checkNewImage(img, req.Name, req.SizeBytes); errors.As(err, &e) {
		return nil, nil, refuse(e.Code, "%s %s: the formatter's image, left in place: %s", op, req.Name, e.Message)
	} else if err != nil {
		return nil, nil, fmt.Errorf("%s %s: the formatter's image, left in place: %w", op, req.Name, err)
	}
	return &loopwire.CreateReply{}, nil, nil
}

// checkNewImage checks a new image (checkImage) is the file of that name
// in the materialization root, exactly size bytes, backed by allocated
// blocks for all of it. Threat: a sparse image would let the sandbox's
// writes fail with ENOSPC of the host file system instead of its own,
// long after the size was granted.
func (h *helper) checkNewImage(img *os.File, name string, size uint64) error {
	st, err := fstat(int(img.Fd()))
	if err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	if err := h.checkImage(&st, name); err != nil {
		return err
	}
	if uint64(st.Size) != size || uint64(st.Blocks)*512 < size {
		return fmt.Errorf("size is %d with %d bytes allocated, want %d, all allocated", st.Size, st.Blocks*512, size)
	}
	if at, err := lstatAt(int(h.root.Fd()), name); err != nil || at.Dev != st.Dev || at.Ino != st.Ino {
		return refuse(wire.ErrRefused, "image %s is not the file of that name in the materialization root (%v)", name, err)
	}
	return nil
}

// checkImage checks an image's stat: a regular file with one link, owned
// by the service user, mode 0600, on the materialization root's file
// system, its size a non-zero multiple of BlockSize within the bound.
func (h *helper) checkImage(st *unix.Stat_t, name string) error {
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return refuse(wire.ErrRefused, "image %s is not a regular file (mode %06o)", name, st.Mode)
	case st.Nlink != 1:
		return refuse(wire.ErrRefused, "image %s has %d links, not 1", name, st.Nlink)
	case st.Uid != h.uid:
		return refuse(wire.ErrRefused, "image %s is owned by uid %d, not the service user %d", name, st.Uid, h.uid)
	case st.Mode&0o7777 != 0o600:
		return refuse(wire.ErrRefused, "image %s has mode %04o, not 0600", name, st.Mode&0o7777)
	case st.Dev != h.rootDev:
		return refuse(wire.ErrRefused, "image %s is not on the materialization root's file system", name)
	}
	if serr := checkSize(uint64(st.Size), h.maxImage); serr != nil {
		return refuse(wire.ErrRefused, "image %s: %s", name, serr.Message)
	}
	return nil
}

// loopRetries bounds attempts to bind a loop device: another process may
// take the device LOOP_CTL_GET_FREE named before LOOP_CONFIGURE binds it
// (EBUSY), and the helper then asks again.
const loopRetries = 8

// attach handles Attach: the image on a free autoclear loop device,
// mounted, as a detached mount descriptor. The loop device and image
// descriptors are closed before replying; the mount keeps the device
// busy, and when the supervisor's last reference to the mount goes the
// device unbinds itself.
func (h *helper) attach(_ uint32, req *loopwire.AttachRequest, fds []*os.File) (*loopwire.AttachReply, []int, error) {
	const op = "attach"
	if err := h.checkRequest(op, req.Name, fds[0]); err != nil {
		return nil, nil, err
	}
	img, size, err := h.openImage(req.Name, req.ReadOnly)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", op, err)
	}
	defer img.Close()
	// Threat: the same image attached twice read-write is two ext4
	// instances writing one file, which corrupts it under the kernel's
	// feet. The lock lives on the open file description the loop device
	// keeps, so it holds exactly as long as the attachment.
	lock := unix.LOCK_EX
	if req.ReadOnly {
		lock = unix.LOCK_SH
	}
	if err := lockNoWait(int(img.Fd()), lock); errors.Is(err, unix.EWOULDBLOCK) {
		return nil, nil, refuse(wire.ErrRefused, "%s %s: the image is attached already", op, req.Name)
	} else if err != nil {
		return nil, nil, fmt.Errorf("%s %s: lock: %w", op, req.Name, err)
	}
	dev, err := h.bindLoop(img, size, req.ReadOnly)
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", op, req.Name, err)
	}
	// Closing dev before a successful mount unbinds the device
	// (autoclear); after it, the mount holds it.
	defer dev.Close()
	mnt, err := mountExt4(dev.Name(), req.ReadOnly)
	if errors.Is(err, errNotMountable) {
		return nil, nil, refuse(wire.ErrRefused, "%s %s: %v", op, req.Name, err)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", op, req.Name, err)
	}
	// The server sends the mount descriptor and then closes it.
	return &loopwire.AttachReply{}, []int{mnt}, nil
}

// openImage opens an existing image relative to the helper's root, and
// returns it with its size. It first opens it O_PATH (no access, no side
// effect on a FIFO or device, a symbolic link not followed) and checks
// it, and only then reopens that very inode for reading or writing
// through /proc/self/fd, checked again. Threat: with CAP_DAC_OVERRIDE an
// open for writing succeeds on files the service user could not open
// itself (a hard link to a root-owned file, left possible if the
// operator turned fs.protected_hardlinks off); they are refused before
// any such open.
func (h *helper) openImage(name string, readOnly bool) (*os.File, uint64, error) {
	pfd, err := openPathAt(int(h.root.Fd()), name)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, 0, refuse(wire.ErrRefused, "image %s does not exist", name)
	case err != nil:
		return nil, 0, fmt.Errorf("open image %s: %w", name, err)
	}
	defer unix.Close(pfd)
	before, err := fstat(pfd)
	if err != nil {
		return nil, 0, fmt.Errorf("stat image %s: %w", name, err)
	}
	if err := h.checkImage(&before, name); err != nil {
		return nil, 0, err
	}
	flags := unix.O_RDWR
	if readOnly {
		flags = unix.O_RDONLY
	}
	fd, err := reopen(pfd, flags)
	if err != nil {
		return nil, 0, fmt.Errorf("reopen image %s: %w", name, err)
	}
	img := os.NewFile(uintptr(fd), name)
	after, err := fstat(fd)
	if err == nil && (after.Dev != before.Dev || after.Ino != before.Ino) {
		err = errors.New("not the file checked")
	}
	if err == nil {
		err = h.checkImage(&after, name)
	}
	if err != nil {
		img.Close()
		return nil, 0, fmt.Errorf("reopen image %s: %w", name, err)
	}
	return img, uint64(after.Size), nil
}

// bindLoop binds img to a free loop device and returns the device, open.
func (h *helper) bindLoop(img *os.File, size uint64, readOnly bool) (*os.File, error) {
	var err error
	for range loopRetries {
		var n int
		var dev *os.File
		if n, err = loopGetFree(h.loopCtl); err != nil {
			return nil, err
		}
		if dev, err = openLoop(n, unix.O_RDWR); err != nil {
			return nil, err
		}
		if err = loopConfigure(dev, img, size, readOnly); err == nil {
			return dev, nil
		}
		dev.Close()
		if !errors.Is(err, unix.EBUSY) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("bind a loop device: %d attempts: %w", loopRetries, err)
}

// maxMountinfo bounds /proc/self/mountinfo as read by Freeze.
const maxMountinfo = 16 << 20

// maxRootEntries bounds the entries Freeze reads from the
// materialization root looking for the image behind a mount. Threat: the
// service user can fill the directory to make every Freeze slow.
const maxRootEntries = 1 << 16

// freeze handles Freeze: the carried mount's file system made read-only.
// Threat: with CAP_SYS_ADMIN, a read-only reconfigure through a
// descriptor of an attached mount ("/" opened O_PATH by a compromised
// supervisor) would make the host read-only. So the descriptor must be
// (a) the root of a mount that is not in the helper's mount table, i.e.
// detached, (b) ext4, (c) on a loop device whose backing file is an
// image of the materialization root: what Attach made, and nothing else.
func (h *helper) freeze(_ uint32, _ *loopwire.FreezeRequest, fds []*os.File) (*loopwire.FreezeReply, []int, error) {
	const op = "freeze"
	fd := int(fds[0].Fd())
	mi, err := statMount(fd)
	if err != nil {
		return nil, nil, refuse(wire.ErrRefused, "%s: %v", op, err)
	}
	if !mi.mountRoot {
		return nil, nil, refuse(wire.ErrRefused, "%s: the descriptor is not the root of a mount", op)
	}
	es, err := mountinfo.Read("/proc/self/mountinfo", maxMountinfo)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", op, err)
	}
	for _, e := range es {
		if e.ID == mi.mountID {
			return nil, nil, refuse(wire.ErrRefused, "%s: mount %d is attached to the mount table, not a detached image mount", op, mi.mountID)
		}
	}
	if magic, err := fsMagic(fd); err != nil || magic != unix.EXT4_SUPER_MAGIC {
		return nil, nil, refuse(wire.ErrRefused, "%s: the mount is not ext4 (magic %#x, %v)", op, magic, err)
	}
	if mi.devMajor != loopMajor {
		return nil, nil, refuse(wire.ErrRefused, "%s: the mount is on device %d:%d, not a loop device", op, mi.devMajor, mi.devMinor)
	}
	dev, err := openLoop(int(mi.devMinor), unix.O_RDONLY)
	if err != nil {
		return nil, nil, refuse(wire.ErrRefused, "%s: %v", op, err)
	}
	bdev, bino, err := loopBacking(dev)
	dev.Close()
	if err != nil {
		return nil, nil, refuse(wire.ErrRefused, "%s: %v", op, err)
	}
	name, err := h.imageByIdentity(bdev, bino)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", op, err)
	}
	if name == "" {
		return nil, nil, refuse(wire.ErrRefused, "%s: the mount's loop device is not backed by an image of the materialization root", op)
	}
	if err := setReadOnly(fd); err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", op, name, err)
	}
	return &loopwire.FreezeReply{}, nil, nil
}

// imageByIdentity returns the name of the image in the materialization
// root whose device and inode numbers are dev and ino, or "" if none.
func (h *helper) imageByIdentity(dev, ino uint64) (string, error) {
	if dev != h.rootDev {
		return "", nil
	}
	fd, err := openDirAt(int(h.root.Fd()), ".")
	if err != nil {
		return "", fmt.Errorf("open the materialization root: %w", err)
	}
	dir := os.NewFile(uintptr(fd), h.root.Name())
	defer dir.Close()
	for seen := 0; seen < maxRootEntries; {
		names, err := dir.Readdirnames(1024)
		for _, n := range names {
			if validName(n) != nil {
				continue
			}
			if st, err := lstatAt(fd, n); err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG && st.Dev == dev && st.Ino == ino {
				return n, nil
			}
		}
		seen += len(names)
		if errors.Is(err, io.EOF) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("list the materialization root: %w", err)
		}
	}
	return "", fmt.Errorf("the materialization root has more than %d entries", maxRootEntries)
}
