// SPDX-License-Identifier: Apache-2.0

package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Encode encodes m, of kind k, as a whole frame with request id reqID.
// It refuses, wrapping [ErrInvalidMessage], what the peer would refuse.
func Encode(reqID uint32, k *Kind, m Message) ([]byte, error) {
	v := reflect.ValueOf(m)
	if m == nil || v.Type() != k.goT || v.IsNil() {
		return nil, fmt.Errorf("wire: encode %s: %w: message %T", k, ErrInvalidMessage, m)
	}
	buf := encodeFields(make([]byte, HeaderSize), v.Elem(), k.fields)
	var err error
	if len(buf) > MaxMessage { // a field's length prefix may have wrapped
		err = fmt.Errorf("%d bytes, max %d", len(buf), MaxMessage)
	} else {
		_, err = decodeMsg(buf[HeaderSize:], k)
	}
	if err != nil {
		return nil, fmt.Errorf("wire: encode %s: %w: %w", k, ErrInvalidMessage, err)
	}
	le := binary.LittleEndian
	le.PutUint16(buf, Version)
	le.PutUint16(buf[2:], uint16(k.t))
	le.PutUint32(buf[4:], reqID)
	le.PutUint32(buf[8:], uint32(len(buf)-HeaderSize))
	le.PutUint16(buf[12:], uint16(k.fds))
	return buf, nil
}

// testHookDecode, set by a test, sees each type about to be decoded.
var testHookDecode func(MsgType)

// Decode checks a received frame, given the number of descriptors that
// came with it, and decodes its message if a admits its type: any other
// is refused with ErrNotAccepted from the header alone (threat: a
// compromised supervisor reaching the decoder of a message the helper
// does not accept). It is the pure part of [Conn.Recv]; every failure is
// a *ProtocolError wrapping the rule's sentinel.
func Decode(buf []byte, nfds int, a Admits) (Frame, error) {
	const op = "decode frame"
	le := binary.LittleEndian
	if len(buf) < HeaderSize {
		return Frame{}, protoErr(op, ErrShortFrame, "%d bytes", len(buf))
	}
	ver, typ, plen, declFDs, flags := le.Uint16(buf), MsgType(le.Uint16(buf[2:])), le.Uint32(buf[8:]), int(le.Uint16(buf[12:])), le.Uint16(buf[14:])
	var err error
	switch k := a(typ); {
	case ver != Version:
		err = protoErr(op, ErrVersion, "got %d, want %d", ver, Version)
	case flags != 0:
		err = protoErr(op, ErrFlags, "%#04x", flags)
	case plen > MaxPayload || len(buf) > MaxMessage:
		err = protoErr(op, ErrTooLarge, "declared payload %d bytes, frame %d bytes", plen, len(buf))
	case int(plen) != len(buf)-HeaderSize:
		err = protoErr(op, ErrLength, "declared %d, received %d", plen, len(buf)-HeaderSize)
	case declFDs > MaxFDs || nfds > MaxFDs:
		err = protoErr(op, ErrTooManyFDs, "declared %d, received %d", declFDs, nfds)
	case declFDs != nfds:
		err = protoErr(op, ErrFDCount, "declared %d, received %d", declFDs, nfds)
	case k == nil:
		err = protoErr(op, ErrNotAccepted, "type %#04x", uint16(typ))
	case k.fds != nfds:
		err = protoErr(op, ErrFDCount, "%s carries %d, frame has %d", k, k.fds, nfds)
	default:
		if testHookDecode != nil {
			testHookDecode(typ)
		}
		m, err := decodeMsg(buf[HeaderSize:], k)
		if err != nil {
			return Frame{}, &ProtocolError{Op: op + " " + k.String(), Err: err}
		}
		return Frame{ReqID: le.Uint32(buf[4:]), Type: typ, Msg: m}, nil
	}
	return Frame{}, err
}

// Conn is one end of a SOCK_SEQPACKET unix socket carrying frames. Send
// and Recv may run in different goroutines.
type Conn struct{ uc *net.UnixConn }

// Frame is one received, checked message. Its descriptors are *os.File,
// owned by the receiver, so that a forgotten one is closed by the
// garbage collector instead of leaking as a bare int.
type Frame struct {
	ReqID uint32
	Type  MsgType
	Msg   Message
	FDs   []*os.File
}

// FromFile turns an inherited socket into a Conn. It always closes f.
// The socket must be AF_UNIX SOCK_SEQPACKET: on a stream socket a peer
// could split or merge frames, and another family cannot carry
// SCM_RIGHTS; a helper given the wrong descriptor must fail loudly.
func FromFile(f *os.File) (*Conn, error) {
	defer f.Close()
	fd := int(f.Fd()) // blocking now; FileConn makes its duplicate non-blocking
	domain, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	typ, terr := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err := errors.Join(err, terr); err != nil {
		return nil, fmt.Errorf("wire: from file %q: getsockopt: %w", f.Name(), err)
	}
	if domain != unix.AF_UNIX || typ != unix.SOCK_SEQPACKET {
		return nil, fmt.Errorf("wire: from file %q: socket domain %d type %d, want AF_UNIX SOCK_SEQPACKET", f.Name(), domain, typ)
	}
	nc, err := net.FileConn(f) // a duplicate of f
	if err != nil {
		return nil, fmt.Errorf("wire: from file %q: %w", f.Name(), err)
	}
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return nil, errors.Join(fmt.Errorf("wire: from file %q: got %T", f.Name(), nc), nc.Close())
	}
	return &Conn{uc}, nil
}

// block makes the socket blocking for a server (one request at a time, no
// deadline): Recv waits in recvmsg, not the Go network poller (issue 19).
func (c *Conn) block() error {
	rc, err := c.uc.SyscallConn()
	if err == nil {
		cerr := rc.Control(func(fd uintptr) { err = unix.SetNonblock(int(fd), false) })
		err = errors.Join(cerr, err)
	}
	return err
}

// SetDeadline sets the socket's read and write deadline.
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

// Send sends m, of kind k, as one datagram with fds (still the caller's)
// in one SCM_RIGHTS message. A local refusal wraps [ErrInvalidMessage]
// and sends nothing.
func (c *Conn) Send(reqID uint32, k *Kind, m Message, fds []int) error {
	buf, err := Encode(reqID, k, m)
	if err == nil && len(fds) != k.fds {
		err = fmt.Errorf("%w: %d descriptors, %s carries %d", ErrInvalidMessage, len(fds), k, k.fds)
	}
	if err == nil {
		err = c.SendRaw(buf, fds)
	}
	if err != nil {
		return fmt.Errorf("wire: send: %w", err)
	}
	return nil
}

// SendRaw sends b as one datagram with fds, unchecked: Send's last step,
// and the tests' way to play a hostile peer.
func (c *Conn) SendRaw(b []byte, fds []int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	n, oobn, err := c.uc.WriteMsgUnix(b, oob, nil)
	if err == nil && (n != len(b) || oobn != len(oob)) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return fmt.Errorf("wire: send raw: %w", err)
	}
	return nil
}

// recvBufs are Recv's buffers: MaxMessage bytes exactly, as a longer
// datagram sets MSG_TRUNC, and reused, as decoding copies every string
// and byte field out of them.
var recvBufs = sync.Pool{New: func() any { return new([MaxMessage]byte) }}

// Recv receives one frame of a type a admits. It returns io.EOF when the
// peer closed, a *ProtocolError for a peer's fault, another error for a
// local failure, and on every error closes each descriptor that came.
func (c *Conn) Recv(a Admits) (Frame, error) {
	buf, oob := recvBufs.Get().(*[MaxMessage]byte), make([]byte, unix.CmsgSpace(MaxFDs*4))
	defer recvBufs.Put(buf)
	n, oobn, flags, _, rerr := c.uc.ReadMsgUnix(buf[:], oob)
	// The kernel installed the descriptors already: take them before any
	// check can return, or they leak.
	fds, err := takeControl(oob[:oobn])
	var fr Frame
	switch {
	case (rerr == nil && n == 0 || errors.Is(rerr, io.EOF)) && oobn == 0:
		return Frame{}, io.EOF
	case errors.Is(rerr, io.EOF):
		// Go reports a 0-byte datagram as EOF; this protocol sends none.
		err = protoErr("recv", ErrShortFrame, "empty datagram with %d bytes of control data", oobn)
	case rerr != nil:
		err = fmt.Errorf("wire: recv: %w", rerr)
	case err != nil:
	case flags&unix.MSG_CTRUNC != 0:
		err = protoErr("recv", ErrControlTruncated, "more than %d descriptors", MaxFDs)
	case flags&unix.MSG_TRUNC != 0:
		err = protoErr("recv", ErrTruncated, "datagram exceeds %d bytes", MaxMessage)
	default:
		fr, err = Decode(buf[:n], len(fds), a)
	}
	for _, fd := range fds {
		// Go receives with MSG_CMSG_CLOEXEC; this re-checks, as a
		// descriptor without it would reach every child a helper execs.
		if ferr := ensureCloexec(fd); err == nil && ferr != nil {
			err = fmt.Errorf("wire: recv: fd %d: %w", fd, ferr)
		}
	}
	if err != nil {
		closeFDs(fds)
		return Frame{}, err
	}
	for _, fd := range fds {
		fr.FDs = append(fr.FDs, os.NewFile(uintptr(fd), "wire-fd"))
	}
	return fr, nil
}

// takeControl returns every descriptor the kernel installed, from
// SCM_RIGHTS and SCM_PIDFD alike so all get closed, and a *ProtocolError
// for anything but SCM_RIGHTS: the peer that made the socket pair may
// have set SO_PASSCRED or SO_PASSPIDFD on our end. Messages are parsed
// one at a time, so a malformed later one cannot hide earlier
// descriptors.
func takeControl(oob []byte) (fds []int, bad error) {
	for rest := oob; len(rest) >= unix.CmsgLen(0); {
		hdr, data, next, err := unix.ParseOneSocketControlMessage(rest)
		if err != nil {
			return fds, protoErr("recv", ErrControl, "malformed control message: %v", err)
		}
		rest = next
		rights := hdr.Level == unix.SOL_SOCKET && hdr.Type == unix.SCM_RIGHTS
		if rights || (hdr.Level == unix.SOL_SOCKET && hdr.Type == unix.SCM_PIDFD) {
			for i := 0; i+4 <= len(data); i += 4 {
				fds = append(fds, int(int32(binary.NativeEndian.Uint32(data[i:]))))
			}
		}
		if !rights && bad == nil {
			bad = protoErr("recv", ErrControl, "level %d type %d", hdr.Level, hdr.Type)
		}
	}
	return fds, bad
}

func ensureCloexec(fd int) error {
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil {
		return fmt.Errorf("fcntl FD_CLOEXEC: %w", err)
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
