// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

// startRaw runs a helper binary with exactly the given argv, environment
// and credentials and a socketpair at descriptor 3 whose other end is
// closed at once, so a helper that wrongly started would exit 0 on EOF
// rather than hang. It returns the exit status and the helper's log.
func startRaw(t *testing.T, path string, args, env []string, cred *syscall.Credential) (int, string) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours := os.NewFile(uintptr(fds[0]), "ours")
	theirs := os.NewFile(uintptr(fds[1]), "theirs")
	if env == nil {
		env = []string{}
	}
	log := &testenv.SyncBuffer{}
	cmd := &exec.Cmd{
		Path: path, Args: args, Env: env, Stderr: log,
		ExtraFiles:  []*os.File{theirs},
		SysProcAttr: &syscall.SysProcAttr{Credential: cred},
	}
	err = cmd.Start()
	theirs.Close()
	ours.Close()
	if err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s still running after 10s", path)
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return -int(ws.Signal()), log.String()
	}
	return ws.ExitStatus(), log.String()
}
