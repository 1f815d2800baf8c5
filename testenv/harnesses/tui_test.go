// SPDX-License-Identifier: Apache-2.0

package harnesses

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/glove-sandbox/glove/testenv/modelserver"
)

// openPty returns a new pty's master and its terminal, sized rows×cols.
func openPty(t *testing.T, rows, cols uint16) (*os.File, *os.File) {
	t.Helper()
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	master := os.NewFile(uintptr(m), "ptmx")
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(m, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	tty, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty terminal: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
		t.Fatalf("size pty: %v", err)
	}
	return master, tty
}

// screen collects what the program writes to the pty, and answers the
// cursor-position query a terminal would (codex works without the
// answer too; a real terminal gives it).
type screen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *screen) pump(master *os.File) {
	b := make([]byte, 64<<10)
	for {
		n, err := master.Read(b)
		if n > 0 {
			s.mu.Lock()
			s.buf.Write(b[:n])
			s.mu.Unlock()
			if bytes.Contains(b[:n], []byte("\x1b[6n")) {
				_, _ = master.Write([]byte("\x1b[1;1R"))
			}
		}
		if err != nil {
			return
		}
	}
}

// waitFor waits until the output after offset from contains want.
func (s *screen) waitFor(from int, want string, d time.Duration) (int, bool) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		out := s.buf.Bytes()[from:]
		i := bytes.Index(out, []byte(want))
		n := s.buf.Len()
		s.mu.Unlock()
		if i >= 0 {
			return n, true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0, false
}

// TestCodexTUI runs codex's interactive TUI on a 24×80 pty with
// TERM=xterm-256color against the model server: it draws its prompt,
// takes a typed task, runs the scripted tool call and shows the answer,
// and leaves on two ^C. Its title request (a tool-less side call) stays
// out of the script.
func TestCodexTUI(t *testing.T) {
	bin := Ensure(t, Codex)
	dir := t.TempDir()
	home, work := filepath.Join(dir, "home"), filepath.Join(dir, "work")
	for _, d := range []string{filepath.Join(home, ".codex"), filepath.Join(home, "tmp"), work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	input := "glove-input-" + random(t)
	if err := os.WriteFile(filepath.Join(work, "input.txt"), []byte(input+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	key, final := "sk-glove-test-"+random(t), "GLOVE-FINAL-"+random(t)
	script := []modelserver.Turn{{Command: "cat input.txt > out.txt"}, {Text: final}}
	srv := modelserver.New(modelserver.Config{Key: key, Responses: script})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := srv.Serve(l)
	t.Cleanup(func() { hs.Close() })

	run := Run{Home: home, BaseURL: "http://" + l.Addr().String(), Key: key, Model: "glove-test-model"}
	// The TUI is codex without `exec` and without a prompt.
	args := Codex.TUIArgs(run)
	master, tty := openPty(t, 24, 80)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(Codex.Env(run), "TERM=xterm-256color")
	cmd.Dir = work
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	var scr screen
	go scr.pump(master)

	n, ok := scr.waitFor(0, "Ask Codex to do anything", 30*time.Second)
	if !ok {
		t.Fatalf("no prompt drawn:\n%q", scr.buf.String())
	}
	for _, c := range "Run the command." {
		if _, err := master.Write([]byte(string(c))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := master.Write([]byte("\r")); err != nil {
		t.Fatal(err)
	}
	if _, ok = scr.waitFor(n, final, 60*time.Second); !ok {
		t.Errorf("final answer not drawn:\n%q", scr.buf.String()[n:])
	}
	for range 2 {
		_, _ = master.Write([]byte{3})
		time.Sleep(500 * time.Millisecond)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("codex TUI after two ^C: %v", err)
	}

	if out, err := os.ReadFile(filepath.Join(work, "out.txt")); err != nil || string(out) != input+"\n" {
		t.Errorf("out.txt = %q, %v", out, err)
	}
	var kinds []string
	for _, r := range srv.Log() {
		kinds = append(kinds, fmt.Sprintf("%s/%d", r.Kind, r.Turn))
		if !r.KeyOK || r.KeyElsewhere || r.Status != 200 {
			t.Errorf("request %d: key ok %v elsewhere %v status %d", r.Seq, r.KeyOK, r.KeyElsewhere, r.Status)
		}
	}
	// The title request runs beside the first turn, so only the
	// scripted turns' order is fixed.
	got := strings.Join(kinds, " ")
	t.Logf("requests: %s", got)
	if strings.Count(got, "responses-side/-1") != 1 || !strings.Contains(strings.ReplaceAll(got, "responses-side/-1 ", ""), "responses/0 responses/1") {
		t.Errorf("requests %s, want responses/0 and responses/1 in order and one title side call", got)
	}
}
