// SPDX-License-Identifier: Apache-2.0

package library

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// newRoot makes an empty bundle root (0700, owned by the test's uid).
func newRoot(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bundles")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

func sha(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// putRaw stores data in root under name with mode 0600 and returns the
// path.
func putRaw(t *testing.T, root, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(root, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func exampleManifest(t *testing.T) *Manifest {
	t.Helper()
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func openRoot(t *testing.T, root string) *Root {
	t.Helper()
	r, err := OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestOpenGoodBundle(t *testing.T) {
	root := newRoot(t)
	m := exampleManifest(t)
	digest, err := Write(root, m)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(root, digest))
	if err != nil || st.Mode() != 0o600 {
		t.Fatalf("written bundle: %v %v", st.Mode(), err)
	}
	r := openRoot(t, root)
	var rst unix.Stat_t
	if err := unix.Stat(root, &rst); err != nil {
		t.Fatal(err)
	}
	if r.Dev() != uint64(rst.Dev) || r.Ino() != rst.Ino {
		t.Errorf("root identity %d/%d, want %d/%d", r.Dev(), r.Ino(), rst.Dev, rst.Ino)
	}
	b, err := r.Open(digest)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Digest != digest || !reflect.DeepEqual(b.Manifest, m) {
		t.Fatalf("bundle %s %+v", b.Digest, b.Manifest)
	}
	data, err := io.ReadAll(b.File)
	if err != nil {
		t.Fatal(err)
	}
	if sha(data) != digest {
		t.Error("the descriptor is not positioned at 0 or reads other bytes")
	}
	if fl, err := unix.FcntlInt(b.File.Fd(), unix.F_GETFL, 0); err != nil || fl&unix.O_ACCMODE != unix.O_RDONLY {
		t.Errorf("descriptor flags %#x %v", fl, err)
	}
	// Write refuses to overwrite, and says which digest exists.
	d2, err := Write(root, m)
	if !errors.Is(err, fs.ErrExist) || d2 != digest {
		t.Errorf("second Write: %s %v", d2, err)
	}
	// Any well-formed file whose name is its hash is accepted, canonical
	// or not.
	pretty, _ := os.ReadFile(examplePath)
	pd := sha(pretty)
	putRaw(t, root, pd, pretty)
	if b2, err := r.Open(pd); err != nil {
		t.Error(err)
	} else {
		b2.Close()
	}
}

func TestOpenRootRefuses(t *testing.T) {
	for _, mode := range []os.FileMode{0o755, 0o750, 0o711, 0o500, 0o701} {
		root := newRoot(t)
		os.Chmod(root, mode)
		_, err := OpenRoot(root)
		checkOpenRefusal(t, "root mode "+mode.String(), err, ErrMode, root, fmt.Sprintf("permission bits are %04o, must be exactly 0700", mode))
	}
	root := newRoot(t)
	link := filepath.Join(filepath.Dir(root), "link")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	_, err := OpenRoot(link)
	checkOpenRefusal(t, "symlink root", err, ErrType, link, "is a symbolic link")
	_, err = OpenRoot(filepath.Join(link, "sub"))
	checkOpenRefusal(t, "symlink ancestor", err, ErrType, link, "a component of the path is a symbolic link")
	file := filepath.Join(filepath.Dir(root), "file")
	os.WriteFile(file, nil, 0o700)
	_, err = OpenRoot(file)
	checkOpenRefusal(t, "file root", err, ErrType, file, "is a regular file, not a directory")
	for _, p := range []string{"bundles", root + "/", root + "/../bundles", ""} {
		_, err = OpenRoot(p)
		checkOpenRefusal(t, "path "+p, err, ErrFormat, "", "not an absolute clean path")
	}
	_, err = OpenRoot(filepath.Join(root, "missing"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing root: %v", err)
	}
}

func TestOpenRootOwner(t *testing.T) {
	requireRoot(t)
	root := newRoot(t)
	if err := os.Chown(root, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err := OpenRoot(root)
	checkOpenRefusal(t, "root owner", err, ErrOwner, root, "owned by uid 65534, must be the effective uid 0")
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: chown to another uid")
	}
}

// checkOpenRefusal: err wraps want, is one line, names where and says
// phrase.
func checkOpenRefusal(t *testing.T, name string, err, want error, where, phrase string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: accepted", name)
		return
	}
	msg := err.Error()
	t.Logf("%s: %s", name, msg)
	if !errors.Is(err, want) || strings.ContainsAny(msg, "\n\r") || !strings.HasPrefix(msg, "library: ") ||
		!strings.Contains(msg, where) || !strings.Contains(msg, phrase) {
		t.Errorf("%s: %q, want %v naming %q and %q", name, msg, want, where, phrase)
	}
}

func TestOpenRefuses(t *testing.T) {
	good, err := Encode(exampleManifest(t))
	if err != nil {
		t.Fatal(err)
	}
	other := []byte(strings.Replace(string(good), "House rules", "House tools", 1))
	unknownKind := []byte(strings.Replace(string(good), `"kind":"behavior"`, `"kind":"agent"`, 1))
	cases := []struct {
		name   string
		setup  func(t *testing.T, root string) string // returns the digest to open
		want   error
		phrase string
	}{
		{"wrong digest", func(t *testing.T, root string) string {
			d := sha(good)
			putRaw(t, root, d, other)
			return d
		}, ErrDigest, "content hashes to sha256 " + sha(other) + ", expected " + sha(good)},
		{"mode 0644", func(t *testing.T, root string) string {
			d := sha(good)
			os.Chmod(putRaw(t, root, d, good), 0o644)
			return d
		}, ErrMode, "permission bits are 0644, must be exactly 0600"},
		{"mode 0400", func(t *testing.T, root string) string {
			d := sha(good)
			os.Chmod(putRaw(t, root, d, good), 0o400)
			return d
		}, ErrMode, "permission bits are 0400"},
		{"setuid bit", func(t *testing.T, root string) string {
			d := sha(good)
			os.Chmod(putRaw(t, root, d, good), 0o600|os.ModeSetuid)
			return d
		}, ErrMode, "permission bits are 4600"},
		{"two links inside the root", func(t *testing.T, root string) string {
			d := sha(good)
			p := putRaw(t, root, d, good)
			if err := os.Link(p, filepath.Join(root, "second")); err != nil {
				t.Fatal(err)
			}
			return d
		}, ErrLinks, "link count is 2, must be 1"},
		{"hard link to a file elsewhere", func(t *testing.T, root string) string {
			d := sha(good)
			elsewhere := putRaw(t, filepath.Dir(root), "elsewhere", good)
			if err := os.Link(elsewhere, filepath.Join(root, d)); err != nil {
				t.Fatal(err)
			}
			return d
		}, ErrLinks, "link count is 2"},
		{"symlink named by digest", func(t *testing.T, root string) string {
			d := sha(good)
			target := putRaw(t, filepath.Dir(root), "target", good)
			if err := os.Symlink(target, filepath.Join(root, d)); err != nil {
				t.Fatal(err)
			}
			return d
		}, ErrType, "is a symbolic link"},
		{"relative symlink inside the root", func(t *testing.T, root string) string {
			d := sha(good)
			putRaw(t, root, "real", good)
			if err := os.Symlink("real", filepath.Join(root, d)); err != nil {
				t.Fatal(err)
			}
			return d
		}, ErrType, "is a symbolic link"},
		{"oversize", func(t *testing.T, root string) string {
			d := sha([]byte("any name"))
			p := putRaw(t, root, d, nil)
			if err := os.Truncate(p, MaxBundleBytes+1); err != nil {
				t.Fatal(err)
			}
			return d
		}, ErrSize, "16777217 bytes, more than the 16777216 allowed"},
		{"directory named by digest", func(t *testing.T, root string) string {
			d := sha(good)
			if err := os.Mkdir(filepath.Join(root, d), 0o600); err != nil {
				t.Fatal(err)
			}
			return d
		}, ErrType, "is a directory, not a regular file"},
		{"named pipe named by digest", func(t *testing.T, root string) string {
			d := sha(good)
			if err := syscall.Mkfifo(filepath.Join(root, d), 0o600); err != nil {
				t.Fatal(err)
			}
			return d
		}, ErrType, "is a named pipe (fifo), not a regular file"},
		{"unknown kind, correctly named", func(t *testing.T, root string) string {
			d := sha(unknownKind)
			putRaw(t, root, d, unknownKind)
			return d
		}, ErrKind, `/entries/0/kind: entry 0 has kind "agent"`},
		{"bad format, correctly named", func(t *testing.T, root string) string {
			bad := []byte(`{"schema":"glove.library-bundle-v1","entries":[]}`)
			d := sha(bad)
			putRaw(t, root, d, bad)
			return d
		}, ErrFormat, "/entries: 0 entries"},
		{"upper-case digest", func(t *testing.T, root string) string {
			d := strings.ToUpper(sha(good))
			putRaw(t, root, d, good)
			return d
		}, ErrFormat, "not 64 lowercase hex"},
		{"path in digest", func(t *testing.T, root string) string { return "../" + sha(good)[3:] }, ErrFormat, "not 64 lowercase hex"},
		{"root loosened after OpenRoot", func(t *testing.T, root string) string {
			d := sha(good)
			putRaw(t, root, d, good)
			os.Chmod(root, 0o755)
			return d
		}, ErrMode, "root: wrong mode: permission bits are 0755, must be exactly 0700"},
	}
	for _, tc := range cases {
		root := newRoot(t)
		r := openRoot(t, root)
		d := tc.setup(t, root)
		b, err := r.Open(d)
		if b != nil {
			b.Close()
		}
		checkOpenRefusal(t, tc.name, err, tc.want, d, tc.phrase)
		if err != nil && !strings.Contains(err.Error(), root) {
			t.Errorf("%s: %q does not name the root", tc.name, err)
		}
	}
	// Not found.
	r := openRoot(t, newRoot(t))
	if _, err := r.Open(sha(good)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing bundle: %v", err)
	}
	r.Close()
	if _, err := r.Open(sha(good)); !errors.Is(err, os.ErrClosed) {
		t.Errorf("closed root: %v", err)
	}
}

func TestOpenOwner(t *testing.T) {
	requireRoot(t)
	good, _ := Encode(exampleManifest(t))
	root := newRoot(t)
	r := openRoot(t, root)
	d := sha(good)
	p := putRaw(t, root, d, good)
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err := r.Open(d)
	checkOpenRefusal(t, "bundle owner", err, ErrOwner, d, "owned by uid 65534, must be the effective uid 0")
	// The root's owner is checked again at every Open.
	os.Chown(p, 0, 0)
	if err := os.Chown(root, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err = r.Open(d)
	checkOpenRefusal(t, "root owner changed", err, ErrOwner, d, "root: wrong owner: owned by uid 65534")
}

// TestRootPinned: the root is the directory opened, not its path: a
// directory renamed into its place is not consulted.
func TestRootPinned(t *testing.T) {
	good, _ := Encode(exampleManifest(t))
	root := newRoot(t)
	r := openRoot(t, root)
	d := sha(good)
	moved := root + ".old"
	if err := os.Rename(root, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	putRaw(t, root, d, good)
	if _, err := r.Open(d); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("swapped root consulted: %v", err)
	}
	putRaw(t, moved, d, good)
	b, err := r.Open(d)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
}

func TestWriteRefuses(t *testing.T) {
	root := newRoot(t)
	os.Chmod(root, 0o755)
	if _, err := Write(root, exampleManifest(t)); !errors.Is(err, ErrMode) {
		t.Errorf("loose root: %v", err)
	}
	os.Chmod(root, 0o700)
	m := exampleManifest(t)
	m.Entries[0].Kind = "agent"
	if _, err := Write(root, m); !errors.Is(err, ErrKind) {
		t.Errorf("unknown kind: %v", err)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Errorf("refused writes left %d files", len(ents))
	}
}

func TestExpandSkill(t *testing.T) {
	old := syscall.Umask(0o077) // modes must not depend on the umask
	defer syscall.Umask(old)
	m := exampleManifest(t)
	skill := &m.Entries[1]
	skill.Files = append(skill.Files, File{Path: "scripts/lib/deep/x.py", Content: []byte("print(1)\n")}, File{Path: "templates/form.txt"})
	home := t.TempDir()
	dir, err := os.Open(home)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	if err := ExpandSkill(dir, skill); err != nil {
		t.Fatal(err)
	}
	want := map[string]os.FileMode{
		"pdf-tools":                       os.ModeDir | 0o755,
		"pdf-tools/SKILL.md":              0o644,
		"pdf-tools/scripts":               os.ModeDir | 0o755,
		"pdf-tools/scripts/extract.sh":    0o755,
		"pdf-tools/scripts/lib":           os.ModeDir | 0o755,
		"pdf-tools/scripts/lib/deep":      os.ModeDir | 0o755,
		"pdf-tools/scripts/lib/deep/x.py": 0o644,
		"pdf-tools/templates":             os.ModeDir | 0o755,
		"pdf-tools/templates/form.txt":    0o644,
	}
	got := map[string]os.FileMode{}
	filepath.Walk(filepath.Join(home, "pdf-tools"), func(p string, info os.FileInfo, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(home, p)
		got[rel] = info.Mode()
		return nil
	})
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tree %v, want %v", got, want)
	}
	for _, f := range skill.Files {
		data, err := os.ReadFile(filepath.Join(home, "pdf-tools", f.Path))
		if err != nil || !bytes.Equal(data, f.Content) {
			t.Errorf("%s: %q %v", f.Path, data, err)
		}
	}
	// A second expansion never merges.
	err = ExpandSkill(dir, skill)
	if !errors.Is(err, fs.ErrExist) || !errors.Is(err, unix.EEXIST) || !strings.Contains(err.Error(), `expand skill "pdf-tools"`) {
		t.Errorf("second expansion: %v", err)
	}
	// Nor does one onto a planted symlink.
	os.Symlink(t.TempDir(), filepath.Join(home, "other"))
	other := *skill
	other.Name = "other"
	if err := ExpandSkill(dir, &other); !errors.Is(err, fs.ErrExist) {
		t.Errorf("expansion onto a symlink: %v", err)
	}
	// Only skills.
	err = ExpandSkill(dir, &m.Entries[0])
	if !errors.Is(err, ErrKind) || !strings.Contains(err.Error(), `kind "behavior" is not "skill"`) {
		t.Errorf("behavior entry: %v", err)
	}
	// A broken entry built in Go is refused before anything is created.
	bad := *skill
	bad.Name = "bad"
	bad.Files = []File{{Path: "SKILL.md"}, {Path: "x/../../escape"}}
	err = ExpandSkill(dir, &bad)
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "/files/1/path") {
		t.Errorf("broken entry: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(home, "bad")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("broken entry created something: %v", err)
	}
}

// TestExpandSkillOPath: an O_PATH directory descriptor will do.
func TestExpandSkillOPath(t *testing.T) {
	home := t.TempDir()
	fd, err := unix.Open(home, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	dir := os.NewFile(uintptr(fd), home)
	defer dir.Close()
	m := exampleManifest(t)
	if err := ExpandSkill(dir, &m.Entries[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(home, "pdf-tools", "scripts", "extract.sh")); err != nil {
		t.Fatal(err)
	}
}
