// SPDX-License-Identifier: Apache-2.0

package streamproxy

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The relay, as docs/helpers.md ("The relay: frames and one exchange")
// describes it: frames, deadlines, queue checks and audit records.

// HeaderSize is the size of a frame header: a big-endian uint32 length.
const HeaderSize = 4

// Error is why the relay closed a stream; Code is its stable name, the
// Err of streamwire StatusReply.
type Error struct{ Code string }

func (e *Error) Error() string { return "relay: " + e.Code }

// Every error the relay returns wraps one of these or is io.EOF (CodeEOF).
var (
	ErrFraming       = &Error{"framing"}                       // a zero, oversized or truncated frame
	ErrPipelined     = &Error{"pipelined"}                     // guest input queued at the request boundary or around a release
	ErrUpstreamDrift = &Error{"upstream_drift"}                // CheckUpstream (the upstream's SO_PEERCRED) failed
	ErrTimeout       = &Error{"timeout"}                       // the exchange deadline passed
	ErrCanceled      = &Error{"canceled"}                      // the context was canceled (streamwire Close)
	ErrAudit         = &Error{"audit"}                         // an audit append or fdatasync failed
	ErrTransport     = &Error{"transport"}                     // a read, write, deadline or queue check failed
	ErrClosed        = errors.New("relay: closed")             // every exchange after the relay closed
	ErrBound         = errors.New("relay: bound out of range") // a bad RelayConfig or socket
)

// Conn is what the relay needs of each side of an exchange.
type Conn interface {
	io.ReadWriteCloser
	// SetDeadline sets the read and write deadline (zero: none); past it,
	// calls fail wrapping os.ErrDeadlineExceeded.
	SetDeadline(t time.Time) error
	Queued() (int, error) // the bytes received and not yet read
}

// unixConn is a Conn over a nonblocking AF_UNIX stream socket.
type unixConn struct{ *net.UnixConn }

func (c unixConn) Queued() (n int, err error) {
	err = control(func(fd []int) (err error) { n, err = queued(fd[0]); return err }, c)
	return n, err
}

// FromFile returns a Conn over a duplicate of f, which must be an AF_UNIX
// SOCK_STREAM socket (net's network "unix"). The caller still owns (and
// closes) f. net.FileConn makes the shared file description nonblocking.
func FromFile(f *os.File) (Conn, error) {
	nc, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	if uc, ok := nc.(*net.UnixConn); ok && uc.LocalAddr().Network() == "unix" {
		return unixConn{uc}, nil
	}
	return nil, errors.Join(fmt.Errorf("%w: not an AF_UNIX stream socket", ErrBound), nc.Close())
}

// control runs fn on the descriptors of conns without changing their
// blocking mode (File.Fd would).
func control(fn func(fds []int) error, conns ...syscall.Conn) error {
	if len(conns) == 0 {
		return fn(nil)
	}
	rc, err := conns[0].SyscallConn()
	if err != nil {
		return err
	}
	ferr := errors.New("control did not run")
	if err := rc.Control(func(fd uintptr) {
		ferr = control(func(fds []int) error { return fn(append([]int{int(fd)}, fds...)) }, conns[1:]...)
	}); err != nil {
		return err
	}
	return ferr
}

// Phase and statuses of audit records.
const (
	PhaseExchange         = "exchange"
	StatusDeliveryPending = "delivery_pending"
	StatusDelivered       = "delivered"
	StatusDeliveryFailed  = "delivery_failed"
)

// Record is one audit record: never anything of a request or a response.
// The Audit implementation binds the session ID and alias.
type Record struct {
	Phase, Status string
	LatencyMS     uint64 // since the exchange began
	// Deferred: r may be only appended when Record returns, to be made
	// durable with the next record or when the audit closes.
	Deferred bool
}

// Audit appends records: Record returns nil once r is durable or, if r.Deferred, appended.
type Audit interface{ Record(r Record) error }

// RelayConfig is a relay's connections and bounds.
type RelayConfig struct {
	// Guest is the proxy's end of the sandbox's socketpair, Upstream the
	// upstream connection; the relay closes both when it closes.
	Guest, Upstream Conn
	MaxFrame        int           // bounds a request's and a response's payload, 1..HardMaxFrameBytes
	MaxExchange     time.Duration // the shared budget of one exchange, > 0
	Audit           Audit         // required
	// CheckUpstream, if set, runs before the request is sent upstream and
	// after the response is received; an error is upstream drift.
	CheckUpstream func() error
}

// Relay runs sequential bounded exchanges. It is not safe for concurrent
// Exchange calls; Close may be called concurrently.
type Relay struct {
	cfg       RelayConfig
	req, resp []byte // a frame each (HeaderSize+MaxFrame), allocated once: no allocation per frame
	closed    atomic.Bool
	once      sync.Once
	closeErr  error
}

// NewRelay checks cfg and returns a relay. On error the connections are
// left to the caller.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	if cfg.MaxFrame < 1 || cfg.MaxFrame > HardMaxFrameBytes || cfg.MaxExchange <= 0 || cfg.Guest == nil || cfg.Upstream == nil || cfg.Audit == nil {
		return nil, fmt.Errorf("%w: max frame %d (1..%d) and max exchange %v (> 0), guest, upstream and audit are required",
			ErrBound, cfg.MaxFrame, HardMaxFrameBytes, cfg.MaxExchange)
	}
	return &Relay{cfg: cfg, req: make([]byte, HeaderSize+cfg.MaxFrame), resp: make([]byte, HeaderSize+cfg.MaxFrame)}, nil
}

// Close closes both connections once (later calls return the same error);
// every later exchange returns ErrClosed.
func (r *Relay) Close() error {
	r.once.Do(func() { r.closed.Store(true); r.closeErr = errors.Join(r.cfg.Guest.Close(), r.cfg.Upstream.Close()) })
	return r.closeErr
}

// Serve runs exchanges until one fails, and returns that error.
func (r *Relay) Serve(ctx context.Context) error {
	for {
		if err := r.Exchange(ctx); err != nil {
			return err
		}
	}
}

// Exchange runs one exchange. It waits, bounded only by ctx, for the
// first byte of a request; the exchange deadline starts with that byte. It
// returns nil once delivered is recorded. Any error closes the relay for
// good; io.EOF means the guest closed its end before a request began.
func (r *Relay) Exchange(ctx context.Context) error {
	if r.closed.Load() {
		return ErrClosed
	}
	x := &exchange{r: r, ctx: ctx}
	// Cancellation closes both connections, which ends any blocked read
	// or write; Close keeps its error for the Close below.
	stop := context.AfterFunc(ctx, func() { r.Close() })
	err := x.run()
	if stop() && err == nil {
		return nil
	} else if err == nil {
		err = ErrCanceled // raced the end of this exchange: the relay is closed
	}
	if ctx.Err() != nil && !errors.Is(err, ErrCanceled) && !errors.Is(err, ErrAudit) {
		err = fmt.Errorf("%w: %v", ErrCanceled, err)
	}
	if cerr := r.Close(); cerr != nil {
		err = fmt.Errorf("%w (close: %v)", err, cerr)
	}
	if x.requested && !x.delivered {
		// Best effort: the stream is closed whatever this returns.
		if rerr := r.cfg.Audit.Record(x.recordOf(StatusDeliveryFailed)); rerr != nil {
			err = fmt.Errorf("%w (%s record: %v)", err, StatusDeliveryFailed, rerr)
		}
	}
	return err
}

// exchange is the state of one exchange.
type exchange struct {
	r               *Relay
	ctx             context.Context
	start, deadline time.Time
	requested       bool // a complete request was read
	delivered       bool // delivered is recorded
}

// recordOf is status's record. Of an exchange's records only
// delivery_pending must be durable before the relay goes on (to the
// release): the one fdatasync on the path. delivered gates nothing and is
// deferred (docs/helpers.md, "What is durable when"); delivery_failed is synced.
func (x *exchange) recordOf(status string) Record {
	return Record{Phase: PhaseExchange, Status: status, LatencyMS: uint64(time.Since(x.start).Milliseconds()), Deferred: status == StatusDelivered}
}

// expired is ErrCanceled once ctx is done, ErrTimeout past the deadline.
func (x *exchange) expired(step string) error {
	if x.ctx.Err() != nil {
		return fmt.Errorf("%w: %s", ErrCanceled, step)
	}
	if !time.Now().Before(x.deadline) {
		return fmt.Errorf("%w: %s", ErrTimeout, step)
	}
	return nil
}

// record appends status, checking the deadline before and after any
// synchronous durability work.
func (x *exchange) record(status string) error {
	if err := x.expired("before " + status); err != nil {
		return err
	}
	if err := x.r.cfg.Audit.Record(x.recordOf(status)); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrAudit, status, err)
	}
	x.delivered = status == StatusDelivered
	return x.expired("after " + status)
}

// guestIdle fails with ErrPipelined if the guest has input queued or, at
// (2), read past the request (read: bytes the request's first read took).
func (x *exchange) guestIdle(step string, read int) error {
	n, err := x.r.cfg.Guest.Queued()
	if err != nil {
		return fmt.Errorf("%w: queue check %s: %v", ErrTransport, step, err)
	}
	if n+read != 0 {
		return fmt.Errorf("%w: %d bytes queued %s, %d read past the request", ErrPipelined, n, step, read)
	}
	return nil
}

func (x *exchange) checkUpstream(step string) error {
	if check := x.r.cfg.CheckUpstream; check != nil {
		if err := check(); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrUpstreamDrift, step, err)
		}
	}
	return nil
}

// run is one exchange, steps (1) to (10) of docs/helpers.md.
func (x *exchange) run() error {
	g, u, max := x.r.cfg.Guest, x.r.cfg.Upstream, x.r.cfg.MaxFrame
	if x.ctx.Err() != nil {
		return ErrCanceled
	}
	// Idle: wait for the first byte of a request.
	if err := setDeadline(g, time.Time{}); err != nil {
		return err
	}
	n, err := io.ReadAtLeast(g, x.r.req, 1) // one read(2) usually takes the whole request; bytes past it fail (2)
	if err == io.EOF {
		return io.EOF
	} else if err != nil {
		return ioError("read request", err)
	}
	x.start = time.Now()
	x.deadline = x.start.Add(x.r.cfg.MaxExchange)
	var req, resp []byte
	var past int // request bytes the first read took past its frame
	for _, step := range []func() error{
		func() error { return setDeadline(g, x.deadline) },
		func() error { return setDeadline(u, x.deadline) },
		func() (err error) { req, past, err = readFrame(g, max, x.r.req, n); return err },        // (1)
		func() error { x.requested = true; return x.guestIdle("at the request boundary", past) }, // (2)
		func() error { return x.checkUpstream("before send") },                                   // (3)
		func() error { return write(u, req) },
		func() (err error) { resp, _, err = readFrame(u, max, x.r.resp, 0); return err }, // (4)
		func() error { return x.checkUpstream("after receive") },                         // (5)
		func() error { return x.record(StatusDeliveryPending) },                          // (6)
		func() error { return x.guestIdle("before release", 0) },                         // (7)
		func() error { return x.expired("before release") },
		func() error { return write(g, resp) },                  // (8) release
		func() error { return x.guestIdle("after release", 0) }, // (9) post-send peek
		func() error { return x.record(StatusDelivered) },       // (10)
	} {
		if err := step(); err == io.EOF { // only (4) ends at a frame boundary
			return fmt.Errorf("%w: upstream closed before responding", ErrTransport)
		} else if err != nil {
			return err
		}
	}
	return nil
}

// readFrame completes in buf a frame whose first have bytes are there, and
// returns it (a prefix of buf) and how many of them lie past it; its own
// reads take exactly what the frame lacks. The length is checked against
// limit before any payload is read: zero, over limit, or end of stream
// inside the frame is ErrFraming; end of stream before its first byte is io.EOF.
func readFrame(r Conn, limit int, buf []byte, have int) (frame []byte, past int, err error) {
	if err := readFull(r, buf[min(have, HeaderSize):HeaderSize], have == 0); err != nil {
		return nil, 0, err
	}
	n := binary.BigEndian.Uint32(buf)
	if n == 0 || n > uint32(limit) {
		return nil, 0, fmt.Errorf("%w: length %d not in 1..%d", ErrFraming, n, limit)
	}
	end := HeaderSize + int(n)
	if err := readFull(r, buf[min(max(have, HeaderSize), end):end], false); err != nil {
		return nil, 0, err
	}
	return buf[:end], max(have-end, 0), nil
}

// readFull fills buf. End of stream before any byte is io.EOF when
// boundary is set, else ErrFraming.
func readFull(r Conn, buf []byte, boundary bool) error {
	switch _, err := io.ReadFull(r, buf); {
	case err == nil:
		return nil
	case err == io.EOF && boundary:
		return io.EOF
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return fmt.Errorf("%w: end of stream inside a frame", ErrFraming)
	default:
		return ioError("read", err)
	}
}

func setDeadline(c Conn, t time.Time) error {
	if err := c.SetDeadline(t); err != nil {
		return fmt.Errorf("%w: set deadline: %v", ErrTransport, err)
	}
	return nil
}

// write writes buf with one Write call: like any io.Writer's, a Conn's
// Write fails if it writes less.
func write(w Conn, buf []byte) error {
	if _, err := w.Write(buf); err != nil {
		return ioError("write", err)
	}
	return nil
}

func ioError(op string, err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: %s", ErrTimeout, op)
	}
	return fmt.Errorf("%w: %s: %v", ErrTransport, op, err)
}
