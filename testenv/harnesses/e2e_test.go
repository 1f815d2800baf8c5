// SPDX-License-Identifier: Apache-2.0

package harnesses

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/testenv/modelserver"
)

func random(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestToolTurn runs each real harness on the host against the scripted
// model server: the model asks for one shell command, the harness runs it
// in its work directory and sends the output back, the model answers.
// Everything is judged from outside: the file the command wrote, the
// harness's stdout, and the server's log of exactly two model requests.
//
// Each harness reaches the server three ways, the ones an egress path
// can offer it: a plain http:// base URL on loopback, an HTTP proxy on
// loopback in front of an unresolvable base URL, and (claude-code only) a
// unix socket.
func TestToolTurn(t *testing.T) {
	for _, h := range All {
		for _, mode := range []string{"base-url", "http-proxy", "unix-socket"} {
			if mode == "unix-socket" && h.Name != Claude.Name {
				continue
			}
			t.Run(h.Name+"/"+mode, func(t *testing.T) { testToolTurn(t, h, mode) })
		}
	}
}

// proxiedHost is the base URL's host when the harness goes through a
// proxy: it does not resolve, so only the proxy can have answered.
const proxiedHost = "model.glove.invalid"

func testToolTurn(t *testing.T, h Harness, mode string) {
	bin := Ensure(t, h)
	dir := t.TempDir()
	home, work := filepath.Join(dir, "home"), filepath.Join(dir, "work")
	for _, d := range []string{home, filepath.Join(home, ".codex"), filepath.Join(home, "tmp"), work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The input's content is unguessable, so finding it in the tool result
	// the harness sends back proves the command ran and was reported.
	input := "glove-input-" + random(t)
	if err := os.WriteFile(filepath.Join(work, "input.txt"), []byte(input+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	key := "sk-glove-test-" + random(t)
	final := "GLOVE-FINAL-" + random(t)
	command := "cat input.txt > out.txt; echo done >> out.txt; cat out.txt"
	script := []modelserver.Turn{{Command: command}, {Text: final}}
	srv := modelserver.New(modelserver.Config{
		Key: key, Responses: script, Messages: script,
		OnRequest: func(r modelserver.Request) {
			t.Logf("server: #%d %s %s kind=%s auth=%s keyok=%v model=%q turn=%d status=%d results=%q answer=%q err=%q",
				r.Seq, r.Method, r.Path, r.Kind, r.AuthHeader, r.KeyOK, r.Model, r.Turn, r.Status, r.ToolResults, r.Answer, r.Err)
		},
	})
	model := "glove-test-model"
	run := Run{Home: home, Key: key, Model: model, Prompt: "Run the command."}
	var l net.Listener
	var err error
	if mode == "unix-socket" {
		sock := filepath.Join(dir, "model.sock")
		l, err = net.Listen("unix", sock)
		run.BaseURL, run.UnixSocket = "http://localhost", sock
	} else {
		l, err = net.Listen("tcp", "127.0.0.1:0")
		run.BaseURL = "http://" + l.Addr().String()
	}
	if err != nil {
		t.Fatal(err)
	}
	if mode == "http-proxy" {
		run.BaseURL, run.Proxy = "http://"+proxiedHost, run.BaseURL
	}
	hs := srv.Serve(l)
	t.Cleanup(func() { hs.Close() })

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, h.Args(run)...)
	cmd.Env, cmd.Dir = h.Env(run), work
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	took := time.Since(start)
	t.Logf("%s: %v, exit %v", h.Name, took, err)
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		// ru_maxrss of a waited child is the largest of it and its
		// waited descendants, in KiB.
		t.Logf("%s: peak RSS %d MiB", h.Name, ru.Maxrss/1024)
	}
	t.Logf("stdout:\n%s", stdout.String())
	if err != nil {
		t.Fatalf("%s failed: %v\nstderr:\n%s", h.Name, err, stderr.String())
	}

	out, err := os.ReadFile(filepath.Join(work, "out.txt"))
	if err != nil {
		t.Fatalf("the tool call did not write out.txt: %v", err)
	}
	if want := input + "\ndone\n"; string(out) != want {
		t.Errorf("out.txt = %q, want %q", out, want)
	}
	if !strings.Contains(stdout.String(), final) {
		t.Errorf("stdout has no final answer %q", final)
	}

	log := srv.Log()
	if len(log) != 2 {
		t.Fatalf("server saw %d requests, want 2 (the tool call turn and the final turn)", len(log))
	}
	wantKind, wantHeader := "responses", "authorization"
	if h.Name == Claude.Name {
		wantKind, wantHeader = "messages", "x-api-key"
	}
	for i, r := range log {
		if r.Kind != wantKind || r.Turn != i || r.Status != 200 || r.Err != "" {
			t.Errorf("request %d: kind %s turn %d status %d err %q; want %s turn %d 200", i+1, r.Kind, r.Turn, r.Status, r.Err, wantKind, i)
		}
		if !r.KeyOK || r.AuthHeader != wantHeader || r.KeyElsewhere {
			t.Errorf("request %d: key ok %v in %q, elsewhere %v; want the key in %s only", i+1, r.KeyOK, r.AuthHeader, r.KeyElsewhere, wantHeader)
		}
		if !r.Stream || !r.ShellTool || r.Model != model {
			t.Errorf("request %d: stream %v shell tool %v model %q", i+1, r.Stream, r.ShellTool, r.Model)
		}
		if proxied := mode == "http-proxy"; r.Proxied != proxied || proxied && r.Host != proxiedHost {
			t.Errorf("request %d: proxied %v host %q in mode %s", i+1, r.Proxied, r.Host, mode)
		}
	}
	if res := log[1].ToolResults; len(res) != 1 || !strings.Contains(res[0], input) {
		t.Errorf("tool result sent back %q, want one containing %q", res, input)
	}

	// The key reaches the harness by its environment and leaves it only in
	// the request header: no file it wrote holds it.
	checkNoKey(t, key, home, work)
}

func checkNoKey(t *testing.T, key string, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		err := filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil || !e.Type().IsRegular() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if bytes.Contains(b, []byte(key)) {
				t.Errorf("API key written to %s", p)
			}
			return nil
		})
		if err != nil {
			t.Errorf("walk %s: %v", d, err)
		}
	}
}

// TestWrongKey runs each harness with a key the server does not accept:
// the harness must fail, not retry for ever, and every request it made
// must be logged as refused.
func TestWrongKey(t *testing.T) {
	for _, h := range All {
		t.Run(h.Name, func(t *testing.T) {
			bin := Ensure(t, h)
			dir := t.TempDir()
			home := filepath.Join(dir, "home")
			for _, d := range []string{filepath.Join(home, ".codex"), filepath.Join(home, "tmp")} {
				if err := os.MkdirAll(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			script := []modelserver.Turn{{Text: "never sent"}}
			srv := modelserver.New(modelserver.Config{Key: "sk-right-" + random(t), Responses: script, Messages: script})
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			hs := srv.Serve(l)
			t.Cleanup(func() { hs.Close() })
			run := Run{Home: home, BaseURL: "http://" + l.Addr().String(), Key: "sk-wrong-" + random(t), Model: "glove-test-model", Prompt: "hello"}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, h.Args(run)...)
			cmd.Env, cmd.Dir = h.Env(run), dir
			out, err := cmd.CombinedOutput()
			if err == nil || ctx.Err() != nil {
				t.Fatalf("%s with a wrong key: %v (context %v)\n%s", h.Name, err, ctx.Err(), out)
			}
			t.Logf("%s: %v\n%s", h.Name, err, out)
			log := srv.Log()
			if len(log) == 0 {
				t.Fatal("no request reached the server")
			}
			for _, r := range log {
				if r.KeyOK || r.Status != 401 {
					t.Errorf("request %d %s: key ok %v status %d", r.Seq, r.Path, r.KeyOK, r.Status)
				}
			}
			t.Logf("%s made %d refused requests", h.Name, len(log))
		})
	}
}
