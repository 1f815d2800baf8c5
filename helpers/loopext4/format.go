// SPDX-License-Identifier: Apache-2.0

package loopext4

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/formatwire"
	"github.com/glove-sandbox/glove/helpers/wire/wirecall"
	"github.com/glove-sandbox/glove/trustpath"
	"golang.org/x/sys/unix"
)

// formatter is the helper's side of its formatter, glove-loopext4-format
// (package loopext4format), which does Create's file work, mkfs.ext4
// included, without capabilities and outside the helper's allowlist:
// the process and its client.
type formatter struct {
	cmd    *exec.Cmd
	client *wirecall.Client
}

// startFormatter starts the formatter before the helper restricts itself
// (the only time a process without the helper's filter can still be
// made), from the file next to the helper's own executable, checked
// root-owned all the way up and executed from that descriptor, never by
// path.
func startFormatter() (*formatter, error) {
	name := formatwire.Protocol.Name
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("start the formatter: find the helper's executable: %w", err)
	}
	exe, _, err := findTrusted(name, []string{filepath.Join(filepath.Dir(self), name)})
	if err != nil {
		return nil, fmt.Errorf("start the formatter: %w", err)
	}
	defer exe.Close()
	fds, err := seqpacketPair()
	if err != nil {
		return nil, fmt.Errorf("start the formatter: socketpair: %w", err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "formatter"), os.NewFile(uintptr(fds[1]), "formatter-peer")
	defer theirs.Close()
	// The socket at descriptor 3, the executable at 4 (the formatter
	// closes it first thing); its log lines join the helper's.
	cmd := &exec.Cmd{Path: "/proc/self/fd/4", Args: []string{name}, Env: []string{}, Dir: "/",
		Stderr: os.Stderr, ExtraFiles: []*os.File{theirs, exe}}
	if err := cmd.Start(); err != nil {
		ours.Close()
		return nil, fmt.Errorf("start the formatter: %w", err)
	}
	conn, err := wire.FromFile(ours)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start the formatter: %w", err), cmd.Process.Kill())
	}
	return &formatter{cmd: cmd, client: &wirecall.Client{Conn: conn}}, nil
}

// stop ends the formatter (it exits on EOF) and reaps it, so it is
// never left for init to reap (threat: a process of the service user
// outliving the helper it belongs to).
func (f *formatter) stop() error {
	cerr := f.client.Conn.Close()
	if err := f.cmd.Wait(); err != nil {
		return errors.Join(cerr, fmt.Errorf("the formatter: %w", err))
	}
	return cerr
}

// create has the formatter make image name of exactly size bytes in the
// materialization root (root), allocated and formatted by mkfs.ext4
// (exe) with its root directory uid:gid's, and returns the new image.
// The formatter's refusal (the name exists) comes back as the *wire.Error
// it is, code ErrRefused; anything else it says is an error that wraps
// no *wire.Error, so no code of the formatter's reaches the supervisor
// unchecked. The formatter bounds the run by formatwire.Timeout; the
// helper waits a little longer.
func (f *formatter) create(root, exe *os.File, name string, size uint64, uid, gid uint32) (*os.File, error) {
	if err := f.client.Conn.SetDeadline(time.Now().Add(formatwire.Timeout + 30*time.Second)); err != nil {
		return nil, fmt.Errorf("the formatter: %w", err)
	}
	req := &formatwire.FormatRequest{Name: name, SizeBytes: size, UID: uid, GID: gid}
	_, fds, err := wirecall.Call(formatwire.Format, f.client, req, []int{int(root.Fd()), int(exe.Fd())})
	var e *wire.Error
	switch {
	case errors.As(err, &e) && e.Code == wire.ErrRefused:
		return nil, &wire.Error{Code: wire.ErrRefused, Message: e.Message}
	case e != nil:
		return nil, errors.New(e.Message)
	case err != nil:
		return nil, fmt.Errorf("the formatter: %v", err)
	}
	return fds[0], nil
}

// mkfsCandidates are where mkfs.ext4 is looked for, in order. The path is
// fixed here, never taken from the configuration, argv, the environment
// or a request: the helper has it executed, and who chooses the program
// chooses what runs with the service user's authority over every image.
var mkfsCandidates = []string{"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"}

// errUntrusted marks an executable or a directory above it that someone
// other than its owner could have written.
var errUntrusted = trustpath.ErrUntrusted

// findMkfs opens the first of mkfsCandidates that exists.
func findMkfs() (*os.File, string, error) { return findTrusted("mkfs.ext4", mkfsCandidates) }

// findTrusted opens the first of candidates that exists, checked by
// openTrustedExecutable from the real root directory with owner root. A
// candidate that exists but fails the check is an error, not a reason to
// try the next one: the operator must hear that the host is wrong.
func findTrusted(what string, candidates []string) (*os.File, string, error) {
	root, err := os.Open("/")
	if err != nil {
		return nil, "", fmt.Errorf("find %s: open /: %w", what, err)
	}
	defer root.Close()
	for _, p := range candidates {
		f, resolved, err := openTrustedExecutable(root, p, 0)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("find %s: %w", what, err)
		}
		return f, resolved, nil
	}
	return nil, "", fmt.Errorf("find %s: none of %s exists: %w", what, strings.Join(candidates, ", "), unix.ENOENT)
}

// openTrustedExecutable resolves the absolute path p beneath root (a
// directory descriptor standing for "/"), following symbolic links
// itself (trustpath.Walk: every directory walked, every link followed
// and the file owned by owner, none but the links group- or
// other-writable), and returns an O_PATH descriptor of the executable
// regular file it names, with the resolved path.
//
// Threat: this file is executed with the service user's authority over
// every image, and a binary or any directory above it that the service
// user (or anyone but root) could write would let them choose the
// program. The returned descriptor is what is executed, never the path
// again, so swapping the file after the check substitutes nothing.
func openTrustedExecutable(root *os.File, p string, owner uint32) (*os.File, string, error) {
	f, name, st, err := trustpath.Walk(root, p, owner, true)
	if err != nil {
		return nil, "", err
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		f.Close()
		return nil, "", fmt.Errorf("resolve %s: %s is not a regular file: %w", p, name, errUntrusted)
	case st.Mode&0o111 == 0:
		f.Close()
		return nil, "", fmt.Errorf("resolve %s: %s is not executable: %w", p, name, unix.EACCES)
	}
	return f, name, nil
}
