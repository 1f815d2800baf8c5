// SPDX-License-Identifier: Apache-2.0

package loopext4

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/loopwire"
	"golang.org/x/sys/unix"
)

func TestValidName(t *testing.T) {
	long := strings.Repeat("a", loopwire.MaxImageName-len(imageSuffix)) + imageSuffix
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"a.img", true},
		{"s1.img", true},
		{"session-42_b.img", true},
		{"a..img", true}, // one component: ".." inside a name is not a path step
		{"0.img", true},
		{long, true},
		{"", false},
		{".img", false},
		{"a.img.bak", false},
		{"a.IMG", false},
		{"A.img", false},
		{"data", false},
		{"img", false},
		{"a/b.img", false},
		{"../a.img", false},
		{"..", false},
		{".", false},
		{"a.img/", false},
		{"-F.img", false},
		{"_a.img", false},
		{".hidden.img", false},
		{"a b.img", false},
		{"a\x00.img", false},
		{"a\n.img", false},
		{"é.img", false},
		{"a" + long, false},
	} {
		err := validName(c.name)
		if (err == nil) != c.ok {
			t.Errorf("validName(%q) = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

func TestCheckSize(t *testing.T) {
	const max = 256 << 20
	for _, c := range []struct {
		size uint64
		code wire.ErrorCode // 0: accepted
	}{
		{BlockSize, 0},
		{64 << 20, 0},
		{max, 0},
		{0, wire.ErrBadRequest},
		{1, wire.ErrBadRequest},
		{BlockSize - 1, wire.ErrBadRequest},
		{BlockSize + 512, wire.ErrBadRequest},
		{^uint64(0), wire.ErrBadRequest},
		{max + BlockSize, wire.ErrRefused},
		{^uint64(0) &^ (BlockSize - 1), wire.ErrRefused},
	} {
		err := checkSize(c.size, max)
		switch {
		case c.code == 0 && err != nil:
			t.Errorf("checkSize(%d) = %v, want accepted", c.size, err)
		case c.code != 0 && (err == nil || err.Code != c.code):
			t.Errorf("checkSize(%d) = %v, want code %v", c.size, err, c.code)
		}
	}
}

// fakeTree builds a Debian-like tree beneath a private directory:
// /usr/sbin/mke2fs, /usr/sbin/mkfs.ext4 -> mke2fs, /sbin -> usr/sbin and
// a sticky, world-writable /tmp.
func fakeTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Chmod(root, 0o755))
	must(os.MkdirAll(filepath.Join(root, "usr/sbin"), 0o755))
	must(os.Chmod(filepath.Join(root, "usr"), 0o755))
	must(os.Chmod(filepath.Join(root, "usr/sbin"), 0o755))
	must(os.WriteFile(filepath.Join(root, "usr/sbin/mke2fs"), []byte("\x7fELF"), 0o755))
	must(os.Chmod(filepath.Join(root, "usr/sbin/mke2fs"), 0o755))
	must(os.Symlink("mke2fs", filepath.Join(root, "usr/sbin/mkfs.ext4")))
	must(os.Symlink("usr/sbin", filepath.Join(root, "sbin")))
	must(os.Mkdir(filepath.Join(root, "tmp"), 0o755))
	must(os.Chmod(filepath.Join(root, "tmp"), os.ModeSticky|0o777))
	return root
}

// trustCase is one case of TestOpenTrustedExecutable.
type trustCase struct {
	name    string
	path    string
	prepare func(t *testing.T, root string)
	owner   func() uint32 // nil: the tree's owner
	want    string        // resolved path, or "" for an error
	wantErr error
	wantMsg string
}

// TestOpenTrustedExecutable runs the mkfs.ext4 path checker against fake
// trees: every directory walked, every link followed and the binary must
// be the owner's and not group/other-writable.
func TestOpenTrustedExecutable(t *testing.T) {
	me := uint32(os.Geteuid())
	asRoot := me == 0
	cases := []trustCase{
		{name: "usr/sbin symlink to mke2fs", path: "/usr/sbin/mkfs.ext4", want: "/usr/sbin/mke2fs"},
		{name: "through the /sbin symlink", path: "/sbin/mkfs.ext4", want: "/usr/sbin/mke2fs"},
		{name: "dot-dot above the root stays at the root", path: "/../usr/./sbin/mke2fs", want: "/usr/sbin/mke2fs"},
		{name: "group-writable ancestor", path: "/usr/sbin/mkfs.ext4",
			prepare: func(t *testing.T, r string) { chmod(t, filepath.Join(r, "usr"), 0o775) },
			wantErr: errUntrusted, wantMsg: "/usr has mode 0775"},
		{name: "other-writable parent directory", path: "/sbin/mkfs.ext4",
			prepare: func(t *testing.T, r string) { chmod(t, filepath.Join(r, "usr/sbin"), 0o757) },
			wantErr: errUntrusted, wantMsg: "/usr/sbin has mode 0757"},
		{name: "group-writable binary", path: "/usr/sbin/mkfs.ext4",
			prepare: func(t *testing.T, r string) { chmod(t, filepath.Join(r, "usr/sbin/mke2fs"), 0o775) },
			wantErr: errUntrusted, wantMsg: "/usr/sbin/mke2fs has mode 0775"},
		{name: "symlink to a world-writable place", path: "/usr/sbin/mkfs.ext4",
			prepare: func(t *testing.T, r string) {
				writeExe(t, filepath.Join(r, "tmp/mke2fs"))
				relink(t, filepath.Join(r, "usr/sbin/mkfs.ext4"), "/tmp/mke2fs")
			},
			wantErr: errUntrusted, wantMsg: "/tmp has mode 1777"},
		{name: "relative symlink climbing to a world-writable place", path: "/usr/sbin/mkfs.ext4",
			prepare: func(t *testing.T, r string) {
				writeExe(t, filepath.Join(r, "tmp/mke2fs"))
				relink(t, filepath.Join(r, "usr/sbin/mkfs.ext4"), "../../tmp/mke2fs")
			},
			wantErr: errUntrusted, wantMsg: "/tmp has mode 1777"},
		{name: "symlink loop", path: "/usr/sbin/mkfs.ext4",
			prepare: func(t *testing.T, r string) {
				relink(t, filepath.Join(r, "usr/sbin/mkfs.ext4"), "loop")
				relink(t, filepath.Join(r, "usr/sbin/loop"), "mkfs.ext4")
			},
			wantErr: unix.ELOOP},
		{name: "names a directory", path: "/usr/sbin", wantErr: unix.EISDIR},
		{name: "a file used as a directory", path: "/usr/sbin/mke2fs/x", wantErr: unix.ENOTDIR},
		{name: "not executable", path: "/usr/sbin/mkfs.ext4",
			prepare: func(t *testing.T, r string) { chmod(t, filepath.Join(r, "usr/sbin/mke2fs"), 0o644) },
			wantErr: unix.EACCES},
		{name: "a FIFO", path: "/usr/sbin/mkfs.ext4",
			prepare: func(t *testing.T, r string) {
				p := filepath.Join(r, "usr/sbin/fifo")
				if err := unix.Mkfifo(p, 0o755); err != nil {
					t.Fatal(err)
				}
				relink(t, filepath.Join(r, "usr/sbin/mkfs.ext4"), "fifo")
			},
			wantErr: errUntrusted},
		{name: "missing", path: "/usr/sbin/mkfs.ext3", wantErr: unix.ENOENT},
		{name: "relative path", path: "usr/sbin/mke2fs", wantMsg: "not an absolute path"},
	}
	if asRoot {
		cases = append(cases,
			trustCase{name: "binary owned by another user", path: "/usr/sbin/mkfs.ext4",
				prepare: func(t *testing.T, r string) { lchown(t, filepath.Join(r, "usr/sbin/mke2fs"), 65534) },
				wantErr: errUntrusted, wantMsg: "/usr/sbin/mke2fs is owned by uid 65534"},
			trustCase{name: "symlink owned by another user", path: "/usr/sbin/mkfs.ext4",
				prepare: func(t *testing.T, r string) { lchown(t, filepath.Join(r, "usr/sbin/mkfs.ext4"), 65534) },
				wantErr: errUntrusted, wantMsg: "/usr/sbin/mkfs.ext4 is owned by uid 65534"},
		)
	} else {
		// Without root nothing can be given away; ask for another owner
		// instead, which the tree's own root already fails.
		cases = append(cases, trustCase{name: "tree owned by another user", path: "/usr/sbin/mkfs.ext4",
			owner: func() uint32 { return me + 1 }, wantErr: errUntrusted, wantMsg: "is owned by uid"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := fakeTree(t)
			if c.prepare != nil {
				c.prepare(t, dir)
			}
			root, err := os.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			owner := me
			if c.owner != nil {
				owner = c.owner()
			}
			f, resolved, err := openTrustedExecutable(root, c.path, owner)
			if c.want != "" {
				if err != nil {
					t.Fatalf("resolve %s: %v", c.path, err)
				}
				defer f.Close()
				if resolved != c.want {
					t.Errorf("resolved %s to %s, want %s", c.path, resolved, c.want)
				}
				sameFile(t, f, filepath.Join(dir, c.want))
				return
			}
			if err == nil {
				f.Close()
				t.Fatalf("resolve %s: accepted as %s, want an error", c.path, resolved)
			}
			if c.wantErr != nil && !errors.Is(err, c.wantErr) {
				t.Errorf("resolve %s: %v, want %v", c.path, err, c.wantErr)
			}
			if !strings.Contains(err.Error(), c.wantMsg) {
				t.Errorf("resolve %s: %v, want it to say %q", c.path, err, c.wantMsg)
			}
		})
	}
}

// TestFindMkfsOnThisHost checks the real mkfs.ext4 passes the checker,
// and that the descriptor returned is the file the path names now.
func TestFindMkfsOnThisHost(t *testing.T) {
	if _, err := os.Stat("/usr/sbin/mkfs.ext4"); err != nil {
		t.Skipf("skipped: no mkfs.ext4 on this host (install e2fsprogs): %v", err)
	}
	f, resolved, err := findMkfs()
	if err != nil {
		t.Fatalf("findMkfs: %v", err)
	}
	defer f.Close()
	t.Logf("mkfs.ext4 resolves to %s", resolved)
	sameFile(t, f, resolved)
	if fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0); err != nil || fl&unix.O_PATH == 0 {
		t.Errorf("descriptor flags %#x, %v: want O_PATH", fl, err)
	}
}

func sameFile(t *testing.T, f *os.File, p string) {
	t.Helper()
	var a, b unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &a); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(p, &b); err != nil {
		t.Fatal(err)
	}
	if a.Dev != b.Dev || a.Ino != b.Ino {
		t.Errorf("descriptor is not %s", p)
	}
}

func chmod(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func lchown(t *testing.T, p string, uid int) {
	t.Helper()
	if err := os.Lchown(p, uid, -1); err != nil {
		t.Fatal(err)
	}
}

func writeExe(t *testing.T, p string) {
	t.Helper()
	if err := os.WriteFile(p, []byte("\x7fELF"), 0o755); err != nil {
		t.Fatal(err)
	}
	chmod(t, p, 0o755)
}

func relink(t *testing.T, p, target string) {
	t.Helper()
	os.Remove(p)
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}
