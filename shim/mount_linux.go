package shim

// The privileged calls of stage 1: every mount of the sandbox is made here,
// from descriptors, in mount namespace 1 (owned by user namespace 1, whose
// root is the invoking user). Rerun shim's TestShim* and TestAttack* after
// any change to the order of these calls.

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// resolveHow resolves a path inside the new root: beneath it, through no
// symlink and no magic link, so a symlink planted in a root or a writable
// mount can never redirect a mount point to the host.
var resolveHow = unix.OpenHow{
	Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
	Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
}

// buildRoot returns a descriptor for the root of the new tree, with every
// mount attached and /proc masked.
func buildRoot(p *Plan) (int, error) {
	// Nothing mounted from here on may propagate back to the host's tree.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return -1, fmt.Errorf("make / private: %w", err)
	}
	// The root is a clone of root.path ("bind", not "rbind": no host
	// submount under it comes along), or a tmpfs (RootTmpfs), attached on
	// top of root.path so that it is a mount pivot_root accepts.
	rootDir, err := openHost(p.RootPath, p.RootIdent, true)
	if err != nil {
		return -1, fmt.Errorf("root %s: %w", p.RootPath, err)
	}
	defer unix.Close(rootDir)
	var root int
	if p.RootTmpfs {
		// A tmpfs of its own, so that mountinfo names "/" as the root's
		// source rather than root.path on the host. It holds only mount
		// points (empty directories and files) and is made read-only
		// below (plan validation requires it), hence the small bounds.
		root, err = fsmount("tmpfs", [][2]string{{"mode", "0755"}, {"size", "1m"}, {"nr_inodes", "16384"}},
			unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	} else {
		root, err = unix.OpenTree(rootDir, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
		if err != nil {
			err = fmt.Errorf("open_tree: %w", err)
		}
	}
	if err != nil {
		return -1, fmt.Errorf("root: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			unix.Close(root)
		}
	}()
	if err := unix.MoveMount(root, "", rootDir, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return -1, fmt.Errorf("root: move_mount: %w", err)
	}
	for _, e := range p.RootEntries {
		if e.Dir {
			err = unix.Mkdirat(root, e.Name, 0o755)
		} else {
			err = unix.Symlinkat(e.Link, root, e.Name)
		}
		if err != nil {
			return -1, fmt.Errorf("root: make %s: %w", e.Name, err)
		}
	}
	devNull, err := unix.Open("/dev/null", unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return -1, fmt.Errorf("open /dev/null: %w", err)
	}
	defer unix.Close(devNull)
	var st unix.Stat_t
	if err := unix.Fstat(devNull, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != unix.Mkdev(1, 3) {
		return -1, fmt.Errorf("/dev/null is not the null device (%v)", err)
	}
	staged, err := stageShared(root, p.Mounts)
	if err != nil {
		return -1, err
	}
	for i, m := range p.Mounts {
		if err := attach(root, m); err != nil {
			return -1, fmt.Errorf("mounts[%d] %s: %w", i, m.Destination, err)
		}
		if m.SourceFD >= 0 && m.SourceSub == "" {
			// A consumed source descriptor is closed at once: it must not
			// reach stage 2, let alone the program.
			unix.Close(m.SourceFD)
		}
		if m.Destination == "/dev" && m.Kind == kindTmpfs {
			if err := devLinks(root, p); err != nil {
				return -1, err
			}
		}
	}
	if err := unstage(root, staged); err != nil {
		return -1, err
	}
	if !p.off(LayerProcMask) {
		for _, path := range p.Masked {
			if err := mask(root, path, devNull); err != nil {
				return -1, fmt.Errorf("linux.maskedPaths %s: %w", path, err)
			}
		}
		for _, path := range p.Readonly {
			if err := readonly(root, path); err != nil {
				return -1, fmt.Errorf("linux.readonlyPaths %s: %w", path, err)
			}
		}
	}
	if p.RootReadonly {
		if err := unix.MountSetattr(root, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return -1, fmt.Errorf("root: make read-only: %w", err)
		}
	}
	ok = true
	return root, nil
}

// stageShared attaches each descriptor that mounts name directories
// beneath (SourceSub) at a directory of its own in the root being built:
// a detached mount cannot be cloned from, an attached one can (before
// 6.15). It returns the staging directories' names by descriptor.
func stageShared(root int, mounts []MountPlan) (map[int]string, error) {
	staged := map[int]string{}
	for _, m := range mounts {
		if m.SourceSub == "" || staged[m.SourceFD] != "" {
			continue
		}
		name := fmt.Sprintf(".glove-stage-%d", m.SourceFD)
		if err := unix.Mkdirat(root, name, 0o700); err != nil {
			return nil, fmt.Errorf("stage descriptor %d: mkdir: %w", m.SourceFD, err)
		}
		staged[m.SourceFD] = name
		dir, err := unix.Openat2(root, name, &resolveHow)
		if err != nil {
			return nil, fmt.Errorf("stage descriptor %d: %w", m.SourceFD, err)
		}
		err = unix.MoveMount(m.SourceFD, "", dir, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
		unix.Close(dir)
		if err != nil {
			return nil, fmt.Errorf("stage descriptor %d (a path beneath it needs a detached mount): move_mount: %w", m.SourceFD, err)
		}
	}
	return staged, nil
}

// unstage detaches each staged mount once every clone is attached,
// closes its descriptor and removes its directory, so that neither the
// whole shared mount nor its descriptor reaches the sandbox.
func unstage(root int, staged map[int]string) error {
	for fd, name := range staged {
		if err := unix.Unmount(fmt.Sprintf("/proc/self/fd/%d", fd), unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unstage descriptor %d: umount: %w", fd, err)
		}
		unix.Close(fd)
		if err := unix.Unlinkat(root, name, unix.AT_REMOVEDIR); err != nil {
			return fmt.Errorf("unstage descriptor %d: rmdir: %w", fd, err)
		}
	}
	return nil
}

// attach makes one mount as a detached mount and moves it onto its
// destination.
func attach(root int, m MountPlan) error {
	var mfd int
	var err error
	switch {
	case m.Kind == kindBind && m.SourceSub != "":
		// Beneath a staged mount (stageShared): its descriptor names the
		// attached mount's root now, and the directory is cloned alone.
		sub, err := unix.Openat2(m.SourceFD, m.SourceSub, &subHow)
		if err != nil {
			return fmt.Errorf("source %s: openat2: %w", m.SourceSub, err)
		}
		mfd, err = unix.OpenTree(sub, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
		unix.Close(sub)
		if err != nil {
			return fmt.Errorf("source %s: open_tree: %w", m.SourceSub, err)
		}
		defer unix.Close(mfd)
		if err := setattr(mfd, unix.AT_EMPTY_PATH, m.Attr); err != nil {
			return err
		}
	case m.Kind == kindBind:
		flags := uint(unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC | unix.AT_EMPTY_PATH)
		setFlags := uint(unix.AT_EMPTY_PATH)
		if m.Recursive {
			flags |= unix.AT_RECURSIVE
			setFlags |= unix.AT_RECURSIVE
		}
		src := m.SourceFD
		if src < 0 {
			if src, err = openHost(m.SourcePath, m.SourceIdent, !m.FileTarget); err != nil {
				return fmt.Errorf("source %s: %w", m.SourcePath, err)
			}
			defer unix.Close(src)
		}
		mfd, err = unix.OpenTree(src, "", flags)
		if errors.Is(err, unix.EINVAL) && m.SourceFD >= 0 {
			// A detached mount made by glove-mounter lives in no mount
			// namespace this stage may clone from: it is attached as it
			// is, then given its attributes where it stands.
			return attachDetached(root, m, setFlags)
		}
		if err != nil {
			return fmt.Errorf("open_tree: %w", err)
		}
		defer unix.Close(mfd)
		if err := setattr(mfd, setFlags, m.Attr); err != nil {
			return err
		}
	default:
		if mfd, err = fsmount(m.Kind, m.Config, m.Attr); err != nil {
			return err
		}
		defer unix.Close(mfd)
	}
	target, err := mountPoint(root, m.Destination, m.FileTarget)
	if err != nil {
		return err
	}
	defer unix.Close(target)
	if err := unix.MoveMount(mfd, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// attachDetached moves a detached mount received as a descriptor onto its
// destination, then sets the attributes on the attached mount.
func attachDetached(root int, m MountPlan, setFlags uint) error {
	target, err := mountPoint(root, m.Destination, m.FileTarget)
	if err != nil {
		return err
	}
	defer unix.Close(target)
	if err := unix.MoveMount(m.SourceFD, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount (detached): %w", err)
	}
	// The descriptor now names the attached mount's root.
	return setattr(m.SourceFD, setFlags, m.Attr)
}

// openHost opens a host path in this stage's copy of the mount tree, with
// the restrictions stage 0 used, and checks that it is the file stage 0
// checked.
func openHost(path string, want Ident, dir bool) (int, error) {
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return -1, fmt.Errorf("openat2: %w", err)
	}
	got, err := identify(fd, dir)
	if err == nil && got != want {
		err = errors.New("changed since glove-shim checked it")
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// setattr sets attr on a detached mount. The attributes are only ever
// added: a source that is read-only (a helper's read-only bind) stays so
// whatever the bundle says.
func setattr(mfd int, flags uint, attr uint64) error {
	if attr == 0 {
		return nil
	}
	a := unix.MountAttr{Attr_set: attr}
	if attr&(unix.MOUNT_ATTR_NOATIME|unix.MOUNT_ATTR_STRICTATIME) != 0 {
		a.Attr_clr = unix.MOUNT_ATTR__ATIME
	}
	if err := unix.MountSetattr(mfd, "", flags, &a); err != nil {
		return fmt.Errorf("mount_setattr %#x: %w", attr, err)
	}
	return nil
}

// fsmount creates a filesystem of kind with the given parameters.
func fsmount(kind string, config [][2]string, attr uint64) (int, error) {
	fs, err := unix.Fsopen(kind, unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsopen %s: %w", kind, err)
	}
	defer unix.Close(fs)
	for _, kv := range config {
		if err := unix.FsconfigSetString(fs, kv[0], kv[1]); err != nil {
			return -1, fmt.Errorf("fsconfig %s=%s: %w", kv[0], kv[1], err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, fmt.Errorf("fsconfig create %s: %w", kind, err)
	}
	// fsmount takes the atime mode as a value, not as flags to clear.
	mfd, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, int(attr))
	if err != nil {
		return -1, fmt.Errorf("fsmount %s: %w", kind, err)
	}
	return mfd, nil
}

// mountPoint opens (creating if missing) the mount point of dest beneath
// root: directories all the way, and a file at the end when the source is
// not a directory.
func mountPoint(root int, dest string, file bool) (int, error) {
	comps := strings.Split(strings.TrimPrefix(dest, "/"), "/")
	cur := root
	for i, c := range comps {
		last := i == len(comps)-1
		fd, err := unix.Openat2(cur, c, &resolveHow)
		if errors.Is(err, unix.ENOENT) {
			if last && file {
				var f int
				f, err = unix.Openat(cur, c, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o644)
				if err == nil {
					unix.Close(f)
				}
			} else {
				err = unix.Mkdirat(cur, c, 0o755)
			}
			if err != nil && !errors.Is(err, unix.EEXIST) {
				closeUnlessRoot(cur, root)
				return -1, fmt.Errorf("create mount point %s: %w", c, err)
			}
			fd, err = unix.Openat2(cur, c, &resolveHow)
		}
		closeUnlessRoot(cur, root)
		if err != nil {
			return -1, fmt.Errorf("open mount point %s: %w", c, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("fstat %s: %w", c, err)
		}
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		if (!last || !file) && !isDir {
			unix.Close(fd)
			return -1, fmt.Errorf("mount point %s: not a directory", c)
		}
		if last && file && isDir {
			unix.Close(fd)
			return -1, fmt.Errorf("mount point %s: a directory, but the source is not one", c)
		}
		cur = fd
	}
	return cur, nil
}

func closeUnlessRoot(fd, root int) {
	if fd != root {
		unix.Close(fd)
	}
}

// openExisting opens path beneath root; ok is false when it does not exist.
func openExisting(root int, path string) (fd int, isDir bool, ok bool, err error) {
	fd, err = unix.Openat2(root, strings.TrimPrefix(path, "/"), &resolveHow)
	if errors.Is(err, unix.ENOENT) {
		return -1, false, false, nil
	}
	if err != nil {
		return -1, false, false, fmt.Errorf("openat2: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, false, false, fmt.Errorf("fstat: %w", err)
	}
	return fd, st.Mode&unix.S_IFMT == unix.S_IFDIR, true, nil
}

// mask hides path: a directory under an empty read-only tmpfs, a file
// under a read-only /dev/null. Missing paths are skipped, as runc does.
func mask(root int, path string, devNull int) error {
	fd, isDir, ok, err := openExisting(root, path)
	if err != nil || !ok {
		return err
	}
	defer unix.Close(fd)
	const attr = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC
	var mfd int
	if isDir {
		mfd, err = fsmount(kindTmpfs, [][2]string{{"size", "4k"}}, attr)
		if err != nil {
			return err
		}
	} else {
		if mfd, err = unix.OpenTree(devNull, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH); err != nil {
			return fmt.Errorf("open_tree /dev/null: %w", err)
		}
		if err := setattr(mfd, unix.AT_EMPTY_PATH, attr); err != nil {
			unix.Close(mfd)
			return err
		}
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// readonly binds path onto itself, read-only, with everything below it.
func readonly(root int, path string) error {
	fd, _, ok, err := openExisting(root, path)
	if err != nil || !ok {
		return err
	}
	defer unix.Close(fd)
	mfd, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	defer unix.Close(mfd)
	if err := setattr(mfd, unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV); err != nil {
		return err
	}
	if err := unix.MoveMount(mfd, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// devLinks adds the links programs expect in a fresh /dev.
func devLinks(root int, p *Plan) error {
	dev, err := unix.Openat2(root, "dev", &resolveHow)
	if err != nil {
		return fmt.Errorf("/dev: %w", err)
	}
	defer unix.Close(dev)
	links := [][2]string{{"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"}, {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"}}
	for _, m := range p.Mounts {
		if m.Destination == "/dev/pts" && m.Kind == kindDevpts {
			links = append(links, [2]string{"pts/ptmx", "ptmx"})
		}
	}
	for _, l := range links {
		if err := unix.Symlinkat(l[0], dev, l[1]); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("/dev/%s: symlink: %w", l[1], err)
		}
	}
	return nil
}

// pivot makes root the root of mount namespace 1 and detaches the host's
// tree, so that nothing of the host is reachable by path any more.
func pivot(root int) error {
	if err := unix.Fchdir(root); err != nil {
		return fmt.Errorf("pivot: fchdir: %w", err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("pivot: detach the old root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fmt.Errorf("pivot: chdir /: %w", err)
	}
	return nil
}
