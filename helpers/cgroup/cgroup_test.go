// SPDX-License-Identifier: Apache-2.0

package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/cgwire"
	"golang.org/x/sys/unix"
)

// fakeSession is a temp directory holding empty control files, as
// cgroupfs shows them in a new cgroup.
func fakeSession(t *testing.T, names ...string) (string, int) {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fd, err := unix.Open(dir, dirOpenFlags, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return dir, fd
}

func contents(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// TestV2Limits checks the exact files and values written on a v2 host,
// and that the optional files are skipped, never created.
func TestV2Limits(t *testing.T) {
	dir, fd := fakeSession(t, "memory.max", "memory.swap.max", "memory.oom.group", "pids.max")
	if err := writeLimits(fd, v2Limits(64<<20, 32)); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"memory.max": "67108864", "memory.swap.max": "0", "memory.oom.group": "1", "pids.max": "32"}
	if got := contents(t, dir); !equal(got, want) {
		t.Errorf("wrote %v, want %v", got, want)
	}

	dir, fd = fakeSession(t, "memory.max", "pids.max")
	if err := writeLimits(fd, v2Limits(4096, 1)); err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"memory.max": "4096", "pids.max": "1"}
	if got := contents(t, dir); !equal(got, want) {
		t.Errorf("without swap accounting: wrote %v, want %v", got, want)
	}

	// A required file missing is an error, not a silently unlimited
	// session.
	_, fd = fakeSession(t, "memory.max")
	if err := writeLimits(fd, v2Limits(4096, 1)); err == nil {
		t.Error("pids.max missing: no error")
	}
}

// TestV1Limits checks the hybrid host's memory and pids files.
func TestV1Limits(t *testing.T) {
	dir, fd := fakeSession(t, "memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "memory.swappiness")
	if err := writeLimits(fd, v1MemoryLimits(1<<20)); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"memory.limit_in_bytes": "1048576", "memory.memsw.limit_in_bytes": "1048576", "memory.swappiness": "0"}
	if got := contents(t, dir); !equal(got, want) {
		t.Errorf("wrote %v, want %v", got, want)
	}
	dir, fd = fakeSession(t, "pids.max")
	if err := writeLimits(fd, v1PidsLimits(7)); err != nil {
		t.Fatal(err)
	}
	if got := contents(t, dir); got["pids.max"] != "7" {
		t.Errorf("pids.max %q", got["pids.max"])
	}
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestOpenHierarchy runs openHierarchy on directories standing for
// mount points (the file system magic is the temporary directory's): the
// first place holding the parent is served, and a parent on another file
// system, without the proof file or owned by another user is refused.
func TestOpenHierarchy(t *testing.T) {
	root := t.TempDir()
	var sfs unix.Statfs_t
	if err := unix.Statfs(root, &sfs); err != nil {
		t.Fatal(err)
	}
	mk := func(dir string, files ...string) {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(root, dir, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("a")
	mk("b/glove", "cgroup.kill")
	mk("b/bare")
	m := mount{"unified", []string{filepath.Join(root, "a"), filepath.Join(root, "b")}, sfs.Type, "cgroup.kill"}
	h, err := openHierarchy(m, "/glove")
	if err != nil {
		t.Fatalf("openHierarchy: %v", err)
	}
	unix.Close(h.parent)
	if h.name != "unified" {
		t.Errorf("name %q", h.name)
	}
	if _, err := openHierarchy(m, "/none"); err == nil || !strings.Contains(err.Error(), "parent") {
		t.Errorf("missing parent: %v, want an error naming the parent", err)
	}
	if _, err := openHierarchy(m, "/bare"); err == nil {
		t.Error("parent without cgroup.kill: no error")
	}
	other := m
	other.magic = unix.CGROUP2_SUPER_MAGIC
	if _, err := openHierarchy(other, "/glove"); err == nil {
		t.Error("parent on another file system: no error")
	}
	// The first place holding the parent decides: it is not skipped for
	// a later one when it fails its checks.
	mk("a/glove")
	if _, err := openHierarchy(m, "/glove"); err == nil {
		t.Error("first place's parent without cgroup.kill: a later place served instead")
	}
	if os.Getuid() == 0 {
		if err := os.Chown(filepath.Join(root, "b/glove"), 1, 1); err != nil {
			t.Fatal(err)
		}
		m.points = m.points[1:]
		if _, err := openHierarchy(m, "/glove"); err == nil || !strings.Contains(err.Error(), "not delegated") {
			t.Errorf("parent owned by uid 1: %v, want a refusal", err)
		}
	}
}

func TestSessionNames(t *testing.T) {
	long := "a123456789012345678901234567890123456789012345678901234567890123"
	for name, ok := range map[string]bool{
		"s1": true, "0": true, "a-b": true, long: true, long + "4": false,
		"": false, "-a": false, "..": false, "a/b": false, "A": false, "a_b": false, "a.b": false, "a\n": false,
	} {
		if got := checkName(name) == nil; got != ok {
			t.Errorf("checkName(%q) ok = %v, want %v", name, got, ok)
		}
	}
}

func TestKeyedAndField(t *testing.T) {
	if n := keyed("usage_usec 1500\nuser_usec 1000\n", "usage_usec"); n != 1500 {
		t.Errorf("keyed %d", n)
	}
	if n := keyed("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", "oom_kill"); n != 3 {
		t.Errorf("keyed oom_kill %d", n)
	}
	if f := field("pos:\t0\nPid:\t-1\n", "Pid:"); f != "-1" {
		t.Errorf("field %q", f)
	}
}

func TestChooseParent(t *testing.T) {
	both := []string{"/system.slice/gloved.service", "/system.slice/glove-run.service"}
	for _, c := range []struct {
		name    string
		parents []string
		own     string
		want    string
		err     bool
	}{
		{"the unit's leaf", both, "/system.slice/gloved.service/supervisor", "/system.slice/gloved.service", false},
		{"the run unit's leaf", both, "/system.slice/glove-run.service/supervisor", "/system.slice/glove-run.service", false},
		{"in the parent itself", both, "/system.slice/glove-run.service", "/system.slice/glove-run.service", false},
		{"a name that only shares a prefix", both, "/system.slice/gloved.service2/supervisor", "", true},
		{"outside every parent", both, "/user.slice", "", true},
		{"no v2 membership", both, "", "", true},
		{"one parent, supervisor elsewhere", both[:1], "/elsewhere", both[0], false},
	} {
		got, err := ChooseParent(c.parents, c.own)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("%s: ChooseParent(%v, %q) = %q, %v; want %q (error %v)", c.name, c.parents, c.own, got, err, c.want, c.err)
		}
	}
}

func TestOwnV2Cgroup(t *testing.T) {
	if got := ownV2Cgroup("12:pids:/a\n0::/glove/supervisor\n"); got != "/glove/supervisor" {
		t.Errorf("ownV2Cgroup = %q", got)
	}
	if got := ownV2Cgroup("12:pids:/a\n"); got != "" {
		t.Errorf("ownV2Cgroup of a v1-only process = %q", got)
	}
}

func TestConfigExtraParents(t *testing.T) {
	base := Config{SchemaVersion: 1, Parent: "/system.slice/gloved.service", MaxMemoryBytes: 1 << 30, MaxPids: 64}
	for _, c := range []struct {
		name  string
		extra []string
		ok    bool
	}{
		{"none", nil, true},
		{"one more unit", []string{"/system.slice/glove-run.service"}, true},
		{"the root", []string{"/"}, false},
		{"relative", []string{"system.slice/x.service"}, false},
		{"the parent again", []string{"/system.slice/gloved.service"}, false},
		{"beneath the parent", []string{"/system.slice/gloved.service/x"}, false},
		{"above the parent", []string{"/system.slice"}, false},
		{"twice", []string{"/a", "/a"}, false},
		{"nested in each other", []string{"/a", "/a/b"}, false},
		{"too many", []string{"/a", "/b", "/c", "/d", "/e", "/f", "/g", "/h", "/i"}, false},
	} {
		cfg := base
		cfg.ExtraParents = c.extra
		if err := cfg.Validate(); (err == nil) != c.ok {
			t.Errorf("%s: Validate(extra_parents %v) = %v, want ok %v", c.name, c.extra, err, c.ok)
		}
	}
}

// TestEnableV2 runs enableV2 against files in a directory standing for a
// parent cgroup (the kernel's EBUSY is exercised in the VM lane, where
// the parent is a real systemd-delegated unit cgroup).
func TestEnableV2(t *testing.T) {
	for _, c := range []struct {
		name, controllers, subtree string
		want                       bool
		wantWrite                  string
	}{
		{"already enabled", "cpu memory pids", "memory pids", true, "memory pids"},
		{"available, not enabled", "cpuset cpu io memory pids", "", true, "+memory +pids"},
		{"hybrid: nothing available", "", "", false, ""},
		{"only memory available", "memory", "", false, ""},
	} {
		dir, fd := fakeSession(t)
		if err := os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte(c.controllers+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(c.subtree+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := enableV2(fd, "/p")
		// A regular file keeps what was written, which then reads back
		// as "+memory +pids" and not as the kernel's "memory pids".
		written, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
		if c.wantWrite == "+memory +pids" {
			if err == nil || string(written) != "+memory +pids" {
				t.Errorf("%s: enableV2 = %v, %v, file %q; want the write and a read-back mismatch error", c.name, got, err, written)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: enableV2 = %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}

// TestLimitBoundMessages: Create over the bounds is refused before any
// cgroup is made, naming the one bound exceeded, with its value and the
// request's, and never the other (the operator changes that line of
// cgroup.json); the longest message fits the wire's error bound.
func TestLimitBoundMessages(t *testing.T) {
	dir, fd := fakeSession(t) // stands for the v2 parent
	v2 := hierarchy{name: "unified", parent: fd}
	s := &server{cfg: &Config{MaxMemoryBytes: 4 << 30, MaxPids: 1024}, v2: v2, mem: v2, pids: v2, inodes: map[string]uint64{}}
	for _, c := range []struct {
		name          string
		mem, pids     uint64
		want, notWant string
	}{
		{"pids over (a profile of 1024 and glove-shim's 32)", 2 << 30, 1056, "pids limit 1056 is over cgroup.json's max_pids 1024", "memory"},
		{"memory over", 4<<30 + 1, 1024, "memory limit 4294967297 is over cgroup.json's max_memory_bytes 4294967296", "pids"},
		{"both over: memory is named", 8 << 30, 4096, "memory limit 8589934592 is over cgroup.json's max_memory_bytes 4294967296", "pids"},
		{"largest numbers", ^uint64(0), ^uint64(0), "memory limit 18446744073709551615 is over", "pids"},
	} {
		_, _, err := s.create(1, &cgwire.CreateRequest{Session: "s1", MemoryBytes: c.mem, Pids: c.pids}, nil)
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != wire.ErrRefused {
			t.Errorf("%s: %v, want ErrRefused", c.name, err)
			continue
		}
		if !strings.Contains(we.Message, c.want) || strings.Contains(we.Message, c.notWant) || len(we.Message) > wire.MaxErrorLen {
			t.Errorf("%s: message %q, want it to say %q and not %q, within %d bytes", c.name, we.Message, c.want, c.notWant, wire.MaxErrorLen)
		}
		if _, err := os.Stat(filepath.Join(dir, "s1")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: a refused Create left the session's directory (%v)", c.name, err)
		}
	}
	if err := s.cfg.CheckLimits(4<<30, 1024); err != nil {
		t.Errorf("exactly the bounds: %v", err)
	}
}

// TestCreateExistingKeepsRecord: a Create refused because the name is
// taken removes nothing and keeps the inode record of the session
// created under it (which refuses a same-named cgroup made behind the
// helper's back).
func TestCreateExistingKeepsRecord(t *testing.T) {
	dir, fd := fakeSession(t) // stands for the v2 parent
	if err := os.Mkdir(filepath.Join(dir, "live"), 0o755); err != nil {
		t.Fatal(err)
	}
	v2 := hierarchy{name: "unified", parent: fd}
	s := &server{cfg: &Config{MaxMemoryBytes: 1 << 30, MaxPids: 64}, v2: v2, mem: v2, pids: v2, inodes: map[string]uint64{"live": 42}}
	_, _, err := s.create(1, &cgwire.CreateRequest{Session: "live", MemoryBytes: 1 << 20, Pids: 1}, nil)
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.ErrRefused {
		t.Errorf("create of an existing name: %v, want ErrRefused", err)
	}
	if s.inodes["live"] != 42 {
		t.Errorf("inode record %d, want 42 kept", s.inodes["live"])
	}
	if _, err := os.Stat(filepath.Join(dir, "live")); err != nil {
		t.Errorf("the existing session's directory: %v", err)
	}
}
