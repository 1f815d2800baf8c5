package relay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// Phase and statuses of audit records.
const (
	PhaseExchange = "exchange"

	StatusDeliveryPending = "delivery_pending"
	StatusDelivered       = "delivered"
	StatusDeliveryFailed  = "delivery_failed"
)

// Record is one audit record of an exchange. It carries only the phase,
// the status and the latency since the exchange began; the Audit
// implementation binds the session ID and alias. Nothing of the request or
// the response is ever part of a record.
type Record struct {
	Phase     string
	Status    string
	LatencyMS uint64
}

// Audit durably appends records. Record must return only once r is durable
// (or return an error); the relay releases a response only after a
// delivery_pending Record returned nil. Implementations write only the
// session ID and alias they were bound to plus the fields of r.
type Audit interface {
	Record(r Record) error
}

// Config is a relay's connections and bounds.
type Config struct {
	// Guest is the proxy's end of the sandbox's socketpair; Upstream is
	// the upstream connection. The relay owns both and closes them when
	// it closes.
	Guest, Upstream Conn
	// MaxFrame bounds the payload of a request and of a response,
	// 1..HardMaxFrame.
	MaxFrame int
	// MaxExchange is the shared budget of one exchange, > 0.
	MaxExchange time.Duration
	// Audit records every exchange. Required.
	Audit Audit
	// CheckUpstream, if set, is called before the request is sent
	// upstream and after the response is received; an error is upstream
	// identity drift (for example an SO_PEERCRED mismatch).
	CheckUpstream func() error
}

// Relay runs sequential bounded exchanges. It is not safe for concurrent
// Exchange calls; Close may be called concurrently.
type Relay struct {
	cfg Config

	mu       sync.Mutex // guards closed, canceled and deadline setting
	closed   bool
	canceled bool
}

// New checks cfg and returns a relay. On error the connections are left
// to the caller.
func New(cfg Config) (*Relay, error) {
	if err := checkMax(cfg.MaxFrame); err != nil {
		return nil, err
	}
	if cfg.Guest == nil || cfg.Upstream == nil || cfg.Audit == nil {
		return nil, fmt.Errorf("%w: guest, upstream and audit are required", ErrBound)
	}
	if cfg.MaxExchange <= 0 {
		return nil, fmt.Errorf("%w: max exchange %v", ErrBound, cfg.MaxExchange)
	}
	return &Relay{cfg: cfg}, nil
}

// Close closes the relay and both connections. Later exchanges return
// ErrClosed.
func (r *Relay) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closeLocked()
}

func (r *Relay) closeLocked() error {
	if r.closed {
		return nil
	}
	r.closed = true
	return errors.Join(r.cfg.Guest.Close(), r.cfg.Upstream.Close())
}

// Serve runs exchanges until one fails and returns that error; io.EOF
// means the guest closed its end between exchanges. The relay is closed
// when Serve returns.
func (r *Relay) Serve(ctx context.Context) error {
	for {
		if err := r.Exchange(ctx); err != nil {
			return err
		}
	}
}

// setDeadline sets t on c unless the relay was canceled, in which case it
// keeps the deadline in the past.
func (r *Relay) setDeadline(c Conn, t time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.canceled {
		t = time.Unix(1, 0)
	}
	if err := c.SetDeadline(t); err != nil {
		return fmt.Errorf("%w: set deadline: %v", ErrTransport, err)
	}
	return nil
}

// exchange is the state of one exchange.
type exchange struct {
	r         *Relay
	ctx       context.Context
	start     time.Time
	deadline  time.Time
	requested bool // a complete request was read
	delivered bool // delivered is durable
}

func (x *exchange) latency() uint64 {
	return uint64(time.Since(x.start) / time.Millisecond)
}

// expired is ErrTimeout if the deadline passed, or ErrCanceled if the
// context was canceled.
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
	if err := x.r.cfg.Audit.Record(Record{Phase: PhaseExchange, Status: status, LatencyMS: x.latency()}); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrAudit, status, err)
	}
	if status == StatusDelivered {
		x.delivered = true
	}
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
	if x.r.cfg.CheckUpstream == nil {
		return nil
	}
	if err := x.r.cfg.CheckUpstream(); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUpstreamDrift, step, err)
	}
	return nil
}

// Exchange runs one exchange (see the package documentation for the exact
// order). It waits, bounded only by ctx, for the first byte of a request;
// the exchange deadline starts with that byte. It returns nil after
// delivered was recorded. Any error closes the relay permanently; io.EOF
// means the guest closed its end before a request began.
func (r *Relay) Exchange(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	if r.canceled {
		// A cancellation that raced the end of the previous exchange.
		_ = r.closeLocked()
		r.mu.Unlock()
		return ErrCanceled
	}
	r.mu.Unlock()

	x := &exchange{r: r, ctx: ctx}
	stop := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.canceled = true
		if !r.closed {
			past := time.Unix(1, 0)
			_ = r.cfg.Guest.SetDeadline(past)
			_ = r.cfg.Upstream.SetDeadline(past)
		}
	})
	err := x.run()
	stop()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && !errors.Is(err, ErrCanceled) && !errors.Is(err, ErrAudit) {
		err = fmt.Errorf("%w: %v", ErrCanceled, err)
	}
	r.mu.Lock()
	_ = r.closeLocked()
	r.mu.Unlock()
	if x.requested && !x.delivered {
		// Best effort: the stream is closed whatever this returns.
		_ = r.cfg.Audit.Record(Record{Phase: PhaseExchange, Status: StatusDeliveryFailed, LatencyMS: x.latency()})
	}
	return err
}

func (x *exchange) run() error {
	r := x.r
	g, u, max := r.cfg.Guest, r.cfg.Upstream, r.cfg.MaxFrame
	if x.ctx.Err() != nil {
		return ErrCanceled
	}

	// Idle: wait for the first byte of a request.
	if err := r.setDeadline(g, time.Time{}); err != nil {
		return err
	}
	var hdr [HeaderSize]byte
	var n int
	for n == 0 {
		var err error
		n, err = g.Read(hdr[:])
		if n > 0 {
			break
		}
		if errors.Is(err, io.EOF) {
			return io.EOF
		}
		if err != nil {
			return ioError("read request", err)
		}
	}
	x.start = time.Now()
	x.deadline = x.start.Add(r.cfg.MaxExchange)
	if err := r.setDeadline(g, x.deadline); err != nil {
		return err
	}
	if err := r.setDeadline(u, x.deadline); err != nil {
		return err
	}

	// (1) the request; (2) nothing behind it.
	req, err := readFrameRest(g, max, hdr[:], n)
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
	frame, err := AppendFrame(nil, req, max)
	if err != nil {
		return err
	}
	if err := writeAll(u, frame); err != nil {
		return err
	}

	// (4) the response; (5) upstream identity again.
	resp, err := readFrameRest(u, max, hdr[:], 0)
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: upstream closed before responding", ErrTransport)
	}
	if err != nil {
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
	frame, err = AppendFrame(frame[:0], resp, max)
	if err != nil {
		return err
	}
	if err := writeAll(g, frame); err != nil {
		return err
	}
	if err := x.guestIdle("after release"); err != nil {
		return err
	}
	return x.record(StatusDelivered)
}
