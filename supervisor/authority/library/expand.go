// SPDX-License-Identifier: Apache-2.0

package library

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// ExpandSkill writes the skill entry e as a directory tree: dir/<e.Name>/
// and every file of e beneath it, for a native-skill runtime's skill
// directory in a private home.
//
// dir is a directory descriptor usable as the dirfd of *at system calls;
// an O_PATH descriptor will do. dir/<e.Name> must not exist: an existing
// name (of any type) is an error wrapping fs.ErrExist (EEXIST), never
// merged into. Directories are created with mode 0755, files with 0644,
// or 0755 when Executable, set exactly (the umask does not narrow them).
// Every directory is reopened with openat2 RESOLVE_BENEATH and
// RESOLVE_NO_SYMLINKS after it is created, and every file is created
// with O_CREAT|O_EXCL|O_NOFOLLOW beneath it, so nothing is ever written
// through a symbolic link, even one planted concurrently. The entry is
// validated again first (ErrKind for a kind other than skill, ErrFormat
// for a broken entry). Errors wrap the system call's error (ENOSPC,
// EDQUOT, EEXIST stay detectable with errors.Is). A failure leaves the
// partial tree in place: the caller discards the private home.
func ExpandSkill(dir *os.File, e *Entry) error {
	if e == nil {
		return fmt.Errorf("library: expand skill: %w: no entry", ErrFormat)
	}
	if e.Kind != KindSkill {
		return fmt.Errorf("library: expand %q: %w: kind %q is not %q; only skill entries are expanded", e.Name, ErrKind, e.Kind, KindSkill)
	}
	if err := validateEntry("", 0, e); err != nil {
		if de, ok := err.(*decodeError); ok {
			return &prefixed{prefix: fmt.Sprintf("library: expand skill %q: ", e.Name), err: de}
		}
		return err
	}
	defer runtime.KeepAlive(dir)
	dfd := int(dir.Fd())
	fail := func(what string, err error) error {
		return fmt.Errorf("library: expand skill %q into %q: %s: %w", e.Name, dir.Name(), what, err)
	}
	if err := unix.Mkdirat(dfd, e.Name, 0o755); err != nil {
		return fail("create "+e.Name, err)
	}
	top, err := openDirBeneath(dfd, e.Name)
	if err != nil {
		return fail("open "+e.Name, err)
	}
	defer unix.Close(top)
	if err := unix.Fchmod(top, 0o755); err != nil {
		return fail("chmod "+e.Name, err)
	}
	created := make(map[string]bool)
	for i := range e.Files {
		f := &e.Files[i]
		if err := expandFile(top, created, f); err != nil {
			return fail(e.Name+"/"+f.Path, err)
		}
	}
	return nil
}

// expandFile creates f beneath the skill directory top, creating the
// missing intermediate directories (recorded in created, by relative
// path) on the way.
func expandFile(top int, created map[string]bool, f *File) error {
	comps := strings.Split(f.Path, "/")
	parent := top
	defer func() {
		if parent != top {
			unix.Close(parent)
		}
	}()
	for k, c := range comps[:len(comps)-1] {
		rel := strings.Join(comps[:k+1], "/")
		fresh := !created[rel]
		if fresh {
			// Every intermediate directory is created by this expansion:
			// the skill directory was new, so one that exists already was
			// put there by someone else, and EEXIST refuses it.
			if err := unix.Mkdirat(parent, c, 0o755); err != nil {
				return fmt.Errorf("create directory %s: %w", rel, err)
			}
			created[rel] = true
		}
		next, err := openDirBeneath(parent, c)
		if err != nil {
			return fmt.Errorf("open directory %s: %w", rel, err)
		}
		if parent != top {
			unix.Close(parent)
		}
		parent = next
		if fresh {
			if err := unix.Fchmod(parent, 0o755); err != nil {
				return fmt.Errorf("chmod directory %s: %w", rel, err)
			}
		}
	}
	mode := uint32(0o644)
	if f.Executable {
		mode = 0o755
	}
	fd, err := unix.Openat2(parent, comps[len(comps)-1], &unix.OpenHow{
		Flags:   unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Mode:    uint64(mode),
		Resolve: beneath,
	})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	return writeAll(os.NewFile(uintptr(fd), f.Path), f.Content, os.FileMode(mode), false)
}

// openDirBeneath opens the directory name inside dfd for use as a dirfd
// and for fchmod, refusing a symbolic link.
func openDirBeneath(dfd int, name string) (int, error) {
	return unix.Openat2(dfd, name, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: beneath,
	})
}
