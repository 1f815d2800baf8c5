// SPDX-License-Identifier: Apache-2.0

package helperkit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/glove-sandbox/glove/trustpath"
)

// tree makes a private root (mode 0755, owned by the test's uid) with
// etc/glove/x.json inside, and returns the root.
func tree(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	if err := os.MkdirAll(filepath.Join(root, "etc", "glove"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{root, filepath.Join(root, "etc"), filepath.Join(root, "etc", "glove")} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(root, "etc", "glove", "x.json"), `{"schema_version":1,"limit":3}`)
	return root
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
}

type xConfig struct {
	SchemaVersion int    `json:"schema_version"`
	Limit         uint64 `json:"limit"`
}

func (c *xConfig) Validate() error {
	if err := CheckSchema(c.SchemaVersion); err != nil {
		return err
	}
	return CheckRange("limit", c.Limit, 10)
}

func TestLoadConfigAcceptsTrustedTree(t *testing.T) {
	root := tree(t)
	var c xConfig
	if err := loadConfigFrom(root, "/etc/glove", "x.json", uint32(os.Getuid()), &c); err != nil {
		t.Fatal(err)
	}
	if c.Limit != 3 {
		t.Fatalf("limit %d, want 3", c.Limit)
	}
}

// TestLoadConfigRefuses is the table of configuration trees a helper must
// refuse to start with: anything another principal could have written,
// anything reached through a link, anything that is not one bounded
// regular file holding one strictly valid object.
func TestLoadConfigRefuses(t *testing.T) {
	uid := uint32(os.Getuid())
	cases := []struct {
		name    string
		dir     string
		file    string
		mutate  func(t *testing.T, root string)
		wantErr string
		untrust bool
	}{
		{name: "file group-writable", mutate: func(t *testing.T, r string) {
			os.Chmod(filepath.Join(r, "etc/glove/x.json"), 0o664)
		}, wantErr: "writable by group or others", untrust: true},
		{name: "file other-writable", mutate: func(t *testing.T, r string) {
			os.Chmod(filepath.Join(r, "etc/glove/x.json"), 0o646)
		}, wantErr: "writable by group or others", untrust: true},
		{name: "directory group-writable", mutate: func(t *testing.T, r string) {
			os.Chmod(filepath.Join(r, "etc/glove"), 0o775)
		}, wantErr: "writable by group or others", untrust: true},
		{name: "ancestor other-writable", mutate: func(t *testing.T, r string) {
			os.Chmod(filepath.Join(r, "etc"), 0o757)
		}, wantErr: "writable by group or others", untrust: true},
		{name: "root other-writable with sticky bit", mutate: func(t *testing.T, r string) {
			os.Chmod(r, 0o1777)
		}, wantErr: "writable by group or others", untrust: true},
		{name: "file is a symlink", mutate: func(t *testing.T, r string) {
			p := filepath.Join(r, "etc/glove/x.json")
			os.Rename(p, p+".real")
			os.Symlink("x.json.real", p)
		}, wantErr: "is a symbolic link", untrust: true},
		{name: "directory is a symlink", mutate: func(t *testing.T, r string) {
			os.Rename(filepath.Join(r, "etc/glove"), filepath.Join(r, "etc/real"))
			os.Symlink("real", filepath.Join(r, "etc/glove"))
		}, wantErr: "is a symbolic link", untrust: true},
		{name: "file is a directory", mutate: func(t *testing.T, r string) {
			p := filepath.Join(r, "etc/glove/x.json")
			os.Remove(p)
			os.Mkdir(p, 0o755)
		}, wantErr: "not a regular file", untrust: true},
		{name: "file is a FIFO", mutate: func(t *testing.T, r string) {
			p := filepath.Join(r, "etc/glove/x.json")
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}, wantErr: "not a regular file", untrust: true},
		{name: "file missing", mutate: func(t *testing.T, r string) {
			os.Remove(filepath.Join(r, "etc/glove/x.json"))
		}, wantErr: "no such file"},
		{name: "file too large", mutate: func(t *testing.T, r string) {
			write(t, filepath.Join(r, "etc/glove/x.json"), `{"schema_version":1,"limit":3}`+strings.Repeat(" ", MaxConfigBytes))
		}, wantErr: "more than"},
		{name: "unknown field", mutate: func(t *testing.T, r string) {
			write(t, filepath.Join(r, "etc/glove/x.json"), `{"schema_version":1,"limit":3,"limt":4}`)
		}, wantErr: "unknown field"},
		{name: "trailing object", mutate: func(t *testing.T, r string) {
			write(t, filepath.Join(r, "etc/glove/x.json"), `{"schema_version":1,"limit":3}{}`)
		}, wantErr: "trailing data"},
		{name: "not JSON", mutate: func(t *testing.T, r string) {
			write(t, filepath.Join(r, "etc/glove/x.json"), `schema_version = 1`)
		}, wantErr: "decode"},
		{name: "wrong type", mutate: func(t *testing.T, r string) {
			write(t, filepath.Join(r, "etc/glove/x.json"), `{"schema_version":1,"limit":"3"}`)
		}, wantErr: "decode"},
		{name: "negative bound", mutate: func(t *testing.T, r string) {
			write(t, filepath.Join(r, "etc/glove/x.json"), `{"schema_version":1,"limit":-1}`)
		}, wantErr: "decode"},
		{name: "bound over its ceiling", mutate: func(t *testing.T, r string) {
			write(t, filepath.Join(r, "etc/glove/x.json"), `{"schema_version":1,"limit":11}`)
		}, wantErr: "limit: 11 is outside 1..10"},
		{name: "zero bound", mutate: func(t *testing.T, r string) {
			write(t, filepath.Join(r, "etc/glove/x.json"), `{"schema_version":1}`)
		}, wantErr: "limit: 0 is outside"},
		{name: "wrong schema", mutate: func(t *testing.T, r string) {
			write(t, filepath.Join(r, "etc/glove/x.json"), `{"schema_version":2,"limit":3}`)
		}, wantErr: "schema_version"},
		{name: "relative configuration directory", dir: "etc/glove", wantErr: "not a clean absolute path"},
		{name: "unclean configuration directory", dir: "/etc/../etc/glove", wantErr: "not a clean absolute path"},
		{name: "dot-dot file name", file: "../glove/x.json", wantErr: "component"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := tree(t)
			if c.mutate != nil {
				c.mutate(t, root)
			}
			dir, file := "/etc/glove", "x.json"
			if c.dir != "" {
				dir = c.dir
			}
			if c.file != "" {
				file = c.file
			}
			var cfg xConfig
			err := loadConfigFrom(root, dir, file, uid, &cfg)
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, c.wantErr)
			}
			if c.untrust && !errors.Is(err, trustpath.ErrUntrusted) {
				t.Errorf("error %v does not wrap ErrUntrusted", err)
			}
		})
	}
}

// TestLoadConfigRefusesOtherOwner needs a file owned by someone else,
// which only root can make.
func TestLoadConfigRefusesOtherOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root to chown a file to another user (CI runs as root)")
	}
	for _, p := range []string{"etc/glove/x.json", "etc/glove", "etc"} {
		t.Run(p, func(t *testing.T) {
			root := tree(t)
			if err := os.Chown(filepath.Join(root, p), 65534, 65534); err != nil {
				t.Fatal(err)
			}
			var cfg xConfig
			err := loadConfigFrom(root, "/etc/glove", "x.json", 0, &cfg)
			if err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
				t.Fatalf("error %v, want owned by uid 65534", err)
			}
		})
	}
}

func TestCheckPathList(t *testing.T) {
	good := [][]string{{"/usr"}, {"/opt", "/usr"}, {"/a", "/a-b", "/b"}}
	for _, g := range good {
		if err := CheckPathList("roots", g); err != nil {
			t.Errorf("%v: %v", g, err)
		}
	}
	bad := map[string][]string{
		"empty":      {},
		"relative":   {"usr"},
		"unclean":    {"/usr/"},
		"dot-dot":    {"/usr/../etc"},
		"unsorted":   {"/usr", "/opt"},
		"duplicate":  {"/usr", "/usr"},
		"nested":     {"/usr", "/usr/lib"},
		"under root": {"/", "/usr"},
		"empty path": {""},
	}
	for name, b := range bad {
		if err := CheckPathList("roots", b); err == nil {
			t.Errorf("%s %v: accepted", name, b)
		}
	}
}
