// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/service/daemon"
	"github.com/glove-sandbox/glove/supervisor/state/lease"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/testenv"
)

// credentialFixture is a fixture whose policy maps the secret handle
// codex-token to a protected source file of the service user, with the
// stand-in agent (the harness's "agent" mode) as its templates: "agent"
// rotates the token by renaming a new file over it, "inplace" by
// rewriting it, and "link", "fifo" and "big" leave in its place a
// symbolic link, a FIFO or a file larger than the credential's bound.
// The policy also declares "unmapped", a handle with no source.
func credentialFixture(t *testing.T, e *testenv.Env) (f *fixture, src string, token []byte) {
	t.Helper()
	srcDir, err := os.MkdirTemp(e.Base, "cred-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(srcDir) })
	if err := os.Chown(srcDir, e.UID, e.GID); err != nil {
		t.Fatal(err)
	}
	src = filepath.Join(srcDir, "codex-auth.json")
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		t.Fatal(err)
	}
	token = []byte("tok-" + hex.EncodeToString(raw[:]))
	writeProtected(t, src, token, e.UID, e.GID)
	const dst = "/home/agent/.codex/auth.json"
	f = newFixture(t, e, map[string][]string{
		"agent":   {"agent", src, dst},
		"inplace": {"agent", src, dst, "inplace"},
		"link":    {"agent", src, dst, "link"},
		"fifo":    {"agent", src, dst, "fifo"},
		"big":     {"agent", src, dst, "big"},
		"rotwait": {"agent", src, dst, "wait"},
		"holder":  {"sleep"},
	})
	f.pol.SecretHandles = []string{"codex-token", "unmapped"}
	f.pol.CredentialPolicies = []policy.CredentialPolicy{{Handle: "codex-token", SourcePath: src, DestinationPath: dst, MaxBytes: 4096}}
	if err := policy.Validate(f.pol); err != nil {
		t.Fatal(err)
	}
	writeProtected(t, filepath.Join(f.dir, "policy.json"), policy.Canonical(f.pol), e.UID, e.GID)
	return f, src, token
}

func withHandles(pl *plan.Plan, handles ...string) *plan.Plan {
	pl.SecretHandles = handles
	return pl
}

// TestGlovedCredentialLease is the end-to-end test of credential leases
// with a stand-in agent harness: it reads its token from its lease's
// copy in the private home, authenticates to a stand-in model service
// through the inherited stream with it, and rotates it; the next session
// sees the rotated token, and the one after a session that spoiled its
// copy still sees the last good one. Judged from outside the sandbox:
//   - the operator's source file is byte for byte and stat for stat
//     unchanged, and no way the agent tries reaches it, nor does any file
//     of the sandbox but the lease's copy hold the token;
//   - the receipts commit each session's lease identity and versions;
//   - no token (the original nor a rotated one) appears in gloved's log,
//     in any file of the session store but the lease itself, in a status
//     or in a receipt;
//   - while a session holds the lease, another session of the handle is
//     refused at start (credential_busy), and the next one after it
//     ended starts;
//   - a plan naming a handle the policy maps to nothing fails before
//     anything is prepared (reason unsupported, no output).
func TestGlovedCredentialLease(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	f, src, tok := credentialFixture(t, e)
	before, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	sock := startUpstream(t, e, f)
	args := withStream(t, e, f, sock)
	g := startGloved(t, e, args...)
	c := dial(t, g.socket)

	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	rot1 := append(append([]byte(nil), tok...), "+rotated"...)
	rot2 := append(append([]byte(nil), rot1...), "+rotated"...)
	rot3 := append(append([]byte(nil), rot2...), "+rotated"...)
	rot4 := append(append([]byte(nil), rot3...), "+rotated"...)
	var statuses []string
	run := func(id, template string, handles ...string) ended {
		t.Helper()
		st := f.create(c, id, withHandles(f.plan(template, "tiny"), handles...))
		c.ok("start_session", map[string]any{"session_id": id, "start_token": st}, nil)
		end := attach(t, c, id)
		raw, e := c.call("session_status", map[string]any{"session_id": id})
		if e != nil {
			t.Fatalf("session_status %s: %v\nlog: %s", id, e, g.log)
		}
		statuses = append(statuses, string(raw))
		return end
	}
	checkAgent := func(end ended, seen []byte, rotatedTo []byte) {
		t.Helper()
		out := strings.ReplaceAll(end.output, "\r\n", "\n")
		want := []string{"credential sha256 " + sum(seen), "model authenticated true"}
		if rotatedTo != nil {
			want = append(want, "rotated to sha256 "+sum(rotatedTo))
		}
		for _, w := range want {
			if !strings.Contains(out, w+"\n") {
				t.Errorf("the agent's output lacks %q:\n%s", w, out)
			}
		}
		if strings.Contains(out, "source reached") || strings.Contains(out, "token found at") {
			t.Errorf("the sandbox reached the operator's source or a copy of the token:\n%s", out)
		}
		if n := strings.Count(out, "source unreachable "); n != 8 {
			t.Errorf("%d ways to the source tried, want 8:\n%s", n, out)
		}
		if end.Status != 0 {
			t.Errorf("status %d, want 0\n%s\nlog: %s", end.Status, out, g.log)
		}
	}

	checkAgent(run("s-cred-1", "agent", "codex-token"), tok, rot1)
	checkAgent(run("s-cred-2", "inplace", "codex-token"), rot1, rot2)
	// What the session leaves is not taken back unless it is a regular
	// file within the bound, reached without a link: the lease keeps
	// its version, and gloved neither follows the link nor blocks on the
	// FIFO (the next session starts and sees the last good token).
	for i, spoiler := range []string{"link", "fifo", "big"} {
		spoiled := run(fmt.Sprintf("s-cred-spoil-%d", i), spoiler, "codex-token")
		checkAgent(spoiled, rot2, nil)
		if !strings.Contains(spoiled.output, "spoiled <nil>") {
			t.Errorf("%s: the agent did not leave what it should:\n%s", spoiler, spoiled.output)
		}
	}
	checkAgent(run("s-cred-3", "agent", "codex-token"), rot2, rot3)

	// One session at a time: while a session holds the lease, another
	// of the same handle is refused at start (credential_busy), before
	// anything is prepared; once it has ended, the next one starts.
	ht := f.create(c, "s-cred-holder", withHandles(f.plan("holder", "tiny"), "codex-token"))
	c.ok("start_session", map[string]any{"session_id": "s-cred-holder", "start_token": ht}, nil)
	bt := f.create(c, "s-cred-busy", withHandles(f.plan("agent", "tiny"), "codex-token"))
	if _, e := c.call("start_session", map[string]any{"session_id": "s-cred-busy", "start_token": bt}); e == nil || !strings.Contains(e.Message, "credential_busy") {
		t.Errorf("a second session of a held lease: start_session %v, want refused as credential_busy", e)
	}
	if st := status(t, c, "s-cred-busy"); st.State != "failed" || st.Reason != "credential_busy" {
		t.Errorf("a second session of a held lease: %s %s, want failed credential_busy", st.State, st.Reason)
	}
	c.ok("stop_session", map[string]any{"session_id": "s-cred-holder", "grace_ms": 100}, nil)
	attach(t, c, "s-cred-holder")
	checkAgent(run("s-cred-4", "agent", "codex-token"), rot3, rot4)

	// A handle the policy maps to no source: refused at start, before
	// anything is prepared.
	ut := f.create(c, "s-cred-unmapped", withHandles(f.plan("agent", "tiny"), "unmapped"))
	if _, e := c.call("start_session", map[string]any{"session_id": "s-cred-unmapped", "start_token": ut}); e == nil || !strings.Contains(e.Message, "unsupported") {
		t.Errorf("unmapped handle: start_session %v, want refused as unsupported", e)
	}
	if st := status(t, c, "s-cred-unmapped"); st.State != "failed" || st.Reason != "unsupported" {
		t.Errorf("unmapped handle: %s %s, want failed unsupported", st.State, st.Reason)
	}
	g.stop(t)

	g2 := startGloved(t, e, args...)
	var page struct {
		Envelopes []receipt.Envelope `json:"envelopes"`
	}
	raw, rerr := dial(t, g2.socket).call("receipts_page", map[string]any{"after": 0, "limit": 10})
	if rerr != nil {
		t.Fatal(rerr)
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		t.Fatal(err)
	}
	g2.stop(t)
	if err := receipt.Verify(f.key, testAnchor, page.Envelopes); err != nil {
		t.Errorf("receipts: %v", err)
	}
	got := map[string][]receipt.CredentialLease{}
	for _, env := range page.Envelopes {
		got[env.Body.SessionID] = env.Body.CredentialLeases
	}
	lease := func(id string) receipt.CredentialLease {
		t.Helper()
		if len(got[id]) != 1 || got[id][0].Handle != "codex-token" || len(got[id][0].LeaseID) != 32 {
			t.Fatalf("receipt of %s: credential leases %+v", id, got[id])
		}
		return got[id][0]
	}
	first := lease("s-cred-1")
	for id, v := range map[string][2]uint64{"s-cred-1": {1, 2}, "s-cred-2": {2, 3},
		"s-cred-spoil-0": {3, 3}, "s-cred-spoil-1": {3, 3}, "s-cred-spoil-2": {3, 3}, "s-cred-3": {3, 4},
		"s-cred-holder": {4, 4}, "s-cred-4": {4, 5}} {
		l := lease(id)
		if l.LeaseID != first.LeaseID || l.Version != v[0] || l.VersionAtEnd != v[1] {
			t.Errorf("receipt of %s: %+v, want lease %s versions %d..%d", id, l, first.LeaseID, v[0], v[1])
		}
	}
	for _, id := range []string{"s-cred-unmapped", "s-cred-busy"} {
		if len(got[id]) != 0 {
			t.Errorf("the receipt of %s, refused at start, names leases: %+v", id, got[id])
		}
	}

	// The operator's source: unchanged.
	after, err := os.Stat(src)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != string(tok) || !after.ModTime().Equal(before.ModTime()) || after.Mode() != before.Mode() {
		t.Errorf("the operator's source changed: %q %v %v (was %v %v)", data, after.ModTime(), after.Mode(), before.ModTime(), before.Mode())
	}

	// No token anywhere it must not be.
	checkNoSecret(t, f, map[string]string{"gloved's log": g.log.String() + g2.log.String(), "statuses": strings.Join(statuses, "\n"), "receipts": string(raw)},
		[][]byte{tok, rot1, rot2, rot3, rot4}, src)
	leaseDir := filepath.Join(f.storeDir, daemon.LeaseDir)
	st, err := os.Stat(filepath.Join(leaseDir, "codex-token.lease"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("lease file mode %v, want 0600", st.Mode().Perm())
	}
	if !strings.Contains(g.log.String(), `"event":"credential_lease"`) {
		t.Errorf("gloved logged no credential_lease event\n%s", g.log)
	}
	for _, why := range []string{`"kept":"not reachable without a link: ELOOP"`, `"kept":"not a regular file"`, `"kept":"larger than max_bytes 4096"`} {
		if !strings.Contains(g.log.String(), why) {
			t.Errorf("gloved's log lacks %s", why)
		}
	}

	// The operator takes the handle out of the policy: the next gloved
	// removes its lease before serving.
	f.pol.CredentialPolicies = nil
	writeProtected(t, filepath.Join(f.dir, "policy.json"), policy.Canonical(f.pol), e.UID, e.GID)
	g3 := startGloved(t, e, args...)
	g3.stop(t)
	if _, err := os.Stat(filepath.Join(leaseDir, "codex-token.lease")); !os.IsNotExist(err) {
		t.Errorf("the lease of a handle no longer mapped is still there: %v", err)
	}
	if !strings.Contains(g3.log.String(), `"event":"credential_lease_removed","handles":["codex-token"]`) {
		t.Errorf("gloved did not log the lease's removal\n%s", g3.log)
	}
}

// TestGlovedCredentialSourceUngrantable: the operator's credential source
// is Glove's own state. A policy whose path alias is the source's
// directory or an ancestor of it keeps gloved from starting, with a line
// naming the handle; and a workspace that has become the source's
// directory since gloved started (a bind mount over it: the name is
// unchanged) fails the launch by identity, before the program exists,
// with the store reason own_state, while the lease is not touched.
func TestGlovedCredentialSourceUngrantable(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	f, src, _ := credentialFixture(t, e)
	ws := f.pol.PathAliases[0].HostPath
	// The log line is JSON: the handle's quotes are escaped. The
	// source's grandparent holds the session store too, which is named
	// first.
	for host, want := range map[string]string{
		filepath.Dir(src):               `cannot grant Glove's own state: the tree contains the credential source of handle \"codex-token\"`,
		filepath.Dir(filepath.Dir(src)): `cannot grant Glove's own state: the tree contains`,
	} {
		f.pol.PathAliases[0].HostPath = host
		writeProtected(t, filepath.Join(f.dir, "policy.json"), policy.Canonical(f.pol), e.UID, e.GID)
		stderr, err := refusedStart(t, e, nil, f.args...)
		if err == nil || !strings.Contains(stderr, want) {
			t.Errorf("alias %s: exit %v, stderr %s; want a refusal saying %q", host, err, stderr, want)
		}
	}
	f.pol.PathAliases[0].HostPath = ws
	writeProtected(t, filepath.Join(f.dir, "policy.json"), policy.Canonical(f.pol), e.UID, e.GID)
	g := f.start()
	c := dial(t, g.socket)
	unmount := mountOver(t, filepath.Dir(src), ws)
	tok := f.create(c, "cred-own", withHandles(f.plan("agent", "tiny"), "codex-token"))
	c.ok("start_session", map[string]any{"session_id": "cred-own", "start_token": tok}, nil)
	end := attach(t, c, "cred-own")
	unmount()
	if end.State != "failed" || end.output != "" {
		t.Errorf("a launch granting the source's directory: ended %+v, output %q; want failed before the program ran", end.End, end.output)
	}
	if st := status(t, c, "cred-own"); st.State != "failed" || st.Reason != "own_state" {
		t.Errorf("status %+v, want failed, reason own_state\nlog: %s", st, g.log)
	}
	g.stop(t)
}

// TestGlovedCredentialRotationSurvivesCrash: a harness rotates its token
// and runs on; gloved is killed (SIGKILL) while the session runs. The
// rotation was made durable while the session ran (the watcher on the
// private home), so after the restart, which ends the orphaned session,
// the next session sees the rotated token, not the one the vendor may
// already have invalidated.
func TestGlovedCredentialRotationSurvivesCrash(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	becomeReaper(t)
	testenv.CheckLeaks(t, e.UID)
	// Registered before gloved starts, so it runs after gloved's own
	// clean-up on every path, a failing one too: the orphans of the
	// killed gloved are this process's to reap.
	t.Cleanup(func() { reapOrphans(t) })
	f, _, tok := credentialFixture(t, e)
	rotated := append(append([]byte(nil), tok...), "+rotated"...)
	leaseDir := filepath.Join(f.storeDir, daemon.LeaseDir)
	g := startGloved(t, e, f.args...)
	c := dial(t, g.socket)
	st := f.create(c, "s-crash", withHandles(f.plan("rotwait", "tiny"), "codex-token"))
	c.ok("start_session", map[string]any{"session_id": "s-crash", "start_token": st}, nil)
	deadline := time.Now().Add(15 * time.Second)
	for {
		infos, err := lease.List(leaseDir)
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) == 1 && infos[0].Version == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rotation was not made durable while the session ran: leases %+v\nlog: %s", infos, g.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := g.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Wait(); err == nil {
		t.Fatal("gloved exited cleanly after SIGKILL")
	}
	reapOrphans(t)

	g2 := startGloved(t, e, f.args...)
	c2 := dial(t, g2.socket)
	if s := status(t, c2, "s-crash"); s.State != "failed" || (s.Reason != daemon.RecoveredGone && s.Reason != daemon.RecoveredKilled) {
		t.Errorf("the crashed session after restart: %s %s, want failed and recovered:*", s.State, s.Reason)
	}
	nt := f.create(c2, "s-after", withHandles(f.plan("agent", "tiny"), "codex-token"))
	c2.ok("start_session", map[string]any{"session_id": "s-after", "start_token": nt}, nil)
	end := attach(t, c2, "s-after")
	sum := sha256.Sum256(rotated)
	if want := "credential sha256 " + hex.EncodeToString(sum[:]); !strings.Contains(end.output, want) {
		t.Errorf("the session after the crash did not get the rotated token (%s):\n%s\nlog: %s", want, end.output, g2.log)
	}
	g2.stop(t)
}

// checkNoSecret fails t if any of secrets (raw or base64) or the
// credential source's host path src appears in places (name: text) or in
// any file of the fixture's session store but the leases, which alone
// hold a credential.
func checkNoSecret(t *testing.T, f *fixture, places map[string]string, secrets [][]byte, src string) {
	t.Helper()
	var forms []string
	for _, s := range secrets {
		forms = append(forms, string(s), base64.StdEncoding.EncodeToString(s))
	}
	leaseDir := filepath.Join(f.storeDir, daemon.LeaseDir)
	if err := filepath.WalkDir(f.storeDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == leaseDir {
			return filepath.SkipDir // the lease itself holds the credential
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			places["store file "+d.Name()] = string(b)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for where, text := range places {
		for _, s := range forms {
			if strings.Contains(text, s) {
				t.Errorf("a token (%d bytes) appears in %s", len(s), where)
			}
		}
		if strings.Contains(text, src) {
			t.Errorf("the source's host path appears in %s", where)
		}
	}
}
