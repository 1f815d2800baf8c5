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
	io.Reader
	io.Writer
	// SetDeadline sets the read and write deadline; the zero time means
	// none. A passed deadline makes blocked and later calls fail with an
	// error wrapping os.ErrDeadlineExceeded.
	SetDeadline(t time.Time) error
	// Queued reports the bytes received and not yet read.
	Queued() (int, error)
	// Close closes the connection.
	Close() error
}

// unixConn is a Conn over a nonblocking AF_UNIX stream socket.
type unixConn struct {
	*net.UnixConn
	raw syscall.RawConn
}

// Queued is FIONREAD (SIOCINQ) on the socket.
func (c *unixConn) Queued() (int, error) {
	var n int
	var ierr error
	if err := c.raw.Control(func(fd uintptr) {
		n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	}); err != nil {
		return 0, err
	}
	if ierr != nil {
		return 0, os.NewSyscallError("ioctl SIOCINQ", ierr)
	}
	return n, nil
}

// FromFile returns a Conn over a duplicate of f, which must be an AF_UNIX
// SOCK_STREAM socket. The caller still owns (and closes) f. net.FileConn
// makes the shared file description nonblocking.
func FromFile(f *os.File) (Conn, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var domain, typ int
	var serr error
	if err := rc.Control(func(fd uintptr) {
		domain, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN)
		if serr == nil {
			typ, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TYPE)
		}
	}); err != nil {
		return nil, err
	}
	if serr != nil {
		return nil, os.NewSyscallError("getsockopt", serr)
	}
	if domain != unix.AF_UNIX || typ != unix.SOCK_STREAM {
		return nil, fmt.Errorf("%w: descriptor is not an AF_UNIX stream socket (domain %d, type %d)", ErrBound, domain, typ)
	}
	nc, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		_ = nc.Close()
		return nil, errors.New("relay: descriptor is not a unix connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		_ = uc.Close()
		return nil, err
	}
	return &unixConn{UnixConn: uc, raw: raw}, nil
}

// FromFD returns a Conn over fd, an AF_UNIX SOCK_STREAM socket, and takes
// ownership of fd: it is closed before FromFD returns, whether or not it
// succeeds (the Conn holds a duplicate).
func FromFD(fd int) (Conn, error) {
	f := os.NewFile(uintptr(fd), "relay-fd")
	if f == nil {
		return nil, fmt.Errorf("%w: invalid descriptor %d", ErrBound, fd)
	}
	defer f.Close()
	return FromFile(f)
}
