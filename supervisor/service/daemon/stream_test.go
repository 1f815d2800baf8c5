// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/testenv"
	"github.com/glove-sandbox/glove/testenv/programs"
)

// startUpstream starts the upstream service and returns its socket. It
// runs as the service user in a directory of its own, mode 0700 (the
// helper accepts only the service user's upstream).
func startUpstream(t *testing.T, e *testenv.Env, f *fixture) string {
	t.Helper()
	return startUpstreamIn(t, e, filepath.Join(f.dir, "svc"))
}

// startUpstreamIn is startUpstream with the socket in directory dir,
// which it makes (the service user's, mode 0700).
func startUpstreamIn(t *testing.T, e *testenv.Env, dir string) string {
	t.Helper()
	up := testenv.BuildStatic(t, e, "upstream", programs.Upstream)
	sockDir := ownedDir(t, e, dir)
	sock := filepath.Join(sockDir, "upstream.sock")
	srv := exec.Command(up, sock, acceptLog(sock))
	srv.SysProcAttr = e.InDelegatedCgroup(t)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			return sock
		}
		if i > 200 {
			t.Fatal("upstream did not listen")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// acceptLog is the file where the upstream of socket sock logs each
// connection it accepts.
func acceptLog(sock string) string { return filepath.Join(filepath.Dir(sock), "accepts") }

// accepts counts the connections the upstream of sock has accepted.
func accepts(t *testing.T, sock string) int {
	t.Helper()
	b, err := os.ReadFile(acceptLog(sock))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "accept\n")
}

// localServices writes doc as gloved's --local-services file (the
// service user's, mode 0600) and returns the arguments naming it.
func localServices(t testing.TB, e *testenv.Env, f *fixture, doc string) []string {
	t.Helper()
	p := filepath.Join(f.dir, "local-services.json")
	writeProtected(t, p, []byte(doc), e.UID, e.GID)
	return []string{"--local-services", p}
}

// streamConfig is an inherited-stream-v1 configuration: alias sage at
// sock, for the runtimes (a JSON array), with binding (a member, or "").
func streamConfig(sock, runtimes, binding string) string {
	return `{"schema_version":1,"transport":"inherited-stream-v1","services":[{"alias":"sage","socket":` +
		strconv.Quote(sock) + `,"runtime_ids":` + runtimes + binding + `}]}`
}

// withStream is the fixture's gloved arguments with an inherited stream
// to sock for the fixture's runtime (codex), unbound.
func withStream(t testing.TB, e *testenv.Env, f *fixture, sock string) []string {
	t.Helper()
	return append(append([]string{}, f.args...), localServices(t, e, f, streamConfig(sock, `["codex"]`, ""))...)
}

// TestGlovedInheritedStream runs a session whose program talks to a real
// upstream unix service through descriptor 3, as inherited-stream-v1
// says: the descriptor map in its environment, getsockname and
// getsockopt(SO_TYPE) on descriptor 3 allowed, any other getsockopt and
// socket denied, two exchanges relayed by glove-streamproxy, and each
// recorded pending then delivered in the session's audit file.
func TestGlovedInheritedStream(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	f := newFixture(t, e, map[string][]string{"streamer": {"stream"}})

	sock := startUpstream(t, e, f)

	g := startGloved(t, e, withStream(t, e, f, sock)...)
	c := dial(t, g.socket)
	var caps struct {
		Stream  int `json:"inherited_stream_version"`
		Channel int `json:"guest_channel_schema_version"`
	}
	c.ok("capabilities", nil, &caps)
	// An unbound service for codex: the stream, and no guest channel.
	if caps.Stream != 1 || caps.Channel != 0 {
		t.Errorf("inherited_stream_version %d, guest_channel_schema_version %d; want 1 and 0", caps.Stream, caps.Channel)
	}
	tok := f.create(c, "s-stream", f.plan("streamer", "tiny"))
	c.ok("start_session", map[string]any{"session_id": "s-stream", "start_token": tok}, nil)
	end := attach(t, c, "s-stream")
	var st struct {
		LaunchDigest string `json:"launch_digest"`
	}
	c.ok("session_status", map[string]any{"session_id": "s-stream"}, &st)
	g.stop(t)
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(st.LaunchDigest) {
		t.Errorf("launch_digest %q, want the managed-launch digest", st.LaunchDigest)
	}
	g2 := startGloved(t, e, withStream(t, e, f, sock)...)
	var page struct {
		Envelopes []receipt.Envelope `json:"envelopes"`
	}
	dial(t, g2.socket).ok("receipts_page", map[string]any{"after": 0, "limit": 10}, &page)
	g2.stop(t)
	if len(page.Envelopes) != 1 || page.Envelopes[0].Body.LaunchDigest != st.LaunchDigest {
		t.Errorf("the receipt does not carry the launch digest %s: %+v", st.LaunchDigest, page.Envelopes)
	}
	if err := receipt.Verify(f.key, testAnchor, page.Envelopes); err != nil {
		t.Errorf("receipt: %v", err)
	}
	out := strings.ReplaceAll(end.output, "\r\n", "\n")
	for _, want := range []string{
		`env {"sage":3}`, "so_type 1 <nil>", "getsockname <nil>",
		"rcvbuf operation not permitted", "other fd operation not permitted", "socket operation not permitted",
		"reply pong:ping", "reply pong:again",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("sandbox output lacks %q:\n%s", want, out)
		}
	}
	if end.Status != 0 {
		t.Errorf("session status %d, want 0\n%s", end.Status, out)
	}
	audit, err := os.ReadFile(filepath.Join(f.storeDir, "stream-s-stream.audit"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(audit)), "\n")
	var statuses []string
	for _, l := range lines {
		for _, st := range []string{"delivery_pending", "delivered", "delivery_failed"} {
			if strings.Contains(l, `"status":"`+st+`"`) {
				statuses = append(statuses, st)
			}
		}
		if strings.Contains(l, "ping") || strings.Contains(l, "pong") || strings.Contains(l, sock) {
			t.Errorf("an audit record holds payload or a host path: %s", l)
		}
	}
	if got := strings.Join(statuses, " "); !strings.HasPrefix(got, "delivery_pending delivered delivery_pending delivered") {
		t.Errorf("audit statuses %q, want pending/delivered twice\n%s", got, audit)
	}
}

// TestGlovedStreamExposed: a path grant whose host tree holds the
// inherited stream's upstream socket (the workspace alias, with the
// socket's directory inside it) would hand the sandbox the socket by
// another way than descriptor 3. The launch refuses it on the grant's
// very descriptor before anything of it is materialized. Judged from
// outside: the session failed with the store reason stream_exposed, and
// the program never ran (no output). The same check on every name of
// such a tree (a link, "..", a bind mount) is TestExposedBy's table.
func TestGlovedStreamExposed(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	f := newFixture(t, e, map[string][]string{"streamer": {"stream"}})
	sock := startUpstreamIn(t, e, filepath.Join(f.ws, "svc"))
	g := startGloved(t, e, withStream(t, e, f, sock)...)
	c := dial(t, g.socket)
	tok := f.create(c, "s-exposed", f.plan("streamer", "tiny"))
	c.ok("start_session", map[string]any{"session_id": "s-exposed", "start_token": tok}, nil)
	end := attach(t, c, "s-exposed")
	if end.State != "failed" || end.output != "" {
		t.Errorf("ended %+v with output %q: want failed before the program ran\nlog: %s", end.End, end.output, g.log)
	}
	if st := status(t, c, "s-exposed"); st.State != "failed" || st.Reason != "stream_exposed" {
		t.Errorf("status %s %s, want failed stream_exposed\nlog: %s", st.State, st.Reason, g.log)
	}
	g.stop(t)
}
