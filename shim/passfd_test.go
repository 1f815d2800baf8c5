// SPDX-License-Identifier: Apache-2.0

package shim_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

// TestShimPassedDescriptorOneHolder: a descriptor passed to the program
// (the inherited stream's guest end, say) has the program as its only
// holder: once the program closes it, the peer reads end of file while
// the program still runs. A copy kept by the waiter or by PID 1 would
// hold the stream open until the session's end, so that a program could
// never end its side of the stream (threat: a relay waiting on a stream
// its guest has given up, and a host-side process holding a
// descriptor meant for the sandbox).
func TestShimPassedDescriptorOneHolder(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	b := e.NewBundle(t)
	b.Spec.Process.Args = []string{"/bin/sh", "-c", `exec 3>&-; echo up > /workspace/up; sleep 3; echo done > /workspace/done`}
	b.Write(t)
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	mine, theirs := os.NewFile(uintptr(pair[0]), "peer"), os.NewFile(uintptr(pair[1]), "passed")
	defer mine.Close()
	eof := eofWhileRunning(b, pair[0], theirs, func(fd int) error {
		var buf [1]byte
		n, err := unix.Read(fd, buf[:])
		for errors.Is(err, unix.EINTR) {
			n, err = unix.Read(fd, buf[:])
		}
		if err == nil && n != 0 {
			err = fmt.Errorf("read %d bytes, want end of file", n)
		}
		return err
	})
	r := runShim(t, e, testenv.ShimRun{Shim: e.HelperPath("glove-shim"), Args: []string{"run", "--bundle", b.Dir, "--preserve-fds", "1", "t"},
		ExtraFiles: []*os.File{theirs}, Timeout: 20 * time.Second})
	if r.Code != 0 {
		t.Errorf("exit %d stderr %q", r.Code, r.Stderr)
	}
	select {
	case err := <-eof:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(10 * time.Second):
		t.Error("no answer on the peer 10 s after the shim ended")
	}
}

// eofWhileRunning waits until the program of b has written
// /workspace/up, closes the test's copy of the descriptor handed to the
// shim (theirs), and reads its peer fd with readEOF (which returns nil
// at end of file). The channel says whether end of file came while the
// program still ran (before /workspace/done): after it, a copy held by
// the shim would have hidden it.
func eofWhileRunning(b *testenv.Bundle, fd int, theirs *os.File, readEOF func(fd int) error) <-chan error {
	eof := make(chan error, 1)
	go func() {
		deadline := time.Now().Add(15 * time.Second)
		for {
			if _, err := os.Stat(filepath.Join(b.Workspace, "up")); err == nil {
				break
			}
			if time.Now().After(deadline) {
				eof <- errors.New("the program never started")
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		// The shim has its copy: the test's goes, so that end of file
		// can only mean nothing of the shim holds one.
		if err := theirs.Close(); err != nil {
			eof <- err
			return
		}
		tv := unix.Timeval{Sec: 2}
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			eof <- err
			return
		}
		if err := readEOF(fd); err != nil {
			eof <- fmt.Errorf("no end of file while the program runs: %w", err)
			return
		}
		if _, err := os.Stat(filepath.Join(b.Workspace, "done")); err == nil {
			eof <- errors.New("end of file only once the program had ended")
			return
		}
		eof <- nil
	}()
	return eof
}
