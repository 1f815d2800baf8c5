// SPDX-License-Identifier: Apache-2.0

package sourceroots

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/testenv"
)

func TestCheck(t *testing.T) {
	base := testenv.ProtectedDir(t, "sourceroots")
	srv := filepath.Join(base, "srv")
	if err := os.MkdirAll(srv+"/runtimes/abc", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("srv", base+"/srv-link"); err != nil {
		t.Fatal(err)
	}
	// The bounds file as the helper reads it: root-owned all the way.
	conf := filepath.Join(base, "conf")
	if err := os.Mkdir(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	bounds := `{"schema_version":1,"source_roots":["/usr","` + base + `/srv-link"],"max_tmpfs_bytes":1048576,"max_tmpfs_inodes":64}`
	if err := os.WriteFile(conf+"/mounter.json", []byte(bounds), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Load(conf, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p, root, err string
	}{
		{"/usr/local/lib/glove-runtimes", "/usr", ""},
		{"/usr", "/usr", ""},
		{srv + "/runtimes/abc", base + "/srv-link", ""},       // a root configured through a link
		{base + "/srv-link/runtimes", base + "/srv-link", ""}, // a path through one
		{srv + "/runtimes/not-yet", base + "/srv-link", ""},   // compared as written
		{"/opt/glove-runtimes/x", "", "is outside glove-mounter's source roots"},
		{"/usrx", "", "is outside"},
		{base, "", "is outside"},
		{"relative", "", "not an absolute path"},
	} {
		root, err := r.Check(c.p)
		if c.err == "" && (err != nil || root != c.root) {
			t.Errorf("Check(%q) = %q, %v; want %q", c.p, root, err, c.root)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("Check(%q) = %q, %v; want an error containing %q", c.p, root, err, c.err)
		}
		if strings.Contains(c.err, "outside") && !errors.Is(err, ErrOutside) {
			t.Errorf("Check(%q): %v does not wrap ErrOutside", c.p, err)
		}
	}
	// Beneath a root but on another mount: the helper's walk up from the
	// source leaves the root's mount.
	if _, err := New("test", []string{"/"}).Check("/proc/self"); err == nil || !strings.Contains(err.Error(), "on another mount than the root's") {
		t.Errorf("Check(/proc/self) under / = %v", err)
	}

	// A bounds file anyone but root could write is not read.
	if err := os.Chmod(conf+"/mounter.json", 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(conf, 0); err == nil {
		t.Error("a group- and world-writable bounds file was read")
	}
}
