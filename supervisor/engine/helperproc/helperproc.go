// SPDX-License-Identifier: Apache-2.0

// Package helperproc starts a Glove helper the way every caller must:
// one end of a SOCK_SEQPACKET socketpair at descriptor 3, an empty
// environment, argv holding only the helper's name, every other
// descriptor closed (Go's os/exec passes only stdio and ExtraFiles, and
// the project's own descriptors are close-on-exec).
package helperproc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/captable/captext"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/wirecall"
	"golang.org/x/sys/unix"
)

// Options says which helper to start and how.
type Options struct {
	// Path is the installed executable.
	Path string
	// Name is its wire name; it becomes argv[0] and argv has nothing else.
	Name string
	// Stderr receives the helper's JSON log; nil discards it.
	Stderr io.Writer
	// Credential, when set, runs the helper as another user. Only a root
	// caller (the test environment) uses it; gloved runs as the service
	// user and starts helpers as itself.
	Credential *syscall.Credential
}

// Proc is a running helper and the client end of its connection.
type Proc struct {
	// Name is the helper's wire name (Options.Name): errors and the
	// session's outcome name a lost helper by it.
	Name   string
	Cmd    *exec.Cmd
	Client *wirecall.Client
	conn   *wire.Conn

	// end reaps the helper once: a session retires a helper whose work
	// is done while its owner still closes it at the session's end.
	end    sync.Once
	endErr error
}

// Start starts the helper.
func Start(opts Options) (*Proc, error) {
	if opts.Path == "" || opts.Name == "" {
		return nil, errors.New("start helper: path and name are required")
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("start helper %s: socketpair: %w", opts.Name, err)
	}
	ours := os.NewFile(uintptr(fds[0]), "helper-control")
	theirs := os.NewFile(uintptr(fds[1]), "helper-control-peer")
	defer theirs.Close()

	cmd := &exec.Cmd{
		Path:       opts.Path,
		Args:       []string{opts.Name},
		Env:        []string{},
		Stderr:     opts.Stderr,
		ExtraFiles: []*os.File{theirs}, // descriptor 3
		// No parent-death signal: exec of a binary with file
		// capabilities clears it. A helper outlives a dead supervisor
		// only until it reads EOF on its socket, and then exits 0.
		SysProcAttr: &syscall.SysProcAttr{Credential: opts.Credential},
	}
	if err := cmd.Start(); err != nil {
		ours.Close()
		return nil, fmt.Errorf("start helper %s: %w", opts.Name, err)
	}
	conn, err := wire.FromFile(ours)
	if err != nil {
		// The helper never got a usable socket: end it. Its exit status
		// (killed) says nothing more; a failed kill is reported.
		if kerr := cmd.Process.Kill(); kerr != nil && !errors.Is(kerr, os.ErrProcessDone) {
			err = errors.Join(err, fmt.Errorf("kill: %w", kerr))
		}
		// Harmless: Wait only reaps the helper killed just above; its
		// status can only be "killed", and a failed kill is in err.
		_ = cmd.Wait() // reaps the helper just killed: its status is "killed", a failed kill is in err
		return nil, fmt.Errorf("start helper %s: %w", opts.Name, err)
	}
	return &Proc{Name: opts.Name, Cmd: cmd, Client: &wirecall.Client{Conn: conn}, conn: conn}, nil
}

// Pid is the helper's process id.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Conn is the raw connection, for tests that forge frames.
func (p *Proc) Conn() *wire.Conn { return p.conn }

// StartReady starts the helper and checks its Hello: the name it gives
// is its own, and it holds exactly its capability table row, permitted,
// and between requests the row's effective set. A helper installed
// without its file capabilities, or with more, is refused (and reaped)
// before any session uses it. gloved and glove run start helpers only
// this way.
func StartReady(opts Options) (*Proc, error) {
	p, err := Start(opts)
	if err != nil {
		return nil, err
	}
	r, err := p.Hello()
	if err == nil {
		err = checkHello(opts.Name, r)
	}
	if err != nil {
		// Refused already; Close reaps the helper (its exit status adds
		// nothing the refusal does not say).
		if cerr := p.Close(); cerr != nil && !errors.As(cerr, new(*exec.ExitError)) {
			err = errors.Join(err, cerr)
		}
		return nil, fmt.Errorf("start helper %s: %w", opts.Name, err)
	}
	return p, nil
}

// checkHello compares a helper's Hello with its capability table row.
func checkHello(name string, r *wire.HelloReply) error {
	row, ok := captable.Lookup(name)
	switch {
	case !ok || !row.Helper || row.StartedBy != "":
		return fmt.Errorf("no helper row in the capability table")
	case r.Name != name:
		return fmt.Errorf("answers Hello as %q", r.Name)
	case r.CapPermitted != row.Mask() || r.CapEffective != row.Effective():
		return fmt.Errorf("holds capabilities effective %s, permitted %s; its row is %s, %s (reinstall it: make install)",
			captext.MaskString(r.CapEffective), captext.MaskString(r.CapPermitted),
			captext.MaskString(row.Effective()), captext.MaskString(row.Mask()))
	}
	return nil
}

// Hello asks the helper who it is.
func (p *Proc) Hello() (*wire.HelloReply, error) {
	r, _, err := wirecall.Call(wire.HelloRoute, p.Client, &wire.Hello{}, nil)
	if err != nil {
		return nil, fmt.Errorf("hello: %w", err)
	}
	return r, nil
}

// Close closes the connection, which makes the helper exit, and waits for
// it. The returned error is the helper's exit status (nil for 0).
// A second call (or one concurrent with the first) returns the first's
// result once the helper is reaped.
func (p *Proc) Close() error {
	p.end.Do(func() {
		p.conn.Close()
		p.endErr = p.Cmd.Wait()
	})
	return p.endErr
}

// Wait waits for the helper without closing the connection first, then
// closes it; for tests that expect the helper to exit on its own. Like
// Close, it reaps once.
func (p *Proc) Wait() error {
	p.end.Do(func() {
		p.endErr = p.Cmd.Wait()
		p.conn.Close()
	})
	return p.endErr
}
