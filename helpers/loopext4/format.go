package loopext4

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/formatwire"
)

// mkfs.ext4 runs in the helper's formatter, glove-loopext4-format (see
// package loopext4format): another executable, without capabilities,
// under its own allowlist, started before the helper restricts itself
// (the only time a process without the helper's filter can still be
// made) and handed the image and the checked mkfs.ext4 for each Create.

// formatter is the helper's side: the formatter process and its client.
type formatter struct {
	cmd    *exec.Cmd
	conn   *wire.Conn
	client *wire.Client
}

// startFormatter starts the formatter from the file next to the helper's
// own executable, checked root-owned all the way up (the helper's
// installed directory) and executed from that descriptor, never by path.
func startFormatter() (*formatter, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("start the formatter: find the helper's executable: %w", err)
	}
	name := formatwire.Protocol.Name
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
	// The control socket at 3, the executable at 4 (the formatter closes
	// it first thing).
	cmd := exec.Command("/proc/self/fd/4")
	cmd.Args = []string{name}
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.Stderr = os.Stderr // its log lines join the helper's
	cmd.ExtraFiles = []*os.File{theirs, exe}
	if err := cmd.Start(); err != nil {
		ours.Close()
		return nil, fmt.Errorf("start the formatter: %w", err)
	}
	conn, err := wire.FromFile(ours)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start the formatter: %w", err), cmd.Process.Kill())
	}
	return &formatter{cmd: cmd, conn: conn, client: &wire.Client{Conn: conn}}, nil
}

// stop ends the formatter (it exits on EOF) and reaps it, so it is
// never left for init to reap (threat: a process of the service user
// outliving the helper it belongs to).
func (f *formatter) stop() error {
	cerr := f.conn.Close()
	if err := f.cmd.Wait(); err != nil {
		return errors.Join(cerr, fmt.Errorf("the formatter: %w", err))
	}
	return cerr
}

// format has the formatter run mkfs.ext4 on img. The formatter bounds
// the run by formatwire.Timeout; the helper waits a little longer.
func (f *formatter) format(exe, img *os.File, uid, gid uint32) error {
	if err := f.conn.SetDeadline(time.Now().Add(formatwire.Timeout + 30*time.Second)); err != nil {
		return fmt.Errorf("run mkfs.ext4: %w", err)
	}
	rep, _, err := formatwire.Format.Call(f.client, &formatwire.FormatRequest{UID: uid, GID: gid}, []int{int(img.Fd()), int(exe.Fd())})
	if err != nil {
		return fmt.Errorf("run mkfs.ext4: the formatter: %w", err)
	}
	if rep.Failed {
		return fmt.Errorf("run mkfs.ext4: %s", rep.Err)
	}
	return nil
}
