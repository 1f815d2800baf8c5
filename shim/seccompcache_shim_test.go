// SPDX-License-Identifier: Apache-2.0

package shim_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/seccomp"
	"github.com/glove-sandbox/glove/shim"
	"github.com/glove-sandbox/glove/testenv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// plantedMarker is what the planted program makes mkdir print: the
// planted filter answers EXDEV to mkdir and mkdirat, which the bundle's
// profile never does.
const plantedMarker = "Invalid cross-device link"

// TestShimSeccompCache runs the installed glove-shim with
// --seccomp-cache-fd: the first start leaves an entry holding exactly
// what libseccomp compiles; a valid entry planted under the real key with
// another program is used (the program sees the planted filter); an
// entry that is corrupt, a symbolic link, another key's or mode 0644 is
// refused (another user's is in TestSeccompCacheRefusesEntries: here the
// service user could not even read it) (the bundle's own filter runs) and replaced; a
// directory that is not the service user's alone ends the start with
// one line; the descriptor reaches neither stage 1 nor the program.
func TestShimSeccompCache(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	b := e.NewBundle(t)
	b.Spec.Process.Args = []string{"/bin/sh", "-c", "mkdir /workspace/d && rmdir /workspace/d && echo made"}
	b.Write(t)
	dir := filepath.Join(t.TempDir(), "seccomp-cache")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	chown(t, dir, e.UID, e.GID)
	df, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer df.Close()
	// As gloved starts it: the release pipe at 3 (its byte already
	// written), the cache at 4, above every descriptor stage 0 gives
	// stage 1 (the control socket takes 3), so that a cache descriptor
	// left open would reach stage 1 and show below.
	runWith := func(cacheFD string) testenv.ShimResult {
		rd, wr, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		if _, err := wr.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		if err := wr.Close(); err != nil {
			t.Fatal(err)
		}
		return runShim(t, e, testenv.ShimRun{Shim: e.HelperPath("glove-shim"),
			Args: []string{"run", "--bundle", b.Dir, "--sync-fd", "3", "--seccomp-cache-fd", cacheFD, "t"}, ExtraFiles: []*os.File{rd, df}})
	}
	run := func() testenv.ShimResult { return runWith("4") }
	// ownFilter: the program ran under the bundle's filter.
	ownFilter := func(what string) {
		t.Helper()
		if r := run(); r.Code != 0 || r.Stdout != "made\n" || r.Stderr != "" {
			t.Errorf("%s: exit %d stdout %q stderr %q, want 0 and made (the bundle's filter)", what, r.Code, r.Stdout, r.Stderr)
		}
	}

	// The first start: one entry, the service user's, 0600, holding the
	// program a fresh compile exports, under its own key.
	ownFilter("cold cache")
	names := entries(t, dir)
	if len(names) != 1 || !regexp.MustCompile(`^[0-9a-f]{64}\.bpf$`).MatchString(names[0]) {
		t.Fatalf("cache after the first start: %q, want one entry", names)
	}
	path := filepath.Join(dir, names[0])
	good, st := readEntry(t, path)
	if int(st.Uid) != e.UID || st.Mode&0o7777 != 0o600 || st.Nlink != 1 {
		t.Errorf("entry: uid %d mode %04o links %d, want %d 0600 1", st.Uid, st.Mode&0o7777, st.Nlink, e.UID)
	}
	key, flags, prog, err := shim.DecodeCacheEntry(good)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%x.bpf", key) != names[0] {
		t.Errorf("entry %s holds key %x", names[0], key)
	}
	fresh, err := seccomp.ExportBPF(b.Spec.Linux.Seccomp)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(prog, fresh) {
		t.Errorf("cached program (%d bytes) differs from a fresh compile (%d bytes)", len(prog), len(fresh))
	}

	// The second start reads the entry and leaves it as it is.
	ownFilter("warm cache")
	if again, st2 := readEntry(t, path); !bytes.Equal(again, good) || st2.Ino != st.Ino {
		t.Error("the warm start rewrote the entry")
	}

	// A valid entry with another program is used: proof the cache is read.
	plantedProg, err := seccomp.ExportBPF(&specs.LinuxSeccomp{DefaultAction: specs.ActAllow,
		Syscalls: []specs.LinuxSyscall{{Names: []string{"mkdir", "mkdirat"}, Action: specs.ActErrno, ErrnoRet: ptr(uint(unix.EXDEV))}}})
	if err != nil {
		t.Fatal(err)
	}
	planted := shim.EncodeCacheEntry(key, flags, plantedProg)
	plant := func(p string, b []byte, uid int, mode os.FileMode) {
		t.Helper()
		os.Remove(p)
		if err := os.WriteFile(p, b, mode); err != nil {
			t.Fatal(err)
		}
		chown(t, p, uid, e.GID)
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	plant(path, planted, e.UID, 0o600)
	if r := run(); r.Code != 1 || !strings.Contains(r.Stderr, plantedMarker) {
		t.Fatalf("planted entry: exit %d stdout %q stderr %q, want the planted filter's %q", r.Code, r.Stdout, r.Stderr, plantedMarker)
	}

	// Each bad entry carries the planted program: used, it would show.
	badSum := bytes.Clone(planted)
	badSum[len(badSum)-1] ^= 1
	otherKey := key
	otherKey[0] ^= 1
	for _, c := range []struct {
		name  string
		plant func()
	}{
		{"corrupt", func() { plant(path, badSum, e.UID, 0o600) }},
		{"another key", func() { plant(path, shim.EncodeCacheEntry(otherKey, flags, plantedProg), e.UID, 0o600) }},
		{"mode 0644", func() { plant(path, planted, e.UID, 0o644) }},
		{"symlink", func() {
			target := filepath.Join(dir, "planted")
			plant(target, planted, e.UID, 0o600)
			os.Remove(path)
			if err := os.Symlink(filepath.Base(target), path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		c.plant()
		ownFilter(c.name)
		if got, _ := readEntry(t, path); !bytes.Equal(got, good) {
			t.Errorf("%s: the entry was not replaced by the compiled program", c.name)
		}
	}
	os.Remove(filepath.Join(dir, "planted"))

	// A directory others could write, or another user's, or no
	// descriptor at all: one line, status 125, nothing runs.
	for _, c := range []struct {
		name  string
		setup func()
		fd    string
		want  string
	}{
		{"group-writable", func() { chmodT(t, dir, 0o770) }, "4", "--seccomp-cache-fd 4: mode 0770: writable by group or others"},
		{"root's", func() { chmodT(t, dir, 0o700); chown(t, dir, 0, 0) }, "4", fmt.Sprintf("--seccomp-cache-fd 4: owned by uid 0, not by uid %d", e.UID)},
		{"no descriptor", func() { chown(t, dir, e.UID, e.GID) }, "900", "--seccomp-cache-fd 900: bad file descriptor"},
	} {
		c.setup()
		r := runWith(c.fd)
		if r.Code != 125 || r.Stdout != "" || strings.Count(r.Stderr, "\n") != 1 || !strings.Contains(r.Stderr, c.want) {
			t.Errorf("%s: exit %d stdout %q stderr %q, want 125 and one line naming %q", c.name, r.Code, r.Stdout, r.Stderr, c.want)
		}
	}
	ownFilter("the directory restored")

	// While the program runs, only stage 0 (and this test) hold the
	// directory: not stage 1, PID 1 of the sandbox, nor the program.
	b.Spec.Process.Args = []string{"/bin/sh", "-c", "touch /workspace/ready; while [ ! -e /workspace/go ]; do sleep 0.05; done"}
	b.Write(t)
	done := make(chan testenv.ShimResult, 1)
	go func() { done <- run() }()
	ready := filepath.Join(b.Workspace, "ready")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the program did not start within 10 s")
		}
	}
	holders, stage1 := holdersOf(t, dir)
	if err := os.WriteFile(filepath.Join(b.Workspace, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.Code != 0 {
		t.Errorf("waiting program: exit %d stderr %q", r.Code, r.Stderr)
	}
	if !stage1 {
		t.Error("found no stage 1 to look at")
	}
	for pid, argv := range holders {
		stage0 := len(argv) > 1 && filepath.Base(argv[0]) == "glove-shim" && argv[1] == "run"
		if pid != os.Getpid() && !stage0 {
			t.Errorf("pid %d %q holds the cache directory", pid, argv)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func chown(t *testing.T, p string, uid, gid int) {
	t.Helper()
	if err := os.Lchown(p, uid, gid); err != nil {
		t.Fatal(err)
	}
}

func chmodT(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func readEntry(t *testing.T, p string) ([]byte, unix.Stat_t) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b, st
}

// holdersOf returns every process with a descriptor of dir (pid to its
// arguments), and whether a glove-shim stage 1 was among the processes
// looked at.
func holdersOf(t *testing.T, dir string) (map[int][]string, bool) {
	t.Helper()
	procs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	holders, stage1 := map[int][]string{}, false
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue // exited
		}
		argv := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
		if len(argv) > 1 && argv[0] == "glove-shim" && argv[1] == "--glove-stage0" {
			stage1 = true
		}
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatalf("list the descriptors of pid %d: %v", pid, err)
		}
		for _, fd := range fds {
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && l == dir {
				holders[pid] = argv
			}
		}
	}
	return holders, stage1
}
