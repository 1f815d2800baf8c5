// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/wire"
	"golang.org/x/sys/unix"
)

// rawEchoEnv, set in the environment of this test binary, makes it the
// raw echo: the anchor of the helper benchmarks. It answers each
// SOCK_SEQPACKET datagram on descriptor 3 with the same bytes and the one
// descriptor that came with it, by blocking recvmsg and sendmsg alone: no
// decoding, no check, no Go network poller. A helper round trip can come
// near this, never below it.
const rawEchoEnv = "GLOVE_TEST_RAW_ECHO"

// rawEchoChild serves until EOF and returns the exit status.
func rawEchoChild() int {
	buf, oob := make([]byte, wire.MaxMessage), make([]byte, unix.CmsgSpace(4))
	for {
		n, oobn, _, _, err := unix.Recvmsg(helperkit.ControlFD, buf, oob, unix.MSG_CMSG_CLOEXEC)
		if err != nil || n == 0 && oobn == 0 {
			return exitOf(err)
		}
		var fds []int
		if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil && len(msgs) == 1 {
			fds, _ = unix.ParseUnixRights(&msgs[0]) // none on error: the peer sees a reply without one
		}
		var rights []byte
		if len(fds) > 0 {
			rights = unix.UnixRights(fds...)
		}
		err = unix.Sendmsg(helperkit.ControlFD, buf[:n], rights, nil, 0)
		for _, fd := range fds {
			unix.Close(fd)
		}
		if err != nil {
			return exitOf(err)
		}
	}
}

func exitOf(err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, "raw echo:", err)
		return 1
	}
	return 0
}

// rawEcho is this process's end of a running raw echo.
type rawEcho struct {
	fd  int
	buf []byte
	oob []byte
}

// startRawEcho re-executes this test binary as the raw echo (as root:
// the anchor measures the socket, not an identity) and stops it, which
// must exit 0, when b ends.
func startRawEcho(b *testing.B) *rawEcho {
	b.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	theirs := os.NewFile(uintptr(fds[1]), "raw-echo-peer")
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = []string{rawEchoEnv + "=1"}
	cmd.Stderr = os.Stderr
	cmd.ExtraFiles = []*os.File{theirs} // descriptor 3
	err = cmd.Start()
	theirs.Close()
	if err != nil {
		unix.Close(fds[0])
		b.Fatalf("start raw echo: %v", err)
	}
	b.Cleanup(func() {
		// EOF ends the echo; a failed wait is its non-zero exit.
		unix.Close(fds[0])
		if err := cmd.Wait(); err != nil {
			b.Errorf("raw echo: %v", err)
		}
	})
	return &rawEcho{fd: fds[0], buf: make([]byte, wire.MaxMessage), oob: make([]byte, unix.CmsgSpace(4))}
}

// roundTrip sends frame with fd, waits for the echo and closes the
// descriptor that comes back.
func (r *rawEcho) roundTrip(frame []byte, fd int) error {
	if err := unix.Sendmsg(r.fd, frame, unix.UnixRights(fd), nil, 0); err != nil {
		return fmt.Errorf("raw echo: sendmsg: %w", err)
	}
	n, oobn, _, _, err := unix.Recvmsg(r.fd, r.buf, r.oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return fmt.Errorf("raw echo: recvmsg: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(r.oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return fmt.Errorf("raw echo: %d control messages: %w", len(msgs), err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	for _, fd := range fds {
		unix.Close(fd)
	}
	if err == nil && (n != len(frame) || len(fds) != 1) {
		err = errors.New("not an echo")
	}
	if err != nil {
		return fmt.Errorf("raw echo: reply of %d bytes with %d descriptors: %w", n, len(fds), err)
	}
	return nil
}

// latencies collects one operation's round trips.
type latencies []time.Duration

func (l *latencies) time(b *testing.B, op func() error) {
	t0 := time.Now()
	err := op()
	*l = append(*l, time.Since(t0))
	if err != nil {
		b.Fatal(err)
	}
}

// p50 is the median in nanoseconds (0 if empty); it sorts l.
func (l latencies) p50() float64 {
	if len(l) == 0 {
		return 0
	}
	slices.Sort(l)
	return float64(l[len(l)/2].Nanoseconds())
}

// mean is the mean in nanoseconds.
func (l latencies) mean() float64 {
	var sum time.Duration
	for _, d := range l {
		sum += d
	}
	return float64(sum.Nanoseconds()) / float64(max(len(l), 1))
}

// cpuTime is the time process pid's threads have spent on a CPU, in
// nanoseconds (the first field of each thread's schedstat).
func cpuTime(b *testing.B, pid int) int64 {
	b.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		b.Fatal(err)
	}
	var sum int64
	for _, t := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // a thread that just exited took its time with it
		}
		var ns int64
		if _, err := fmt.Sscan(string(data), &ns); err != nil {
			b.Fatalf("schedstat of %d/%s: %v", pid, t.Name(), err)
		}
		sum += ns
	}
	return sum
}
