// SPDX-License-Identifier: Apache-2.0

package shim

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/glove-sandbox/glove/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// The seccomp cache (--seccomp-cache-fd) holds the BPF programs stage 0
// compiled before, one file per key, so that a start whose profile was
// compiled already reads about 2.6 KiB (the default profile) instead of
// spending about 1.7 ms in libseccomp (docs/shim-startup.md).
//
// Threat: a poisoned entry would weaken the filter of every later sandbox
// of that profile, silently. So the directory must be writable by the
// service user alone and reachable from no sandbox: gloved creates it
// mode 0700 in its session store, which ownpaths refuses to any mount,
// and hands it to stage 0 only, as a descriptor that close_range has made
// close-on-exec before anything is started (stage 1 receives only the
// preserved descriptors and its control socket). Stage 0 checks the
// directory (ours, not writable by group or other) and every entry
// (regular, ours, one link, mode 0600, bounded, its own key inside, a
// SHA-256 over all of it): an entry that fails any check is never used;
// the profile is compiled as without a cache and the entry replaced.
//
// A hit skips seccomp.CheckRoutes and libseccomp's compile, which is
// where a profile is refused. That is sound because an entry is written
// only after both accepted the profile, and its key covers every input
// of theirs and of the program (seccompCacheKey): the same key means the
// same verdict and the same program.

const (
	// seccompCacheMagic opens every entry: the format and its version.
	seccompCacheMagic = "GLVSCB1\n"
	// maxCachedInsns is the kernel's BPF_MAXINSNS: a longer program
	// could never be loaded, so no entry holds one.
	maxCachedInsns = 4096
	// cacheHeader is magic, key, flags (8 bytes) and program length (4).
	cacheHeader  = len(seccompCacheMagic) + sha256.Size + 8 + 4
	maxCacheFile = cacheHeader + maxCachedInsns*8 + sha256.Size
	// maxCacheEntries bounds the directory: before an entry is added,
	// the oldest are removed until fewer remain. Keys change with every
	// reinstall of glove-shim, kernel or profile, so old entries are
	// garbage, never reclaimed otherwise.
	maxCacheEntries = 64
	// cacheSuffix ends every entry's name (hex key + suffix); nothing
	// else in the directory is read, counted or removed.
	cacheSuffix = ".bpf"
)

// cacheFlags are the SECCOMP_FILTER_FLAG_* an entry may carry: those
// seccompFlags (run_linux.go) produces.
const cacheFlags = unix.SECCOMP_FILTER_FLAG_TSYNC | unix.SECCOMP_FILTER_FLAG_LOG | unix.SECCOMP_FILTER_FLAG_SPEC_ALLOW |
	unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH

// seccompCache is the checked cache directory.
type seccompCache struct {
	dir int // the caller's descriptor, close-on-exec
}

// openSeccompCache checks the directory open at fd (any descriptor kind,
// O_PATH included). A directory another user owns, or that group or
// others may write, could hold an entry someone else planted (the threat
// above): it is refused, never used quietly.
func openSeccompCache(fd int) (*seccompCache, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("fstat: %w", err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return nil, errors.New("not a directory")
	case int(st.Uid) != os.Geteuid():
		return nil, fmt.Errorf("owned by uid %d, not by uid %d", st.Uid, os.Geteuid())
	case st.Mode&0o022 != 0:
		return nil, fmt.Errorf("mode %04o: writable by group or others", st.Mode&0o7777)
	}
	return &seccompCache{dir: fd}, nil
}

// seccompCacheKey is the SHA-256 over everything the compiled program and
// the refusals skipped on a hit depend on: the profile (json.Marshal of
// the decoded struct, deterministic), the routes annotation, the kernel
// flags, libseccomp's version, the running kernel (libseccomp chooses its
// API level from what the kernel supports), the architecture, and this
// executable's identity. glove-shim is linked statically (Makefile), so
// its identity covers libseccomp's code and package seccomp's tables too;
// stat rather than a hash of the 6 MB file, because any reinstall changes
// the inode or the times, and a start cannot afford reading the binary.
func seccompCacheKey(s *specs.LinuxSeccomp, routes *string, flags uint) ([sha256.Size]byte, error) {
	var key [sha256.Size]byte
	profile, err := json.Marshal(s)
	if err != nil {
		return key, fmt.Errorf("encode profile: %w", err)
	}
	var exe unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &exe); err != nil {
		return key, fmt.Errorf("stat /proc/self/exe: %w", err)
	}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return key, fmt.Errorf("uname: %w", err)
	}
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	number := func(v uint64) { field(binary.LittleEndian.AppendUint64(nil, v)) }
	field([]byte("glove-shim seccomp cache key 1"))
	field(profile)
	if routes != nil {
		number(1)
		field([]byte(*routes))
	} else {
		number(0)
	}
	number(uint64(flags))
	field([]byte(seccomp.LibraryVersion()))
	field(bytes.TrimRight(uts.Release[:], "\x00"))
	field(bytes.TrimRight(uts.Version[:], "\x00"))
	field(bytes.TrimRight(uts.Machine[:], "\x00"))
	field([]byte(runtime.GOARCH))
	for _, v := range []uint64{exe.Dev, exe.Ino, uint64(exe.Size), uint64(exe.Mtim.Sec), uint64(exe.Mtim.Nsec),
		uint64(exe.Ctim.Sec), uint64(exe.Ctim.Nsec)} {
		number(v)
	}
	h.Sum(key[:0])
	return key, nil
}

// lookup returns the program cached for the bundle's profile under the
// given kernel flags. On a miss it returns nil and, unless c is nil or
// the key cannot be made (no /proc, say: that start just compiles), a
// function that stores the program compiled instead, replacing an entry
// get refused.
func (c *seccompCache) lookup(s *specs.Spec, flags uint) ([]byte, func(prog []byte) error) {
	if c == nil {
		return nil, nil
	}
	var routes *string
	if v, ok := s.Annotations[seccomp.RoutesAnnotation]; ok {
		routes = &v
	}
	key, err := seccompCacheKey(s.Linux.Seccomp, routes, flags)
	if err != nil {
		return nil, nil
	}
	prog, err := c.get(key, flags)
	if err == nil {
		return prog, nil
	}
	replace := !errors.Is(err, unix.ENOENT)
	return nil, func(prog []byte) error { return c.put(key, flags, prog, replace) }
}

// encodeCacheEntry is an entry: magic, key, flags, program length, the
// program (native-endian struct sock_filter, as libseccomp exported it),
// and a SHA-256 over all of that, which catches a torn or damaged file.
func encodeCacheEntry(key [sha256.Size]byte, flags uint, prog []byte) []byte {
	b := make([]byte, 0, cacheHeader+len(prog)+sha256.Size)
	b = append(b, seccompCacheMagic...)
	b = append(b, key[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(flags))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(prog)))
	b = append(b, prog...)
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

// errCacheEntry is wrapped by every refusal of an entry's bytes.
var errCacheEntry = errors.New("bad seccomp cache entry")

// decodeCacheEntry decodes untrusted bytes (a file any process of the
// service user could have written, or a crash could have torn) and
// returns its key, flags and program. The program is a copy.
func decodeCacheEntry(b []byte) ([sha256.Size]byte, uint, []byte, error) {
	var key [sha256.Size]byte
	if len(b) < cacheHeader+sha256.Size || len(b) > maxCacheFile {
		return key, 0, nil, fmt.Errorf("%w: %d bytes, want %d..%d", errCacheEntry, len(b), cacheHeader+sha256.Size, maxCacheFile)
	}
	body, sum := b[:len(b)-sha256.Size], b[len(b)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return key, 0, nil, fmt.Errorf("%w: checksum mismatch", errCacheEntry)
	}
	if string(body[:len(seccompCacheMagic)]) != seccompCacheMagic {
		return key, 0, nil, fmt.Errorf("%w: bad magic", errCacheEntry)
	}
	rest := body[len(seccompCacheMagic):]
	copy(key[:], rest[:sha256.Size])
	rest = rest[sha256.Size:]
	flags := binary.LittleEndian.Uint64(rest[:8])
	n := binary.LittleEndian.Uint32(rest[8:12])
	prog := rest[12:]
	switch {
	case flags&^cacheFlags != 0 || flags&unix.SECCOMP_FILTER_FLAG_TSYNC == 0:
		return key, 0, nil, fmt.Errorf("%w: flags %#x", errCacheEntry, flags)
	case uint64(n) != uint64(len(prog)):
		return key, 0, nil, fmt.Errorf("%w: program length %d, %d bytes follow", errCacheEntry, n, len(prog))
	case n == 0 || n%8 != 0 || n/8 > maxCachedInsns:
		return key, 0, nil, fmt.Errorf("%w: program length %d: want a multiple of 8, 8..%d", errCacheEntry, n, maxCachedInsns*8)
	}
	return key, uint(flags), slices.Clone(prog), nil
}

// entryName is the file name of key's entry.
func entryName(key [sha256.Size]byte) string { return hex.EncodeToString(key[:]) + cacheSuffix }

// entryHow opens an entry: beneath the directory, through no link of any
// kind. O_NONBLOCK: a FIFO planted under an entry's name must not block
// the start (fstat then refuses it).
var entryHow = unix.OpenHow{
	Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK,
	Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
}

// get returns the program cached under key for flags. An error wrapping
// unix.ENOENT is a plain miss; any other error is an entry that exists
// and was refused (put then replaces it).
func (c *seccompCache) get(key [sha256.Size]byte, flags uint) ([]byte, error) {
	name := entryName(key)
	fd, err := unix.Openat2(c.dir, name, &entryHow)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("fstat %s: %w", name, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, fmt.Errorf("%s: %w: not a regular file", name, errCacheEntry)
	case int(st.Uid) != os.Geteuid():
		return nil, fmt.Errorf("%s: %w: owned by uid %d", name, errCacheEntry, st.Uid)
	case st.Nlink != 1:
		// Another name for the file is another way to have written it.
		return nil, fmt.Errorf("%s: %w: %d links", name, errCacheEntry, st.Nlink)
	case st.Mode&0o7777 != 0o600:
		return nil, fmt.Errorf("%s: %w: mode %04o", name, errCacheEntry, st.Mode&0o7777)
	case st.Size > int64(maxCacheFile):
		return nil, fmt.Errorf("%s: %w: %d bytes", name, errCacheEntry, st.Size)
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(maxCacheFile)+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	k, fl, prog, err := decodeCacheEntry(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if k != key || fl != flags {
		return nil, fmt.Errorf("%s: %w: another key or other flags", name, errCacheEntry)
	}
	return prog, nil
}

// put stores prog under key. Without fsync, deliberately: a lost entry is
// compiled again, and a torn one (a crash before its data reached the
// disk) fails decodeCacheEntry's length or checksum and is replaced. The
// file is written unnamed (O_TMPFILE) and linked in complete, so no other
// start ever reads it half-written; replace removes a refused entry
// first (linkat does not replace a name).
func (c *seccompCache) put(key [sha256.Size]byte, flags uint, prog []byte, replace bool) error {
	if err := c.prune(); err != nil {
		return err
	}
	fd, err := unix.Openat(c.dir, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("open an unnamed entry: %w", err)
	}
	f := os.NewFile(uintptr(fd), "seccomp-cache-entry")
	defer f.Close()
	// Whatever the umask: get accepts exactly 0600.
	if err := unix.Fchmod(fd, 0o600); err != nil {
		return fmt.Errorf("fchmod the unnamed entry: %w", err)
	}
	if _, err := f.Write(encodeCacheEntry(key, flags, prog)); err != nil {
		return fmt.Errorf("write the unnamed entry: %w", err)
	}
	name := entryName(key)
	if replace {
		if err := unix.Unlinkat(c.dir, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("remove the refused entry %s: %w", name, err)
		}
	}
	// AT_EMPTY_PATH would need CAP_DAC_READ_SEARCH; the descriptor's
	// /proc link does not.
	err = unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), c.dir, name, unix.AT_SYMLINK_FOLLOW)
	if errors.Is(err, unix.EEXIST) {
		// Another start of the same profile linked it first.
		return nil
	}
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	return nil
}

// prune removes the oldest entries (by modification time) until fewer
// than maxCacheEntries remain, so that the directory stays bounded.
func (c *seccompCache) prune() error {
	dfd, err := unix.Openat(c.dir, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open to list: %w", err)
	}
	d := os.NewFile(uintptr(dfd), "seccomp-cache")
	names, err := d.Readdirnames(-1)
	if cerr := d.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	type entry struct {
		name string
		age  unix.Timespec
	}
	var ents []entry
	for _, n := range names {
		if len(n) != 2*sha256.Size+len(cacheSuffix) || !strings.HasSuffix(n, cacheSuffix) {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(c.dir, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // another start removed it
			}
			return fmt.Errorf("stat %s: %w", n, err)
		}
		ents = append(ents, entry{n, st.Mtim})
	}
	if len(ents) < maxCacheEntries {
		return nil
	}
	slices.SortFunc(ents, func(a, b entry) int {
		if c := cmp.Compare(a.age.Sec, b.age.Sec); c != 0 {
			return c
		}
		return cmp.Compare(a.age.Nsec, b.age.Nsec)
	})
	for _, e := range ents[:len(ents)-maxCacheEntries+1] {
		if err := unix.Unlinkat(c.dir, e.name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("remove %s: %w", e.name, err)
		}
	}
	return nil
}
