// SPDX-License-Identifier: Apache-2.0

package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCheckJoin: a Join reply's descriptor must be a cgroup v1 file open
// write-only; a regular file, a cgroup v2 file and a v1 file open for
// reading are refused before the shim would write "0" to them.
func TestCheckJoin(t *testing.T) {
	open := func(path string, flags int) *os.File {
		f, err := os.OpenFile(path, flags, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	plain := filepath.Join(t.TempDir(), "tasks")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bad := map[string]*os.File{"a regular file": open(plain, os.O_WRONLY)}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.procs"); err == nil {
		bad["a cgroup v2 file"] = open("/sys/fs/cgroup/cgroup.procs", os.O_RDONLY)
	}
	var v1 string
	for _, p := range []string{"/sys/fs/cgroup/memory/tasks", "/sys/fs/cgroup/pids/tasks"} {
		var fs unix.Statfs_t
		if unix.Statfs(p, &fs) == nil && fs.Type == unix.CGROUP_SUPER_MAGIC {
			v1 = p
		}
	}
	if v1 != "" {
		bad["a v1 tasks file open for reading"] = open(v1, os.O_RDONLY)
	}
	for name, f := range bad {
		if err := checkJoin([]*os.File{f}); err == nil || !strings.Contains(err.Error(), "not a v1 cgroup file open for writing only") {
			t.Errorf("%s: %v, want refused", name, err)
		}
	}
	if v1 == "" {
		t.Skip("no v1 hierarchy here (a pure v2 host): the accepted case is not tried")
	}
	if os.Getuid() != 0 {
		t.Skip("not root: the root cgroup's v1 tasks file cannot be opened for writing")
	}
	if err := checkJoin([]*os.File{open(v1, os.O_WRONLY)}); err != nil {
		t.Errorf("a v1 tasks file open write-only: %v", err)
	}
}

// TestAwaitJoin: only the byte 'j' is the shim's word that it joined;
// end of file (the shim ended first) and any other byte fail.
func TestAwaitJoin(t *testing.T) {
	for _, c := range []struct {
		name string
		send []byte
		ok   bool
	}{{"joined", []byte("j"), true}, {"end of file", nil, false}, {"another byte", []byte{1}, false}} {
		shim, sup, err := syncSocket()
		if err != nil {
			t.Fatal(err)
		}
		if len(c.send) > 0 {
			if _, err := shim.Write(c.send); err != nil {
				t.Fatal(err)
			}
		}
		if err := shim.Close(); err != nil {
			t.Fatal(err)
		}
		err = awaitJoin(sup)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok %v", c.name, err, c.ok)
		}
		if err := sup.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
