// SPDX-License-Identifier: Apache-2.0

package session

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/internal/cgleaf"
	"golang.org/x/sys/unix"
)

// TestOwnChildren: the kernel's children lists name exactly the children
// a scan of every process finds (reapOrphans relies on it to find the
// orphans re-parented to gloved), and a child that ends and is reaped
// leaves them.
func TestOwnChildren(t *testing.T) {
	var cmds []*exec.Cmd
	for range 3 {
		c := exec.Command("sleep", "60")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	defer func() {
		for _, c := range cmds {
			if err := c.Process.Kill(); err != nil {
				t.Errorf("kill %d: %v", c.Process.Pid, err)
			}
			_ = c.Wait() // the kill's own status
		}
	}()
	got, err := ownChildren(nil)
	if err != nil {
		t.Fatal(err)
	}
	scan, err := childrenOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	slices.Sort(scan)
	if !slices.Equal(got, scan) {
		t.Errorf("children lists %v, scan of /proc %v", got, scan)
	}
	for _, c := range cmds {
		if !slices.Contains(got, c.Process.Pid) {
			t.Errorf("child %d not listed in %v", c.Process.Pid, got)
		}
	}
	last := cmds[2]
	cmds = cmds[:2]
	if err := last.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = last.Wait() // the kill's own status
	got, err = ownChildren(nil)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(got, last.Process.Pid) {
		t.Errorf("reaped child %d still listed in %v", last.Process.Pid, got)
	}
}

// sessionCgroup makes a v2 cgroup to stand for a session's (root only;
// removed when the test ends) and returns its name and a descriptor of
// it for starting children there (SysProcAttr.CgroupFD).
func sessionCgroup(t testing.TB) (string, int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root to create a cgroup (CI runs as root)")
	}
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	mnt := cgleaf.ParseV2Mount(info)
	if mnt == "" {
		t.Skip("skipped: no cgroup2 hierarchy mounted")
	}
	name := fmt.Sprintf("glove-reap-test-%d", os.Getpid())
	dir := filepath.Join(mnt, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.Close(fd)
		// Its children are reaped by now (each test's own clean-up).
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove the test cgroup: %v", err)
		}
	})
	return name, fd
}

// startIn starts argv as a child of this process in the cgroup cg (-1:
// this process's own).
func startIn(t testing.TB, cg int, argv ...string) *exec.Cmd {
	t.Helper()
	c := exec.Command(argv[0], argv[1:]...)
	if cg >= 0 {
		c.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cg}
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	return c
}

// killAll kills and reaps the children still running.
func killAll(t testing.TB, cmds ...*exec.Cmd) {
	for _, c := range cmds {
		if err := c.Process.Kill(); err != nil {
			t.Errorf("kill %d: %v", c.Process.Pid, err)
		}
		_ = c.Wait() // the kill's own status
	}
}

// zombie starts a child (in cgroup cg) that exits at once and waits
// until it is a zombie (unreaped).
func zombie(t *testing.T, cg int) *exec.Cmd {
	t.Helper()
	c := startIn(t, cg, "true")
	for deadline := time.Now().Add(10 * time.Second); ; {
		if st, err := procState(c.Process.Pid); err == nil && st == "Z" {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d did not become a zombie", c.Process.Pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// procState is field 3 of /proc/PID/stat.
func procState(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return f[0], nil
}

// TestReapOrphansOnce: only zombies in the session's cgroup are reaped,
// live children there are counted as still exiting, and a child of
// another cgroup (another session's shim, a helper) is left alone, its
// exit status kept for its own Wait.
func TestReapOrphansOnce(t *testing.T) {
	name, cg := sessionCgroup(t)
	live := startIn(t, cg, "sleep", "60")
	other := startIn(t, -1, "sleep", "60")
	defer killAll(t, live, other)

	// Another session's (or no session's): nothing reaped, nothing left.
	z := zombie(t, -1)
	left, err := reapOrphansOnce(name + "-other")
	if err != nil || left != 0 {
		t.Fatalf("another session: left %d, %v; want 0, nil", left, err)
	}
	if st, err := procState(z.Process.Pid); err != nil || st != "Z" {
		t.Fatalf("another session's zombie %d: state %q, %v; want it unreaped", z.Process.Pid, st, err)
	}
	if err := z.Wait(); err != nil {
		t.Fatalf("its own Wait: %v", err)
	}

	// This session's: its zombie reaped, its live child left, the
	// other cgroup's child untouched.
	z = zombie(t, cg)
	zo := zombie(t, -1)
	left, err = reapOrphansOnce(name)
	if err != nil || left != 1 {
		t.Fatalf("this session: left %d, %v; want 1 (sleep), nil", left, err)
	}
	if _, err := procState(z.Process.Pid); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the session's zombie %d is still there (%v)", z.Process.Pid, err)
	}
	if err := z.Wait(); err == nil || !strings.Contains(err.Error(), "no child processes") {
		t.Fatalf("Wait of a reaped child: %v, want ECHILD", err)
	}
	// A Wait that failed leaves the process's pidfd open until a
	// finalizer closes it, during some later test, whose leak check then
	// sees a descriptor vanish (TestGloveRunPolicyPlan did): close it now.
	if err := z.Process.Release(); err != nil {
		t.Fatalf("release the reaped child's handle: %v", err)
	}
	if err := zo.Wait(); err != nil {
		t.Fatalf("the other cgroup's zombie, its own Wait: %v", err)
	}
}

// BenchmarkReapOrphansOnce is the scan each session's end makes, with
// 24 children of other cgroups (8 sessions' shims and helpers at
// gloved's concurrency of 8): none is this session's.
func BenchmarkReapOrphansOnce(b *testing.B) {
	var cmds []*exec.Cmd
	for range 24 {
		cmds = append(cmds, startIn(b, -1, "sleep", "60"))
	}
	defer killAll(b, cmds...)
	b.ResetTimer()
	for b.Loop() {
		if left, err := reapOrphansOnce("glove-no-such-session"); err != nil || left != 0 {
			b.Fatalf("left %d, %v", left, err)
		}
	}
}
