// SPDX-License-Identifier: Apache-2.0

package materialize

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fdCount counts this process's open descriptors.
func fdCount(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents) - 1 // the ReadDir descriptor itself
}

func openDir(t testing.TB, p string) int {
	t.Helper()
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fd
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

func mustWrite(t testing.TB, p string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // umask, setuid
		t.Fatal(err)
	}
}

// copyTree opens src, copies it into dst (a path) and checks that no
// descriptor leaks.
func copyTree(t *testing.T, src, dst string, o Options) (Totals, error) {
	t.Helper()
	before := fdCount(t)
	s, err := Open(src)
	if err != nil {
		t.Fatal(err)
	}
	d := openDir(t, dst)
	tot, cerr := s.CopyTo(d, o)
	if err := unix.Close(d); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if after := fdCount(t); after != before {
		t.Errorf("descriptor leak: %d open before, %d after", before, after)
	}
	return tot, cerr
}

func TestCopy(t *testing.T) {
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	type check func(t *testing.T, src, dst string, tot Totals, err error)
	noErr := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name  string
		build func(t *testing.T, src string)
		opts  Options
		check check
	}{
		{
			name: "files and dirs",
			build: func(t *testing.T, src string) {
				mustWrite(t, filepath.Join(src, "empty"), nil, 0o644)
				mustWrite(t, filepath.Join(src, "small"), []byte("hello"), 0o600)
				mustWrite(t, filepath.Join(src, "a/b/c/big"), pattern(3<<20+17), 0o755)
				mustWrite(t, filepath.Join(src, "a/mid"), pattern(100_000), 0o640)
				if err := os.Chtimes(filepath.Join(src, "a/mid"), mtime, mtime); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(filepath.Join(src, "a/b"), 0o555); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = os.Chmod(filepath.Join(src, "a/b"), 0o755) })
			},
			check: func(t *testing.T, src, dst string, tot Totals, err error) {
				noErr(t, err)
				want := Totals{Files: 4, Dirs: 3, Bytes: 5 + 3<<20 + 17 + 100_000}
				if tot != want {
					t.Errorf("totals %+v, want %+v", tot, want)
				}
				for _, f := range []string{"empty", "small", "a/b/c/big", "a/mid"} {
					a, _ := os.ReadFile(filepath.Join(src, f))
					b, err := os.ReadFile(filepath.Join(dst, f))
					if err != nil || !bytes.Equal(a, b) {
						t.Errorf("%s: contents differ (%v)", f, err)
					}
					sa, _ := os.Lstat(filepath.Join(src, f))
					sb, _ := os.Lstat(filepath.Join(dst, f))
					if sa.Mode() != sb.Mode() {
						t.Errorf("%s: mode %v, want %v", f, sb.Mode(), sa.Mode())
					}
					if !sa.ModTime().Equal(sb.ModTime()) {
						t.Errorf("%s: mtime %v, want %v", f, sb.ModTime(), sa.ModTime())
					}
				}
				st, _ := os.Lstat(filepath.Join(dst, "a/b"))
				if st.Mode().Perm() != 0o755 {
					t.Errorf("a/b: mode %v, want 0755 (u+rwx forced)", st.Mode())
				}
				sa, _ := os.Lstat(filepath.Join(src, "a"))
				sb, _ := os.Lstat(filepath.Join(dst, "a"))
				if !sa.ModTime().Equal(sb.ModTime()) {
					t.Errorf("dir a: mtime %v, want %v", sb.ModTime(), sa.ModTime())
				}
			},
		},
		{
			name: "symlinks kept as text, never followed",
			build: func(t *testing.T, src string) {
				for name, target := range map[string]string{"passwd": "/etc/passwd", "up": "../../x", "d/rel": "../passwd"} {
					_ = os.MkdirAll(filepath.Dir(filepath.Join(src, name)), 0o755)
					if err := os.Symlink(target, filepath.Join(src, name)); err != nil {
						t.Fatal(err)
					}
				}
			},
			check: func(t *testing.T, src, dst string, tot Totals, err error) {
				noErr(t, err)
				if tot.Symlinks != 3 || tot.Files != 0 || tot.Bytes != 0 {
					t.Errorf("totals %+v", tot)
				}
				for name, target := range map[string]string{"passwd": "/etc/passwd", "up": "../../x", "d/rel": "../passwd"} {
					got, err := os.Readlink(filepath.Join(dst, name))
					if err != nil || got != target {
						t.Errorf("%s: link %q (%v), want %q", name, got, err, target)
					}
				}
				// Resolved inside the destination as the sandbox would:
				// the host's /etc/passwd is never reached.
				root := openDir(t, dst)
				defer unix.Close(root)
				for _, name := range []string{"passwd", "up", "d/rel"} {
					fd, err := unix.Openat2(root, name, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT})
					if err == nil {
						unix.Close(fd)
						t.Errorf("%s: resolved beneath the destination to an existing file", name)
					} else if !errors.Is(err, unix.ENOENT) {
						t.Errorf("%s: %v, want ENOENT", name, err)
					}
				}
			},
		},
		{
			name: "setuid setgid sticky stripped",
			build: func(t *testing.T, src string) {
				mustWrite(t, filepath.Join(src, "suid"), []byte("x"), os.ModeSetuid|os.ModeSetgid|0o755)
				if err := os.Mkdir(filepath.Join(src, "sticky"), 0o777); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(filepath.Join(src, "sticky"), os.ModeSticky|os.ModeSetgid|0o777); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, src, dst string, tot Totals, err error) {
				noErr(t, err)
				if st, _ := os.Lstat(filepath.Join(src, "suid")); st.Mode()&os.ModeSetuid == 0 {
					t.Fatal("source file lost its setuid bit: test is void")
				}
				st, err := os.Lstat(filepath.Join(dst, "suid"))
				if err != nil || st.Mode() != 0o755 {
					t.Errorf("suid: mode %v (%v), want -rwxr-xr-x", st.Mode(), err)
				}
				st, err = os.Lstat(filepath.Join(dst, "sticky"))
				if err != nil || st.Mode() != os.ModeDir|0o777 {
					t.Errorf("sticky: mode %v (%v), want drwxrwxrwx", st.Mode(), err)
				}
			},
		},
		{
			name: "fifo and socket skipped, not blocked",
			build: func(t *testing.T, src string) {
				if err := unix.Mkfifo(filepath.Join(src, "fifo"), 0o644); err != nil {
					t.Fatal(err)
				}
				l, err := net.Listen("unix", filepath.Join(src, "sock"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
				mustWrite(t, filepath.Join(src, "file"), []byte("ok"), 0o644)
			},
			check: func(t *testing.T, src, dst string, tot Totals, err error) {
				noErr(t, err)
				if tot.Special != 2 || tot.Files != 1 {
					t.Errorf("totals %+v, want 2 special, 1 file", tot)
				}
				for _, n := range []string{"fifo", "sock"} {
					if _, err := os.Lstat(filepath.Join(dst, n)); !os.IsNotExist(err) {
						t.Errorf("%s: copied (%v)", n, err)
					}
				}
			},
		},
		{
			name: "too deep",
			build: func(t *testing.T, src string) {
				mustWrite(t, filepath.Join(src, "1/2/3/4/5/6/7/f"), nil, 0o644)
			},
			opts: Options{MaxDepth: 5},
			check: func(t *testing.T, src, dst string, tot Totals, err error) {
				if !errors.Is(err, ErrTooDeep) {
					t.Fatalf("err %v, want ErrTooDeep", err)
				}
				if !strings.Contains(err.Error(), "1/2/3/4/5/6") || strings.Contains(err.Error(), src) {
					t.Errorf("error %q: want the relative path, not the host path", err)
				}
			},
		},
		{
			name: "depth at the limit",
			build: func(t *testing.T, src string) {
				mustWrite(t, filepath.Join(src, "1/2/3/4/5/f"), nil, 0o644)
			},
			opts: Options{MaxDepth: 5},
			check: func(t *testing.T, src, dst string, tot Totals, err error) {
				noErr(t, err)
			},
		},
		{
			name: "too many entries",
			build: func(t *testing.T, src string) {
				for i := range 10 {
					mustWrite(t, filepath.Join(src, "d", string(rune('a'+i))), nil, 0o644)
				}
			},
			opts: Options{MaxEntries: 5},
			check: func(t *testing.T, src, dst string, tot Totals, err error) {
				if !errors.Is(err, ErrTooManyEntries) {
					t.Fatalf("err %v, want ErrTooManyEntries", err)
				}
			},
		},
		{
			name: "entries at the limit",
			build: func(t *testing.T, src string) {
				for i := range 4 {
					mustWrite(t, filepath.Join(src, "d", string(rune('a'+i))), nil, 0o644)
				}
			},
			opts: Options{MaxEntries: 5},
			check: func(t *testing.T, src, dst string, tot Totals, err error) {
				noErr(t, err)
			},
		},
		{
			name: "hard links become separate files",
			build: func(t *testing.T, src string) {
				mustWrite(t, filepath.Join(src, "a"), []byte("same"), 0o644)
				if err := os.Link(filepath.Join(src, "a"), filepath.Join(src, "b")); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, src, dst string, tot Totals, err error) {
				noErr(t, err)
				a, _ := os.Lstat(filepath.Join(dst, "a"))
				b, _ := os.Lstat(filepath.Join(dst, "b"))
				if a == nil || b == nil || os.SameFile(a, b) || tot.Bytes != 8 {
					t.Errorf("hard links not copied as two files: %+v", tot)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, dst := t.TempDir(), t.TempDir()
			c.build(t, src)
			type result struct {
				tot Totals
				err error
			}
			done := make(chan result, 1)
			go func() {
				tot, err := copyTree(t, src, dst, c.opts)
				done <- result{tot, err}
			}()
			select {
			case r := <-done:
				c.check(t, src, dst, r.tot, r.err)
			case <-time.After(30 * time.Second):
				t.Fatal("copy blocked")
			}
		})
	}
}

func TestScanMatchesCopy(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	mustWrite(t, filepath.Join(src, "x/y/z"), pattern(200_000), 0o644)
	mustWrite(t, filepath.Join(src, "x/w"), pattern(10), 0o644)
	if err := os.Symlink("z", filepath.Join(src, "x/l")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(src, "p"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	total, err := s.Scan()
	if err != nil {
		t.Fatal(err)
	}
	var calls int
	var last Totals
	d := openDir(t, dst)
	defer unix.Close(d)
	got, err := s.CopyTo(d, Options{Total: total, Progress: func(done, tot Totals) {
		calls++
		if tot != total || done.Bytes < last.Bytes {
			t.Errorf("progress %+v of %+v after %+v", done, tot, last)
		}
		last = done
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got != total || last != total {
		t.Errorf("copy %+v, last progress %+v, scan %+v", got, last, total)
	}
	// 200,000 bytes: at most 3 calls at 64 KiB steps within it (the 128
	// KiB rounds give 2), one per file (2) and one at the end.
	if calls < 3 || calls > 6 {
		t.Errorf("%d progress calls", calls)
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "f"), nil, 0o644)
	if err := os.Symlink(dir, filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"relative/path", filepath.Join(dir, "f"), filepath.Join(dir, "l"), filepath.Join(dir, "missing")} {
		s, err := Open(p)
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", p)
			continue
		}
		if strings.Contains(err.Error(), dir) {
			t.Errorf("Open error %q names the host path", err)
		}
	}
}

// TestChangedDuringCopy replaces entries between lstat and open.
func TestChangedDuringCopy(t *testing.T) {
	cases := []struct {
		name    string
		build   func(t *testing.T, p string)
		replace func(t *testing.T, p string)
		wantErr error
	}{
		{"file becomes dir", func(t *testing.T, p string) { mustWrite(t, p, []byte("x"), 0o644) },
			func(t *testing.T, p string) { _ = os.Remove(p); _ = os.Mkdir(p, 0o755) }, ErrChanged},
		{"dir becomes file", func(t *testing.T, p string) { _ = os.Mkdir(p, 0o755) },
			func(t *testing.T, p string) { _ = os.Remove(p); mustWrite(t, p, nil, 0o644) }, ErrChanged},
		{"dir becomes symlink", func(t *testing.T, p string) { _ = os.Mkdir(p, 0o755) },
			func(t *testing.T, p string) { _ = os.Remove(p); _ = os.Symlink("/etc", p) }, ErrChanged},
		{"file becomes fifo", func(t *testing.T, p string) { mustWrite(t, p, []byte("x"), 0o644) },
			func(t *testing.T, p string) { _ = os.Remove(p); _ = unix.Mkfifo(p, 0o644) }, ErrChanged},
		{"file becomes symlink", func(t *testing.T, p string) { mustWrite(t, p, []byte("x"), 0o644) },
			func(t *testing.T, p string) { _ = os.Remove(p); _ = os.Symlink("/etc/passwd", p) }, ErrChanged},
		{"file removed", func(t *testing.T, p string) { mustWrite(t, p, []byte("x"), 0o644) },
			func(t *testing.T, p string) { _ = os.Remove(p) }, unix.ENOENT},
		{"file shrinks", func(t *testing.T, p string) { mustWrite(t, p, pattern(1000), 0o644) },
			func(t *testing.T, p string) { _ = os.Truncate(p, 10) }, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, dst := t.TempDir(), t.TempDir()
			p := filepath.Join(src, "e")
			c.build(t, p)
			testHookBeforeOpen = func(rel string) {
				if rel == "e" {
					c.replace(t, p)
				}
			}
			defer func() { testHookBeforeOpen = nil }()
			_, err := copyTree(t, src, dst, Options{})
			if c.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err %v, want %v", err, c.wantErr)
			}
			if strings.Contains(err.Error(), src) {
				t.Errorf("error %q names the host path", err)
			}
		})
	}
}

func TestUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("running as root: CAP_DAC_OVERRIDE reads every file, so an unreadable file cannot be made; run the compiled test binary as a non-root user (e.g. setpriv --reuid=nobody --regid=nogroup --clear-groups ./materialize.test) to cover this")
	}
	for _, c := range []struct{ name, rel string }{{"file", "d/secret"}, {"dir", "d/closed"}} {
		t.Run(c.name, func(t *testing.T) {
			src, dst := t.TempDir(), t.TempDir()
			p := filepath.Join(src, c.rel)
			if c.name == "file" {
				mustWrite(t, p, []byte("x"), 0o000)
			} else {
				mustWrite(t, filepath.Join(p, "f"), nil, 0o644)
				if err := os.Chmod(p, 0); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = os.Chmod(p, 0o755) })
			}
			_, err := copyTree(t, src, dst, Options{})
			if !errors.Is(err, unix.EACCES) {
				t.Fatalf("err %v, want EACCES", err)
			}
			if !strings.Contains(err.Error(), c.rel) || strings.Contains(err.Error(), src) {
				t.Errorf("error %q: want %q and not the host path", err, c.rel)
			}
		})
	}
}

// detachedTmpfs returns the root descriptor of a tmpfs of the given size
// that is mounted nowhere: the descriptor is its only reference.
func detachedTmpfs(t *testing.T, size string) int {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_SYS_ADMIN) for fsopen/fsmount of a detached tmpfs")
	}
	fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fsfd)
	if err := unix.FsconfigSetString(fsfd, "size", size); err != nil {
		t.Fatal(err)
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		t.Fatal(err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return mfd
}

func TestQuota(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(t *testing.T, src string)
	}{
		{"one big file", func(t *testing.T, src string) {
			mustWrite(t, filepath.Join(src, "d/big"), pattern(1<<20), 0o644)
		}},
		{"many small files", func(t *testing.T, src string) {
			for i := range 40 {
				mustWrite(t, filepath.Join(src, "d", strings.Repeat("x", i+1)), pattern(4096), 0o644)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := t.TempDir()
			c.build(t, src)
			mfd := detachedTmpfs(t, "64k")
			before := fdCount(t)
			s, err := Open(src)
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.CopyTo(mfd, Options{})
			s.Close()
			unix.Close(mfd)
			if !errors.Is(err, ErrQuota) {
				t.Fatalf("err %v, want ErrQuota", err)
			}
			if !strings.Contains(err.Error(), "d/") || strings.Contains(err.Error(), src) {
				t.Errorf("error %q: want the relative path only", err)
			}
			if after := fdCount(t); after != before-1 {
				t.Errorf("descriptor leak: %d before (with the mount), %d after", before, after)
			}
		})
	}
}

// TestMaxBytes: Options.MaxBytes bounds the bytes copied where the
// destination's space would not (a shared scratch tmpfs): exactly the
// bound fits, one byte more is refused with ErrQuota, whether the bytes
// are in one file or spread over many.
func TestMaxBytes(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]int
		max   int64
		fits  bool
	}{
		{"one file at the bound", map[string]int{"d/a": 10_000}, 10_000, true},
		{"one file past the bound", map[string]int{"d/a": 10_001}, 10_000, false},
		{"many files at the bound", map[string]int{"d/a": 4000, "d/b": 4000, "e/c": 2000}, 10_000, true},
		{"many files past the bound", map[string]int{"d/a": 4000, "d/b": 4000, "e/c": 2001}, 10_000, false},
		{"unbounded", map[string]int{"d/a": 100_000}, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := t.TempDir()
			for name, n := range c.files {
				mustWrite(t, filepath.Join(src, name), pattern(n), 0o644)
			}
			mfd := detachedTmpfs(t, "4m")
			defer unix.Close(mfd)
			s, err := Open(src)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			tot, err := s.CopyTo(mfd, Options{MaxBytes: c.max})
			if c.fits {
				if err != nil {
					t.Fatalf("%+v, %v; want it copied", tot, err)
				}
				return
			}
			if !errors.Is(err, ErrQuota) || strings.Contains(err.Error(), src) {
				t.Fatalf("err %v, want ErrQuota naming the relative path only", err)
			}
			if tot.Bytes > c.max {
				t.Errorf("%d bytes copied past the bound of %d", tot.Bytes, c.max)
			}
		})
	}
}

// TestQuotaFits copies into a detached tmpfs large enough: the O_PATH
// mount descriptor works as the destination.
func TestQuotaFits(t *testing.T) {
	src := t.TempDir()
	mustWrite(t, filepath.Join(src, "d/f"), pattern(300_000), 0o644)
	mfd := detachedTmpfs(t, "4m")
	defer unix.Close(mfd)
	s, err := Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tot, err := s.CopyTo(mfd, Options{})
	if err != nil || tot.Bytes != 300_000 {
		t.Fatalf("%+v, %v", tot, err)
	}
	fd, err := unix.Openat2(mfd, "d/f", &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT})
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "f")
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(f); err != nil || !bytes.Equal(buf.Bytes(), pattern(300_000)) {
		t.Errorf("contents differ (%v)", err)
	}
}

func TestMountPointSkipped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_SYS_ADMIN) to bind-mount a directory and a file inside the source")
	}
	src, dst, other := t.TempDir(), t.TempDir(), t.TempDir()
	mustWrite(t, filepath.Join(other, "host-secret"), []byte("no"), 0o644)
	mustWrite(t, filepath.Join(src, "keep"), []byte("yes"), 0o644)
	mustWrite(t, filepath.Join(src, "filemnt"), []byte("under"), 0o644)
	mnt := filepath.Join(src, "sub/mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, m := range [][2]string{{other, mnt}, {filepath.Join(other, "host-secret"), filepath.Join(src, "filemnt")}} {
		if err := unix.Mount(m[0], m[1], "", unix.MS_BIND, ""); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := unix.Unmount(m[1], unix.MNT_DETACH); err != nil {
				t.Errorf("unmount: %v", err)
			}
		})
	}
	tot, err := copyTree(t, src, dst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tot.Mounts != 2 || tot.Files != 1 || tot.Dirs != 1 {
		t.Errorf("totals %+v, want 2 mounts, 1 file, 1 dir", tot)
	}
	for _, p := range []string{"sub/mnt", "filemnt"} {
		if _, err := os.Lstat(filepath.Join(dst, p)); !os.IsNotExist(err) {
			t.Errorf("%s: copied (%v)", p, err)
		}
	}
	// Scan skips them the same way.
	s, err := Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if sc, err := s.Scan(); err != nil || sc.Mounts != 2 {
		t.Errorf("scan %+v, %v", sc, err)
	}
}

func TestCheckName(t *testing.T) {
	for _, n := range []string{"", ".", "..", "a/b", "a\x00", strings.Repeat("x", 256)} {
		if checkName(n) == nil {
			t.Errorf("%q accepted", n)
		}
	}
	for _, n := range []string{"a", "...", strings.Repeat("x", 255), "é"} {
		if err := checkName(n); err != nil {
			t.Errorf("%q: %v", n, err)
		}
	}
}
