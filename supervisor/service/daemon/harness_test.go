// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/authority/harness"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/testenv"
	"github.com/glove-sandbox/glove/testenv/harnesses"
	"github.com/glove-sandbox/glove/testenv/modelserver"
)

// harnessProfile is what a real harness's model-backed turn runs under
// here: both peaked below 200 MiB on the host (testenv/harnesses), codex
// keeps its state in the private home (scratch, disk_bytes).
var harnessProfile = policy.ResourceProfile{ProfileID: "harness", CPUTimeMs: 120000, MemoryBytes: 1 << 30, Pids: 512,
	WallTimeMs: 180000, DiskBytes: 256 << 20, TerminalOutputBytes: 16 << 20}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// stageHarness puts the harness binary bin beneath the mounter's source
// root (testenv's sources directory), read-only for everyone, and returns
// its path there: a hard link when the cache shares the file system,
// else a copy.
func stageHarness(t *testing.T, e *testenv.Env, name, bin string) string {
	t.Helper()
	dir := filepath.Join(e.Base, "sources", "harness-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	dst := filepath.Join(dir, filepath.Base(bin))
	if err := os.Link(bin, dst); err != nil {
		in, err := os.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// modelGateway serves the scripted model server on a unix socket of the
// host that gloved (the service user) can connect to, as an operator's
// model gateway, and returns it with the socket's path. Each request is
// logged to the test.
func modelGateway(t *testing.T, e *testenv.Env, f *fixture, cfg modelserver.Config) (*modelserver.Server, string) {
	t.Helper()
	cfg.OnRequest = func(r modelserver.Request) {
		t.Logf("model server: #%d %s %s kind=%s keyok=%v turn=%d status=%d results=%q err=%q",
			r.Seq, r.Method, r.Path, r.Kind, r.KeyOK, r.Turn, r.Status, r.ToolResults, r.Err)
	}
	srv := modelserver.New(cfg)
	sock := filepath.Join(ownedDir(t, e, filepath.Join(f.dir, "gateway")), "model.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(sock, e.UID, e.GID); err != nil {
		t.Fatal(err)
	}
	hs := srv.Serve(l)
	t.Cleanup(func() { hs.Close() })
	return srv, sock
}

// keyCredential gives the fixture's policy the harness's API key as a
// variable credential, handle "<harness>-key" (a variable's name is one
// credential's; one source file each), its source a protected file in
// dir; the caller writes the policy (withEgress does).
func keyCredential(t *testing.T, e *testenv.Env, f *fixture, dir string, h harnesses.Harness, key string) {
	t.Helper()
	handle, src := h.Name+"-key", filepath.Join(dir, h.Name+".key")
	writeProtected(t, src, []byte(key+"\n"), e.UID, e.GID)
	f.pol.SecretHandles = append(f.pol.SecretHandles, handle)
	slices.Sort(f.pol.SecretHandles)
	f.pol.CredentialPolicies = append(f.pol.CredentialPolicies, policy.CredentialPolicy{Handle: handle, SourcePath: src, EnvironmentVariable: h.KeyVar(), MaxBytes: 256})
	slices.SortFunc(f.pol.CredentialPolicies, func(a, b policy.CredentialPolicy) int { return strings.Compare(a.Handle, b.Handle) })
}

// TestGlovedRealHarnesses runs the real harnesses, the pinned codex and
// claude-code from npm, as managed sessions: each reaches the scripted
// model server (on a unix socket of the host) only through the session's
// egress endpoint 127.0.0.1:8787, receives a scripted tool call, runs a
// shell command in its /workspace copy that reads input.txt and writes
// out.txt, sends the result back and prints the scripted final answer.
// Judged from outside: the model server's log of exactly the two
// expected requests with the key, the unguessable input in the tool
// result the harness sent, the final answer in the session's output,
// the egress audit's connections, and the session's exit status.
func TestGlovedRealHarnesses(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	codexBin := harnesses.Ensure(t, harnesses.Codex)
	claudeBin := harnesses.Ensure(t, harnesses.Claude)
	testenv.CheckLeaks(t, e.UID)
	bins := map[string]string{
		harnesses.Codex.Name:  stageHarness(t, e, "codex", codexBin),
		harnesses.Claude.Name: stageHarness(t, e, "claude", claudeBin),
	}

	f := newFixture(t, e, map[string][]string{"line": {"line"}}, harnessProfile, tinyProfile)
	input := "glove-input-" + randomHex(t)
	if err := os.WriteFile(filepath.Join(f.ws, "input.txt"), []byte(input+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	key := "sk-glove-test-" + randomHex(t)
	final := "GLOVE-FINAL-" + randomHex(t)
	script := []modelserver.Turn{{Command: "cat input.txt > out.txt; echo done >> out.txt; cat out.txt"}, {Text: final}}
	srv, sock := modelGateway(t, e, f, modelserver.Config{Key: key, Responses: script, Messages: script})
	// The key reaches each harness as a variable credential: in no
	// launch field, digest, status or log (TestGlovedCredentialVariable).
	keyDir := ownedDir(t, e, filepath.Join(f.dir, "keys"))

	// One template per harness: its binary pinned, the harness settings'
	// read-only paths (its shell tool runs /bin/bash), its model settings
	// pointing at the egress endpoint.
	base := "http://127.0.0.1:" + strconv.Itoa(egressPort)
	for _, h := range harnesses.All {
		run := harnesses.Run{Home: "/home/agent", BaseURL: base, Key: key, Model: "glove-test-model", Prompt: "Run the command."}
		runtime := "codex"
		if h.Name == harnesses.Claude.Name {
			runtime = "claude-code"
		}
		r := policy.RuntimeTemplate{
			RuntimeTemplateID: h.Name + "-e2e", RuntimeID: runtime, SandboxBackend: policy.BackendLinuxProduction,
			AllowedPathAliases: []string{"workspace"},
			Launch: policy.Launch{ExecutablePath: bins[h.Name], Arguments: h.Args(run), Environment: h.SandboxEnv(run), ReadOnlyPaths: harness.ReadOnlyPaths(),
				HostFiles: []string{policy.HostFilesCA, policy.HostFilesNameService}},
		}
		keyCredential(t, e, f, keyDir, h, key)
		f.putTemplate(r)
	}
	f.withEgress(t, sock)
	g := f.start()
	logOnFailure(t, g)
	c := dial(t, g.socket)

	for _, h := range harnesses.All {
		t.Run(h.Name, func(t *testing.T) {
			before := len(srv.Log())
			id := "s-" + h.Name
			pl := f.plan(h.Name+"-e2e", "harness")
			pl.RuntimeID = f.templates[h.Name+"-e2e"].RuntimeID
			pl.EgressPolicyIDs = []string{"model-gateway"}
			pl.SecretHandles = []string{h.Name + "-key"}
			tok := f.create(c, id, pl)
			c.ok("start_session", map[string]any{"session_id": id, "start_token": tok}, nil)
			end := attach(t, c, id)
			out := strings.ReplaceAll(end.output, "\r\n", "\n")
			t.Logf("%s: %s exit %d\n%s", h.Name, end.Termination, end.ExitCode, out)
			if end.Termination != "exited" || end.ExitCode != 0 {
				t.Errorf("%s ended %s (exit %d), want exited 0", h.Name, end.Termination, end.ExitCode)
			}
			if !strings.Contains(out, final) {
				t.Errorf("%s's output lacks the final answer %s", h.Name, final)
			}
			log := srv.Log()[before:]
			if len(log) != 2 {
				t.Fatalf("the model server saw %d requests, want 2", len(log))
			}
			for i, r := range log {
				if !r.KeyOK || r.KeyElsewhere || r.Status != 200 || r.Turn != i {
					t.Errorf("request %d: key ok %v elsewhere %v status %d turn %d", i+1, r.KeyOK, r.KeyElsewhere, r.Status, r.Turn)
				}
			}
			if res := log[1].ToolResults; len(res) != 1 || !strings.Contains(res[0], input) {
				t.Errorf("the tool result sent back %q, want one holding %q", res, input)
			}
			raw, err := os.ReadFile(filepath.Join(f.storeDir, "egress-"+id+".audit"))
			if err != nil {
				t.Fatalf("the egress audit: %v", err)
			}
			if strings.Contains(string(raw), key) || strings.Contains(string(raw), input) {
				t.Errorf("the egress audit holds the key or a payload:\n%s", raw)
			}
			if !strings.Contains(string(raw), `"event":"close"`) {
				t.Errorf("the egress audit has no closed connection:\n%s", raw)
			}
		})
	}
	// The key was the gateway's and the harness's alone: not in the
	// policy, gloved's log or the store.
	pol, err := os.ReadFile(filepath.Join(f.dir, "policy.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(pol), key) || strings.Contains(g.log.String(), key) {
		t.Error("the API key is in the policy or gloved's log")
	}
	if err := filepath.WalkDir(f.storeDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), key) {
			t.Errorf("the API key is in the store's %s", filepath.Base(p))
		}
		return err
	}); err != nil {
		t.Errorf("walk the store: %v", err)
	}
	g.stop(t)
}
