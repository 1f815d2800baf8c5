// SPDX-License-Identifier: Apache-2.0

package session_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

// TestGloveRunTerminal runs glove run on a terminal: the program gets its
// own pseudo-terminal (a controlling terminal, the caller's window size),
// the workspace copy shows its progress on the terminal, and the caller's
// terminal settings are restored afterwards. A program that changes its
// terminal (echo off, raw: what a broken or hostile harness leaves behind)
// changes its own pseudo-terminal only: the caller's keeps its termios and
// its line discipline (issue 17, item 4).
func TestGloveRunTerminal(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	ws := workspace(t, e, map[string]string{"big": strings.Repeat("x", 4<<20)})
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	master := os.NewFile(uintptr(m), "ptmx")
	defer master.Close()
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(m, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 31, Col: 101}); err != nil {
		t.Fatal(err)
	}
	before, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	attr := e.InDelegatedCgroup(t)
	attr.Setsid, attr.Setctty, attr.Ctty = true, true, 0
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.HelperPath("glove"), "run", "--", "sh", "-c", "test -t 0 && echo IS-A-TTY; stty size; stat -L -c 'FD0 %d %t:%T' /proc/self/fd/0; stty -echo -icanon raw; exit 4")
	cmd.Dir = ws
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TERM=vt100"}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := make(chan string, 1)
	go func() { b, _ := io.ReadAll(master); out <- string(b) }()
	err = cmd.Wait()
	after, terr := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	ldisc, lerr := unix.IoctlGetInt(int(slave.Fd()), unix.TIOCGETD)
	slave.Close()
	got := <-out
	if cmd.ProcessState.ExitCode() != 4 {
		t.Fatalf("exit %v, want 4; terminal: %q", err, got)
	}
	if !strings.Contains(got, "copying to /workspace [") {
		t.Errorf("terminal output %q: no progress bar for the workspace copy", got)
	}
	// The bar's line is erased before the program's first output, which
	// was appended to "100% 4.0 MiB / 4.0 MiB"; and no NUL reaches the
	// terminal (issue 32).
	if i := strings.Index(got, "IS-A-TTY"); i < 0 || !strings.HasSuffix(got[:i], "\r\x1b[K") {
		t.Errorf("terminal output %q: the program's output does not start on an erased line", got)
	}
	if strings.ContainsRune(got, 0) {
		t.Errorf("terminal output %q holds a NUL", got)
	}
	if !strings.Contains(got, "IS-A-TTY") || !strings.Contains(got, "31 101") {
		t.Errorf("terminal output %q: want a tty of 31 rows and 101 columns", got)
	}
	if terr != nil || after.Lflag != before.Lflag || after.Iflag != before.Iflag || after.Oflag != before.Oflag || after.Lflag&unix.ECHO == 0 {
		t.Errorf("the caller's terminal settings were not restored (%v): lflag %#x, was %#x", terr, after.Lflag, before.Lflag)
	}
	// The program's descriptor 0 is not the caller's terminal: another
	// terminal device (file system and device number) altogether.
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/dev/pts/%d", n), &st); err != nil {
		t.Fatal(err)
	}
	outer := fmt.Sprintf("FD0 %d %x:%x", st.Dev, unix.Major(st.Rdev), unix.Minor(st.Rdev))
	if i := strings.Index(got, "FD0 "); i >= 0 {
		t.Logf("the program's descriptor 0: %q; the caller's terminal: %s", strings.TrimSpace(got[i:min(len(got), i+20)]), outer)
	}
	if !strings.Contains(got, "FD0 ") || strings.Contains(got, outer) {
		t.Errorf("the program's descriptor 0 (%q) is the caller's terminal (%s)", got, outer)
	}
	if lerr != nil || ldisc != 0 {
		t.Errorf("the caller's terminal's line discipline is %d (%v), want N_TTY (0)", ldisc, lerr)
	}
}

// onPTY runs glove run with args on a new pty of the given size, as the
// operator's terminal, with env, and returns what the terminal showed
// and the exit status.
func onPTY(t *testing.T, e *testenv.Env, ws string, size unix.Winsize, env []string, args ...string) (string, int) {
	t.Helper()
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
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
	if err := unix.IoctlSetWinsize(int(slave.Fd()), unix.TIOCSWINSZ, &size); err != nil {
		t.Fatal(err)
	}
	attr := e.InDelegatedCgroup(t)
	attr.Setsid, attr.Setctty, attr.Ctty = true, true, 0
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.HelperPath("glove"), append([]string{"run", "--"}, args...)...)
	cmd.Dir = ws
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := make(chan string, 1)
	go func() { b, _ := io.ReadAll(master); out <- string(b) }()
	_ = cmd.Wait()
	slave.Close()
	got := <-out
	if ctx.Err() != nil {
		t.Fatalf("glove run still running after 60 s: %q", got)
	}
	return got, cmd.ProcessState.ExitCode()
}

// TestGloveRunTerminalDevices: on a terminal, the program's standard
// descriptors can be re-opened by name for writing (/dev/stderr,
// /dev/stdout, /proc/self/fd/2: glove-shim's Landlock rule for the
// session's pty), /dev/tty is its terminal, tput sees the operator's
// size and TERM, and nothing can be created in /dev (read-only). Issue
// 32, "A real terminal". Each line fails without its part: without the
// rule the three re-opens fail with "Permission denied"; without the
// /dev/tty bind the write makes a file in /dev (or, with /dev
// read-only, fails); with a writable /dev the new file is made.
func TestGloveRunTerminalDevices(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	ws := workspace(t, e, nil)
	const script = `echo "TERM=$TERM"; echo "cols=$(tput cols) lines=$(tput lines)"
echo via-stderr > /dev/stderr && echo ok-stderr
echo via-stdout > /dev/stdout && echo ok-stdout
echo via-fd2 > /proc/self/fd/2 && echo ok-fd2
echo via-tty > /dev/tty && echo ok-tty
test -c /dev/tty && echo tty-is-a-device
echo x > /dev/newfile && echo CREATED-FILE
mkdir /dev/newdir && echo CREATED-DIR
echo x > /dev/null && echo ok-null
ls -A /dev | tr '\n' ' '; echo`
	got, code := onPTY(t, e, ws, unix.Winsize{Row: 33, Col: 97}, []string{"PATH=/usr/bin:/bin", "TERM=xterm-color"}, "sh", "-c", script)
	if code != 0 {
		t.Fatalf("exit %d; terminal: %q", code, got)
	}
	for _, want := range []string{"TERM=xterm-color", "cols=97 lines=33", "via-stderr", "ok-stderr", "via-stdout", "ok-stdout",
		"via-fd2", "ok-fd2", "via-tty", "ok-tty", "tty-is-a-device", "ok-null", "Read-only file system"} {
		if !strings.Contains(got, want) {
			t.Errorf("terminal output lacks %q:\n%s", want, got)
		}
	}
	for _, bad := range []string{"CREATED-FILE", "CREATED-DIR", "Permission denied", "newfile ", "newdir "} {
		if strings.Contains(got, bad) {
			t.Errorf("terminal output has %q:\n%s", bad, got)
		}
	}
	// An operator's TERM that is no terminal type name is not passed in:
	// the program gets the default.
	got, code = onPTY(t, e, ws, unix.Winsize{Row: 24, Col: 80}, []string{"PATH=/usr/bin:/bin", "TERM=../../etc/x"}, "sh", "-c", `echo "TERM=$TERM"`)
	if code != 0 || !strings.Contains(got, "TERM=xterm-256color") {
		t.Errorf("with an insane TERM: exit %d, %q; want TERM=xterm-256color", code, got)
	}
}

// TestGloveRunNoTerminalTTY: a session without a terminal has no
// controlling terminal, and /dev/tty behaves as on a host without one:
// opening it fails with ENXIO ("No such device or address"), and no file
// is created in its place (before issue 32 it was missing from a
// writable /dev, and "echo > /dev/tty" made a regular file). Writing
// /dev/stderr still works (a pipe).
func TestGloveRunNoTerminalTTY(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	ws := workspace(t, e, nil)
	out, errb, code := gloveRun(t, e, ws, "", "--", "sh", "-c",
		`echo x > /dev/tty; echo "tty-status=$?"; stat -c 'tty-type=%F' /dev/tty; echo e > /dev/stderr && echo ok-stderr; echo "TERM=${TERM-unset}"`)
	all := out + errb
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errb)
	}
	for _, want := range []string{"No such device or address", "tty-status=2", "tty-type=character special file", "ok-stderr"} {
		if !strings.Contains(all, want) {
			t.Errorf("output lacks %q:\n%s", want, all)
		}
	}
}
