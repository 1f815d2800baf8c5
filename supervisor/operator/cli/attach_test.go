// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// attachServer is a fake gloved for glove attach: it answers attach
// with a response and one output line, records every later request, and
// answers each (detach with detached, write_stdin with written); with
// endAfter set it sends "ended" once the input holds that text.
type attachServer struct {
	mu       sync.Mutex
	requests []map[string]any
	input    bytes.Buffer
}

func (s *attachServer) start(t *testing.T, endAfter string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gloved.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			var req struct {
				ID     int            `json:"id"`
				Method string         `json:"method"`
				Params map[string]any `json:"params"`
			}
			if err := json.Unmarshal(line, &req); err != nil {
				return
			}
			s.mu.Lock()
			s.requests = append(s.requests, map[string]any{"method": req.Method, "params": req.Params})
			var out []string
			switch req.Method {
			case "attach":
				out = []string{`{"jsonrpc":"2.0","id":1,"result":{"attached":true}}`,
					`{"jsonrpc":"2.0","method":"output","params":{"session_id":"s1","data":"aGVsbG8K","offset":0}}`}
			case "write_stdin":
				var data []byte
				b, _ := json.Marshal(req.Params["data"])
				_ = json.Unmarshal(b, &data)
				s.input.Write(data)
				out = []string{`{"jsonrpc":"2.0","id":` + itoa(req.ID) + `,"result":{"written":1}}`}
				if endAfter != "" && strings.Contains(s.input.String(), endAfter) {
					out = append(out, `{"jsonrpc":"2.0","method":"ended","params":{"session_id":"s1","state":"exited","termination":"exited","exit_code":3,"signal":0,"status":3}}`)
				}
			case "detach":
				out = []string{`{"jsonrpc":"2.0","id":` + itoa(req.ID) + `,"result":{"detached":true}}`}
			default:
				out = []string{`{"jsonrpc":"2.0","id":` + itoa(req.ID) + `,"result":{"resized":true}}`}
			}
			s.mu.Unlock()
			for _, l := range out {
				if _, err := c.Write([]byte(l + "\n")); err != nil {
					return
				}
			}
		}
	}()
	return path
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// attachRun runs glove attach with stdin and returns its exit status,
// stdout and stderr.
func attachRun(t *testing.T, stdin *os.File, args ...string) (int, string, string) {
	t.Helper()
	var out, errs bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- attachCommand(args, stdin, &out, &errs) }()
	select {
	case code := <-done:
		return code, out.String(), errs.String()
	case <-time.After(20 * time.Second):
		t.Fatalf("glove attach still running after 20 s: stdout %q stderr %q", out.String(), errs.String())
	}
	return 0, "", ""
}

// TestAttachDetachKey: input reaches write_stdin, Ctrl-] Ctrl-] is one
// Ctrl-], Ctrl-] and another byte are both sent, and Ctrl-] d detaches
// (detach sent, exit 0), with nothing after it sent.
func TestAttachDetachKey(t *testing.T) {
	s := &attachServer{}
	sock := s.start(t, "")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := w.Write([]byte("ls\r\x1d\x1dx\x1dy\x1ddafter")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	code, out, errs := attachRun(t, r, "--socket", sock, "s1")
	if code != 0 || out != "hello\n" || !strings.Contains(errs, "detached from s1") {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, errs)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if got, want := s.input.String(), "ls\r\x1dx\x1dy"; got != want {
		t.Errorf("input sent %q, want %q", got, want)
	}
	last := s.requests[len(s.requests)-1]
	if last["method"] != "detach" || last["params"].(map[string]any)["session_id"] != "s1" {
		t.Errorf("last request %v, want detach of s1", last)
	}
}

// TestAttachEnded: the session's end ends glove attach with its status;
// end of file on a non-terminal input detaches nothing.
func TestAttachEnded(t *testing.T) {
	s := &attachServer{}
	sock := s.start(t, "exit\n")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := w.Write([]byte("exit\n")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	code, out, errs := attachRun(t, r, "--socket", sock, "s1")
	if code != 3 || out != "hello\n" {
		t.Fatalf("exit %d stdout %q stderr %q, want 3", code, out, errs)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, req := range s.requests {
		if req["method"] == "detach" || req["method"] == "resize" {
			t.Errorf("request %v from a non-terminal input", req)
		}
	}
	if code, _, _ := attachRun(t, r, "--socket", sock); code != ExitUsage {
		t.Errorf("no session id: exit %d, want %d", code, ExitUsage)
	}
}

// TestAttachTerminalSize: on a terminal, glove attach sends the
// terminal's size with resize before any input, and restores the
// terminal's settings when it detaches.
func TestAttachTerminalSize(t *testing.T) {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	master := os.NewFile(uintptr(m), "ptmx")
	defer master.Close()
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	sfd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		t.Fatal(errno)
	}
	slave := os.NewFile(sfd, "pts")
	defer slave.Close()
	if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 30, Col: 90}); err != nil {
		t.Fatal(err)
	}
	before, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	s := &attachServer{}
	sock := s.start(t, "")
	// The keys arrive once raw mode is on: typed before, the line
	// discipline would hold them in its canonical buffer.
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, _ = master.Write([]byte("q\x1dd"))
	}()
	code, _, errs := attachRun(t, slave, "--socket", sock, "s1")
	if code != 0 || !strings.Contains(errs, "Ctrl-] d detaches") {
		t.Fatalf("exit %d stderr %q", code, errs)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) < 2 || s.requests[1]["method"] != "resize" {
		t.Fatalf("requests %v: want resize right after attach", s.requests)
	}
	p := s.requests[1]["params"].(map[string]any)
	if p["rows"] != 30.0 || p["cols"] != 90.0 {
		t.Errorf("resize %v, want 30 rows, 90 cols", p)
	}
	if s.input.String() != "q" {
		t.Errorf("input sent %q, want %q", s.input.String(), "q")
	}
	after, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil || after.Lflag != before.Lflag || after.Iflag != before.Iflag {
		t.Errorf("terminal settings not restored (%v): lflag %#x, was %#x", err, after.Lflag, before.Lflag)
	}
}

// failingWriter is an output nobody reads any more (a closed pipe).
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, syscall.EPIPE }

// TestAttachOutputUnwritable: output glove attach cannot write ends it
// with exit 1 and one line saying so, not a loop that drops the
// session's output silently.
func TestAttachOutputUnwritable(t *testing.T) {
	s := &attachServer{}
	sock := s.start(t, "")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close() // input stays open: only the output failure may end it
	var errs bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- attachCommand([]string{"--socket", sock, "s1"}, r, failingWriter{}, &errs) }()
	select {
	case code := <-done:
		if code != ExitFail || !strings.Contains(errs.String(), "glove: attach: write output: broken pipe") {
			t.Fatalf("exit %d stderr %q, want %d and the write's failure", code, errs.String(), ExitFail)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("glove attach still running after its output failed")
	}
}
