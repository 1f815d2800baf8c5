// SPDX-License-Identifier: Apache-2.0

package shim_test

import (
	"bufio"
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

	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

// usernsSpec says how makeUserns makes a user namespace and what it
// writes into it from outside; an empty string leaves that file as the
// kernel made it.
type usernsSpec struct {
	byRoot         bool // created by root instead of the service user
	nested         bool // nested in a user namespace of the service user
	uidMap, gidMap string
	setgroups      string
}

// goodUserns is what glove-userns makes for the service user: the one-id
// maps of its uid and gid, setgroups denied.
func goodUserns(e *testenv.Env) usernsSpec {
	return usernsSpec{uidMap: fmt.Sprintf("0 %d 1\n", e.UID), gidMap: fmt.Sprintf("0 %d 1\n", e.GID), setgroups: "deny"}
}

// makeUserns makes a user namespace the way glove-userns does
// (docs/hardened-hosts-measured.md, "Consequences", 2): a child of the
// service user unshares a user namespace (util-linux unshare, holding
// CAP_SYS_ADMIN as the helper does, so that a kernel which refuses
// unprivileged user namespaces lets it), this process (root, in the
// parent namespace) writes setgroups and the maps from outside and opens
// /proc/CHILD/ns/user, and the child exits: the namespace lives on in the
// returned descriptor alone.
func makeUserns(t testing.TB, e *testenv.Env, s usernsSpec) *os.File {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux) is needed to make a user namespace: %v", err)
	}
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Fatal(err)
	}
	argv := []string{"--user", cat}
	if s.nested {
		argv = []string{"--user", "--map-root-user", unshare, "--user", cat}
	}
	cmd := exec.Command(unshare, argv...)
	cmd.Env = []string{}
	// Should this process die first, cat reads end of file and exits.
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if !s.byRoot {
		cmd.SysProcAttr.Credential = e.Credential()
		cmd.SysProcAttr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN}
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", unshare, err)
	}
	exited := false
	defer func() {
		if !exited {
			// Only on a failed set-up: the kill ends a child that may
			// have exited already, and its status is the failure's.
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	pid := strconv.Itoa(cmd.Process.Pid)
	// cat runs once every unshare is done.
	for deadline := time.Now().Add(10 * time.Second); ; {
		comm, err := os.ReadFile("/proc/" + pid + "/comm")
		if err == nil && strings.TrimSpace(string(comm)) == "cat" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %v: not running cat after 10 s (%q, %v): %s", unshare, argv, comm, err, &out)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, w := range []struct{ file, value string }{{"uid_map", s.uidMap}, {"setgroups", s.setgroups}, {"gid_map", s.gidMap}} {
		if w.value == "" {
			continue
		}
		if err := os.WriteFile("/proc/"+pid+"/"+w.file, []byte(w.value), 0); err != nil {
			t.Fatalf("write %q to the child's %s: %v", w.value, w.file, err)
		}
	}
	ns, err := os.Open("/proc/" + pid + "/ns/user")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	if err := stdin.Close(); err != nil {
		t.Fatal(err)
	}
	exited = true
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s %v: %v: %s", unshare, argv, err, &out)
	}
	return ns
}

// nsIno is the inode of a namespace descriptor, as /proc/PID/ns/* links
// show it ("user:[INO]").
func nsIno(t *testing.T, f *os.File) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// TestShimUsernsFD runs a real bundle in a user namespace made for the
// shim (--userns-fd), as gloved will on a host whose kernel refuses
// unprivileged user namespaces, and checks from outside: the program
// runs, as uid 0 of the namespace passed, whose maps inside are the
// service user's one-id maps; stage 0's waiter, stage 1 and the program
// are all in that namespace, and the program shares stage 1's mount
// namespace (there is no user namespace 2, so no mount lock); no process
// of the sandbox holds the descriptor while the program runs; stage 1
// gave the namespace its share of every per-user count although another
// process made it; --sync-fd and --seccomp-cache-fd work beside it as
// gloved passes them; nothing is left behind.
func TestShimUsernsFD(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	ns := makeUserns(t, e, goodUserns(e))
	ino := nsIno(t, ns)
	b := e.NewBundle(t)
	b.Spec.Process.Args = []string{"/bin/sh", "-c", `cat /proc/self/uid_map /proc/self/gid_map; id -u; id -g; echo ready; read x; exit 3`}
	b.Write(t)
	// As gloved will start it: the release pipe at 3 (its byte already
	// written), the seccomp cache at 4, the namespace at 5.
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
	cache := filepath.Join(t.TempDir(), "seccomp-cache")
	if err := os.Mkdir(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	chown(t, cache, e.UID, e.GID)
	df, err := os.OpenFile(cache, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer df.Close()
	cmd := exec.Command(e.HelperPath("glove-shim"), "run", "--bundle", b.Dir, "--sync-fd", "3", "--seccomp-cache-fd", "4", "--userns-fd", "5", "t")
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{rd, df, ns}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.Credential(), Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := false
	t.Cleanup(func() {
		if !done {
			if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Errorf("kill the shim: %v", err)
			}
			t.Logf("the shim, killed: %v", cmd.Wait())
		}
	})
	var inside []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && sc.Text() != "ready" {
		inside = append(inside, strings.Join(strings.Fields(sc.Text()), " "))
	}
	want := []string{fmt.Sprintf("0 %d 1", e.UID), fmt.Sprintf("0 %d 1", e.GID), "0", "0"}
	if !slices.Equal(inside, want) {
		t.Fatalf("inside: uid_map, gid_map, uid, gid %q, want %q; stderr %s", inside, want, stderr.String())
	}
	waiter := cmd.Process.Pid
	stage1 := stage1Of(t, waiter, &stderr)
	children, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", stage1, stage1))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(children))
	if len(f) != 1 {
		t.Fatalf("stage 1's children %q, want the program alone", f)
	}
	program, err := strconv.Atoi(f[0])
	if err != nil {
		t.Fatal(err)
	}
	link := func(pid int, name string) string {
		t.Helper()
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/%s", pid, name))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	wantNS := fmt.Sprintf("user:[%d]", ino)
	for _, p := range []struct {
		name string
		pid  int
	}{{"stage 0's waiter", waiter}, {"stage 1", stage1}, {"the program", program}} {
		if got := link(p.pid, "ns/user"); got != wantNS {
			t.Errorf("%s (pid %d) is in %s, want the namespace passed, %s", p.name, p.pid, got, wantNS)
		}
	}
	if p, s := link(program, "ns/mnt"), link(stage1, "ns/mnt"); p != s {
		t.Errorf("the program's mount namespace %s is not stage 1's %s: a user namespace 2 exists", p, s)
	}
	// Every process of the service user, the sandbox's among them: none
	// holds a descriptor of the namespace (nor of the cache, whose
	// descriptor stage 0 alone holds, and only until the waiter).
	seen := map[int]bool{}
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range procs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(dir, &st) != nil || int(st.Uid) != e.UID {
			continue // gone, or another user's
		}
		fds, err := os.ReadDir(dir + "/fd")
		if err != nil {
			continue // gone meanwhile
		}
		seen[pid] = true
		for _, fd := range fds {
			if l, err := os.Readlink(dir + "/fd/" + fd.Name()); err == nil && (l == wantNS || l == cache) {
				t.Errorf("pid %d holds %s at descriptor %s", pid, l, fd.Name())
			}
		}
	}
	for _, pid := range []int{waiter, stage1, program} {
		if !seen[pid] {
			t.Errorf("pid %d of the sandbox not looked at (seen %v)", pid, seen)
		}
	}
	checkSharedBudgets(t, stage1)
	if err := stdin.Close(); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	done = true
	if code, werr := testenv.ExitStatus(err); werr != nil || code != 3 {
		t.Errorf("exit %d (%v), want the program's 3; stderr %s", code, werr, stderr.String())
	}
	// The seccomp cache works in this mode too: the start left its entry.
	if names, err := os.ReadDir(cache); err != nil || len(names) != 1 {
		t.Errorf("seccomp cache after the start: %v (%v), want one entry", names, err)
	}
}

// TestShimUsernsFDRefuses: a --userns-fd that is not a user namespace of
// the service user, a child of its own, with the one-id maps of its ids
// and setgroups denied, ends the shim with 125 and one line naming what
// is wrong, before the program runs; a number in stdio or the preserved
// range is a usage error (2 and the usage line).
func TestShimUsernsFDRefuses(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	b := e.NewBundle(t)
	b.Spec.Process.Args = []string{"/bin/sh", "-c", "echo ran > /workspace/ran"}
	b.Write(t)
	good := goodUserns(e)
	with := func(edit func(*usernsSpec)) func() *os.File {
		return func() *os.File {
			s := good
			edit(&s)
			return makeUserns(t, e, s)
		}
	}
	nestedSkip := ""
	if v, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(v)) == "0" {
		nestedSkip = "this kernel lets nobody nest a user namespace (kernel.unprivileged_userns_clone=0): the case cannot be made here"
	}
	cases := []struct {
		name string
		file func() *os.File
		want string
		skip string
	}{
		{name: "regular file", file: func() *os.File {
			f, err := os.Open(filepath.Join(b.Outside, "secret"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}, want: "not a namespace (NS_GET_NSTYPE: inappropriate ioctl for device)"},
		{name: "pipe", file: func() *os.File {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close(); w.Close() })
			return r
		}, want: "not a namespace (NS_GET_NSTYPE: inappropriate ioctl for device)"},
		{name: "network namespace", file: func() *os.File {
			f, err := os.Open("/proc/self/ns/net")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}, want: "a network namespace, not a user namespace"},
		{name: "owned by root", file: with(func(s *usernsSpec) { s.byRoot = true }),
			want: fmt.Sprintf("a user namespace owned by uid 0, not by uid %d", e.UID)},
		{name: "nested", file: with(func(s *usernsSpec) { *s = usernsSpec{nested: true} }),
			want: "a user namespace nested in another one, not a child of this process's user namespace", skip: nestedSkip},
		{name: "no maps", file: with(func(s *usernsSpec) { s.uidMap, s.gidMap = "", "" }),
			want: "uid 65534 and gid 65534 in the user namespace, not 0: its maps are missing"},
		{name: "no gid map", file: with(func(s *usernsSpec) { s.gidMap = "" }),
			want: "uid 0 and gid 65534 in the user namespace, not 0: its maps are missing"},
		{name: "uid map onto another uid", file: with(func(s *usernsSpec) { s.uidMap = "0 65534 1\n" }),
			want: "uid 65534 and gid 0 in the user namespace, not 0"},
		{name: "uid map of two ids", file: with(func(s *usernsSpec) { s.uidMap = fmt.Sprintf("0 %d 2\n", e.UID) }),
			want: fmt.Sprintf("uid_map is not one line mapping 0 to uid %d alone, length 1", e.UID)},
		{name: "uid map with host root", file: with(func(s *usernsSpec) { s.uidMap = fmt.Sprintf("0 %d 1\n1 0 1\n", e.UID) }),
			want: fmt.Sprintf("uid_map is not one line mapping 0 to uid %d alone, length 1", e.UID)},
		{name: "gid map of two ids", file: with(func(s *usernsSpec) { s.gidMap = fmt.Sprintf("0 %d 2\n", e.GID) }),
			want: fmt.Sprintf("gid_map is not one line mapping 0 to gid %d alone, length 1", e.GID)},
		{name: "gid map with host root", file: with(func(s *usernsSpec) { s.gidMap = fmt.Sprintf("0 %d 1\n1 0 1\n", e.GID) }),
			want: fmt.Sprintf("gid_map is not one line mapping 0 to gid %d alone, length 1", e.GID)},
		{name: "setgroups allowed", file: with(func(s *usernsSpec) { s.setgroups = "" }),
			want: "setgroups is not denied in the user namespace"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.skip != "" {
				t.Skip("skipped: " + c.skip)
			}
			r := e.RunAs(t, testenv.ShimRun{Shim: e.HelperPath("glove-shim"),
				Args: []string{"run", "--bundle", b.Dir, "--userns-fd", "3", "t"}, ExtraFiles: []*os.File{c.file()}})
			line := strings.TrimSuffix(r.Stderr, "\n")
			if r.Code != 125 || strings.Contains(line, "\n") || !strings.HasPrefix(line, "glove-shim: --userns-fd 3: ") || !strings.Contains(line, c.want) {
				t.Errorf("exit %d, stderr %q: want 125 and one line naming %q", r.Code, r.Stderr, c.want)
			}
			if _, err := os.Stat(filepath.Join(b.Workspace, "ran")); err == nil {
				t.Error("the program ran")
			}
		})
	}
	t.Run("closed descriptor", func(t *testing.T) {
		r := e.RunAs(t, testenv.ShimRun{Shim: e.HelperPath("glove-shim"), Args: []string{"run", "--bundle", b.Dir, "--userns-fd", "9", "t"}})
		if r.Code != 125 || r.Stderr != "glove-shim: --userns-fd 9: bad file descriptor\n" {
			t.Errorf("exit %d, stderr %q: want 125 and one line", r.Code, r.Stderr)
		}
	})
	t.Run("in the preserved range", func(t *testing.T) {
		ns := makeUserns(t, e, good)
		r := e.RunAs(t, testenv.ShimRun{Shim: e.HelperPath("glove-shim"),
			Args: []string{"run", "--bundle", b.Dir, "--preserve-fds", "1", "--userns-fd", "3", "t"}, ExtraFiles: []*os.File{ns}})
		if r.Code != 2 || !strings.Contains(r.Stderr, "--userns-fd 3: must lie beyond stdio and the preserved range 3..3\n") ||
			!strings.Contains(r.Stderr, "usage: glove-shim ") || !strings.Contains(r.Stderr, "[--userns-fd N] ID\n") {
			t.Errorf("exit %d, stderr %q: want 2, the reason and the usage line", r.Code, r.Stderr)
		}
	})
	if _, err := os.Stat(filepath.Join(b.Workspace, "ran")); err == nil {
		t.Error("the program ran")
	}
}
