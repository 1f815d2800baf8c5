// SPDX-License-Identifier: Apache-2.0

package guest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Evidence collects what one check did and saw; it becomes
// /lane/evidence/NAME.txt.
type Evidence struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// maxEvidence bounds one check's evidence.
const maxEvidence = 4 << 20

// Printf appends a line.
func (e *Evidence) Printf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.buf.Len() > maxEvidence {
		return
	}
	fmt.Fprintf(&e.buf, format, args...)
	if !strings.HasSuffix(format, "\n") {
		e.buf.WriteByte('\n')
	}
}

// Bytes is the evidence so far.
func (e *Evidence) Bytes() []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	return bytes.Clone(e.buf.Bytes())
}

// Result is a finished command.
type Result struct {
	Argv   []string
	Stdout string
	Stderr string
	Code   int // -1 when it did not exit normally
	Err    error
	Dur    time.Duration
}

// OK reports whether the command ran and exited 0.
func (r Result) OK() bool { return r.Err == nil && r.Code == 0 }

// Brief is a one-line summary: the exit and the end of stderr (or
// stdout).
func (r Result) Brief() string {
	what := fmt.Sprintf("exit %d", r.Code)
	if r.Err != nil {
		what = r.Err.Error()
	}
	tail := strings.TrimSpace(r.Stderr)
	if tail == "" {
		tail = strings.TrimSpace(r.Stdout)
	}
	if lines := strings.Split(tail, "\n"); len(lines) > 3 {
		tail = strings.Join(lines[len(lines)-3:], "\n")
	}
	if tail != "" {
		what += ": " + tail
	}
	return fmt.Sprintf("%s: %s", strings.Join(r.Argv, " "), OneLine(what, 400))
}

// RunOpts are how to run a command.
type RunOpts struct {
	Timeout time.Duration
	// As, when set, runs the command with these credentials.
	As *syscall.Credential
	// CgroupFD, when >= 0 and UseCgroup, places the command's process
	// in that cgroup v2 directory at clone.
	UseCgroup bool
	CgroupFD  int
	Dir       string
	Env       []string // default: a minimal PATH and LANG
	Stdin     []byte
	// Quiet keeps the output out of the evidence (it is still returned).
	Quiet bool
}

// DefaultEnv is a command's environment unless RunOpts.Env says
// otherwise.
var DefaultEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "HOME=/root",
	"SYSTEMD_PAGER=", "SYSTEMD_COLORS=0"}

// maxOutput bounds what is kept of a command's output.
const maxOutput = 1 << 20

type capBuffer struct {
	bytes.Buffer
}

func (b *capBuffer) Write(p []byte) (int, error) {
	if room := maxOutput - b.Len(); room > 0 {
		if len(p) > room {
			b.Buffer.Write(p[:room])
		} else {
			b.Buffer.Write(p)
		}
	}
	return len(p), nil
}

// Run runs argv, recording it in ev (if not nil).
func Run(ev *Evidence, o RunOpts, argv ...string) Result {
	if o.Timeout == 0 {
		o.Timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = o.Env
	if cmd.Env == nil {
		cmd.Env = DefaultEnv
	}
	cmd.Dir = o.Dir
	if o.Stdin != nil {
		cmd.Stdin = bytes.NewReader(o.Stdin)
	}
	var stdout, stderr capBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	attr := &syscall.SysProcAttr{Setpgid: true}
	if o.As != nil {
		attr.Credential = o.As
	}
	if o.UseCgroup {
		attr.UseCgroupFD, attr.CgroupFD = true, o.CgroupFD
	}
	cmd.SysProcAttr = attr
	// Kill the whole process group on timeout.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	start := time.Now()
	err := cmd.Run()
	r := Result{Argv: argv, Stdout: stdout.String(), Stderr: stderr.String(), Code: -1, Dur: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
		r.Code = 0
	case errors.As(err, &ee) && ee.Exited():
		r.Code = ee.ExitCode()
	default:
		r.Err = err
	}
	if ctx.Err() != nil {
		r.Err = fmt.Errorf("timed out after %v", o.Timeout)
	}
	if ev != nil {
		who := ""
		if o.As != nil {
			who = fmt.Sprintf(" (as uid %d gid %d)", o.As.Uid, o.As.Gid)
		}
		ev.Printf("$ %s%s", shellQuote(argv), who)
		if r.Err != nil {
			ev.Printf("  -> %v (%.1fs)", r.Err, r.Dur.Seconds())
		} else {
			ev.Printf("  -> exit %d (%.1fs)", r.Code, r.Dur.Seconds())
		}
		if !o.Quiet {
			if s := strings.TrimRight(r.Stdout, "\n"); s != "" {
				ev.Printf("  stdout:\n%s", indent(s))
			}
			if s := strings.TrimRight(r.Stderr, "\n"); s != "" {
				ev.Printf("  stderr:\n%s", indent(s))
			}
		}
	}
	return r
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

func shellQuote(argv []string) string {
	var out []string
	for _, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
		}) < 0 {
			out = append(out, a)
			continue
		}
		out = append(out, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	return strings.Join(out, " ")
}

// DialAs connects to the unix socket path as the given user: a child (the
// agent's own executable, subcommand "dial") connects with those
// credentials, so that gloved's SO_PEERCRED check sees that uid, and
// passes the connected descriptor back over a socketpair.
func DialAs(self string, cred *syscall.Credential, path string, timeout time.Duration) (net.Conn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	parent := os.NewFile(uintptr(fds[0]), "dial-parent")
	child := os.NewFile(uintptr(fds[1]), "dial-child")
	defer parent.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, "dial", "--socket", path)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.ExtraFiles = []*os.File{child}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if err := cmd.Start(); err != nil {
		child.Close()
		return nil, fmt.Errorf("start the dialer: %w", err)
	}
	child.Close()
	werr := cmd.Wait()
	if werr != nil {
		return nil, fmt.Errorf("dial %s as uid %d: %v: %s", path, cred.Uid, werr, strings.TrimSpace(stderr.String()))
	}
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(int(parent.Fd()), buf, oob, unix.MSG_DONTWAIT|unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("receive the connection: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("receive the connection: %d control messages (%v)", len(msgs), err)
	}
	got, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(got) != 1 {
		return nil, fmt.Errorf("receive the connection: %d descriptors (%v)", len(got), err)
	}
	f := os.NewFile(uintptr(got[0]), "gloved-conn")
	defer f.Close()
	return net.FileConn(f)
}

// DialChild is the "dial" subcommand: connect to path and send the
// connection over descriptor 3.
func DialChild(path string) error {
	conn, err := net.DialTimeout("unix", path, 10*time.Second)
	if err != nil {
		return err
	}
	f, err := conn.(*net.UnixConn).File()
	if err != nil {
		return err
	}
	return unix.Sendmsg(3, []byte{0}, unix.UnixRights(int(f.Fd())), nil, 0)
}
