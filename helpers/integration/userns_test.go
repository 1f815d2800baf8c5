// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/captable/captext"
	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/userwire"
	"github.com/glove-sandbox/glove/helpers/wire/wirecall"
	"github.com/glove-sandbox/glove/supervisor/engine/helperproc"
	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

// usernsRequest is the request glove-userns grants: one id inside (here
// the sandbox's user of Glove's bundles, 1000) is the service user,
// nothing else is mapped.
func usernsRequest(env *testenv.Env, session string) *userwire.CreateRequest {
	return &userwire.CreateRequest{Session: session, UIDInside: 1000, UIDOutside: uint32(env.UID), UIDCount: 1,
		GIDInside: 1000, GIDOutside: uint32(env.GID), GIDCount: 1}
}

// usernsQuiet checks, from outside, that the helper holds no capability
// effective on any thread and has no child left (the namespace's holder
// is killed and reaped within the request).
func usernsQuiet(t *testing.T, p *helperproc.Proc, when string) {
	t.Helper()
	row := captable.MustLookup("glove-userns")
	checkThreads(t, p.Pid(), map[string]string{"CapEff": captext.MaskString(0), "CapPrm": captext.MaskString(row.Mask())})
	if kids := childrenOf(t, p.Pid()); len(kids) != 0 {
		t.Errorf("%s: glove-userns has children %v", when, kids)
	}
}

// childrenOf lists the pids whose parent is pid (every thread's
// children file).
func childrenOf(t *testing.T, pid int) []string {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("threads of %d: %v", pid, err)
	}
	var kids []string
	for _, task := range tasks {
		b, err := os.ReadFile(task)
		if err != nil {
			t.Fatalf("read %s: %v", task, err)
		}
		kids = append(kids, strings.Fields(string(b))...)
	}
	return kids
}

// TestUsernsCreate asks glove-userns for a namespace and checks it from
// outside: a user namespace, child of the initial one, owned by the
// service user, mapping 1000 to the service uid and gid only, setgroups
// denied; joinable by the service user with no capability. Between and
// after requests the helper holds no effective capability and no child;
// a second Create on the connection ends it with the protocol status.
func TestUsernsCreate(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	p, log := env.StartHelper(t, "glove-userns")
	if h, err := p.Hello(); err != nil || h.CapEffective != 0 {
		t.Fatalf("hello: CapEff %x, %v (want 0 between requests)\nhelper log: %s", h.CapEffective, err, log)
	}
	usernsQuiet(t, p, "before Create")
	r, files, err := wirecall.Call(userwire.Create, p.Client, usernsRequest(env, "s-1"), nil)
	if err != nil {
		t.Fatalf("create: %v\nhelper log: %s", err, log)
	}
	ns := files[0]
	defer ns.Close()
	usernsQuiet(t, p, "after Create")

	fd := int(ns.Fd())
	if typ, err := unix.IoctlRetInt(fd, unix.NS_GET_NSTYPE); err != nil || typ != unix.CLONE_NEWUSER {
		t.Fatalf("NS_GET_NSTYPE %#x, %v: not a user namespace", typ, err)
	}
	if owner, err := unix.IoctlGetUint32(fd, unix.NS_GET_OWNER_UID); err != nil || owner != uint32(env.UID) {
		t.Errorf("owner uid %d, %v; want the service user %d", owner, err, env.UID)
	}
	var st, init unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	if st.Ino != r.Inode {
		t.Errorf("reply names inode %d, the descriptor is %d", r.Inode, st.Ino)
	}
	parent, err := unix.IoctlRetInt(fd, unix.NS_GET_PARENT)
	if err != nil {
		t.Fatalf("NS_GET_PARENT: %v", err)
	}
	defer unix.Close(parent)
	if err := unix.Fstat(parent, &st); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat("/proc/self/ns/user", &init); err != nil {
		t.Fatal(err)
	}
	if st.Dev != init.Dev || st.Ino != init.Ino {
		t.Errorf("parent namespace %d:%d is not the test's (the initial one) %d:%d", st.Dev, st.Ino, init.Dev, init.Ino)
	}

	// Joined by the service user, without any capability, as glove-shim's
	// waiter will: 1000 inside, the one-id maps, setgroups denied.
	cmd := exec.Command("nsenter", "--preserve-credentials", "--user=/proc/self/fd/3", "sh", "-c",
		"id -u; id -g; cat /proc/self/uid_map /proc/self/gid_map /proc/self/setgroups")
	cmd.ExtraFiles = []*os.File{ns}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: env.Credential()}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("join as the service user: %v\n%s", err, out)
	}
	got := strings.Fields(string(out))
	want := []string{"1000", "1000", "1000", fmt.Sprint(env.UID), "1", "1000", fmt.Sprint(env.GID), "1", "deny"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("inside the namespace: %q, want %q", got, want)
	}

	// Create is once per connection: a second one is a protocol error.
	if _, extra, err := wirecall.Call(userwire.Create, p.Client, usernsRequest(env, "s-2"), nil); err == nil {
		closeAll(extra)
		t.Errorf("a second Create was answered")
	}
	if code, sig := testenv.WaitExit(t, p, 10*time.Second); code != helperkit.ExitProtocol {
		t.Errorf("exit %d (signal %v) after a second Create, want %d\nhelper log: %s", code, sig, helperkit.ExitProtocol, log)
	}
}

// TestUsernsRefusals: each request glove-userns must refuse is refused in
// words (wire.ErrRefused), before any namespace exists: no child, no
// capability raised, and the helper goes on to exit 0 at end of file.
func TestUsernsRefusals(t *testing.T) {
	env := testenv.Get(t)
	good := usernsRequest(env, "s-1")
	with := func(f func(*userwire.CreateRequest)) *userwire.CreateRequest { q := *good; f(&q); return &q }
	cases := []struct {
		name    string
		q       *userwire.CreateRequest
		off     bool // userns.json says "enabled": false
		wantMsg string
	}{
		{"not enabled", good, true, "not enabled"},
		{"uid inside -1", with(func(q *userwire.CreateRequest) { q.UIDInside = ^uint32(0) }), false, "uid map"},
		{"uid of another user", with(func(q *userwire.CreateRequest) { q.UIDOutside = 0 }), false, "uid map"},
		{"uid range of two", with(func(q *userwire.CreateRequest) { q.UIDCount = 2 }), false, "uid map"},
		{"empty uid map", with(func(q *userwire.CreateRequest) { q.UIDCount = 0 }), false, "uid map"},
		{"gid of another group", with(func(q *userwire.CreateRequest) { q.GIDOutside = 0 }), false, "gid map"},
		{"gid range of 65536", with(func(q *userwire.CreateRequest) { q.GIDCount = 65536 }), false, "gid map"},
		{"gid inside -1", with(func(q *userwire.CreateRequest) { q.GIDInside = ^uint32(0) }), false, "gid map"},
		{"session not an identifier", with(func(q *userwire.CreateRequest) { q.Session = "../x" }), false, "session"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			testenv.CheckLeaks(t, env.UID)
			if c.off {
				if err := env.WriteConfig("userns.json", map[string]any{"schema_version": 1, "enabled": false}); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					if err := env.WriteConfig("userns.json", testenv.DefaultConfigs(env.Base)["userns.json"]); err != nil {
						t.Fatal(err)
					}
				})
			}
			p, log := env.StartHelper(t, "glove-userns")
			_, files, err := wirecall.Call(userwire.Create, p.Client, c.q, nil)
			closeAll(files)
			if wireCode(err) != wire.ErrRefused || !strings.Contains(err.Error(), c.wantMsg) {
				t.Errorf("create: %v, want a refusal naming %q\nhelper log: %s", err, c.wantMsg, log)
			}
			usernsQuiet(t, p, "after the refusal")
			if err := p.Close(); err != nil {
				t.Errorf("exit after EOF: %v\nhelper log: %s", err, log)
			}
		})
	}
}
