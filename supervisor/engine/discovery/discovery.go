// SPDX-License-Identifier: Apache-2.0

// Package discovery finds a native adapter's executable in the
// operator-listed search directories of a runtime-discovery launch
// (docs/policy.md, "Runtime discovery") and pins its identity.
//
// Only the listed directories are searched, in order, never the inherited
// PATH. A directory is acceptable only when it and every ancestor up to /
// is a real directory (each component is opened on its own with openat2
// RESOLVE_NO_SYMLINKS, starting at /), owned by the service account (the
// effective uid) or root, and writable by neither group nor others. An
// owner equal to the kernel's overflow uid is what an unmapped host uid
// looks like inside a user namespace: it is rejected explicitly, never
// assumed to be root. The entry itself must be a regular file (not a
// symbolic link), executable, with the same owner and mode rules. Its
// identity (device, inode, size, modification time and the SHA-256 of the
// content read through the opened descriptor) is what a launch pins;
// Identity.Recheck fails closed when the file was replaced since.
package discovery

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
)

var (
	// ErrNotInstalled: no search directory holds an acceptable entry.
	ErrNotInstalled = errors.New("discovery: executable not installed in any acceptable search directory")
	// ErrChanged: the pinned executable is no longer the file pinned.
	ErrChanged = errors.New("discovery: executable changed since it was pinned")
	// ErrUnknownRuntime: the runtime is not a runtime_discovery value.
	ErrUnknownRuntime = errors.New("discovery: unknown runtime")
)

// Identity pins one executable file.
type Identity struct {
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNs int64  `json:"mtime_ns"`
	SHA256  string `json:"sha256"`
}

// Rejected is one search directory passed over, and why.
type Rejected struct {
	Dir    string `json:"dir"`
	Reason string `json:"reason"`
}

// Found is the result of a search. Rejected lists every search directory
// passed over before the one used (all of them when nothing was found).
type Found struct {
	Runtime    string     `json:"runtime"`
	Executable string     `json:"executable"`
	Dir        string     `json:"dir,omitempty"`
	Path       string     `json:"path,omitempty"`
	Identity   Identity   `json:"identity,omitzero"`
	Rejected   []Rejected `json:"rejected,omitempty"`
}

// overflowUID is the kernel's overflow uid (typically 65534).
var overflowUID = sync.OnceValue(func() uint32 {
	b, err := os.ReadFile("/proc/sys/kernel/overflowuid")
	if err == nil {
		if v, perr := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32); perr == nil {
			return uint32(v)
		}
	}
	return 65534
})

// Find searches searchPaths, in order, for runtime's executable. The
// returned Found always carries the rejections; with nothing acceptable
// installed the error wraps ErrNotInstalled.
func Find(runtime string, searchPaths []string) (Found, error) {
	exe, ok := policy.DiscoveryExecutable(runtime)
	if !ok {
		return Found{Runtime: runtime}, fmt.Errorf("%w %q", ErrUnknownRuntime, runtime)
	}
	f := Found{Runtime: runtime, Executable: exe}
	for _, dir := range searchPaths {
		path, id, present, err := look(dir, exe)
		if err != nil {
			f.Rejected = append(f.Rejected, Rejected{Dir: dir, Reason: err.Error()})
			continue
		}
		if !present {
			f.Rejected = append(f.Rejected, Rejected{Dir: dir, Reason: fmt.Sprintf("no entry named %q", exe)})
			continue
		}
		f.Dir, f.Path, f.Identity = dir, path, id
		return f, nil
	}
	return f, fmt.Errorf("%w: %s (%s)", ErrNotInstalled, runtime, exe)
}

// Recheck reopens path under the same rules and fails with ErrChanged
// when any field of the identity, the content hash included, differs.
func (id Identity) Recheck(path string) error {
	if !canonical(path) || path == "/" {
		return fmt.Errorf("discovery: %q is not an absolute canonical file path", path)
	}
	dir, name := filepath.Split(path)
	if dir != "/" {
		dir = strings.TrimSuffix(dir, "/")
	}
	_, got, present, err := look(dir, name)
	if err != nil {
		return fmt.Errorf("discovery: recheck %s: %w", path, err)
	}
	if !present {
		return fmt.Errorf("%w: %s no longer exists", ErrChanged, path)
	}
	if got != id {
		return fmt.Errorf("%w: %s: pinned %s, now %s", ErrChanged, path, id, got)
	}
	return nil
}

// String is a compact one-line form of the identity.
func (id Identity) String() string {
	return fmt.Sprintf("dev=%d ino=%d size=%d mtime_ns=%d sha256=%s", id.Dev, id.Ino, id.Size, id.MtimeNs, id.SHA256)
}

func canonical(p string) bool { return filepath.IsAbs(p) && filepath.Clean(p) == p }

// look checks dir and its ancestors, then the entry name inside it.
// present is false (with a nil error) when the directory is acceptable
// but holds no entry of that name.
func look(dir, name string) (path string, id Identity, present bool, err error) {
	dfd, err := openDir(dir)
	if err != nil {
		return "", Identity{}, false, err
	}
	defer unix.Close(dfd)
	path = filepath.Join(dir, name)
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return "", Identity{}, false, nil
		}
		return "", Identity{}, false, fmt.Errorf("%s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return "", Identity{}, false, fmt.Errorf("%s: is a symbolic link", path)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", Identity{}, false, fmt.Errorf("%s: not a regular file", path)
	}
	fd, err := unix.Openat2(dfd, name, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return "", Identity{}, false, fmt.Errorf("%s: open: %w", path, err)
	}
	file := os.NewFile(uintptr(fd), path)
	defer file.Close()
	if err := unix.Fstat(fd, &st); err != nil {
		return "", Identity{}, false, fmt.Errorf("%s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", Identity{}, false, fmt.Errorf("%s: not a regular file", path)
	}
	if st.Mode&0o111 == 0 {
		return "", Identity{}, false, fmt.Errorf("%s: not executable (mode %04o)", path, st.Mode&0o7777)
	}
	if err := checkOwnerMode(path, &st); err != nil {
		return "", Identity{}, false, err
	}
	h := sha256.New()
	if _, err := io.Copy(h, file); err != nil {
		return "", Identity{}, false, fmt.Errorf("%s: read: %w", path, err)
	}
	var after unix.Stat_t
	if err := unix.Fstat(fd, &after); err != nil {
		return "", Identity{}, false, fmt.Errorf("%s: %w", path, err)
	}
	if after.Size != st.Size || after.Mtim != st.Mtim || after.Ctim != st.Ctim {
		return "", Identity{}, false, fmt.Errorf("%s: changed while it was being hashed", path)
	}
	id = Identity{
		Dev:     uint64(st.Dev),
		Ino:     st.Ino,
		Size:    st.Size,
		MtimeNs: st.Mtim.Nano(),
		SHA256:  hex.EncodeToString(h.Sum(nil)),
	}
	return path, id, true, nil
}

// openDir opens dir component by component from /, checking each
// directory on the way, and returns an O_PATH descriptor of dir.
func openDir(dir string) (int, error) {
	if !canonical(dir) {
		return -1, fmt.Errorf("%q is not an absolute canonical path", dir)
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, "/", &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return -1, fmt.Errorf("open /: %w", err)
	}
	if err := checkDir("/", fd); err != nil {
		unix.Close(fd)
		return -1, err
	}
	cur := "/"
	for _, comp := range strings.Split(strings.TrimPrefix(dir, "/"), "/") {
		if comp == "" {
			continue
		}
		cur = filepath.Join(cur, comp)
		next, err := unix.Openat2(fd, comp, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if err != nil {
			err = classify(fd, comp, cur, err)
			unix.Close(fd)
			return -1, err
		}
		unix.Close(fd)
		fd = next
		if err := checkDir(cur, fd); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	return fd, nil
}

// classify turns a failed open of one path component into a reason.
func classify(parent int, comp, cur string, err error) error {
	var st unix.Stat_t
	if serr := unix.Fstatat(parent, comp, &st, unix.AT_SYMLINK_NOFOLLOW); serr == nil {
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			return fmt.Errorf("%s: is a symbolic link", cur)
		case unix.S_IFDIR:
		default:
			return fmt.Errorf("%s: not a directory", cur)
		}
	}
	if errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("%s: does not exist", cur)
	}
	return fmt.Errorf("%s: open: %w", cur, err)
}

func checkDir(path string, fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s: not a directory", path)
	}
	return checkOwnerMode(path, &st)
}

// checkOwnerMode applies the owner and write-permission rules shared by
// directories and the entry.
func checkOwnerMode(path string, st *unix.Stat_t) error {
	euid := uint32(os.Geteuid())
	if ov := overflowUID(); st.Uid == ov {
		return fmt.Errorf("%s: owned by the overflow uid %d (an owner unmapped in this user namespace), not assumed to be root", path, ov)
	}
	if st.Uid != 0 && st.Uid != euid {
		return fmt.Errorf("%s: owned by uid %d, neither the service account (uid %d) nor root", path, st.Uid, euid)
	}
	if st.Mode&0o022 != 0 {
		return fmt.Errorf("%s: writable by group or others (mode %04o)", path, st.Mode&0o7777)
	}
	return nil
}

// OpenDirectory opens dir under the search-directory rules (it and every
// ancestor a real directory, owned by the service account or root, not
// writable by group or others; no symbolic link anywhere) and returns an
// O_PATH descriptor of it. `glove policy stage` uses it for the protected
// runtime directory it copies into, so that what it stages is found by
// discovery under the same rules.
func OpenDirectory(dir string) (*os.File, error) {
	fd, err := openDir(dir)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	return os.NewFile(uintptr(fd), dir), nil
}
