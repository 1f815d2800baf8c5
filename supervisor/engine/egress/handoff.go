// SPDX-License-Identifier: Apache-2.0

package egress

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNoListeners is returned by Receive when the shim closed the hand-off
// socket without sending: it ended before its stage 1 listened.
var ErrNoListeners = errors.New("the shim sent no egress listeners")

// Receive reads the one message stage 1 sends on the hand-off socket: n
// bytes with n descriptors (SCM_RIGHTS). Anything else — fewer or more
// descriptors, a truncated message, other control data — is refused and
// every descriptor received is closed. sock must be non-blocking, so
// that the deadline holds. The returned files are
// close-on-exec and not yet checked (CheckListener).
func Receive(sock *os.File, n int, deadline time.Time) ([]*os.File, error) {
	if n < 1 || n > 8 {
		return nil, fmt.Errorf("egress: receive %d listeners: want 1..8", n)
	}
	if err := sock.SetReadDeadline(deadline); err != nil {
		return nil, fmt.Errorf("egress: receive the listeners: %w", err)
	}
	rc, err := sock.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("egress: receive the listeners: %w", err)
	}
	buf := make([]byte, 9)
	oob := make([]byte, unix.CmsgSpace(4*9))
	var k, oobn, flags int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		k, oobn, flags, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC)
		return rerr != unix.EAGAIN
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return nil, fmt.Errorf("egress: receive the listeners: %w", err)
	}
	var files []*os.File
	bad := func(format string, a ...any) ([]*os.File, error) {
		for _, f := range files {
			f.Close()
		}
		return nil, fmt.Errorf("egress: receive the listeners: "+format, a...)
	}
	msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
	for _, m := range msgs {
		if m.Header.Level != unix.SOL_SOCKET || m.Header.Type != unix.SCM_RIGHTS {
			continue
		}
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "egress-listener"))
		}
	}
	switch {
	case perr != nil:
		return bad("control data: %v", perr)
	case flags&(unix.MSG_CTRUNC|unix.MSG_TRUNC) != 0:
		return bad("message truncated (flags %#x)", flags)
	case k == 0 && len(files) == 0:
		return nil, fmt.Errorf("egress: %w", ErrNoListeners)
	case k != n || len(files) != n:
		return bad("%d bytes and %d descriptors, want %d of each", k, len(files), n)
	}
	return files, nil
}
