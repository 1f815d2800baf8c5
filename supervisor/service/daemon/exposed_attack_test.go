// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"encoding/binary"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/testenv"
	"github.com/glove-sandbox/glove/testenv/programs"
	"golang.org/x/sys/unix"
)

// exposedStreamArgs is gloved's configuration of the inherited stream
// whose upstream listens at sock, under the alias "sage": the one place
// these tests say how an operator configures it.
func exposedStreamArgs(t testing.TB, e *testenv.Env, f *fixture, sock string) []string {
	t.Helper()
	return localServices(t, e, f, streamConfig(sock, `["codex"]`, ""))
}

// countingUpstream is the upstream service of the exposure attacks,
// judged from outside: programs.Upstream tells on its standard output
// each connection it accepted (with the connecting pid) and each read.
type countingUpstream struct {
	sock string
	out  *testenv.SyncBuffer
}

// startCountingUpstream starts programs.Upstream as the service user
// with its socket in dir, which it makes (the service user's, mode
// 0700, as gloved requires of the upstream's directory).
func startCountingUpstream(t *testing.T, e *testenv.Env, dir string) *countingUpstream {
	t.Helper()
	bin := testenv.BuildStatic(t, e, "upstream", programs.Upstream)
	u := &countingUpstream{sock: filepath.Join(ownedDir(t, e, dir), "upstream.sock"), out: &testenv.SyncBuffer{}}
	srv := exec.Command(bin, u.sock)
	srv.Stdout = u.out
	srv.SysProcAttr = e.InDelegatedCgroup(t)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Process.Kill(); err != nil {
			t.Errorf("kill the upstream: %v", err)
		}
		// Killed: Wait reports the signal, which is what was asked for.
		if err := srv.Wait(); err != nil && !strings.Contains(err.Error(), "killed") {
			t.Errorf("upstream: %v", err)
		}
	})
	for i := 0; ; i++ {
		if _, err := os.Stat(u.sock); err == nil {
			return u
		}
		if i > 200 {
			t.Fatal("upstream did not listen")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// barrier makes one exchange with the upstream from this process and
// waits until the upstream has told it (its standard output reaches the
// test through a pipe, later than its replies): the upstream accepts in
// order, so every connection made before the barrier's (a sandboxed
// program's, which has ended) has then been told too.
func (u *countingUpstream) barrier(t *testing.T, offset int) {
	t.Helper()
	c, err := net.Dial("unix", u.sock)
	if err != nil {
		t.Fatalf("barrier: %v", err)
	}
	defer c.Close()
	if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(barrierMsg))), barrierMsg...)); err != nil {
		t.Fatalf("barrier: %v", err)
	}
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatalf("barrier: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(c, body); err != nil || string(body) != "pong:"+barrierMsg {
		t.Fatalf("barrier reply %q %v", body, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		pids, total := u.since(t, offset)
		if slices.Contains(pids, os.Getpid()) && total >= 4+len(barrierMsg) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upstream did not tell the barrier in 10 s: %q", u.out.String()[offset:])
		}
	}
}

const barrierMsg = "barrier"

// since is what the upstream told from offset on: the pids of the
// connections it accepted, in order, and the bytes it read in all.
func (u *countingUpstream) since(t *testing.T, offset int) (pids []int, total int) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSpace(u.out.String()[offset:]), "\n") {
		switch {
		case l == "":
		case strings.HasPrefix(l, "accept pid="):
			pid, err := strconv.Atoi(strings.TrimPrefix(l, "accept pid="))
			if err != nil {
				t.Fatalf("upstream line %q", l)
			}
			pids = append(pids, pid)
		case strings.HasPrefix(l, "bytes "):
			n, err := strconv.Atoi(strings.TrimPrefix(l, "bytes "))
			if err != nil {
				t.Fatalf("upstream line %q", l)
			}
			total += n
		default:
			t.Fatalf("upstream line %q", l)
		}
	}
	return pids, total
}

// reachedOnlyBy checks, from the upstream's own account since offset,
// that the only connections it got were gloved's (pid glovedPID: the
// session's stream, connected before the launch) and the test's
// barrier, and that no byte reached it but the barrier's.
func (u *countingUpstream) reachedOnlyBy(t *testing.T, offset, glovedPID int, sessions int) {
	t.Helper()
	u.barrier(t, offset)
	pids, total := u.since(t, offset)
	want := append(slices.Repeat([]int{glovedPID}, sessions), os.Getpid())
	if !slices.Equal(pids, want) {
		t.Errorf("the upstream accepted connections of pids %v, want %v (gloved %d for each session's stream, then the test's barrier)", pids, want, glovedPID)
	}
	if frame := 4 + len(barrierMsg); total != frame {
		t.Errorf("the upstream read %d bytes, want %d (the barrier's frame alone): request bytes reached it", total, frame)
	}
}

// exposureTuples are the access tuples the attacks grant with.
var (
	roBind  = policy.AccessTuple{Access: policy.AccessReadOnly, Materialization: policy.MaterializationBind, CreatePolicy: policy.CreateMustExist, CleanupPolicy: policy.CleanupNone}
	roCopy  = policy.AccessTuple{Access: policy.AccessReadOnly, Materialization: policy.MaterializationCopy, CreatePolicy: policy.CreateMustExist, CleanupPolicy: policy.CleanupRemove, MaxBytes: 4 << 20}
	ephCopy = fixtureAccess
)

// tupleFor names an access tuple in a case's name.
func tupleFor(t policy.AccessTuple) string { return t.Access + "/" + t.Materialization }

// grantPolicy rewrites the fixture's policy so that its one alias,
// "workspace", has the host path hostPath and the one access tuple acc.
func grantPolicy(t *testing.T, f *fixture, hostPath string, acc policy.AccessTuple, validate bool) {
	t.Helper()
	f.pol.PathAliases[0].HostPath = hostPath
	f.pol.PathAliases[0].Access = []policy.AccessTuple{acc}
	if validate {
		if err := policy.Validate(f.pol); err != nil {
			t.Fatalf("test policy: %v", err)
		}
	}
	writeProtected(t, filepath.Join(f.dir, "policy.json"), policy.Canonical(f.pol), f.e.UID, f.e.GID)
}

// grantPlan is the fixture's plan for template, granting the workspace
// with acc.
func grantPlan(f *fixture, template string, acc policy.AccessTuple) *plan.Plan {
	pl := f.plan(template, "tiny")
	g := &pl.PathGrants[0]
	g.Access, g.Materialization, g.CreatePolicy, g.CleanupPolicy, g.MaxBytes = acc.Access, acc.Materialization, acc.CreatePolicy, acc.CleanupPolicy, acc.MaxBytes
	return pl
}

// TestGlovedStreamExposedAttacks: a sandboxed program tries to reach the
// inherited stream's upstream socket by its name, through a path grant
// whose host tree holds it, reached every way the policy lets an operator
// (or an attacker who can shape the host tree) write: a symbolic link in
// the alias's host path, a bind mount of the socket's directory, "..",
// an ancestor of the directory, and the directory itself read-only bound
// and copied. Each case is judged from outside: how the session ended
// (the store's reason and the exact refusal in gloved's log, or gloved
// refusing the policy), that the program never ran (it prints "ran"
// first and then connects), and the upstream's own account that nothing
// but gloved's stream connection (made before the launch) and the test's
// barrier reached it, and no byte but the barrier's.
//
// The last case switches the first layer off (a glove_testfaults gloved
// with GLOVED_TEST_NO_EXPOSURE_CHECK=1) and grants the socket's
// directory read-only: the program runs, sees the socket, and seccomp
// alone refuses its socket and connect (EPERM), with the upstream again
// reached by nothing.
func TestGlovedStreamExposedAttacks(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	// The program's path to the socket: the socket's directory granted,
	// or its parent.
	const inSvc, inBase = "/workspace/upstream.sock", "/workspace/svc/upstream.sock"
	// The socket's tree lies outside the fixture's directory, which
	// holds gloved's own state: an ancestor of the socket granted there
	// would be refused as own state first, and show nothing of this
	// check.
	//
	// It lies beneath glove-mounter's source roots (testenv's sources/,
	// where the programs are built), so that a read-only bind of it
	// reaches the guard: a bind from outside every source root is
	// refused by glove-mounter, another layer this test does not judge.
	f := newFixture(t, e, map[string][]string{"in-svc": {"connect", inSvc}, "in-base": {"connect", inBase}})
	base, err := os.MkdirTemp(filepath.Join(e.Base, "sources"), "exposed-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(base); err != nil {
			t.Errorf("remove %s: %v", base, err)
		}
	})
	if err := os.Chown(base, e.UID, e.GID); err != nil {
		t.Fatal(err)
	}
	svc := filepath.Join(base, "svc")
	up := startCountingUpstream(t, e, svc)
	// base/link -> svc: the alias's last component is a link to the
	// socket's directory; base/hop -> base: a link earlier in the path,
	// base/hop/svc being the socket's directory again.
	for name, target := range map[string]string{"link": svc, "hop": base} {
		if err := os.Symlink(target, filepath.Join(base, name)); err != nil {
			t.Fatal(err)
		}
	}

	// The refusals, exactly as gloved logs them. A link anywhere but
	// last in the host path is refused by openat2 (ELOOP from
	// RESOLVE_NO_SYMLINKS), at the bind's open of the host tree or at
	// materialize.Open for a copy; so is a link last for a copy, which
	// opens a directory. A link last for a bind is opened as the link
	// itself (O_PATH|O_NOFOLLOW): the guard refuses it (it does not follow
	// links), and glove-mounter would refuse to bind a link as well.
	const (
		linkLast = `/workspace: the host tree of /workspace: a path grant would expose a local service's upstream: the grant is a symbolic link, which this check does not follow`
		exposed  = `/workspace: the host tree of /workspace: a path grant would expose a local service's upstream: the grant is the upstream's directory or one of its ancestors`
		linkBind = `/workspace: open the host tree: too many levels of symbolic links`
		linkCopy = `/workspace: open the host tree: materialize: open source: too many levels of symbolic links`
		// policy.Validate's fault; gloved's log line escapes its quotes.
		dotdotRef, dotdotLog = `/path_aliases/0/host_path: "`, `/path_aliases/0/host_path: \"`
	)
	type attack struct {
		name     string
		host     string // the alias's host path
		acc      policy.AccessTuple
		template string
		reason   string // the store's reason
		refusal  string // in gloved's log
		bindRoot bool   // host is a bind mount of svc, made as root
		env      []string
	}
	attacks := []attack{
		{"link-last/" + tupleFor(roBind), filepath.Join(base, "link"), roBind, "in-svc", "stream_exposed", linkLast, false, nil},
		{"link-last/" + tupleFor(ephCopy), filepath.Join(base, "link"), ephCopy, "in-svc", "failed", linkCopy, false, nil},
		{"link-inner/" + tupleFor(roBind), filepath.Join(base, "hop", "svc"), roBind, "in-svc", "failed", linkBind, false, nil},
		{"link-inner/" + tupleFor(ephCopy), filepath.Join(base, "hop", "svc"), ephCopy, "in-svc", "failed", linkCopy, false, nil},
		{"bind-mount/" + tupleFor(roBind), filepath.Join(base, "bound"), roBind, "in-svc", "stream_exposed", exposed, true, nil},
		{"bind-mount/" + tupleFor(ephCopy), filepath.Join(base, "bound"), ephCopy, "in-svc", "stream_exposed", exposed, true, nil},
		{"ancestor/" + tupleFor(roBind), base, roBind, "in-base", "stream_exposed", exposed, false, nil},
		{"ancestor/" + tupleFor(roCopy), base, roCopy, "in-base", "stream_exposed", exposed, false, nil},
		{"directory/" + tupleFor(roBind), svc, roBind, "in-svc", "stream_exposed", exposed, false, nil},
		{"directory/" + tupleFor(roCopy), svc, roCopy, "in-svc", "stream_exposed", exposed, false, nil},
		{"directory/" + tupleFor(ephCopy), svc, ephCopy, "in-svc", "stream_exposed", exposed, false, nil},
		// The test-only switch of the "seccomp-alone" case below, given
		// to the installed (production) gloved: it has no effect there.
		{"directory/" + tupleFor(roBind) + "/switch-in-production", svc, roBind, "in-svc", "stream_exposed", exposed, false,
			[]string{"GLOVED_TEST_NO_EXPOSURE_CHECK=1"}},
	}
	for i, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			if a.bindRoot {
				if os.Getuid() != 0 {
					t.Skip("not root: a bind mount needs CAP_SYS_ADMIN (CI runs as root)")
				}
				bindOver(t, svc, a.host)
			}
			grantPolicy(t, f, a.host, a.acc, true)
			offset := len(up.out.String())
			g := startGlovedAt(t, e, e.HelperPath("gloved"), a.env, append(f.args, exposedStreamArgs(t, e, f, up.sock)...)...)
			logOnFailure(t, g)
			c := dial(t, g.socket)
			id := "s-attack-" + strconv.Itoa(i)
			tok := f.create(c, id, grantPlan(f, a.template, a.acc))
			c.ok("start_session", map[string]any{"session_id": id, "start_token": tok}, nil)
			end := attach(t, c, id)
			if end.State != "failed" || end.output != "" {
				t.Errorf("ended %+v with output %q: want failed before the program ran", end.End, end.output)
			}
			if st := status(t, c, id); st.State != "failed" || st.Reason != a.reason {
				t.Errorf("status %s %s, want failed %s", st.State, st.Reason, a.reason)
			}
			up.reachedOnlyBy(t, offset, g.cmd.Process.Pid, 1)
			g.stop(t)
			if !strings.Contains(g.log.String(), a.refusal) {
				t.Errorf("gloved's log does not hold the refusal %q", a.refusal)
			}
		})
	}

	// "..": policy validation admits clean paths only, so an alias
	// through ".." (svc/sub/.. is svc) cannot be written; a gloved given
	// such a policy refuses to start, naming the member. What ".." could
	// reach, an ancestor, is the "ancestor" case above.
	t.Run("dotdot", func(t *testing.T) {
		host := filepath.Join(svc, "sub") + "/.."
		f.pol.PathAliases[0].HostPath = host
		if err := policy.Validate(f.pol); err == nil || !strings.HasPrefix(err.Error(), dotdotRef) || !strings.Contains(err.Error(), `contains ".."`) {
			t.Errorf("policy.Validate of host_path %s: %v, want the refusal at /path_aliases/0/host_path", host, err)
		}
		grantPolicy(t, f, host, roBind, false)
		offset := len(up.out.String())
		stderr, err := refusedStart(t, e, nil, append(f.args, exposedStreamArgs(t, e, f, up.sock)...)...)
		if err == nil || !strings.Contains(stderr, "refusing to start: --session-policy: load policy SESSION-POLICY: "+dotdotLog) ||
			!strings.Contains(stderr, `contains \"..\"`) {
			t.Errorf("gloved with host_path %s: exit %v, stderr %s; want the policy refused at /path_aliases/0/host_path", host, err, stderr)
		}
		up.reachedOnlyBy(t, offset, -1, 0)
	})

	// Layer 2 alone: the guard's exposure check off, the socket's
	// directory granted read-only. The program runs and sees the socket;
	// seccomp refuses socket, and connect on a socket it could make
	// (EPERM where the kernel would say EISCONN), so it reaches nothing.
	t.Run("seccomp-alone", func(t *testing.T) {
		grantPolicy(t, f, svc, roBind, true)
		offset := len(up.out.String())
		g := startGlovedAt(t, e, buildFaultyGloved(t, e), []string{"GLOVED_TEST_NO_EXPOSURE_CHECK=1"},
			append(f.args, exposedStreamArgs(t, e, f, up.sock)...)...)
		logOnFailure(t, g)
		c := dial(t, g.socket)
		tok := f.create(c, "s-seccomp", grantPlan(f, "in-svc", roBind))
		c.ok("start_session", map[string]any{"session_id": "s-seccomp", "start_token": tok}, nil)
		end := attach(t, c, "s-seccomp")
		out := strings.ReplaceAll(end.output, "\r\n", "\n")
		want := "ran\nsocket operation not permitted\nconnect operation not permitted\n"
		if out != want || end.State != "exited" || end.Status != 0 {
			t.Errorf("ended %+v with output %q, want exited 0 with %q", end.End, out, want)
		}
		up.reachedOnlyBy(t, offset, g.cmd.Process.Pid, 1)
		g.stop(t)
	})
}

// bindOver bind-mounts dir at path (made here) until the test ends: the
// same directory under another name, on another mount.
func bindOver(t *testing.T, dir, path string) {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(dir, path, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s at %s: %v", dir, path, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(path, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", path, err)
		}
		if err := os.Remove(path); err != nil {
			t.Errorf("remove %s: %v", path, err)
		}
	})
}
