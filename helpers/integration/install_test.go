// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/captable/captext"
	"github.com/glove-sandbox/glove/testenv"
)

// TestMakeInstall runs `make install DESTDIR=...` twice and checks the
// result against the capability table: getcap -r lists exactly the rows
// with capabilities, no file is setuid or setgid, helpers are 0750 and
// group-owned by the service group, and the second install changed
// nothing.
func TestMakeInstall(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dest := t.TempDir()
	bindir := t.TempDir()
	const prefix = "/usr/local"
	var listings []string
	for i := 0; i < 2; i++ {
		cmd := exec.Command("make", "-s", "-C", root, "install",
			"DESTDIR="+dest, "PREFIX="+prefix, "BINDIR="+bindir, "GROUP="+env.Group)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make install (run %d): %v\n%s", i+1, err, out)
		}
		listings = append(listings, listing(t, dest))
	}
	if listings[0] != listings[1] {
		t.Errorf("second install changed the result:\n%s\n---\n%s", listings[0], listings[1])
	}

	// getcap -r: exactly the table's rows with capabilities.
	out, err := exec.Command("getcap", "-r", dest).Output()
	if err != nil {
		t.Fatalf("getcap -r: %v", err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l == "" {
			continue
		}
		f := strings.Fields(l)
		got[f[0]] = strings.Join(f[1:], " ")
	}
	want := map[string]string{}
	for _, e := range captable.Table {
		if captext.SetcapText(e) != "" {
			want[filepath.Join(dest, prefix, e.Dir, e.Binary)] = captext.SetcapText(e)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("getcap -r %s:\n got %v\nwant %v", dest, got, want)
	}

	// find -perm /6000: nothing setuid or setgid.
	out, err = exec.Command("find", dest, "-perm", "/6000").Output()
	if err != nil {
		t.Fatalf("find: %v", err)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("setuid/setgid files installed:\n%s", s)
	}

	for _, e := range captable.Table {
		p := filepath.Join(dest, prefix, e.Dir, e.Binary)
		st, err := os.Stat(p)
		if err != nil {
			t.Errorf("%s not installed: %v", e.Binary, err)
			continue
		}
		sys := st.Sys().(*syscall.Stat_t)
		wantMode, wantGid := os.FileMode(0o755), uint32(0)
		if e.Helper {
			wantMode, wantGid = 0o750, uint32(env.GID)
		}
		if st.Mode() != wantMode || sys.Uid != 0 || sys.Gid != wantGid {
			t.Errorf("%s: mode %v owner %d:%d, want %v 0:%d", e.Binary, st.Mode(), sys.Uid, sys.Gid, wantMode, wantGid)
		}
	}
}

// listing describes every file under dir: path, mode, owner, size and
// capabilities, to compare two installs.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		sys := info.Sys().(*syscall.Stat_t)
		caps, _ := exec.Command("getcap", p).Output()
		lines = append(lines, fmt.Sprintf("%s %v %d:%d %d %s", p, info.Mode(), sys.Uid, sys.Gid, info.Size(), bytes.TrimSpace(caps)))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
