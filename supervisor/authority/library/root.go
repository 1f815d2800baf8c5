// SPDX-License-Identifier: Apache-2.0

package library

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/glove-sandbox/glove/filetype"
	"golang.org/x/sys/unix"
)

// Root is an open, identity-pinned bundle root directory. Its O_PATH
// descriptor is kept for the life of the Root: every bundle is opened
// relative to it, so a rename or replacement of the root's path after
// OpenRoot does not redirect Glove to another directory. A Root is safe
// for concurrent use.
type Root struct {
	mu   sync.RWMutex
	fd   int // -1 once closed
	path string
	dev  uint64
	ino  uint64
}

// Bundle is a verified bundle file.
type Bundle struct {
	Digest   string
	File     *os.File // O_RDONLY descriptor of the verified file; the caller mounts it read-only through this descriptor
	Manifest *Manifest
}

// Close closes the bundle's descriptor.
func (b *Bundle) Close() error { return b.File.Close() }

// rootFlags and rootResolve open the root: no symbolic link anywhere on
// the path, not even the last component.
const (
	rootFlags   = unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW
	rootResolve = unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS
	// beneath confines every open relative to a directory descriptor to
	// that directory and refuses every symbolic link.
	beneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS
)

// OpenRoot opens and pins the bundle root directory path, which must be
// absolute and clean, reached without any symbolic link, a directory
// owned by the effective uid with permission bits exactly 0700. Refusals
// wrap ErrFormat (path), ErrType, ErrOwner or ErrMode and name the
// observed type, owner or mode.
func OpenRoot(path string) (*Root, error) {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return nil, fmt.Errorf("library: bundle root %q: %w: not an absolute clean path", path, ErrFormat)
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{Flags: rootFlags, Resolve: rootResolve})
	if err != nil {
		return nil, fmt.Errorf("library: bundle root %q: %w", path, classifyRootOpen(path, err))
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("library: bundle root %q: fstat: %w", path, err)
	}
	if err := checkRoot(&st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("library: bundle root %q: %w", path, err)
	}
	return &Root{fd: fd, path: path, dev: uint64(st.Dev), ino: st.Ino}, nil
}

// classifyRootOpen says why the root could not be opened.
func classifyRootOpen(path string, err error) error {
	var st unix.Stat_t
	if lerr := unix.Lstat(path, &st); lerr == nil {
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			return fmt.Errorf("%w: is a symbolic link", ErrType)
		case unix.S_IFDIR:
		default:
			return fmt.Errorf("%w: is a %s, not a directory", ErrType, filetype.Name(st.Mode))
		}
	}
	if errors.Is(err, unix.ELOOP) {
		return fmt.Errorf("%w: a component of the path is a symbolic link", ErrType)
	}
	return fmt.Errorf("open: %w", err)
}

// checkRoot applies the root directory rules to its status.
func checkRoot(st *unix.Stat_t) error {
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%w: is a %s, not a directory", ErrType, filetype.Name(st.Mode))
	}
	if euid := uint32(os.Geteuid()); st.Uid != euid {
		return fmt.Errorf("%w: owned by uid %d, must be the effective uid %d", ErrOwner, st.Uid, euid)
	}
	if perm := st.Mode & 0o7777; perm != 0o700 {
		return fmt.Errorf("%w: permission bits are %04o, must be exactly 0700", ErrMode, perm)
	}
	return nil
}

// Path is the path the root was opened by (for messages only: the
// descriptor, not the path, is what Open uses).
func (r *Root) Path() string { return r.path }

// Dev is the device number of the pinned root directory.
func (r *Root) Dev() uint64 { return r.dev }

// Ino is the inode number of the pinned root directory.
func (r *Root) Ino() uint64 { return r.ino }

// Close releases the root descriptor. Bundles already opened stay open.
func (r *Root) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fd < 0 {
		return fmt.Errorf("library: bundle root %q: %w", r.path, os.ErrClosed)
	}
	err := unix.Close(r.fd)
	r.fd = -1
	if err != nil {
		return fmt.Errorf("library: bundle root %q: close: %w", r.path, err)
	}
	return nil
}

// refuse formats a refusal of bundle digest: "library: bundle DIGEST in
// "ROOT": SENTINEL: DETAIL". format may hold a further %w.
func (r *Root) refuse(digest string, sentinel error, format string, args ...any) error {
	return fmt.Errorf("library: bundle %s in %q: %w: "+format, append([]any{digest, r.path, sentinel}, args...)...)
}

// prefixed is a decode fault inside a named bundle.
type prefixed struct {
	prefix string
	err    *decodeError
}

func (p *prefixed) Error() string { return p.prefix + p.err.detail() }
func (p *prefixed) Unwrap() error { return p.err }

// Open opens the bundle file named digest (64 lowercase hex characters)
// relative to the pinned root, verifies it and decodes it. In order:
// the root's owner and mode are checked again (they may have been
// loosened since OpenRoot); the file is opened with openat2
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS and O_NOFOLLOW|O_NONBLOCK (a
// symbolic link, a named pipe or a device is refused, never followed or
// waited on); its status must show a regular file (ErrType) owned by the
// effective uid (ErrOwner), permission bits exactly 0600 (ErrMode), one
// link (ErrLinks) and at most MaxBundleBytes (ErrSize), all before any
// byte is read; then it is read through the descriptor, its status
// compared again (ErrChanged), its SHA-256 compared with digest
// (ErrDigest) and the bytes decoded (ErrFormat, ErrKind). The returned
// Bundle's File is positioned at offset 0; the caller closes it.
func (r *Root) Open(digest string) (*Bundle, error) {
	if !ValidDigest(digest) {
		return nil, fmt.Errorf("library: bundle %q in %q: %w: the digest is not 64 lowercase hex characters", digest, r.path, ErrFormat)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.fd < 0 {
		return nil, fmt.Errorf("library: bundle %s in %q: %w", digest, r.path, os.ErrClosed)
	}
	var rst unix.Stat_t
	if err := unix.Fstat(r.fd, &rst); err != nil {
		return nil, fmt.Errorf("library: bundle %s in %q: fstat root: %w", digest, r.path, err)
	}
	if err := checkRoot(&rst); err != nil {
		return nil, fmt.Errorf("library: bundle %s in %q: root: %w", digest, r.path, err)
	}
	fd, err := unix.Openat2(r.fd, digest, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC,
		Resolve: beneath,
	})
	if err != nil {
		var st unix.Stat_t
		if serr := unix.Fstatat(r.fd, digest, &st, unix.AT_SYMLINK_NOFOLLOW); serr == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return nil, r.refuse(digest, ErrType, "is a symbolic link")
			}
			return nil, r.refuse(digest, ErrType, "is a %s, not a regular file", filetype.Name(st.Mode))
		}
		if errors.Is(err, unix.ENOENT) {
			return nil, fmt.Errorf("library: bundle %s in %q: no such bundle: %w", digest, r.path, err)
		}
		return nil, fmt.Errorf("library: bundle %s in %q: open: %w", digest, r.path, err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(r.path, digest))
	b, err := r.verify(digest, f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return b, nil
}

func (r *Root) verify(digest string, f *os.File) (*Bundle, error) {
	fd := int(f.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("library: bundle %s in %q: fstat: %w", digest, r.path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, r.refuse(digest, ErrType, "is a %s, not a regular file", filetype.Name(st.Mode))
	}
	if euid := uint32(os.Geteuid()); st.Uid != euid {
		return nil, r.refuse(digest, ErrOwner, "owned by uid %d, must be the effective uid %d", st.Uid, euid)
	}
	if perm := st.Mode & 0o7777; perm != 0o600 {
		return nil, r.refuse(digest, ErrMode, "permission bits are %04o, must be exactly 0600", perm)
	}
	if st.Nlink != 1 {
		return nil, r.refuse(digest, ErrLinks, "link count is %d, must be 1 (another name could change the file)", st.Nlink)
	}
	if st.Size > MaxBundleBytes {
		return nil, r.refuse(digest, ErrSize, "%d bytes, more than the %d allowed", st.Size, MaxBundleBytes)
	}
	// One byte more than fstat reported: a file that grew shows up as a
	// read longer than its size, and the buffer never exceeds
	// MaxBundleBytes+1.
	buf := make([]byte, st.Size+1)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("library: bundle %s in %q: read: %w", digest, r.path, err)
	}
	var after unix.Stat_t
	if err := unix.Fstat(fd, &after); err != nil {
		return nil, fmt.Errorf("library: bundle %s in %q: fstat: %w", digest, r.path, err)
	}
	if int64(n) != st.Size || after.Size != st.Size || after.Mtim != st.Mtim || after.Ctim != st.Ctim {
		return nil, r.refuse(digest, ErrChanged, "size %d, read %d bytes, now %d", st.Size, n, after.Size)
	}
	data := buf[:n]
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != digest {
		return nil, r.refuse(digest, ErrDigest, "content hashes to sha256 %s, expected %s", got, digest)
	}
	m, err := Decode(data)
	if err != nil {
		prefix := fmt.Sprintf("library: bundle %s in %q: ", digest, r.path)
		var de *decodeError
		if errors.As(err, &de) {
			return nil, &prefixed{prefix: prefix, err: de}
		}
		return nil, fmt.Errorf("%s%w", prefix, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("library: bundle %s in %q: seek: %w", digest, r.path, err)
	}
	return &Bundle{Digest: digest, File: f, Manifest: m}, nil
}

// Write encodes m (see Encode) and stores it in the bundle root
// directory root (which must pass OpenRoot) as a file named by the
// SHA-256 of the encoded bytes, created with O_EXCL and mode 0600. It
// returns the digest. If a file of that name already exists, the error
// wraps fs.ErrExist and the digest is returned with it; nothing is
// overwritten. A failed write removes the partial file. It is meant for
// tests, demonstrations and operators (docs/library-bundles.md).
func Write(root string, m *Manifest) (digest string, err error) {
	data, err := Encode(m)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	digest = hex.EncodeToString(sum[:])
	r, err := OpenRoot(root)
	if err != nil {
		return "", err
	}
	defer r.Close()
	fd, err := unix.Openat2(r.fd, digest, &unix.OpenHow{
		Flags:   unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Mode:    0o600,
		Resolve: beneath,
	})
	if errors.Is(err, unix.EEXIST) {
		return digest, fmt.Errorf("library: write bundle %s in %q: %w", digest, root, err)
	}
	if err != nil {
		return "", fmt.Errorf("library: write bundle %s in %q: %w", digest, root, err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(root, digest))
	werr := writeAll(f, data, 0o600, true)
	if werr != nil {
		if uerr := unix.Unlinkat(r.fd, digest, 0); uerr != nil {
			werr = errors.Join(werr, fmt.Errorf("remove partial file: %w", uerr))
		}
		return "", fmt.Errorf("library: write bundle %s in %q: %w", digest, root, werr)
	}
	return digest, nil
}

// writeAll writes data to the newly created f, sets its permission bits
// to exactly mode (the umask only narrows the creation mode), syncs it
// when asked and closes it. The file is closed in every case.
func writeAll(f *os.File, data []byte, mode os.FileMode, durable bool) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
