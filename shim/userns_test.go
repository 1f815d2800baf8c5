// SPDX-License-Identifier: Apache-2.0

package shim_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/testenv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
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

// goodUserns is what glove-userns makes for the service user and a
// bundle of the test environment (process.user testenv.SandboxUID and
// SandboxGID): the one-id maps of those ids onto the service user's,
// setgroups denied.
func goodUserns(e *testenv.Env) usernsSpec {
	return usernsFor(e, specs.User{UID: testenv.SandboxUID, GID: testenv.SandboxGID})
}

// usernsFor is what glove-userns makes for the service user and a bundle
// whose process.user is u: u's uid and gid mapped onto the service
// user's, one id each, setgroups denied.
func usernsFor(e *testenv.Env, u specs.User) usernsSpec {
	return usernsSpec{uidMap: fmt.Sprintf("%d %d 1\n", u.UID, e.UID), gidMap: fmt.Sprintf("%d %d 1\n", u.GID, e.GID), setgroups: "deny"}
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
			_ = cmd.Process.Kill() // may have exited already: the set-up's own failure is reported
			_ = cmd.Wait()         // its status is that failure's
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
// runs, as process.user's uid and gid (1000) in the namespace passed,
// whose maps inside are those ids' one-id maps onto the service user's,
// as the bundle's mappings say; stage 0's waiter, stage 1 and the program
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
	h := startHeld(t, cmd)
	stderr := h.stderr
	var inside []string
	for _, l := range h.lines {
		inside = append(inside, strings.Join(strings.Fields(l), " "))
	}
	want := []string{fmt.Sprintf("%d %d 1", testenv.SandboxUID, e.UID), fmt.Sprintf("%d %d 1", testenv.SandboxGID, e.GID),
		strconv.Itoa(testenv.SandboxUID), strconv.Itoa(testenv.SandboxGID)}
	if !slices.Equal(inside, want) {
		t.Fatalf("inside: uid_map, gid_map, uid, gid %q, want %q; stderr %s", inside, want, stderr.String())
	}
	waiter := cmd.Process.Pid
	stage1 := stage1Of(t, waiter, stderr)
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
	err = h.release(t)
	if code, werr := testenv.ExitStatus(err); werr != nil || code != 3 {
		t.Errorf("exit %d (%v), want the program's 3; stderr %s", code, werr, stderr.String())
	}
	// The seccomp cache works in this mode too: the start left its entry.
	if names, err := os.ReadDir(cache); err != nil || len(names) != 1 {
		t.Errorf("seccomp cache after the start: %v (%v), want one entry", names, err)
	}
}

// TestShimUsernsFDRefuses: a --userns-fd that is not a user namespace of
// the service user, a child of its own, mapping the bundle's process.user
// (1000:1000) onto the service user's ids alone, one id each, with
// setgroups denied, ends the shim with 125 and one line naming what is
// wrong, before the program runs; a number in stdio or the preserved
// range is a usage error (2 and the usage line). On a host that refuses
// unprivileged user namespaces a nested namespace cannot be made at all,
// and the nested case shows that instead (nestedUsernsRefused).
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
	cases := []struct {
		name string
		file func() *os.File
		want string
		// hardened replaces the run where the host refuses unprivileged
		// user namespaces (noUserns): it checks that the case cannot
		// even be made there.
		hardened func(t *testing.T)
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
			want:     "a user namespace nested in another one, not a child of this process's user namespace",
			hardened: func(t *testing.T) { nestedUsernsRefused(t, e) }},
		{name: "no maps", file: with(func(s *usernsSpec) { s.uidMap, s.gidMap = "", "" }),
			want: fmt.Sprintf("uid 65534 and gid 65534 in the user namespace, not process.user's 1000 and 1000: it must map process.user's ids to the service user's (uid %d, gid %d) alone", e.UID, e.GID)},
		{name: "no gid map", file: with(func(s *usernsSpec) { s.gidMap = "" }),
			want: "uid 1000 and gid 65534 in the user namespace, not process.user's 1000 and 1000"},
		// Root inside for a bundle whose user is 1000: refused, not run
		// as root.
		{name: "maps 0, process.user is 1000", file: with(func(s *usernsSpec) {
			s.uidMap, s.gidMap = fmt.Sprintf("0 %d 1\n", e.UID), fmt.Sprintf("0 %d 1\n", e.GID)
		}), want: "uid 0 and gid 0 in the user namespace, not process.user's 1000 and 1000"},
		{name: "maps the uid alone to 0", file: with(func(s *usernsSpec) { s.uidMap = fmt.Sprintf("0 %d 1\n", e.UID) }),
			want: "uid 0 and gid 1000 in the user namespace, not process.user's 1000 and 1000"},
		{name: "uid map onto another uid", file: with(func(s *usernsSpec) { s.uidMap = "1000 65534 1\n" }),
			want: "uid 65534 and gid 1000 in the user namespace, not process.user's 1000 and 1000"},
		{name: "uid map of two ids", file: with(func(s *usernsSpec) { s.uidMap = fmt.Sprintf("1000 %d 2\n", e.UID) }),
			want: fmt.Sprintf(`uid_map "1000 %d 2" is not one line mapping process.user's uid 1000 to uid %d alone, length 1`, e.UID, e.UID)},
		{name: "uid map with host root", file: with(func(s *usernsSpec) { s.uidMap = fmt.Sprintf("1000 %d 1\n0 0 1\n", e.UID) }),
			want: fmt.Sprintf(`uid_map "1000 %d 1; 0 0 1" is not one line mapping process.user's uid 1000 to uid %d alone, length 1`, e.UID, e.UID)},
		{name: "gid map of two ids", file: with(func(s *usernsSpec) { s.gidMap = fmt.Sprintf("1000 %d 2\n", e.GID) }),
			want: fmt.Sprintf(`gid_map "1000 %d 2" is not one line mapping process.user's gid 1000 to gid %d alone, length 1`, e.GID, e.GID)},
		{name: "gid map with host root", file: with(func(s *usernsSpec) { s.gidMap = fmt.Sprintf("1000 %d 1\n0 0 1\n", e.GID) }),
			want: fmt.Sprintf(`gid_map "1000 %d 1; 0 0 1" is not one line mapping process.user's gid 1000 to gid %d alone, length 1`, e.GID, e.GID)},
		{name: "setgroups allowed", file: with(func(s *usernsSpec) { s.setgroups = "" }),
			want: `setgroups is "allow", not denied in the user namespace`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.hardened != nil && noUserns(t) {
				c.hardened(t)
				return
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

// viewScript prints what the program sees of its identity and of the
// owners of the sandbox's files: its ids and capabilities, and the
// owner, group, mode and type of the root's entries, /dev's, /dev/pts's
// (a pts opened first, so that one exists), its working directory, /tmp,
// the workspace, a file and a directory it makes in /tmp and the
// workspace, its own and PID 1's /proc entries, and a few that belong to
// the sandbox's network and IPC namespaces.
const viewScript = `set -e
echo "id $(id -u):$(id -g) groups $(id -G)"
grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp):' /proc/self/status | tr -s ' \t' ' '
exec 3<>/dev/ptmx
touch /tmp/f /workspace/f
mkdir /tmp/d /workspace/d
stat -c '%n %F %u:%g %a' / /* /dev/* /dev/pts /dev/pts/* /tmp/* /workspace/* "$PWD" /proc/1 /proc/self/ /proc/self/fd /proc/sys/kernel/hostname /proc/sys/net/ipv4/ip_forward /proc/sys/kernel/msgmax /proc/sys/fs/mqueue/queues_max /proc/net/dev /sys/class/net/lo/mtu
`

// TestShimUsernsFDSameView runs the same bundles in the default mode and
// with --userns-fd (a namespace mapping the bundle's process.user, as
// gloved asks glove-userns for it) and compares what the program sees
// (viewScript): its ids, its capabilities and the owners of the
// sandbox's files must be the same in both, for Glove's own identity
// (1000:1000), for a bundle of uid 0 and for a devpts given gid=0 (the
// plan's one id in user namespace 1's terms: shim.Plan.joinUserns).
//
// One difference is allowed, only for the files the kernel gives to uid
// and gid 0 of user namespace 1, and only in one shape: the program's
// own ids on one side, the overflow ids (65534, "not mapped") on the
// other, type and mode the same.
//   - The devpts's root directory and the sysctls of the sandbox's
//     network and IPC namespaces (owners looked up when the file is
//     first seen): in the default mode user namespace 1's 0 is the
//     service user, whom user namespace 2 shows the program as its own
//     ids; with --userns-fd user namespace 1 maps no 0 unless the
//     bundle's uid is 0, so a program of uid 1000 sees 65534 there, as
//     for every other file it does not own.
//   - /proc/net and the network devices in /sys (owners fixed when the
//     network namespace is made): in the default mode it is made in
//     the same clone as user namespace 1, before its maps exist, so
//     they are the overflow ids; with --userns-fd the maps exist by
//     then, and a bundle of uid 0 sees them as its own.
//
// Glove's bundles (1000) see the first difference alone.
//
// On a host that refuses unprivileged user namespaces the default mode
// cannot start (defaultModeRefused shows it once), so there is nothing
// to compare with: each view with --userns-fd is checked on its own
// (viewAlone) for what the comparison implies there.
func TestShimUsernsFDSameView(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	hardened := noUserns(t)
	if hardened {
		t.Logf("the default mode, refused: %s", defaultModeRefused(t, e, e.HelperPath("glove-shim"), e.NewBundle(t)))
	}
	nsRootOwned := []string{"/dev/pts ", "/proc/sys/net/", "/proc/sys/kernel/msgmax ", "/proc/sys/fs/mqueue/", "/proc/net/", "/sys/class/net/"}
	for _, c := range []struct {
		name   string
		user   specs.User
		devpts string // an option added to /dev/pts
	}{
		{name: "1000", user: specs.User{UID: testenv.SandboxUID, GID: testenv.SandboxGID}},
		{name: "0", user: specs.User{UID: 0, GID: 0}},
		{name: "devpts gid=0", user: specs.User{UID: testenv.SandboxUID, GID: testenv.SandboxGID}, devpts: "gid=0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			run := func(userns bool) []string {
				b := e.NewBundle(t)
				b.Spec.Process.User = c.user
				b.Spec.Linux.UIDMappings[0].ContainerID = c.user.UID
				b.Spec.Linux.GIDMappings[0].ContainerID = c.user.GID
				devpts := 0
				for i := range b.Spec.Mounts {
					if b.Spec.Mounts[i].Type == "devpts" && c.devpts != "" {
						b.Spec.Mounts[i].Options = append(b.Spec.Mounts[i].Options, c.devpts)
						devpts++
					}
				}
				if c.devpts != "" && devpts != 1 {
					t.Fatalf("%d devpts mounts in the bundle, want 1", devpts)
				}
				b.Spec.Process.Args = []string{"/bin/sh", "-c", viewScript}
				b.Write(t)
				r := testenv.ShimRun{Shim: e.HelperPath("glove-shim"), Args: []string{"run", "--bundle", b.Dir, "t"}}
				if userns {
					r.Args = []string{"run", "--bundle", b.Dir, "--userns-fd", "3", "t"}
					r.ExtraFiles = []*os.File{makeUserns(t, e, usernsFor(e, c.user))}
				}
				res := e.RunAs(t, r)
				if res.Code != 0 || res.Stderr != "" {
					t.Fatalf("--userns-fd %v: exit %d, stderr %q, stdout:\n%s", userns, res.Code, res.Stderr, res.Stdout)
				}
				// Seen from the host: what the program made in the
				// workspace is the service user's.
				for _, n := range []string{"f", "d"} {
					var st unix.Stat_t
					if err := unix.Lstat(filepath.Join(b.Workspace, n), &st); err != nil || int(st.Uid) != e.UID || int(st.Gid) != e.GID {
						t.Errorf("--userns-fd %v: the workspace's %s on the host: %d:%d (%v), want the service user's %d:%d", userns, n, st.Uid, st.Gid, err, e.UID, e.GID)
					}
				}
				return strings.Split(strings.TrimSuffix(res.Stdout, "\n"), "\n")
			}
			wantID := fmt.Sprintf("id %d:%d groups %d", c.user.UID, c.user.GID, c.user.GID)
			if hardened {
				viewAlone(t, run(true), wantID, c.user)
				return
			}
			def, got := run(false), run(true)
			if len(def) == 0 || def[0] != wantID {
				t.Errorf("default mode: %q, want %q first", def, wantID)
			}
			if len(got) != len(def) {
				t.Fatalf("--userns-fd: %d lines, the default mode %d:\n%s\n\n%s", len(got), len(def), strings.Join(got, "\n"), strings.Join(def, "\n"))
			}
			self := fmt.Sprintf(" %d:%d ", c.user.UID, c.user.GID)
			for i := range def {
				if got[i] == def[i] {
					continue
				}
				allowed := false
				for _, prefix := range nsRootOwned {
					allowed = allowed || strings.HasPrefix(def[i], prefix) &&
						(strings.Contains(def[i], self) && got[i] == strings.Replace(def[i], self, " 65534:65534 ", 1) ||
							strings.Contains(got[i], self) && def[i] == strings.Replace(got[i], self, " 65534:65534 ", 1))
				}
				if !allowed {
					t.Errorf("--userns-fd: %q, the default mode: %q", got[i], def[i])
					continue
				}
				t.Logf("user namespace 1's 0's (allowed): --userns-fd %q, the default mode %q", got[i], def[i])
			}
		})
	}
}

// viewAlone checks a view of viewScript taken with --userns-fd where no
// default mode exists to compare it with: the ids are process.user's
// (wantID, and every id of the status's Uid and Gid lines), and every
// file's owner and group are the program's own ids or the overflow id
// 65534 (not mapped): user namespace 1 maps process.user's ids alone,
// onto the service user's, so the program can see no third id, the ids
// the comparison would otherwise show to be the default mode's.
func viewAlone(t *testing.T, view []string, wantID string, u specs.User) {
	t.Helper()
	if len(view) == 0 || view[0] != wantID {
		t.Errorf("--userns-fd: %q, want %q first", view, wantID)
	}
	owner := regexp.MustCompile(` ([0-9]+):([0-9]+) [0-7]+$`)
	files := 0
	for _, l := range view[min(1, len(view)):] {
		f := strings.Fields(l)
		switch {
		case len(f) == 5 && (f[0] == "Uid:" || f[0] == "Gid:"):
			want := strconv.FormatUint(uint64(u.UID), 10)
			if f[0] == "Gid:" {
				want = strconv.FormatUint(uint64(u.GID), 10)
			}
			for _, id := range f[1:] {
				if id != want {
					t.Errorf("--userns-fd: %q, want %s in every field", l, want)
					break
				}
			}
		case strings.HasPrefix(l, "/"):
			m := owner.FindStringSubmatch(l)
			if m == nil {
				t.Errorf("--userns-fd: %q: no owner:group mode at its end", l)
				continue
			}
			files++
			for i, own := range []uint32{u.UID, u.GID} {
				if id := m[1+i]; id != strconv.FormatUint(uint64(own), 10) && id != "65534" {
					t.Errorf("--userns-fd: %q: id %s is neither the program's own %d nor the overflow id 65534", l, id, own)
				}
			}
		}
	}
	// viewScript stats the root's, /dev's and /tmp's entries and more.
	if files < 20 {
		t.Errorf("--userns-fd: %d files in the view, want 20 or more:\n%s", files, strings.Join(view, "\n"))
	}
}
