// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/glove-sandbox/glove/filetype"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/engine/discovery"
	"golang.org/x/sys/unix"
)

// Schema is the first field of the digest preimage.
const Schema = "glove.stage-tree-v1"

// Bounds of one staged closure.
const (
	// MaxBytes bounds the total content of the regular files.
	MaxBytes = 4 << 30
	// MaxEntries bounds the entries below the root (directories, files,
	// symbolic links).
	MaxEntries = 200_000
	// MaxDepth bounds directory nesting (the walk holds one descriptor
	// per level).
	MaxDepth = 256
)

// HarnessHomes are the directory names of the five discovery runtimes'
// harness homes and configuration: ~/.codex (codex), ~/.claude
// (claude-code), ~/.pi (pi), ~/.copilot (copilot) and ~/.config (opencode,
// and the XDG home of the others). A harness home holds credentials and
// session history; it is never staged, and nothing beneath one is read.
var HarnessHomes = []string{".claude", ".codex", ".config", ".copilot", ".pi"}

// Kind is the type of a staged entry.
type Kind uint8

// Entry kinds.
const (
	Dir Kind = iota + 1
	File
	Symlink
)

func (k Kind) String() string {
	switch k {
	case Dir:
		return "directory"
	case File:
		return "file"
	case Symlink:
		return "symbolic link"
	}
	return "unknown"
}

// Entry is one entry below the root of a tree.
type Entry struct {
	Kind   Kind
	Path   string // relative to the staged root, "/"-separated
	Exec   bool   // files: staged mode 0555 (else 0444)
	Size   int64  // files: content length
	SHA256 [32]byte
	Target string // symbolic links: the target text

	src      string // files: path relative to the walk's root descriptor
	dev, ino uint64
	// mode, mtime and ctime are the entry's when it was scanned: a
	// launch's TreePin compares them again (pin.go).
	mode         uint32
	mtime, ctime unix.Timespec
}

// Tree is a walked and hashed closure, its root still open.
type Tree struct {
	Source     string // canonical SOURCE (or the tree's own path)
	EntryPoint string // relative path of the entry point
	// Interpreter is the entry point's ELF program interpreter
	// (PT_INTERP), "" for a static executable: the host's, which the
	// template must grant for the program to start.
	Interpreter string
	Entries     []Entry
	Files       int64
	Dirs        int64 // below the root
	Symlinks    int64
	Bytes       int64
	Digest      string

	root   *os.File // a directory, read-only (for a single file: its parent)
	single bool     // SOURCE is a single file
	dev    uint64
	label  string // for messages: the path the walk started from
}

// Close releases the root descriptor.
func (t *Tree) Close() error {
	if t == nil || t.root == nil {
		return nil
	}
	err := t.root.Close()
	t.root = nil
	return err
}

// Report is what `glove policy stage` prints.
type Report struct {
	Runtime    string `json:"runtime"`
	Executable string `json:"executable"`
	Source     string `json:"source"`
	Digest     string `json:"digest"`
	StagedPath string `json:"staged_path"`
	SearchPath string `json:"search_path"`
	EntryPoint string `json:"entry_point"`
	// Interpreter is the entry point's program interpreter (an ELF
	// PT_INTERP such as /lib64/ld-linux-x86-64.so.2), omitted for a
	// static executable: it and the libraries it loads come from the
	// host, through the template's read_only_paths.
	Interpreter string `json:"interpreter,omitempty"`
	Files       int64  `json:"files"`
	Directories int64  `json:"directories"`
	Symlinks    int64  `json:"symlinks"`
	Bytes       int64  `json:"bytes"`
	// SourceRoots is the command's one line on glove-mounter's source
	// roots (set by `glove policy stage`, which reads its bounds).
	SourceRoots   string `json:"source_roots,omitempty"`
	AlreadyStaged bool   `json:"already_staged"`
	DryRun        bool   `json:"dry_run"`
}

// PolicyLine is the line to put in a policy's launch.
func (r *Report) PolicyLine() string {
	return fmt.Sprintf("executable_search_paths: [%s]", strconv.Quote(r.SearchPath))
}

// Progress, when set, is told the bytes done out of the total of one
// phase: "hash" (reading SOURCE), "copy" (writing the temporary copy) and
// "verify" (re-hashing a copy or an existing staged tree).
type Progress func(phase string, done, total int64)

// Options of Stage.
type Options struct {
	Runtime   string
	Source    string
	Directory string
	DryRun    bool // walk, hash and report; write nothing
	Progress  Progress
}

// hooks for tests: called after the source was hashed and before the
// copy starts, and before each file is copied.
var (
	testHookBeforeCopy func()
	testHookCopyFile   func(rel string) error
)

const (
	resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV
	fileReadFlags  = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC
	dirReadFlags   = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
)

// open2 is openat2, retried on EINTR and EAGAIN (which openat2 returns
// with RESOLVE_* when a concurrent rename may have raced a lookup).
func open2(dirfd int, name string, how unix.OpenHow) (int, error) {
	for i := 0; ; i++ {
		fd, err := unix.Openat2(dirfd, name, &how)
		if (errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN)) && i < 16 {
			continue
		}
		return fd, err
	}
}

func isCanonical(p string) bool { return filepath.IsAbs(p) && filepath.Clean(p) == p }

// within reports whether p is base or lies beneath it (both canonical).
func within(p, base string) bool {
	return p == base || base == "/" || strings.HasPrefix(p, base+"/")
}

// harnessComponent returns the first component of p that is a harness
// home, or "".
func harnessComponent(p string) string {
	for _, c := range strings.Split(p, "/") {
		if slices.Contains(HarnessHomes, c) {
			return c
		}
	}
	return ""
}

// Walk canonicalizes source, refuses a harness home, opens it, scans it
// (every refusal happens here, before any content is read), hashes every
// file and finds runtime's entry point. The caller closes the Tree.
func Walk(runtime, source string, progress Progress) (*Tree, error) {
	exe, ok := policy.DiscoveryExecutable(runtime)
	if !ok {
		return nil, fmt.Errorf("unknown runtime %q (one of %s)", runtime, strings.Join(policy.DiscoveryRuntimes(), ", "))
	}
	if !filepath.IsAbs(source) {
		return nil, fmt.Errorf("source %q is not an absolute path", source)
	}
	if c := harnessComponent(filepath.Clean(source)); c != "" {
		return nil, fmt.Errorf("source %s: lies in a harness home (%s); a harness home is never staged", source, c)
	}
	canon, err := filepath.EvalSymlinks(source)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	if c := harnessComponent(canon); c != "" {
		return nil, fmt.Errorf("source %s: lies in a harness home (%s); a harness home is never staged", canon, c)
	}
	if canon == "/" {
		return nil, errors.New("source: refusing to stage /")
	}
	parentDir, base := filepath.Split(canon)
	pfd, err := open2(unix.AT_FDCWD, parentDir, unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, fmt.Errorf("source %s: open: %w", parentDir, err)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		unix.Close(pfd)
		return nil, fmt.Errorf("source %s: %w", canon, err)
	}
	t := &Tree{Source: canon, label: canon, dev: uint64(st.Dev)}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		// The closure is the file alone, staged as EXE; the walk's root
		// is the file's parent directory.
		t.root, t.single = os.NewFile(uintptr(pfd), parentDir), true
		if st.Mode&0o111 == 0 {
			t.Close()
			return nil, fmt.Errorf("source %s: not executable (mode %04o); no entry point", canon, st.Mode&0o7777)
		}
		t.Entries = []Entry{{Kind: File, Path: exe, Exec: true, Size: st.Size, src: base, dev: uint64(st.Dev), ino: st.Ino}}
		t.Files, t.Bytes = 1, st.Size
		if st.Size > MaxBytes {
			t.Close()
			return nil, fmt.Errorf("source %s: %d bytes, more than the %d-byte bound", canon, st.Size, int64(MaxBytes))
		}
	case unix.S_IFDIR:
		fd, err := open2(pfd, base, unix.OpenHow{Flags: dirReadFlags, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS})
		unix.Close(pfd)
		if err != nil {
			return nil, fmt.Errorf("source %s: open: %w", canon, err)
		}
		t.root = os.NewFile(uintptr(fd), canon)
		if err := t.scan(); err != nil {
			t.Close()
			return nil, err
		}
	default:
		unix.Close(pfd)
		return nil, fmt.Errorf("source %s: is a %s; only a directory or a regular file is staged", canon, filetype.Name(st.Mode))
	}
	return t.complete(func() error { return t.findEntryPoint(exe) }, "hash", progress)
}

// openTree opens an existing directory tree (a staged tree or a
// temporary copy) below dirfd, scans and hashes it.
func openTree(dirfd int, name, label string, progress Progress) (*Tree, error) {
	fd, err := open2(dirfd, name, unix.OpenHow{Flags: dirReadFlags, Resolve: resolveBeneath})
	if err != nil {
		return nil, fmt.Errorf("%s: open: %w", label, err)
	}
	t := &Tree{Source: label, label: label, root: os.NewFile(uintptr(fd), label)}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Close()
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	t.dev = uint64(st.Dev)
	return t.complete(t.scan, "verify", progress)
}

// complete runs first, hashes every file (verb names it for progress)
// and sets the digest; on any failure it closes t.
func (t *Tree) complete(first func() error, verb string, progress Progress) (*Tree, error) {
	if err := first(); err != nil {
		t.Close()
		return nil, err
	}
	if err := t.hash(verb, progress); err != nil {
		t.Close()
		return nil, err
	}
	t.Digest = Digest(t.Entries)
	return t, nil
}

// scan walks the tree below t.root (metadata only) and fills t.Entries.
func (t *Tree) scan() error {
	return t.scanDir(t.root, "", 1)
}

func (t *Tree) where(rel string) string {
	if rel == "" {
		return t.label
	}
	return t.label + "/" + rel
}

func (t *Tree) scanDir(dir *os.File, rel string, depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("%s: more than %d levels of directories", t.where(rel), MaxDepth)
	}
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("%s: read directory: %w", t.where(rel), err)
	}
	slices.Sort(names) // bytewise
	dfd := int(dir.Fd())
	for _, name := range names {
		crel := name
		if rel != "" {
			crel = rel + "/" + name
		}
		where := t.where(crel)
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if uint64(st.Dev) != t.dev {
			return fmt.Errorf("%s: is a mount point (another file system than the source's); not staged", where)
		}
		if len(t.Entries)+1 > MaxEntries {
			return fmt.Errorf("%s: more than %d entries", t.label, MaxEntries)
		}
		e := Entry{Path: crel, src: crel, dev: uint64(st.Dev), ino: st.Ino, mode: st.Mode, mtime: st.Mtim, ctime: st.Ctim}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if slices.Contains(HarnessHomes, name) {
				return fmt.Errorf("%s: a harness home directory (%s); a harness home is never staged", where, name)
			}
			e.Kind = Dir
			t.Entries = append(t.Entries, e)
			t.Dirs++
			fd, err := open2(dfd, name, unix.OpenHow{Flags: dirReadFlags, Resolve: resolveBeneath})
			if err != nil {
				return fmt.Errorf("%s: open: %w", where, err)
			}
			sub := os.NewFile(uintptr(fd), where)
			var sst unix.Stat_t
			if err := unix.Fstat(fd, &sst); err != nil || sst.Ino != st.Ino || sst.Dev != st.Dev {
				sub.Close()
				return fmt.Errorf("%s: changed while it was being staged", where)
			}
			err = t.scanDir(sub, crel, depth+1)
			sub.Close()
			if err != nil {
				return err
			}
		case unix.S_IFREG:
			e.Kind, e.Exec, e.Size = File, st.Mode&0o111 != 0, st.Size
			t.Bytes += st.Size
			if t.Bytes > MaxBytes {
				return fmt.Errorf("%s: more than %d bytes of files", t.label, int64(MaxBytes))
			}
			t.Entries = append(t.Entries, e)
			t.Files++
		case unix.S_IFLNK:
			buf := make([]byte, unix.PathMax+1)
			n, err := unix.Readlinkat(dfd, name, buf)
			if err != nil {
				return fmt.Errorf("%s: readlink: %w", where, err)
			}
			if n > unix.PathMax {
				return fmt.Errorf("%s: symbolic link target longer than %d bytes", where, unix.PathMax)
			}
			e.Kind, e.Target = Symlink, string(buf[:n])
			if err := linkInside(crel, e.Target); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			t.Entries = append(t.Entries, e)
			t.Symlinks++
		default:
			return fmt.Errorf("%s: is a %s; only directories, regular files and symbolic links are staged", where, filetype.Name(st.Mode))
		}
	}
	return nil
}

// linkInside checks a symbolic link at rel (relative to the root) with
// target: relative, no ".." after a name, resolving lexically inside the
// root.
func linkInside(rel, target string) error {
	if target == "" {
		return errors.New("symbolic link with an empty target; not staged")
	}
	if path.IsAbs(target) {
		return fmt.Errorf("symbolic link to an absolute path %q; only relative links inside the source are staged", target)
	}
	named := false
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "", ".":
		case "..":
			if named {
				return fmt.Errorf("symbolic link target %q has \"..\" after a name; not staged", target)
			}
		default:
			named = true
		}
	}
	if r := path.Join(path.Dir(rel), target); r == ".." || strings.HasPrefix(r, "../") {
		return fmt.Errorf("symbolic link target %q escapes the source tree; not staged", target)
	}
	return nil
}

// srcName is the path of e's file for messages.
func (t *Tree) srcName(e *Entry) string {
	if t.single {
		return t.Source
	}
	return t.where(e.src)
}

// openFile opens the regular file of e below the root, checking it is
// still the file the scan saw.
func (t *Tree) openFile(e *Entry) (*os.File, error) {
	where := t.srcName(e)
	fd, err := open2(int(t.root.Fd()), e.src, unix.OpenHow{Flags: fileReadFlags, Resolve: resolveBeneath})
	if err != nil {
		return nil, fmt.Errorf("%s: open: %w", where, err)
	}
	f := os.NewFile(uintptr(fd), where)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || uint64(st.Dev) != e.dev || st.Ino != e.ino || st.Size != e.Size || (st.Mode&0o111 != 0) != e.Exec {
		f.Close()
		return nil, fmt.Errorf("%s: changed while it was being staged", where)
	}
	return f, nil
}

// readFile copies e's content to w (when not nil) and returns its
// SHA-256, failing when the content is not exactly e.Size bytes.
func (t *Tree) readFile(e *Entry, w io.Writer, done *int64, total int64, phase string, progress Progress) ([32]byte, error) {
	f, err := t.openFile(e)
	if err != nil {
		return [32]byte{}, err
	}
	defer f.Close()
	h := sha256.New()
	dst := io.Writer(h)
	if w != nil {
		dst = io.MultiWriter(h, w)
	}
	buf := make([]byte, 256<<10)
	var n int64
	for {
		k, rerr := f.Read(buf)
		if k > 0 {
			n += int64(k)
			if n > e.Size {
				return [32]byte{}, fmt.Errorf("%s: changed while it was being staged (grew)", f.Name())
			}
			if _, err := dst.Write(buf[:k]); err != nil {
				return [32]byte{}, fmt.Errorf("%s: write: %w", f.Name(), err)
			}
			*done += int64(k)
			if progress != nil {
				progress(phase, *done, total)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return [32]byte{}, fmt.Errorf("%s: read: %w", f.Name(), rerr)
		}
	}
	if n != e.Size {
		return [32]byte{}, fmt.Errorf("%s: changed while it was being staged (shrank)", f.Name())
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum, nil
}

// hash fills the SHA-256 of every file.
func (t *Tree) hash(phase string, progress Progress) error {
	var done int64
	for i := range t.Entries {
		e := &t.Entries[i]
		if e.Kind != File {
			continue
		}
		sum, err := t.readFile(e, nil, &done, t.Bytes, phase, progress)
		if err != nil {
			return err
		}
		e.SHA256 = sum
	}
	if progress != nil {
		progress(phase, t.Bytes, t.Bytes)
	}
	return nil
}

// Digest is the content digest of a tree's entries (see the package doc
// for the preimage).
func Digest(entries []Entry) string {
	h := sha256.New()
	var lenbuf [8]byte
	field := func(b []byte) {
		binary.BigEndian.PutUint64(lenbuf[:], uint64(len(b)))
		h.Write(lenbuf[:])
		h.Write(b)
	}
	field([]byte(Schema))
	for _, e := range entries {
		switch e.Kind {
		case Dir:
			field([]byte("d"))
			field([]byte(e.Path))
		case File:
			field([]byte("f"))
			field([]byte(e.Path))
			if e.Exec {
				field([]byte("1"))
			} else {
				field([]byte("0"))
			}
			field([]byte(strconv.FormatInt(e.Size, 10)))
			field(e.SHA256[:])
		case Symlink:
			field([]byte("l"))
			field([]byte(e.Path))
			field([]byte(e.Target))
		default:
			panic("stage: entry of unknown kind")
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Stage walks and hashes o.Source and, unless o.DryRun, copies it into
// o.Directory/<digest>.
func Stage(o Options) (*Report, error) {
	exe, ok := policy.DiscoveryExecutable(o.Runtime)
	if !ok {
		return nil, fmt.Errorf("unknown runtime %q (one of %s)", o.Runtime, strings.Join(policy.DiscoveryRuntimes(), ", "))
	}
	if !isCanonical(o.Directory) {
		return nil, fmt.Errorf("directory %q is not an absolute canonical path", o.Directory)
	}
	if !filepath.IsAbs(o.Source) {
		return nil, fmt.Errorf("source %q is not an absolute path", o.Source)
	}
	dirFile, err := discovery.OpenDirectory(o.Directory)
	if err != nil {
		return nil, fmt.Errorf("directory %s: %w", o.Directory, err)
	}
	defer dirFile.Close()
	dirfd := int(dirFile.Fd())

	// Containment is checked on the canonical source before it is walked,
	// and again (Walk canonicalizes too) on what was walked.
	if canon, err := filepath.EvalSymlinks(o.Source); err == nil {
		if err := checkContainment(canon, o.Directory); err != nil {
			return nil, err
		}
	}
	t, err := Walk(o.Runtime, o.Source, o.Progress)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	if err := checkContainment(t.Source, o.Directory); err != nil {
		return nil, err
	}

	staged := o.Directory + "/" + t.Digest
	rep := &Report{
		Runtime:     o.Runtime,
		Executable:  exe,
		Source:      t.Source,
		Digest:      t.Digest,
		StagedPath:  staged,
		SearchPath:  path.Dir(staged + "/" + t.EntryPoint),
		EntryPoint:  staged + "/" + t.EntryPoint,
		Interpreter: t.Interpreter,
		Files:       t.Files,
		Directories: t.Dirs,
		Symlinks:    t.Symlinks,
		Bytes:       t.Bytes,
		DryRun:      o.DryRun,
	}
	// alreadyStaged admits a copy already in place only when identical.
	alreadyStaged := func() (bool, error) {
		same, err := existing(dirfd, t.Digest, staged, o.Progress)
		rep.AlreadyStaged = same
		return same, err
	}
	if same, err := alreadyStaged(); err != nil {
		return nil, err
	} else if same {
		return rep, nil
	}
	if o.DryRun {
		return rep, nil
	}
	if testHookBeforeCopy != nil {
		testHookBeforeCopy()
	}
	tmp, err := tempName()
	if err != nil {
		return nil, err
	}
	if err := unix.Mkdirat(dirfd, tmp, 0o700); err != nil {
		return nil, fmt.Errorf("%s/%s: mkdir: %w", o.Directory, tmp, err)
	}
	committed := false
	defer func() {
		if !committed {
			removeAll(dirfd, tmp)
		}
	}()
	tmpPath := o.Directory + "/" + tmp
	if err := copyTree(t, dirfd, tmp, tmpPath, o.Progress); err != nil {
		return nil, err
	}
	cp, err := openTree(dirfd, tmp, tmpPath, o.Progress)
	if err != nil {
		return nil, fmt.Errorf("verify the copy: %w", err)
	}
	got := cp.Digest
	cp.Close()
	if got != t.Digest {
		return nil, fmt.Errorf("the copy in %s has digest %s, not %s: the source changed while it was being staged", tmpPath, got, t.Digest)
	}
	if err := finalModes(dirfd, tmp, tmpPath, t.Entries); err != nil {
		return nil, err
	}
	if err := unix.Renameat2(dirfd, tmp, dirfd, t.Digest, unix.RENAME_NOREPLACE); err != nil {
		if errors.Is(err, unix.EEXIST) {
			// Staged concurrently: admit it only when identical.
			if same, err := alreadyStaged(); err != nil {
				return nil, err
			} else if same {
				return rep, nil
			}
		}
		return nil, fmt.Errorf("rename %s to %s: %w", tmpPath, staged, err)
	}
	committed = true
	if err := syncDir(dirfd, "."); err != nil {
		return nil, fmt.Errorf("%s: fsync: %w", o.Directory, err)
	}
	return rep, nil
}

func checkContainment(source, dir string) error {
	if within(source, dir) {
		return fmt.Errorf("source %s is inside the directory %s", source, dir)
	}
	if within(dir, source) {
		return fmt.Errorf("directory %s is inside the source %s", dir, source)
	}
	return nil
}

// existing reports whether dir/<digest> exists with the same content; it
// fails when it exists with other content (never overwritten) or is not a
// directory.
func existing(dirfd int, digest, staged string, progress Progress) (bool, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, digest, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("%s: %w", staged, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return false, fmt.Errorf("%s exists and is a %s; not overwritten", staged, filetype.Name(st.Mode))
	}
	t, err := openTree(dirfd, digest, staged, progress)
	if err != nil {
		return false, fmt.Errorf("%s exists and cannot be verified (%w); not overwritten", staged, err)
	}
	defer t.Close()
	if t.Digest != digest {
		return false, fmt.Errorf("%s exists with different content; not overwritten (its content digest is %s)", staged, t.Digest)
	}
	return true, nil
}

func tempName() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random name: %w", err)
	}
	return ".stage-" + hex.EncodeToString(b[:]), nil
}

// openParent opens the directory that holds rel below root (root itself
// for a top-level entry) and returns it with rel's last component.
func openParent(root int, rel string) (int, string, error) {
	dir, base := path.Split(rel)
	if dir == "" {
		dir = "."
	}
	fd, err := open2(root, strings.TrimSuffix(dir, "/"), unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: resolveBeneath,
	})
	return fd, base, err
}

// copyTree copies t into the empty directory dirfd/tmp.
func copyTree(t *Tree, dirfd int, tmp, tmpPath string, progress Progress) error {
	rfd, err := open2(dirfd, tmp, unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: resolveBeneath})
	if err != nil {
		return fmt.Errorf("%s: open: %w", tmpPath, err)
	}
	defer unix.Close(rfd)
	var done int64
	for i := range t.Entries {
		e := &t.Entries[i]
		where := tmpPath + "/" + e.Path
		pfd, base, err := openParent(rfd, e.Path)
		if err != nil {
			return fmt.Errorf("%s: open parent: %w", where, err)
		}
		err = copyEntry(t, e, pfd, base, where, &done, progress)
		unix.Close(pfd)
		if err != nil {
			return err
		}
	}
	if progress != nil {
		progress("copy", t.Bytes, t.Bytes)
	}
	return nil
}

func copyEntry(t *Tree, e *Entry, pfd int, base, where string, done *int64, progress Progress) error {
	switch e.Kind {
	case Dir:
		if err := unix.Mkdirat(pfd, base, 0o700); err != nil {
			return fmt.Errorf("%s: mkdir: %w", where, err)
		}
	case Symlink:
		if err := unix.Symlinkat(e.Target, pfd, base); err != nil {
			return fmt.Errorf("%s: symlink: %w", where, err)
		}
	case File:
		if testHookCopyFile != nil {
			if err := testHookCopyFile(e.Path); err != nil {
				return err
			}
		}
		fd, err := open2(pfd, base, unix.OpenHow{
			Flags:   unix.O_WRONLY | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Mode:    0o600,
			Resolve: resolveBeneath,
		})
		if err != nil {
			return fmt.Errorf("%s: create: %w", where, err)
		}
		out := os.NewFile(uintptr(fd), where)
		defer out.Close()
		sum, err := t.readFile(e, out, done, t.Bytes, "copy", progress)
		if err != nil {
			return err
		}
		if !bytes.Equal(sum[:], e.SHA256[:]) {
			return fmt.Errorf("%s: changed while it was being staged (content differs from when it was hashed)", t.srcName(e))
		}
		mode := uint32(0o444)
		if e.Exec {
			mode = 0o555
		}
		if err := unix.Fchmod(fd, mode); err != nil {
			return fmt.Errorf("%s: chmod: %w", where, err)
		}
		if err := out.Sync(); err != nil {
			return fmt.Errorf("%s: fsync: %w", where, err)
		}
		if err := out.Close(); err != nil {
			return fmt.Errorf("%s: close: %w", where, err)
		}
	}
	return nil
}

// finalModes makes every directory of the copy (deepest first, the root
// last) mode 0555 and syncs it.
func finalModes(dirfd int, tmp, tmpPath string, entries []Entry) error {
	rfd, err := open2(dirfd, tmp, unix.OpenHow{Flags: dirReadFlags, Resolve: resolveBeneath})
	if err != nil {
		return fmt.Errorf("%s: open: %w", tmpPath, err)
	}
	defer unix.Close(rfd)
	for i := len(entries) - 1; i >= 0; i-- {
		e := &entries[i]
		if e.Kind != Dir {
			continue
		}
		if err := sealDir(rfd, e.Path); err != nil {
			return fmt.Errorf("%s/%s: %w", tmpPath, e.Path, err)
		}
	}
	if err := sealDir(rfd, "."); err != nil {
		return fmt.Errorf("%s: %w", tmpPath, err)
	}
	return nil
}

func sealDir(root int, rel string) error {
	fd, err := open2(root, rel, unix.OpenHow{Flags: dirReadFlags, Resolve: resolveBeneath})
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Fchmod(fd, 0o555); err != nil {
		return fmt.Errorf("chmod: %w", err)
	}
	if err := unix.Fsync(fd); err != nil {
		return fmt.Errorf("fsync: %w", err)
	}
	return nil
}

func syncDir(dirfd int, rel string) error {
	fd, err := open2(dirfd, rel, unix.OpenHow{Flags: dirReadFlags, Resolve: resolveBeneath})
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Fsync(fd)
}

// removeAll removes parent/name and everything below it, working from
// descriptors, making each directory writable first.
func removeAll(parent int, name string) error {
	fd, err := open2(parent, name, unix.OpenHow{Flags: dirReadFlags, Resolve: resolveBeneath})
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return unix.Unlinkat(parent, name, 0)
		}
		return err
	}
	d := os.NewFile(uintptr(fd), name)
	defer d.Close()
	if err := unix.Fchmod(fd, 0o700); err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	var first error
	for _, n := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			first = cmpErr(first, err)
			continue
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			first = cmpErr(first, removeAll(fd, n))
		} else {
			first = cmpErr(first, unix.Unlinkat(fd, n, 0))
		}
	}
	return cmpErr(first, unix.Unlinkat(parent, name, unix.AT_REMOVEDIR))
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}
