package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Conn is one end of a SOCK_SEQPACKET unix socket carrying wire frames.
// Send and Recv may be used from different goroutines; each is a single
// system call on its own buffers.
type Conn struct {
	uc *net.UnixConn
}

// Frame is one received, fully validated message. FDs holds the received
// descriptors as *os.File so that ownership is explicit and a forgotten one
// is eventually closed by the garbage collector instead of leaking as a bare
// int; the receiver owns them and should Close them.
type Frame struct {
	ReqID uint32
	Type  MsgType
	Msg   Message
	FDs   []*os.File
}

// NewConn wraps c, which must be a connected "unixpacket" (SOCK_SEQPACKET)
// socket. Use FromFile for an inherited descriptor: it checks the type.
func NewConn(c *net.UnixConn) *Conn { return &Conn{uc: c} }

// FromFile turns an inherited socket descriptor into a Conn. It takes
// ownership of f and always closes it (net.FileConn works on a duplicate).
//
// The descriptor is checked to be AF_UNIX and SOCK_SEQPACKET before use:
// on a SOCK_STREAM socket message boundaries would vanish and a peer could
// split or merge frames, and a socket of another family cannot carry
// SCM_RIGHTS at all. A helper started with the wrong descriptor must fail
// loudly instead of speaking the protocol over it.
func FromFile(f *os.File) (*Conn, error) {
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("wire: from file %q: %w", f.Name(), err)
	}
	var domain, typ int
	var serr error
	cerr := rc.Control(func(fd uintptr) {
		domain, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN)
		if serr == nil {
			typ, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TYPE)
		}
	})
	if err := errors.Join(cerr, serr); err != nil {
		return nil, fmt.Errorf("wire: from file %q: getsockopt: %w", f.Name(), err)
	}
	if domain != unix.AF_UNIX || typ != unix.SOCK_SEQPACKET {
		return nil, fmt.Errorf("wire: from file %q: socket domain %d type %d, want AF_UNIX SOCK_SEQPACKET", f.Name(), domain, typ)
	}
	nc, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("wire: from file %q: %w", f.Name(), err)
	}
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		nc.Close()
		return nil, fmt.Errorf("wire: from file %q: got %T, want *net.UnixConn", f.Name(), nc)
	}
	return NewConn(uc), nil
}

// SetDeadline sets the read and write deadline of the underlying socket.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.uc.SetDeadline(t); err != nil {
		return fmt.Errorf("wire: set deadline: %w", err)
	}
	return nil
}

// Close closes the socket.
func (c *Conn) Close() error {
	if err := c.uc.Close(); err != nil {
		return fmt.Errorf("wire: close: %w", err)
	}
	return nil
}

// send sends m, of kind k, with request id reqID as one datagram, with
// fds attached in a single SCM_RIGHTS control message. len(fds) must be
// the kind's count. send does not close fds; the caller still owns them.
// Local validation failures wrap [ErrInvalidMessage]; nothing is sent in
// that case.
func (c *Conn) send(reqID uint32, k *kind, m Message, fds []int) error {
	buf, err := encodeFrame(reqID, k, m)
	if err != nil {
		return fmt.Errorf("wire: send: %w", err)
	}
	if len(fds) != k.fds {
		return fmt.Errorf("wire: send %s: %w: %d descriptors, type carries %d", k, ErrInvalidMessage, len(fds), k.fds)
	}
	if err := c.SendRaw(buf, fds); err != nil {
		return fmt.Errorf("wire: send %s: %w", k, err)
	}
	return nil
}

// Recv receives and validates one frame of a type a Admits (a *Protocol
// Admits its requests; [OnlyErrors] an Error). It returns io.EOF when the
// peer has closed the connection, a *ProtocolError for any peer fault,
// and a plain wrapped error for local I/O failures. On every error path
// each descriptor that arrived is closed before returning.
func (c *Conn) Recv(a Admits) (Frame, error) {
	const op = "recv"
	// MaxMessage bytes exactly: anything longer sets MSG_TRUNC, which is
	// how an oversized datagram is detected without a bigger buffer.
	buf := make([]byte, MaxMessage)
	oob := make([]byte, unix.CmsgSpace(MaxFDs*4))
	n, oobn, flags, _, rerr := c.uc.ReadMsgUnix(buf, oob)

	// Collect descriptors first, before any check can return: once
	// recvmsg has returned, the kernel has already installed them in our
	// table and they leak unless closed.
	fds, cerr := takeControl(oob[:oobn])
	fail := func(err error) (Frame, error) {
		closeFDs(fds)
		return Frame{}, err
	}
	// Go's net package receives with MSG_CMSG_CLOEXEC, so this only
	// re-checks: a received descriptor without FD_CLOEXEC would be
	// inherited by every child the helper execs (mount, mkfs, ...).
	for _, fd := range fds {
		if err := ensureCloexec(fd); err != nil {
			return fail(fmt.Errorf("wire: %s: fd %d: %w", op, fd, err))
		}
	}

	if rerr != nil {
		// A SEQPACKET read of 0 bytes is reported as io.EOF by the net
		// package, even if the zero-length datagram carried descriptors.
		// This protocol never sends empty datagrams, so only a bare one is
		// treated as the peer closing.
		if errors.Is(rerr, io.EOF) {
			if oobn == 0 {
				return Frame{}, io.EOF
			}
			return fail(protoErr(op, ErrShortFrame, "empty datagram with %d bytes of control data", oobn))
		}
		return fail(fmt.Errorf("wire: %s: %w", op, rerr))
	}
	if n == 0 && oobn == 0 {
		return Frame{}, io.EOF
	}
	if cerr != nil {
		return fail(cerr)
	}
	if flags&unix.MSG_CTRUNC != 0 {
		return fail(protoErr(op, ErrControlTruncated, "more than %d descriptors", MaxFDs))
	}
	if flags&unix.MSG_TRUNC != 0 {
		return fail(protoErr(op, ErrTruncated, "datagram exceeds %d bytes", MaxMessage))
	}
	reqID, m, err := decodeFrame(buf[:n], len(fds), a)
	typ := MsgType(binary.LittleEndian.Uint16(buf[offType:]))
	if err != nil {
		return fail(err)
	}
	files := make([]*os.File, len(fds))
	for i, fd := range fds {
		files[i] = os.NewFile(uintptr(fd), "wire-fd")
	}
	return Frame{ReqID: reqID, Type: typ, Msg: m, FDs: files}, nil
}

// takeControl walks every control message and returns every descriptor
// the kernel installed (from SCM_RIGHTS and also SCM_PIDFD, so the latter can
// be closed), plus a *ProtocolError if anything other than SCM_RIGHTS was
// present. The peer that created the socket pair may have enabled
// SO_PASSCRED or SO_PASSPIDFD on our end; such messages are rejected, but
// their descriptors are still collected so they get closed. Messages are
// parsed one at a time so that a malformed later header cannot make us
// forget descriptors from an earlier one.
func takeControl(oob []byte) ([]int, error) {
	var fds []int
	var bad error
	for rest := oob; len(rest) >= unix.CmsgLen(0); {
		hdr, data, next, err := unix.ParseOneSocketControlMessage(rest)
		if err != nil {
			return fds, protoErr("recv", ErrControl, "malformed control message: %v", err)
		}
		rest = next
		isRights := hdr.Level == unix.SOL_SOCKET && hdr.Type == unix.SCM_RIGHTS
		if hdr.Level == unix.SOL_SOCKET && (isRights || hdr.Type == unix.SCM_PIDFD) {
			for i := 0; i+4 <= len(data); i += 4 {
				fds = append(fds, int(int32(binary.NativeEndian.Uint32(data[i:]))))
			}
		}
		if !isRights && bad == nil {
			bad = protoErr("recv", ErrControl, "level %d type %d", hdr.Level, hdr.Type)
		}
	}
	return fds, bad
}

func ensureCloexec(fd int) error {
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		return fmt.Errorf("fcntl F_GETFD: %w", err)
	}
	if flags&unix.FD_CLOEXEC == 0 {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC); err != nil {
			return fmt.Errorf("fcntl F_SETFD: %w", err)
		}
	}
	return nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
