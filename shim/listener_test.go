// SPDX-License-Identifier: Apache-2.0

package shim_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/seccomp"
	"github.com/glove-sandbox/glove/seccomp/notify"
	"github.com/glove-sandbox/glove/testenv"
	"github.com/glove-sandbox/glove/testenv/programs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// listenerBundle is a bundle running the harness (testenv/programs) at
// /h/harness under the default profile with LocalServiceConnect, whose
// listener goes to descriptor 3.
func listenerBundle(t *testing.T, e *testenv.Env, script string) *testenv.Bundle {
	t.Helper()
	harness := testenv.BuildStatic(t, e, "harness", programs.Harness)
	b := e.NewBundle(t)
	if err := os.Mkdir(filepath.Join(b.Dir, "rootfs", "h"), 0o755); err != nil {
		t.Fatal(err)
	}
	b.Spec.Mounts = append(b.Spec.Mounts, specs.Mount{Destination: "/h", Type: "bind", Source: filepath.Dir(harness),
		Options: []string{"bind", "ro", "nosuid", "nodev"}})
	prof := seccomp.DefaultProfile(seccomp.ProfileOptions{LocalServiceConnect: true})
	prof.ListenerPath = "/proc/self/fd/3"
	b.Spec.Linux.Seccomp = prof
	b.Spec.Process.Args = []string{"/bin/sh", "-c", script}
	b.Write(t)
	return b
}

// receiveListener reads the one byte and the listener stage 2 sends on
// sock; ok is false at end of file (no filter, so no listener).
func receiveListener(sock int) (listener int, ok bool, err error) {
	b, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	var n, oobn int
	for {
		n, oobn, _, _, err = unix.Recvmsg(sock, b, oob, unix.MSG_CMSG_CLOEXEC)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return -1, false, fmt.Errorf("recvmsg: %w", err)
	}
	if n == 0 && oobn == 0 {
		return -1, false, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return -1, false, fmt.Errorf("%d bytes with control messages %v: %v", n, msgs, err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 || n != 1 {
		return -1, false, fmt.Errorf("%d bytes with rights %v: %v", n, fds, err)
	}
	return fds[0], true, nil
}

// connectPath reads the AF_UNIX path a notified connect names, from the
// caller's memory (as gloved's handler will), then checks the
// notification is still the caller's: a pid reused after a death would
// otherwise have been read.
func connectPath(listener int, n notify.Notif) (string, error) {
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", n.Pid))
	if err != nil {
		return "", err
	}
	defer mem.Close()
	size := min(n.Args[2], 110)
	buf := make([]byte, size)
	if _, err := mem.ReadAt(buf, int64(n.Args[1])); err != nil {
		return "", fmt.Errorf("read the address: %w", err)
	}
	if err := notify.IDValid(listener, n.ID); err != nil {
		return "", err
	}
	if len(buf) < 3 || binary.NativeEndian.Uint16(buf) != unix.AF_UNIX {
		return "", fmt.Errorf("not an AF_UNIX address: %x", buf)
	}
	path, _, _ := strings.Cut(string(buf[2:]), "\x00")
	return path, nil
}

// serveConnects is the test's stand-in for gloved's handler: it takes
// the listener from sock, refuses a connect to /refused with
// ECONNREFUSED, answers one to /alias with a socket of its own installed
// at the caller's descriptor, replies "pong" to the frame that comes
// through it, and returns the paths it saw after want connects.
func serveConnects(sock int, want int) ([]string, error) {
	listener, ok, err := receiveListener(sock)
	if err != nil {
		return nil, fmt.Errorf("receive the listener: %w", err)
	}
	if !ok {
		return nil, errors.New("end of file on the listener's socket: stage 2 sent no listener")
	}
	defer unix.Close(listener)
	var paths []string
	for len(paths) < want {
		n, err := notify.Recv(listener)
		if err != nil {
			return paths, err
		}
		if n.Nr != unix.SYS_CONNECT {
			return paths, fmt.Errorf("notified of system call %d, not connect", n.Nr)
		}
		path, err := connectPath(listener, n)
		if err != nil {
			return paths, err
		}
		paths = append(paths, path)
		if path != "/alias" {
			if err := notify.RespondError(listener, n.ID, unix.ECONNREFUSED); err != nil {
				return paths, err
			}
			continue
		}
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return paths, err
		}
		_, err = notify.InstallAt(listener, n.ID, pair[0], int(n.Args[0]), false)
		if cerr := unix.Close(pair[0]); err == nil {
			err = cerr
		}
		if err == nil {
			err = notify.RespondValue(listener, n.ID, 0)
		}
		if err == nil {
			err = pong(os.NewFile(uintptr(pair[1]), "alias"))
		} else if cerr := unix.Close(pair[1]); cerr != nil {
			return paths, cerr
		}
		if err != nil {
			return paths, err
		}
	}
	return paths, nil
}

// pong reads one frame (testenv/programs: exchange) and replies "pong".
func pong(f *os.File) error {
	defer f.Close()
	var hdr [4]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return err
	}
	if _, err := io.ReadFull(f, make([]byte, binary.BigEndian.Uint32(hdr[:]))); err != nil {
		return err
	}
	_, err := f.Write(append(binary.BigEndian.AppendUint32(nil, 4), "pong"...))
	return err
}

// TestShimSeccompListener: with listenerPath /proc/self/fd/3, the
// program's connect is the listener holder's to answer, judged from
// outside: a connect refused by the holder fails with ECONNREFUSED, one
// answered with an installed socket reaches the holder, and descriptor
// 3, the listener's way out, is not the program's.
func TestShimSeccompListener(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	b := listenerBundle(t, e, `/h/harness connect /refused; /h/harness connect /alias; if [ -e /proc/self/fd/3 ]; then echo fd3-open; else echo fd3-closed; fi`)
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	mine, theirs := os.NewFile(uintptr(pair[0]), "handler"), os.NewFile(uintptr(pair[1]), "listener socket")
	defer mine.Close()
	defer theirs.Close()
	type served struct {
		paths []string
		err   error
	}
	done := make(chan served, 1)
	go func() {
		paths, err := serveConnects(pair[0], 2)
		done <- served{paths, err}
	}()
	r := runShim(t, e, testenv.ShimRun{Shim: e.HelperPath("glove-shim"), Args: []string{"run", "--bundle", b.Dir, "--preserve-fds", "1", "t"},
		ExtraFiles: []*os.File{theirs}, Timeout: 20 * time.Second})
	want := "ran\nsocket <nil>\nconnect connection refused\nran\nsocket <nil>\nconnect <nil>\nreply pong <nil>\nfd3-closed\n"
	if r.Code != 0 || r.Stdout != want {
		t.Errorf("exit %d\nstdout %q\nwant   %q\nstderr %q", r.Code, r.Stdout, want, r.Stderr)
	}
	select {
	case s := <-done:
		if s.err != nil || strings.Join(s.paths, " ") != "/refused /alias" {
			t.Errorf("handler: paths %q, %v", s.paths, s.err)
		}
	case <-time.After(5 * time.Second):
		t.Error("handler still waiting after the shim ended")
	}
}

// TestShimSeccompListenerLayerOff: with the seccomp layer off (test
// build) there is no filter and no listener: nothing is sent, and the
// holder reads end of file on its end while the program still runs, so
// no copy of descriptor 3 is left in the waiter, stage 1 or the program.
func TestShimSeccompListenerLayerOff(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	b := listenerBundle(t, e, `echo up > /workspace/up; sleep 3; echo done > /workspace/done`)
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	mine, theirs := os.NewFile(uintptr(pair[0]), "handler"), os.NewFile(uintptr(pair[1]), "listener socket")
	defer mine.Close()
	eof := eofWhileRunning(b, pair[0], theirs, func(fd int) error {
		_, ok, err := receiveListener(fd)
		if err == nil && ok {
			err = errors.New("a listener was sent with the seccomp layer off")
		}
		return err
	})
	r := runShim(t, e, testenv.ShimRun{Shim: e.LayersShim(t), Env: []string{"GLOVE_SHIM_TEST_LAYERS_OFF=" + "seccomp"},
		Args: []string{"run", "--bundle", b.Dir, "--preserve-fds", "1", "t"}, ExtraFiles: []*os.File{theirs}, Timeout: 20 * time.Second})
	if r.Code != 0 {
		t.Errorf("exit %d stderr %q", r.Code, r.Stderr)
	}
	select {
	case err := <-eof:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(10 * time.Second):
		t.Error("no answer on the listener's socket 10 s after the shim ended")
	}
}

// TestShimSeccompListenerRefusesNonSocket: a listenerPath naming anything
// but a connected AF_UNIX stream socket is refused with one line before
// anything runs.
func TestShimSeccompListenerRefusesNonSocket(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	b := listenerBundle(t, e, `echo ran > /workspace/ran`)
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	defer wr.Close()
	unconnected, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	uf := os.NewFile(uintptr(unconnected), "unconnected")
	defer uf.Close()
	dgram, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	df, df2 := os.NewFile(uintptr(dgram[0]), "dgram"), os.NewFile(uintptr(dgram[1]), "dgram peer")
	defer df.Close()
	defer df2.Close()
	for _, c := range []struct {
		name string
		f    *os.File
		want string
	}{
		{"pipe", wr, "is not a socket"},
		{"unconnected", uf, "not connected"},
		{"datagram", df, "type 2"},
	} {
		r := runShim(t, e, testenv.ShimRun{Shim: e.HelperPath("glove-shim"), Args: []string{"run", "--bundle", b.Dir, "--preserve-fds", "1", "t"},
			ExtraFiles: []*os.File{c.f}})
		if r.Code != 125 || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 ||
			!strings.Contains(r.Stderr, "linux.seccomp.listenerPath: descriptor 3:") || !strings.Contains(r.Stderr, c.want) {
			t.Errorf("%s: exit %d stderr %q, want 125 and one line naming descriptor 3 and %q", c.name, r.Code, r.Stderr, c.want)
		}
		if _, err := os.Stat(filepath.Join(b.Workspace, "ran")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: the program ran (%v)", c.name, err)
		}
	}
}
