package relay

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Conn is what the relay needs of each side of an exchange.
type Conn interface {
	io.ReadWriteCloser
	// SetDeadline sets the read and write deadline (the zero time: none);
	// once passed, blocked and later calls fail wrapping
	// os.ErrDeadlineExceeded.
	SetDeadline(t time.Time) error
	// Queued reports the bytes received and not yet read.
	Queued() (int, error)
}

// unixConn is a Conn over a nonblocking AF_UNIX stream socket.
type unixConn struct {
	*net.UnixConn
	raw syscall.RawConn
}

// Queued is FIONREAD (SIOCINQ) on the socket.
func (c *unixConn) Queued() (n int, err error) {
	if cerr := c.raw.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); cerr != nil {
		return 0, cerr
	}
	if err != nil {
		return 0, os.NewSyscallError("ioctl SIOCINQ", err)
	}
	return n, nil
}

// FromFile returns a Conn over a duplicate of f, which must be an AF_UNIX
// SOCK_STREAM socket (net's network "unix"). The caller still owns (and
// closes) f. net.FileConn makes the shared file description nonblocking.
func FromFile(f *os.File) (Conn, error) {
	nc, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	uc, ok := nc.(*net.UnixConn)
	if !ok || uc.LocalAddr().Network() != "unix" {
		return nil, errors.Join(fmt.Errorf("%w: not an AF_UNIX stream socket", ErrBound), nc.Close())
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, errors.Join(err, uc.Close())
	}
	return &unixConn{UnixConn: uc, raw: raw}, nil
}
