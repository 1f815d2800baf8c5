// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/service/daemon"
	"github.com/glove-sandbox/glove/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const testAnchor = "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"

// client is one connection to the control socket.
type client struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
	n int
}

func dial(t *testing.T, path string) *client {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, c: c, r: bufio.NewReaderSize(c, 1<<20)}
}

// msg is any line gloved sends: a response or a notification.
type msg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *daemon.Error   `json:"error"`
}

func (c *client) sendLine(line string) {
	c.t.Helper()
	_ = c.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.c.Write([]byte(line + "\n")); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *client) read() (msg, error) { return readMsg(c.c, c.r) }

// readMsg reads one line from gloved (60 s at most) and decodes it.
func readMsg(c net.Conn, r *bufio.Reader) (msg, error) {
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	line, err := r.ReadBytes('\n')
	if err != nil {
		return msg{}, err
	}
	var m msg
	if err := json.Unmarshal(line, &m); err != nil {
		return msg{}, fmt.Errorf("bad line %q: %w", line, err)
	}
	return m, nil
}

// raw sends one line and returns the response.
func (c *client) raw(line string) msg {
	c.t.Helper()
	c.sendLine(line)
	m, err := c.read()
	if err != nil {
		c.t.Fatalf("read response to %.200s: %v", line, err)
	}
	return m
}

// call sends a request and returns its result, or the error.
func (c *client) call(method string, params any) (json.RawMessage, *daemon.Error) {
	c.t.Helper()
	c.n++
	req := map[string]any{"jsonrpc": "2.0", "id": c.n, "method": method}
	if params != nil {
		req["params"] = params
	}
	line, err := json.Marshal(req)
	if err != nil {
		c.t.Fatal(err)
	}
	m := c.raw(string(line))
	if string(m.ID) != fmt.Sprint(c.n) {
		c.t.Fatalf("%s: response id %s, want %d", method, m.ID, c.n)
	}
	return m.Result, m.Error
}

// ok calls and decodes the result into out, failing on an error.
func (c *client) ok(method string, params any, out any) {
	c.t.Helper()
	res, e := c.call(method, params)
	if e != nil {
		c.t.Fatalf("%s: error %d %s", method, e.Code, e.Message)
	}
	if out != nil {
		if err := json.Unmarshal(res, out); err != nil {
			c.t.Fatalf("%s: result %s: %v", method, res, err)
		}
	}
}

// fails calls and checks the error code.
func (c *client) fails(method string, params any, code int) {
	c.t.Helper()
	res, e := c.call(method, params)
	if e == nil || e.Code != code {
		c.t.Fatalf("%s %v: result %s error %+v, want code %d", method, params, res, e, code)
	}
}

// writeFile writes a protected file (mode 0600, owned by uid).
func writeFile(t *testing.T, path string, data []byte, uid, gid int) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
}

// examplePlan is the example plan of docs/plan.md, expiring in a minute.
func examplePlan(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile("../../authority/plan/testdata/example-plan.json")
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	p["expires_at_unix_ms"] = time.Now().Add(time.Minute).UnixMilli()
	return p
}

type unitEnv struct {
	dir, socket, storeDir string
	d                     *daemon.Daemon
	done                  chan error
}

// startUnit runs a daemon in this process with the example policy, a
// store and a receipt journal (no session runtime).
func startUnit(t *testing.T, allow []int) *unitEnv {
	t.Helper()
	dir := t.TempDir()
	pol, err := os.ReadFile("../../authority/policy/testdata/example-policy.json")
	if err != nil {
		t.Fatal(err)
	}
	u := &unitEnv{dir: dir, socket: filepath.Join(dir, "run", "gloved.sock"), storeDir: filepath.Join(dir, "store")}
	for _, sub := range []string{"run", "store"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(dir, "policy.json"), pol, os.Getuid(), os.Getgid())
	writeFile(t, filepath.Join(dir, "key"), []byte(strings.Repeat("k", 32)), os.Getuid(), os.Getgid())
	u.d, err = daemon.New(daemon.Config{PolicyFile: filepath.Join(dir, "policy.json"), StoreDir: u.storeDir,
		RuntimeDir: filepath.Join(dir, "run"), KeyFile: filepath.Join(dir, "key"), Anchor: testAnchor, AllowUIDs: allow})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := daemon.Listen(u.d.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	u.done = make(chan error, 1)
	go func() { u.done <- u.d.Serve(ln) }()
	t.Cleanup(func() {
		if err := u.d.Shutdown(time.Second); err != nil {
			t.Error(err)
		}
		if err := <-u.done; err != nil {
			t.Error(err)
		}
		if _, err := os.Lstat(u.socket); err == nil {
			t.Error("socket left behind")
		}
	})
	return u
}

// journal returns the session store's bytes, for "nothing changed".
func (u *unitEnv) journal(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(u.storeDir, "sessions.journal"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return data
}

func TestCapabilitiesFromComponents(t *testing.T) {
	u := startUnit(t, nil)
	c := dial(t, u.socket)
	var caps struct {
		ProtocolVersion int      `json:"protocol_version"`
		Methods         []string `json:"methods"`
	}
	c.ok("capabilities", nil, &caps)
	want := "capabilities supervisor_status receipts_page receipts_ack validate_plan create_session session_status"
	if got := strings.Join(caps.Methods, " "); got != want || caps.ProtocolVersion != 1 {
		t.Errorf("capabilities %v (protocol %d), want %s", caps.Methods, caps.ProtocolVersion, want)
	}
	// The lifecycle methods exist but are not advertised: not found.
	for _, m := range []string{"start_session", "attach", "write_stdin", "resize", "signal", "detach", "stop_session", "cleanup_session"} {
		c.fails(m, map[string]any{"session_id": "s1"}, daemon.CodeMethodNotFound)
	}

	// Policy only: validate_plan alone.
	dir := t.TempDir()
	pol, _ := os.ReadFile("../../authority/policy/testdata/example-policy.json")
	writeFile(t, filepath.Join(dir, "policy.json"), pol, os.Getuid(), os.Getgid())
	d, err := daemon.New(daemon.Config{PolicyFile: filepath.Join(dir, "policy.json")})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(d.Methods(), " "); got != "capabilities supervisor_status validate_plan" {
		t.Errorf("policy only: %s", got)
	}
	_ = d.Shutdown(0)
}

func TestFraming(t *testing.T) {
	u := startUnit(t, nil)
	c := dial(t, u.socket)
	before := u.journal(t)
	for _, tc := range []struct {
		name, line string
		code       int
	}{
		{"bad JSON", `{"jsonrpc":"2.0","id":1,"method":`, daemon.CodeParse},
		{"two values", `{"jsonrpc":"2.0","id":1,"method":"capabilities"} {}`, daemon.CodeParse},
		{"not an object", `[1,2]`, daemon.CodeInvalidRequest},
		{"wrong version", `{"jsonrpc":"1.0","id":1,"method":"capabilities"}`, daemon.CodeInvalidRequest},
		{"no id", `{"jsonrpc":"2.0","method":"capabilities"}`, daemon.CodeInvalidRequest},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"capabilities"}`, daemon.CodeInvalidRequest},
		{"unknown envelope member", `{"jsonrpc":"2.0","id":1,"method":"capabilities","extra":1}`, daemon.CodeInvalidRequest},
		{"duplicate member", `{"jsonrpc":"2.0","id":1,"id":2,"method":"capabilities"}`, daemon.CodeParse},
		{"params array", `{"jsonrpc":"2.0","id":1,"method":"capabilities","params":[]}`, daemon.CodeInvalidRequest},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"format_disk","params":{}}`, daemon.CodeMethodNotFound},
		{"unadvertised method", `{"jsonrpc":"2.0","id":1,"method":"start_session","params":{"session_id":"s1","start_token":"x"}}`, daemon.CodeMethodNotFound},
		{"wrong param type", `{"jsonrpc":"2.0","id":1,"method":"session_status","params":{"session_id":7}}`, daemon.CodeInvalidParams},
		{"unknown param member", `{"jsonrpc":"2.0","id":1,"method":"session_status","params":{"session_id":"s1","verbose":true}}`, daemon.CodeInvalidParams},
		{"null param", `{"jsonrpc":"2.0","id":1,"method":"session_status","params":{"session_id":null}}`, daemon.CodeInvalidParams},
		{"negative limit", `{"jsonrpc":"2.0","id":1,"method":"receipts_page","params":{"after":0,"limit":-1}}`, daemon.CodeInvalidParams},
		{"limit above 100", `{"jsonrpc":"2.0","id":1,"method":"receipts_page","params":{"after":0,"limit":101}}`, daemon.CodeInvalidParams},
		{"plan not an object", `{"jsonrpc":"2.0","id":1,"method":"validate_plan","params":{"plan":"{}"}}`, daemon.CodeInvalidParams},
		{"plan unknown member", `{"jsonrpc":"2.0","id":1,"method":"validate_plan","params":{"plan":{"schema_version":1,"surprise":1}}}`, daemon.CodeInvalidParams},
		{"unknown session", `{"jsonrpc":"2.0","id":1,"method":"session_status","params":{"session_id":"nobody"}}`, daemon.CodeNotFound},
		{"bad session id", `{"jsonrpc":"2.0","id":1,"method":"session_status","params":{"session_id":"../x"}}`, daemon.CodeInvalidParams},
	} {
		m := c.raw(tc.line)
		if m.Error == nil || m.Error.Code != tc.code {
			t.Errorf("%s: result %s error %+v, want %d", tc.name, m.Result, m.Error, tc.code)
		}
		if tc.code != daemon.CodeParse && tc.code != daemon.CodeInvalidRequest && string(m.ID) != "1" {
			t.Errorf("%s: id %s, want 1", tc.name, m.ID)
		}
	}
	// The connection still works after every error above.
	c.ok("capabilities", nil, nil)
	if !bytes.Equal(before, u.journal(t)) {
		t.Error("a rejected request changed the session store")
	}

	// An oversized line: -32600, then the connection is closed.
	big := `{"jsonrpc":"2.0","id":1,"method":"validate_plan","params":{"plan":{"x":"` + strings.Repeat("a", daemon.MaxLine) + `"}}}`
	m := c.raw(big)
	if m.Error == nil || m.Error.Code != daemon.CodeInvalidRequest || string(m.ID) != "null" {
		t.Errorf("oversized line: %+v id %s", m.Error, m.ID)
	}
	if _, err := c.read(); err == nil {
		t.Error("connection still open after an oversized line")
	}
	// A line of exactly MaxLine bytes is read (and rejected as JSON only).
	c2 := dial(t, u.socket)
	m = c2.raw(strings.Repeat(" ", daemon.MaxLine-2) + "{}")
	if m.Error == nil || m.Error.Code != daemon.CodeInvalidRequest {
		t.Errorf("line of MaxLine bytes: %+v", m.Error)
	}
	if !bytes.Equal(before, u.journal(t)) {
		t.Error("a rejected request changed the session store")
	}
}

func TestCreateSessionIdempotency(t *testing.T) {
	u := startUnit(t, nil)
	c := dial(t, u.socket)
	p := examplePlan(t)
	var v struct {
		Digest string `json:"plan_content_digest"`
	}
	c.ok("validate_plan", map[string]any{"plan": p}, &v)
	if len(v.Digest) != 64 {
		t.Fatalf("digest %q", v.Digest)
	}
	ctrl := strings.Repeat("c", 64)
	params := map[string]any{"session_id": "s1", "idempotency_key": "k1", "controller_plan_digest": ctrl, "plan": p}
	type created struct {
		SessionID string `json:"session_id"`
		State     string `json:"state"`
		Existing  bool   `json:"existing"`
		Token     string `json:"start_token"`
		Expires   int64  `json:"start_token_expires_at_ms"`
	}
	var first, again created
	c.ok("create_session", params, &first)
	if first.SessionID != "s1" || first.State != "created" || first.Existing || !strings.HasPrefix(first.Token, "glove-start-v1.") ||
		first.Expires <= time.Now().UnixMilli() {
		t.Fatalf("create: %+v", first)
	}
	after := u.journal(t)
	// A byte-identical retry returns the original.
	c.ok("create_session", params, &again)
	if !again.Existing || again.SessionID != "s1" {
		t.Errorf("retry: %+v", again)
	}
	// The key with other content, or the id with another key: conflict,
	// and nothing is written.
	for _, ps := range []map[string]any{
		{"session_id": "s2", "idempotency_key": "k1", "controller_plan_digest": ctrl, "plan": p},
		{"session_id": "s1", "idempotency_key": "k1", "controller_plan_digest": strings.Repeat("d", 64), "plan": p},
		{"session_id": "s1", "idempotency_key": "k2", "controller_plan_digest": ctrl, "plan": p},
	} {
		c.fails("create_session", ps, daemon.CodeConflict)
	}
	// A plan the policy does not authorize, or a bad digest: rejected.
	other := examplePlan(t)
	other["policy_revision"] = 8
	c.fails("create_session", map[string]any{"session_id": "s3", "idempotency_key": "k3", "controller_plan_digest": ctrl, "plan": other}, daemon.CodeRejected)
	c.fails("create_session", map[string]any{"session_id": "s3", "idempotency_key": "k3", "controller_plan_digest": "ABC", "plan": p}, daemon.CodeInvalidParams)
	if !bytes.Equal(after, u.journal(t)) {
		t.Error("a rejected create changed the session store")
	}
	c.fails("session_status", map[string]any{"session_id": "s2"}, daemon.CodeNotFound)
	var st daemon.Status
	c.ok("session_status", map[string]any{"session_id": "s1"}, &st)
	if st.State != "created" || st.ControllerPlanDigest != ctrl || st.PlanContentDigest != v.Digest {
		t.Errorf("status %+v", st)
	}
}

func TestReceiptsEmpty(t *testing.T) {
	u := startUnit(t, nil)
	c := dial(t, u.socket)
	var page struct {
		Envelopes []json.RawMessage `json:"envelopes"`
		HeadSeq   uint64            `json:"head_seq"`
		HeadMAC   string            `json:"head_mac"`
	}
	c.ok("receipts_page", map[string]any{"after": 0, "limit": 100}, &page)
	if len(page.Envelopes) != 0 || page.HeadSeq != 0 || page.HeadMAC != testAnchor {
		t.Errorf("empty page %+v", page)
	}
	c.fails("receipts_page", map[string]any{"after": 1, "limit": 1}, daemon.CodeInvalidParams)
	c.fails("receipts_ack", map[string]any{"seq": 1, "envelope_mac": testAnchor}, daemon.CodeConflict)
}

func TestPeerRefused(t *testing.T) {
	u := startUnit(t, []int{os.Getuid() + 12345})
	c := dial(t, u.socket)
	_, _ = c.c.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"capabilities"}` + "\n"))
	if m, err := c.read(); err == nil {
		t.Errorf("a refused peer got an answer: %+v", m)
	}
}

func TestListenRefusesExisting(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sock")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := daemon.Listen(path); err == nil {
		t.Error("Listen replaced a regular file")
	}
	os.Remove(path)
	// A live socket is not replaced; a stale one is.
	ln, err := daemon.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := daemon.Listen(path); err == nil {
		t.Error("Listen replaced a live socket")
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v %v", st.Mode(), err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	ln2, err := daemon.Listen(path)
	if err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	ln2.Close()
	if _, err := os.Lstat(path); err == nil {
		t.Error("socket not removed at close")
	}
}

func TestCheckDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := daemon.CheckDir(dir); err != nil {
		t.Errorf("0700 directory: %v", err)
	}
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o755)
	os.Chmod(open, 0o755)
	link := filepath.Join(dir, "link")
	os.Symlink(dir, link)
	for _, bad := range []string{"relative", open, link, filepath.Join(dir, "missing"), dir + "/"} {
		if err := daemon.CheckDir(bad); err == nil {
			t.Errorf("CheckDir(%s) accepted", bad)
		}
	}
	if _, err := daemon.New(daemon.Config{RuntimeDir: open}); err == nil {
		t.Error("New accepted a 0755 runtime directory")
	}
}

// TestProtocolDocExamples replays docs/protocol.md's conformance
// examples.
func TestProtocolDocExamples(t *testing.T) {
	data, err := os.ReadFile("../../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "## Conformance examples")
	if !ok {
		t.Fatal("no conformance section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	u := startUnit(t, nil)
	c := dial(t, u.socket)
	n := 0
	lines := strings.Split(section, "\n")
	for i, l := range lines {
		req, ok := strings.CutPrefix(l, "-> ")
		if !ok {
			continue
		}
		want, ok := strings.CutPrefix(lines[i+1], "<- ")
		if !ok {
			t.Fatalf("no reply after %q", l)
		}
		c.sendLine(req)
		got, err := c.r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(got) != want {
			t.Errorf("%s\ngot  %s\nwant %s", req, strings.TrimSpace(got), want)
		}
		n++
	}
	if n < 10 {
		t.Errorf("only %d examples", n)
	}
}
