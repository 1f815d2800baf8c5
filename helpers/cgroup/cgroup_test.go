package cgroup

import (
	"os"
	"path/filepath"
	"testing"

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

func TestParseMountinfo(t *testing.T) {
	text := `30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
31 30 0:28 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
34 30 0:31 / /sys/fs/cgroup/memory rw,relatime shared:5 - cgroup cgroup rw,memory
38 30 0:35 /sub /mnt/pids rw,relatime - cgroup cgroup rw,pids
40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
41 30 0:38 / /mnt/we\040ird rw - cgroup2 cgroup2 rw
garbage
`
	ms := parseMountinfo(text)
	if len(ms) != 4 {
		t.Fatalf("%d mounts: %+v", len(ms), ms)
	}
	if !ms[0].opts["cpuacct"] || ms[0].v2 || !ms[1].opts["memory"] || !ms[3].v2 {
		t.Errorf("parsed %+v", ms)
	}
	for _, c := range []struct {
		m            cgMount
		parent, want string
	}{
		{ms[1], "/glove", "/sys/fs/cgroup/memory/glove"},
		{ms[2], "/sub/glove", "/mnt/pids/glove"},
		{ms[2], "/glove", ""},
		{ms[2], "/subx", ""},
	} {
		if got := parentPath(c.m, c.parent); got != c.want {
			t.Errorf("parentPath(%s, %s) = %q, want %q", c.m.point, c.parent, got, c.want)
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
