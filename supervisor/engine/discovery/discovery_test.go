// SPDX-License-Identifier: Apache-2.0

package discovery

import (
	"errors"
	"github.com/glove-sandbox/glove/testenv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testBase is a protected directory (testenv.ProtectedDir) that this
// host's ancestors of /var/lib let discovery accept.
func testBase(t *testing.T) string {
	t.Helper()
	base := testenv.ProtectedDir(t, "discovery")
	fd, err := openDir(base)
	if err != nil {
		t.Skipf("test base is not an acceptable search directory on this host: %v", err)
	}
	unix.Close(fd)
	return base
}

func mkdir(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func writeExe(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func TestFind(t *testing.T) {
	const rt, exe = "codex", "codex"
	tests := []struct {
		name string
		// setup builds the tree under base and returns the search paths.
		setup func(t *testing.T, base string) []string
		// want is the found path relative to base ("" for not installed).
		want string
		// reasons are substrings, one per rejected directory, in order.
		reasons []string
	}{
		{
			name: "happy path",
			setup: func(t *testing.T, base string) []string {
				mkdir(t, base+"/bin", 0o755)
				writeExe(t, base+"/bin/codex", "#!/bin/sh\n", 0o755)
				return []string{base + "/bin"}
			},
			want: "bin/codex",
		},
		{
			name: "group-writable directory",
			setup: func(t *testing.T, base string) []string {
				mkdir(t, base+"/bin", 0o775)
				writeExe(t, base+"/bin/codex", "x", 0o755)
				return []string{base + "/bin"}
			},
			reasons: []string{"/bin: writable by group or others (mode 0775)"},
		},
		{
			name: "other-writable ancestor",
			setup: func(t *testing.T, base string) []string {
				mkdir(t, base+"/opt", 0o757)
				mkdir(t, base+"/opt/bin", 0o755)
				writeExe(t, base+"/opt/bin/codex", "x", 0o755)
				return []string{base + "/opt/bin"}
			},
			reasons: []string{"/opt: writable by group or others (mode 0757)"},
		},
		{
			name: "symlinked directory in the path",
			setup: func(t *testing.T, base string) []string {
				mkdir(t, base+"/real/bin", 0o755)
				writeExe(t, base+"/real/bin/codex", "x", 0o755)
				if err := os.Symlink("real", base+"/link"); err != nil {
					t.Fatal(err)
				}
				return []string{base + "/link/bin"}
			},
			reasons: []string{"/link: is a symbolic link"},
		},
		{
			name: "symlinked entry",
			setup: func(t *testing.T, base string) []string {
				mkdir(t, base+"/bin", 0o755)
				writeExe(t, base+"/bin/real", "x", 0o755)
				if err := os.Symlink("real", base+"/bin/codex"); err != nil {
					t.Fatal(err)
				}
				return []string{base + "/bin"}
			},
			reasons: []string{"/bin/codex: is a symbolic link"},
		},
		{
			name: "entry not executable",
			setup: func(t *testing.T, base string) []string {
				mkdir(t, base+"/bin", 0o755)
				writeExe(t, base+"/bin/codex", "x", 0o644)
				return []string{base + "/bin"}
			},
			reasons: []string{"/bin/codex: not executable (mode 0644)"},
		},
		{
			name: "entry group-writable",
			setup: func(t *testing.T, base string) []string {
				mkdir(t, base+"/bin", 0o755)
				writeExe(t, base+"/bin/codex", "x", 0o775)
				return []string{base + "/bin"}
			},
			reasons: []string{"/bin/codex: writable by group or others (mode 0775)"},
		},
		{
			name: "entry not a regular file",
			setup: func(t *testing.T, base string) []string {
				mkdir(t, base+"/bin/codex", 0o755)
				return []string{base + "/bin"}
			},
			reasons: []string{"/bin/codex: not a regular file"},
		},
		{
			name: "entry owned by another user",
			setup: func(t *testing.T, base string) []string {
				mkdir(t, base+"/bin", 0o755)
				writeExe(t, base+"/bin/codex", "x", 0o755)
				if err := os.Chown(base+"/bin/codex", 1234, 0); err != nil {
					t.Fatal(err)
				}
				return []string{base + "/bin"}
			},
			reasons: []string{"/bin/codex: owned by uid 1234"},
		},
		{
			name: "overflow-uid-owned ancestor",
			setup: func(t *testing.T, base string) []string {
				mkdir(t, base+"/ns/bin", 0o755)
				writeExe(t, base+"/ns/bin/codex", "x", 0o755)
				if err := os.Chown(base+"/ns", int(overflowUID()), -1); err != nil {
					t.Fatal(err)
				}
				return []string{base + "/ns/bin"}
			},
			reasons: []string{"/ns: owned by the overflow uid"},
		},
		{
			name: "nothing installed",
			setup: func(t *testing.T, base string) []string {
				mkdir(t, base+"/a", 0o755)
				return []string{base + "/a", base + "/missing"}
			},
			reasons: []string{`no entry named "codex"`, "/missing: does not exist"},
		},
		{
			name: "not canonical",
			setup: func(t *testing.T, base string) []string {
				return []string{"relative/bin", base + "/a/../b"}
			},
			reasons: []string{"not an absolute canonical path", "not an absolute canonical path"},
		},
		{
			name: "found in the second path after the first is rejected",
			setup: func(t *testing.T, base string) []string {
				mkdir(t, base+"/bad", 0o777)
				writeExe(t, base+"/bad/codex", "bad", 0o755)
				mkdir(t, base+"/good", 0o755)
				writeExe(t, base+"/good/codex", "good", 0o755)
				return []string{base + "/bad", base + "/good"}
			},
			want:    "good/codex",
			reasons: []string{"/bad: writable by group or others (mode 0777)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := testBase(t)
			paths := tc.setup(t, base)
			f, err := Find(rt, paths)
			if f.Executable != exe || f.Runtime != rt {
				t.Errorf("runtime/executable = %q/%q", f.Runtime, f.Executable)
			}
			if len(f.Rejected) != len(tc.reasons) {
				t.Fatalf("rejected = %+v, want %d: %q", f.Rejected, len(tc.reasons), tc.reasons)
			}
			for i, r := range tc.reasons {
				if f.Rejected[i].Dir != paths[i] || !strings.Contains(f.Rejected[i].Reason, r) {
					t.Errorf("rejected[%d] = %+v, want dir %q reason containing %q", i, f.Rejected[i], paths[i], r)
				}
			}
			if tc.want == "" {
				if !errors.Is(err, ErrNotInstalled) {
					t.Fatalf("err = %v, want ErrNotInstalled", err)
				}
				if f.Path != "" || f.Identity != (Identity{}) {
					t.Errorf("found %+v with nothing installed", f)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := filepath.Join(base, tc.want)
			if f.Path != want || f.Dir != filepath.Dir(want) {
				t.Errorf("found %q in %q, want %q", f.Path, f.Dir, want)
			}
			if len(f.Identity.SHA256) != 64 || f.Identity.Ino == 0 || f.Identity.Size == 0 {
				t.Errorf("identity %+v", f.Identity)
			}
			if err := f.Identity.Recheck(f.Path); err != nil {
				t.Errorf("recheck of an unchanged file: %v", err)
			}
		})
	}
}

func TestFindUnknownRuntime(t *testing.T) {
	if _, err := Find("bash", []string{"/usr/bin"}); !errors.Is(err, ErrUnknownRuntime) {
		t.Fatalf("err = %v", err)
	}
}

func TestRecheck(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, p string)
		want   error // nil: any non-nil error
	}{
		{
			name: "replaced by a new file",
			change: func(t *testing.T, p string) {
				tmp := p + ".new"
				writeExe(t, tmp, "#!/bin/sh\necho other\n", 0o755)
				if err := os.Rename(tmp, p); err != nil {
					t.Fatal(err)
				}
			},
			want: ErrChanged,
		},
		{
			name: "same size different content, same mtime",
			change: func(t *testing.T, p string) {
				st, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				f, err := os.OpenFile(p, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteAt([]byte("X"), 0); err != nil {
					t.Fatal(err)
				}
				f.Close()
				if err := os.Chtimes(p, time.Time{}, st.ModTime()); err != nil {
					t.Fatal(err)
				}
			},
			want: ErrChanged,
		},
		{
			name: "removed",
			change: func(t *testing.T, p string) {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			},
			want: ErrChanged,
		},
		{
			name: "replaced by a symlink",
			change: func(t *testing.T, p string) {
				if err := os.Rename(p, p+".real"); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(filepath.Base(p)+".real", p); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "directory made group-writable",
			change: func(t *testing.T, p string) {
				if err := os.Chmod(filepath.Dir(p), 0o775); err != nil {
					t.Fatal(err)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := testBase(t)
			mkdir(t, base+"/bin", 0o755)
			writeExe(t, base+"/bin/codex", "#!/bin/sh\necho codex\n", 0o755)
			f, err := Find("codex", []string{base + "/bin"})
			if err != nil {
				t.Fatal(err)
			}
			tc.change(t, f.Path)
			err = f.Identity.Recheck(f.Path)
			if err == nil {
				t.Fatal("recheck passed after the binary changed")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}
