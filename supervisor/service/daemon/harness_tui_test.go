// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/harness"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/authority/stage"
	"github.com/glove-sandbox/glove/supervisor/service/daemon"
	"github.com/glove-sandbox/glove/testenv"
	"github.com/glove-sandbox/glove/testenv/harnesses"
	"github.com/glove-sandbox/glove/testenv/modelserver"
)

// stagedCodex stages the pinned codex's platform package (glove policy
// stage's code) beneath the mounter's source root and returns the stage's
// search path.
func stagedCodex(t *testing.T, e *testenv.Env) string {
	t.Helper()
	plat := filepath.Join(harnesses.EnsurePrefix(t, harnesses.Codex), "node_modules", "@openai", "codex-linux-x64")
	work, err := os.MkdirTemp(filepath.Join(e.Base, "sources"), "staged-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeStage(t, work) })
	if err := os.Chmod(work, 0o755); err != nil {
		t.Fatal(err)
	}
	r, err := stage.Stage(stage.Options{Runtime: "codex", Source: plat, Directory: work})
	if err != nil {
		t.Fatal(err)
	}
	return r.SearchPath
}

// removeStage removes a directory holding stages, which are read-only.
func removeStage(t *testing.T, dir string) {
	t.Helper()
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			return os.Chmod(p, 0o755)
		}
		if errors.Is(err, fs.ErrNotExist) && p == dir {
			return nil
		}
		return err
	}); err != nil {
		t.Errorf("make the stage removable: %v", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Errorf("remove the stage: %v", err)
	}
}

// screen collects an attached session's output, answering the terminal's
// cursor position query as a terminal would (codex's TUI asks once).
type screen struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ended *daemon.End
	// queries counts the cursor position queries not yet answered; the
	// test's goroutine answers them (tick), as calls of a test's client
	// belong to its goroutine.
	queries int
	answer  func()
}

func (s *screen) read(t *testing.T, c *client, id string) {
	for {
		m, err := c.read()
		if err != nil {
			return
		}
		switch m.Method {
		case "output":
			var o daemon.Output
			if err := json.Unmarshal(m.Params, &o); err != nil || o.SessionID != id {
				t.Errorf("output %s: %v", m.Params, err)
				return
			}
			s.mu.Lock()
			s.buf.Write(o.Data)
			s.mu.Unlock()
			if n := bytes.Count(o.Data, []byte("\x1b[6n")); n > 0 {
				s.mu.Lock()
				s.queries += n
				s.mu.Unlock()
			}
		case "ended":
			var e daemon.End
			if err := json.Unmarshal(m.Params, &e); err != nil {
				t.Errorf("ended %s: %v", m.Params, err)
			}
			s.mu.Lock()
			s.ended = &e
			s.mu.Unlock()
			return
		}
	}
}

// waitFor waits until want appears after offset from; it returns the
// output's length then.
func (s *screen) waitFor(from int, want string, d time.Duration) (int, bool) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		n := s.buf.Len()
		found := from <= n && bytes.Contains(s.buf.Bytes()[from:], []byte(want))
		q := s.queries
		s.queries = 0
		s.mu.Unlock()
		for range q {
			s.answer()
		}
		if found {
			return n, true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0, false
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// TestGlovedCodexTUI runs the real codex's interactive TUI in a managed
// session as a person would through `glove attach`: launched from its
// whole staged platform package (its TUI refuses to start without the
// package's sibling executables), on a pty of 24x80 from the start (it
// draws nothing on 0x0), its model reached only through the egress
// endpoint. Judged from outside: the prompt drawn, the typed request
// answered with the scripted tool call's run and final answer, a resize
// taken, and the session stopped by stop_session.
func TestGlovedCodexTUI(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the test stages codex's linux-x64 platform package")
	}
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	search := stagedCodex(t, e)
	testenv.CheckLeaks(t, e.UID)

	f := newFixture(t, e, map[string][]string{"line": {"line"}}, harnessProfile, tinyProfile)
	input := "glove-input-" + randomHex(t)
	if err := os.WriteFile(filepath.Join(f.ws, "input.txt"), []byte(input+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	key, final := "sk-glove-test-"+randomHex(t), "GLOVE-FINAL-"+randomHex(t)
	srv, sock := modelGateway(t, e, f, modelserver.Config{Key: key,
		Responses: []modelserver.Turn{{Command: "cat input.txt > out.txt; cat out.txt; rg --version"}, {Text: final}}})
	run := harnesses.Run{Home: "/home/agent", BaseURL: "http://127.0.0.1:" + strconv.Itoa(egressPort), Key: key, Model: "glove-test-model"}
	keyCredential(t, e, f, ownedDir(t, e, filepath.Join(f.dir, "keys")), harnesses.Codex, key)
	r := policy.RuntimeTemplate{RuntimeTemplateID: "codex-tui", RuntimeID: "codex", SandboxBackend: policy.BackendLinuxProduction,
		AllowedPathAliases: []string{"workspace"},
		Launch: policy.Launch{RuntimeDiscovery: "codex", ExecutableSearchPaths: []string{search},
			Arguments: harnesses.Codex.TUIArgs(run), Environment: harnesses.Codex.SandboxEnv(run), ReadOnlyPaths: harness.ReadOnlyPaths()}}
	f.putTemplate(r)
	f.withEgress(t, sock)
	g := f.start()
	logOnFailure(t, g)
	c, ctl := dial(t, g.socket), dial(t, g.socket)

	const id = "s-codex-tui"
	pl := f.plan("codex-tui", "harness")
	pl.EgressPolicyIDs = []string{"model-gateway"}
	pl.SecretHandles = []string{"codex-key"}
	tok := f.create(ctl, id, pl)
	ctl.ok("start_session", map[string]any{"session_id": id, "start_token": tok, "rows": 24, "cols": 80}, nil)
	var a struct {
		Attached bool `json:"attached"`
	}
	c.ok("attach", map[string]any{"session_id": id}, &a)
	if !a.Attached {
		t.Fatal("not attached")
	}
	type10 := func(s string) {
		for _, ch := range s {
			ctl.ok("write_stdin", map[string]any{"session_id": id, "data": []byte(string(ch))}, nil)
			time.Sleep(10 * time.Millisecond)
		}
	}
	// The answer goes on the control connection: a call on the attached
	// one would interleave with the notifications read there.
	scr := &screen{answer: func() {
		ctl.ok("write_stdin", map[string]any{"session_id": id, "data": []byte("\x1b[1;1R")}, nil)
	}}
	done := make(chan struct{})
	go func() { defer close(done); scr.read(t, c, id) }()
	// A check that fails on the way stops the session still, so that
	// nothing of it outlives the test (the leak check).
	defer func() {
		select {
		case <-done:
			return
		default:
		}
		if _, e := ctl.call("stop_session", map[string]any{"session_id": id, "grace_ms": 200}); e != nil {
			t.Errorf("stop the session after a failed check: %v", e)
		}
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the session did not end after stop_session")
		}
	}()

	n, ok := scr.waitFor(0, "Ask Codex to do anything", 60*time.Second)
	if !ok {
		t.Fatalf("codex drew no prompt in the session:\n%q", scr.String())
	}
	type10("Run the command.")
	time.Sleep(300 * time.Millisecond)
	type10("\r")
	if n, ok = scr.waitFor(n, final, 90*time.Second); !ok {
		t.Errorf("codex drew no final answer:\n%q", scr.String())
	}
	var rs struct {
		Resized bool `json:"resized"`
	}
	ctl.ok("resize", map[string]any{"session_id": id, "rows": 30, "cols": 100}, &rs)
	if !rs.Resized {
		t.Error("resize not taken")
	}
	// codex redraws on SIGWINCH: output follows the resize.
	if _, ok := scr.waitFor(n+1, "", 10*time.Second); !ok {
		t.Error("no output after the resize")
	}
	ctl.ok("stop_session", map[string]any{"session_id": id, "grace_ms": 2000}, nil)
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the session did not end after stop_session")
	}
	if scr.ended == nil || scr.ended.State != "exited" && scr.ended.Termination == "" {
		t.Errorf("ended %+v", scr.ended)
	}
	var log []modelserver.Request
	for _, r := range srv.Log() {
		if r.Kind == "responses" && r.ShellTool {
			log = append(log, r)
		}
	}
	if len(log) != 2 || !log[0].KeyOK || !log[1].KeyOK {
		t.Fatalf("the model server saw %d scripted requests (%+v), want 2 with the key", len(log), log)
	}
	// ripgrep is not on the host's PATH here: codex's own, a sibling in
	// its package (codex-path/rg), answers, which only the whole staged
	// tree shows the sandbox.
	if res := log[1].ToolResults; len(res) != 1 || !strings.Contains(res[0], input) || !strings.Contains(res[0], "ripgrep ") {
		t.Errorf("the tool result sent back %q, want one holding %q and ripgrep's version", res, input)
	}
	g.stop(t)
}
