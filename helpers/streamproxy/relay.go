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
	"syscall"
	"time"
)

// This file is the relay: frames, deadlines, queue checks and audit
// records, never what a payload means. docs/helpers.md ("The relay:
// frames and one exchange") has the frame format, the order of one
// exchange and the failure rule.

// HeaderSize is the size of a frame header: a big-endian uint32 length.
const HeaderSize = 4

// Error is why the relay closed a stream; Code is its stable name, the
// Err of streamwire StatusReply.
type Error struct{ Code string }

func (e *Error) Error() string { return "relay: " + e.Code }

// Every error the relay returns wraps exactly one of these, or is io.EOF
// (CodeEOF).
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

func (c *unixConn) Queued() (n int, err error) {
	if cerr := c.raw.Control(func(fd uintptr) { n, err = queued(int(fd)) }); cerr != nil {
		return 0, cerr
	}
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

// Phase and statuses of audit records.
const (
	PhaseExchange         = "exchange"
	StatusDeliveryPending = "delivery_pending"
	StatusDelivered       = "delivered"
	StatusDeliveryFailed  = "delivery_failed"
)

// Record is one audit record of an exchange: the phase, the status and
// the latency since the exchange began, never anything of the request or
// the response. The Audit implementation binds the session ID and alias.
type Record struct {
	Phase, Status string
	LatencyMS     uint64
}

// Audit durably appends records: Record returns nil only once r is
// durable. A response is released only after its delivery_pending Record
// returned nil.
type Audit interface{ Record(r Record) error }

// RelayConfig is a relay's connections and bounds.
type RelayConfig struct {
	// Guest is the proxy's end of the sandbox's socketpair, Upstream the
	// upstream connection; the relay closes both when it closes.
	Guest, Upstream Conn
	MaxFrame        int           // bounds a request's and a response's payload, 1..HardMaxFrameBytes
	MaxExchange     time.Duration // the shared budget of one exchange, > 0
	Audit           Audit         // records every exchange; required
	// CheckUpstream, if set, runs before the request is sent upstream and
	// after the response is received; an error is upstream drift.
	CheckUpstream func() error
}

// Relay runs sequential bounded exchanges. It is not safe for concurrent
// Exchange calls; Close may be called concurrently.
type Relay struct {
	cfg      RelayConfig
	mu       sync.Mutex // guards closed and closeErr
	closed   bool
	closeErr error
}

// NewRelay checks cfg and returns a relay. On error the connections are
// left to the caller.
func NewRelay(cfg RelayConfig) (*Relay, error) {
	if err := checkMax(cfg.MaxFrame); err != nil {
		return nil, err
	}
	if cfg.Guest == nil || cfg.Upstream == nil || cfg.Audit == nil || cfg.MaxExchange <= 0 {
		return nil, fmt.Errorf("%w: guest, upstream, audit and a max exchange > 0 (%v) are required", ErrBound, cfg.MaxExchange)
	}
	return &Relay{cfg: cfg}, nil
}

func checkMax(max int) error {
	if max < 1 || max > HardMaxFrameBytes {
		return fmt.Errorf("%w: max frame %d not in 1..%d", ErrBound, max, HardMaxFrameBytes)
	}
	return nil
}

// Close closes both connections once (later calls return the same error);
// every later exchange returns ErrClosed.
func (r *Relay) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed, r.closeErr = true, errors.Join(r.cfg.Guest.Close(), r.cfg.Upstream.Close())
	}
	return r.closeErr
}

// Serve runs exchanges until one fails and returns that error, the relay
// closed.
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
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return ErrClosed
	}
	x := &exchange{r: r, ctx: ctx}
	// Cancellation closes both connections, which ends any blocked read
	// or write; Close keeps its error for the Close below.
	stop := context.AfterFunc(ctx, func() { r.Close() })
	err := x.run()
	if !stop() && err == nil {
		err = ErrCanceled // raced the end of this exchange: the relay is closed
	}
	if err == nil {
		return nil
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
	delivered       bool // delivered is durable
}

func (x *exchange) recordOf(status string) Record {
	return Record{Phase: PhaseExchange, Status: status, LatencyMS: uint64(time.Since(x.start).Milliseconds())}
}

// expired is ErrCanceled once the context is done, or ErrTimeout past the
// deadline.
func (x *exchange) expired(step string) error {
	if x.ctx.Err() != nil {
		return fmt.Errorf("%w: %s", ErrCanceled, step)
	}
	if !time.Now().Before(x.deadline) {
		return fmt.Errorf("%w: %s", ErrTimeout, step)
	}
	return nil
}

// record appends status, checking the deadline before and after the
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

// guestIdle fails with ErrPipelined if the guest has input queued.
func (x *exchange) guestIdle(step string) error {
	n, err := x.r.cfg.Guest.Queued()
	if err != nil {
		return fmt.Errorf("%w: queue check %s: %v", ErrTransport, step, err)
	}
	if n != 0 {
		return fmt.Errorf("%w: %d bytes queued %s", ErrPipelined, n, step)
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
	if err := g.SetDeadline(time.Time{}); err != nil {
		return fmt.Errorf("%w: set deadline: %v", ErrTransport, err)
	}
	var hdr [HeaderSize]byte
	n, err := io.ReadAtLeast(g, hdr[:], 1)
	if err == io.EOF {
		return io.EOF
	} else if err != nil {
		return ioError("read request", err)
	}
	x.start = time.Now()
	x.deadline = x.start.Add(x.r.cfg.MaxExchange)
	for _, c := range []Conn{g, u} {
		if err := c.SetDeadline(x.deadline); err != nil {
			return fmt.Errorf("%w: set deadline: %v", ErrTransport, err)
		}
	}
	// (1) the request; (2) nothing behind it.
	req, err := readFrame(g, max, hdr[:], n)
	if err != nil {
		return err
	}
	x.requested = true
	if err := x.guestIdle("at the request boundary"); err != nil {
		return err
	}
	// (3) upstream identity, then forward.
	if err := x.checkUpstream("before send"); err != nil {
		return err
	}
	if err := write(u, req); err != nil {
		return err
	}
	// (4) the response; (5) upstream identity again.
	resp, err := readFrame(u, max, hdr[:], 0)
	if err == io.EOF {
		return fmt.Errorf("%w: upstream closed before responding", ErrTransport)
	} else if err != nil {
		return err
	}
	if err := x.checkUpstream("after receive"); err != nil {
		return err
	}
	// (6) durable pending; (7) no next request arrived meanwhile.
	if err := x.record(StatusDeliveryPending); err != nil {
		return err
	}
	if err := x.guestIdle("before release"); err != nil {
		return err
	}
	if err := x.expired("before release"); err != nil {
		return err
	}
	// (8) release; (9) post-send peek; (10) delivered.
	if err := write(g, resp); err != nil {
		return err
	}
	if err := x.guestIdle("after release"); err != nil {
		return err
	}
	return x.record(StatusDelivered)
}

// readFrame completes a frame of which the first have header bytes are
// already in hdr (the deadline is set) and returns it whole, header
// included. The length is checked against max before the frame is
// allocated: zero, over max, or end of stream inside the frame is
// ErrFraming; end of stream before the first header byte is io.EOF.
func readFrame(r Conn, max int, hdr []byte, have int) ([]byte, error) {
	if err := readFull(r, hdr[have:HeaderSize], have == 0); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr)
	if n == 0 || n > uint32(max) {
		return nil, fmt.Errorf("%w: length %d not in 1..%d", ErrFraming, n, max)
	}
	frame := make([]byte, HeaderSize+int(n))
	copy(frame, hdr)
	if err := readFull(r, frame[HeaderSize:], false); err != nil {
		return nil, err
	}
	return frame, nil
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
