// SPDX-License-Identifier: Apache-2.0

// Package lease is gloved's store of credential leases: for each secret
// handle of the policy that a session has used, one file holding the
// credential's current content, a lease identity and a version.
//
// A lease stands between the operator's credential source (a protected
// file the sandbox never reaches) and the copy a session works with:
//
//   - the first launch of a handle imports the source (version 1, a
//     random lease identity);
//   - a later launch uses the lease as it is, with what earlier sessions
//     left in it (a harness's rotated token), unless the operator has
//     replaced the source since the last import: the source's new content
//     then wins, as the next version;
//   - after each session the content the session left is committed as the
//     next version if it differs.
//
// One session at a time uses a lease: Acquire takes an exclusive flock
// on the handle's lock file and fails with ErrBusy rather than wait, and
// the kernel drops the lock with the process, so a crashed gloved leaves
// no lease locked. Every write is a new file made durable and renamed
// over the old one, then the directory synced: a crash leaves the old
// version or the new one, never a mix.
//
// The store is a directory of the service user, mode 0700, inside the
// session store (Glove's own state: no grant may reach it). The lease
// identity and version are not secret and go into the managed-launch
// digest and the receipt; the content never leaves this package but to
// the session's copy.
package lease

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/glove-sandbox/glove/names"
	"github.com/glove-sandbox/glove/supervisor/internal/strictjson"
	"golang.org/x/sys/unix"
)

// Schema names the lease file's format.
const Schema = "glove.credential-lease-v1"

// MaxContentBytes bounds a lease's content (the policy's
// MaxCredentialBytes; a credential policy's max_bytes is at most this).
const MaxContentBytes = 1 << 20

// maxFileBytes bounds a lease file: the content in base64 and a few
// short members.
const maxFileBytes = (MaxContentBytes+2)/3*4 + 1024

// Errors a caller tells apart.
var (
	// ErrBusy: another session holds the lease.
	ErrBusy = errors.New("the credential lease is in use by another session")
	// ErrCorrupt: the lease file is not one this package wrote (or not
	// whole): the lease is not used, and nothing replaces it silently.
	ErrCorrupt = errors.New("the credential lease file is not valid")
	// ErrTooLarge: content over the lease's bound.
	ErrTooLarge = errors.New("the credential is larger than its bound")
)

// record is the lease file: one JSON object.
type record struct {
	Schema  string `json:"schema"`
	Handle  string `json:"handle"`
	LeaseID string `json:"lease_id"`
	Version uint64 `json:"version"`
	// SourceSHA256 is the digest of the source content last imported:
	// a launch re-imports only when the source differs from it.
	SourceSHA256 string `json:"source_sha256"`
	Content      string `json:"content"` // standard base64
}

// decode strictly decodes and checks a lease file's bytes (they are
// gloved's own, but read back from disk: a torn or foreign file must not
// become a credential).
func decode(data []byte) (*record, []byte, error) {
	var r record
	if err := strictjson.Unmarshal(data, &r, maxFileBytes); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	switch {
	case r.Schema != Schema:
		return nil, nil, fmt.Errorf("%w: schema %q is not %q", ErrCorrupt, r.Schema, Schema)
	case !names.Identifier(r.Handle):
		return nil, nil, fmt.Errorf("%w: handle %q is not an identifier", ErrCorrupt, r.Handle)
	case !isHex(r.LeaseID, 32):
		return nil, nil, fmt.Errorf("%w: lease_id is not 32 lowercase hex digits", ErrCorrupt)
	case r.Version < 1 || r.Version > 1<<53-1:
		return nil, nil, fmt.Errorf("%w: version %d is outside 1..2^53-1", ErrCorrupt, r.Version)
	case !isHex(r.SourceSHA256, 64):
		return nil, nil, fmt.Errorf("%w: source_sha256 is not 64 lowercase hex digits", ErrCorrupt)
	}
	content, err := base64.StdEncoding.Strict().DecodeString(r.Content)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: content is not standard base64", ErrCorrupt)
	}
	if len(content) > MaxContentBytes {
		return nil, nil, fmt.Errorf("%w: content of %d bytes, more than %d", ErrCorrupt, len(content), MaxContentBytes)
	}
	return &r, content, nil
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Store is the lease directory, open.
type Store struct {
	dir *os.File
}

// Open opens (making it if missing) the lease directory dir: it must be
// the service user's, mode 0700, not a symbolic link.
func Open(dir string) (*Store, error) {
	if err := unix.Mkdir(dir, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("lease store: make %s: %w", dir, err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("lease store: open %s: %w", dir, err)
	}
	f := os.NewFile(uintptr(fd), dir)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("lease store: stat: %w", err)
	}
	// Threat: a lease directory another user can enter or write lets
	// that user read every credential or plant a lease of their own.
	if int(st.Uid) != os.Geteuid() || st.Mode&0o7777 != 0o700 {
		f.Close()
		return nil, fmt.Errorf("lease store: %s: owner uid %d mode %04o, want uid %d mode 0700", dir, st.Uid, st.Mode&0o7777, os.Geteuid())
	}
	return &Store{dir: f}, nil
}

// Close closes the directory.
func (s *Store) Close() error { return s.dir.Close() }

// Lease is one handle's lease, held (locked) by one session.
type Lease struct {
	s       *Store
	handle  string
	lock    *os.File
	rec     record
	content []byte
	// Imported is set when this acquisition imported the source (the
	// first use of the handle, or a source the operator replaced).
	Imported bool
}

// Handle, ID and Version identify the lease and its current content.
func (l *Lease) Handle() string    { return l.handle }
func (l *Lease) ID() string        { return l.rec.LeaseID }
func (l *Lease) Version() uint64   { return l.rec.Version }
func (l *Lease) Content() []byte   { return bytes.Clone(l.content) }
func (l *Lease) SourceSum() string { return l.rec.SourceSHA256 }

// Acquire locks handle's lease and brings it up to date with source, the
// credential source's content as just read (protected-file rules, by the
// caller): imported when there is no lease yet or when the source
// differs from the one last imported; otherwise the lease keeps its
// content. The lease must be Released.
func (s *Store) Acquire(handle string, source []byte) (_ *Lease, err error) {
	if !names.Identifier(handle) {
		return nil, fmt.Errorf("lease: handle %q is not an identifier", handle)
	}
	if len(source) > MaxContentBytes {
		return nil, fmt.Errorf("lease %s: source of %d bytes: %w", handle, len(source), ErrTooLarge)
	}
	fd, err := unix.Openat(int(s.dir.Fd()), handle+".lock", unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lease %s: open the lock file: %w", handle, err)
	}
	lock := os.NewFile(uintptr(fd), handle+".lock")
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("lease %s: %w", handle, ErrBusy)
		}
		return nil, fmt.Errorf("lease %s: lock: %w", handle, err)
	}
	l := &Lease{s: s, handle: handle, lock: lock}
	defer func() {
		if err != nil {
			err = errors.Join(err, l.Release())
		}
	}()
	rec, content, err := s.read(handle)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(source)
	srcSum := hex.EncodeToString(sum[:])
	switch {
	case rec == nil:
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return nil, fmt.Errorf("lease %s: lease identity: %w", handle, err)
		}
		l.rec = record{Schema: Schema, Handle: handle, LeaseID: hex.EncodeToString(id[:]), Version: 1, SourceSHA256: srcSum}
		l.content, l.Imported = bytes.Clone(source), true
	case rec.SourceSHA256 != srcSum:
		l.rec = *rec
		l.rec.Version++
		l.rec.SourceSHA256 = srcSum
		l.content, l.Imported = bytes.Clone(source), true
	default:
		l.rec, l.content = *rec, content
		return l, nil
	}
	if err := s.write(&l.rec, l.content); err != nil {
		return nil, err
	}
	return l, nil
}

// Commit makes content the lease's next version, durably, unless it is
// the current content. It reports whether a version was written.
func (l *Lease) Commit(content []byte) (bool, error) {
	if l.lock == nil {
		return false, fmt.Errorf("lease %s: commit after release", l.handle)
	}
	if bytes.Equal(content, l.content) {
		return false, nil
	}
	if len(content) > MaxContentBytes {
		return false, fmt.Errorf("lease %s: %d bytes: %w", l.handle, len(content), ErrTooLarge)
	}
	next := l.rec
	next.Version++
	if err := l.s.write(&next, content); err != nil {
		return false, err
	}
	l.rec, l.content = next, bytes.Clone(content)
	return true, nil
}

// Release unlocks the lease (closing the lock file drops the flock).
func (l *Lease) Release() error {
	if l.lock == nil {
		return nil
	}
	err := l.lock.Close()
	l.lock = nil
	if err != nil {
		return fmt.Errorf("lease %s: unlock: %w", l.handle, err)
	}
	return nil
}

// read reads handle's lease file; nil when there is none.
func (s *Store) read(handle string) (*record, []byte, error) {
	fd, err := unix.Openat(int(s.dir.Fd()), handle+".lease", unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("lease %s: open: %w", handle, err)
	}
	f := os.NewFile(uintptr(fd), handle+".lease")
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, nil, fmt.Errorf("lease %s: stat: %w", handle, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() || st.Mode&0o7777 != 0o600 || st.Nlink != 1 || st.Size > maxFileBytes {
		return nil, nil, fmt.Errorf("lease %s: not a regular file of the service user, mode 0600, one link, at most %d bytes: %w", handle, maxFileBytes, ErrCorrupt)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("lease %s: read: %w", handle, err)
	}
	rec, content, err := decode(data)
	if err != nil {
		return nil, nil, fmt.Errorf("lease %s: %w", handle, err)
	}
	if rec.Handle != handle {
		return nil, nil, fmt.Errorf("lease %s: the file names handle %q: %w", handle, rec.Handle, ErrCorrupt)
	}
	return rec, content, nil
}

// write replaces handle's lease file: a new file, synced, renamed over
// the old one, then the directory synced.
func (s *Store) write(r *record, content []byte) error {
	r.Content = base64.StdEncoding.EncodeToString(content)
	defer func() { r.Content = "" }()
	data := strictjson.Canonical(r)
	dir := int(s.dir.Fd())
	tmp, name := r.Handle+".lease.tmp", r.Handle+".lease"
	// A temporary file left by a crash mid-write is the lock holder's to
	// remove: the lock is held.
	if err := unix.Unlinkat(dir, tmp, 0); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("lease %s: remove a stale temporary file: %w", r.Handle, err)
	}
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("lease %s: create: %w", r.Handle, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, werr := f.Write(data)
	if werr == nil {
		werr = unix.Fdatasync(fd)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		if uerr := unix.Unlinkat(dir, tmp, 0); uerr != nil && !errors.Is(uerr, unix.ENOENT) {
			werr = errors.Join(werr, fmt.Errorf("remove the temporary file: %w", uerr))
		}
		return fmt.Errorf("lease %s: write: %w", r.Handle, werr)
	}
	if err := unix.Renameat(dir, tmp, dir, name); err != nil {
		return fmt.Errorf("lease %s: rename into place: %w", r.Handle, err)
	}
	if err := unix.Fsync(dir); err != nil {
		return fmt.Errorf("lease %s: sync the lease directory: %w", r.Handle, err)
	}
	return nil
}

// maxPrune bounds the directory entries Prune reads: a store holds two
// files per handle the policy ever mapped, and the policy maps at most
// 64.
const maxPrune = 4096

// Prune removes the leases (and their lock and temporary files) of every
// handle not in keep, and returns the handles removed. gloved calls it at
// start-up, before any session: a credential the operator has taken out
// of the policy must not stay on disk (threat: a rotated token outliving
// the operator's decision to revoke its handle). A name it does not
// recognize is left alone and not reported.
func (s *Store) Prune(keep []string) ([]string, error) {
	// A duplicate, so that listing (which moves the offset) does not
	// touch the store's own descriptor.
	fd, err := unix.Openat(int(s.dir.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("lease store: open for listing: %w", err)
	}
	f := os.NewFile(uintptr(fd), "leases")
	defer f.Close()
	ents, err := f.Readdirnames(maxPrune)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("lease store: list: %w", err)
	}
	kept := map[string]bool{}
	for _, h := range keep {
		kept[h] = true
	}
	var removed []string
	var errs []error
	for _, n := range ents {
		var h string
		for _, suffix := range []string{".lease", ".lock", ".lease.tmp"} {
			if base, ok := strings.CutSuffix(n, suffix); ok && names.Identifier(base) {
				h = base
			}
		}
		if h == "" || kept[h] {
			continue
		}
		if err := unix.Unlinkat(int(s.dir.Fd()), n, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("lease store: remove %s: %w", n, err))
			continue
		}
		if strings.HasSuffix(n, ".lease") {
			removed = append(removed, h)
		}
	}
	if len(removed) > 0 || len(errs) > 0 {
		if err := unix.Fsync(int(s.dir.Fd())); err != nil {
			errs = append(errs, fmt.Errorf("lease store: sync after removing: %w", err))
		}
	}
	return removed, errors.Join(errs...)
}

// Info is what may be said of a lease without its content.
type Info struct {
	Handle  string
	LeaseID string
	Version uint64
}

// List describes the leases in dir (for `glove status`), by handle,
// without taking any lock: a status never makes a session's start fail.
// A lease file that is not valid is listed with version 0.
func List(dir string) ([]Info, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("lease store: list %s: %w", dir, err)
	}
	var out []Info
	for _, e := range ents {
		h, ok := strings.CutSuffix(e.Name(), ".lease")
		if !ok || !names.Identifier(h) || len(out) >= maxPrune {
			continue
		}
		info := Info{Handle: h}
		if data, err := readBounded(filepath.Join(dir, e.Name())); err == nil {
			if r, _, err := decode(data); err == nil && r.Handle == h {
				info.LeaseID, info.Version = r.LeaseID, r.Version
			}
		}
		out = append(out, info)
	}
	return out, nil
}

// readBounded reads a lease file by name, without following a link or
// blocking, at most maxFileBytes.
func readBounded(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxFileBytes+1))
}
