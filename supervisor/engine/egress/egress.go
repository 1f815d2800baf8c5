// SPDX-License-Identifier: Apache-2.0

// Package egress relays a session's egress endpoints: loopback TCP
// listeners that glove-shim's stage 1 opened in the sandbox's own network
// namespace (spec.EgressListenAnnotation) and handed to the supervisor.
// The supervisor accepts on them from the host's side (an accepted
// connection stays in the sandbox's namespace) and relays each connection,
// byte for byte, to the operator's upstream on the host: a unix socket or
// a loopback TCP address named by the session policy's egress policy
// (docs/policy.md, "Egress policies"). Nothing else is reachable from the
// sandbox: its namespace has loopback alone.
//
// Threats and bounds:
//   - the program opens connections without end: at most Bounds.MaxConns
//     at once per session; one more is closed at once and recorded refused;
//   - a connection held open and idle: closed after Bounds.Idle with no
//     byte either way;
//   - the program outlives nothing: Stop, at the session's end, closes the
//     listeners and every connection;
//   - what crosses is not recorded: the audit holds, for each connection,
//     its policy, port, sequence, byte counts, duration and status — never
//     a payload, a secret or a host path. A connection's "open" record is
//     durable before its upstream is dialled: no byte is relayed
//     unrecorded;
//   - a wrong descriptor handed over: CheckListener refuses anything but a
//     listening AF_INET stream socket bound to 127.0.0.1:PORT of another
//     network namespace than the supervisor's own.
package egress

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Upstream is where an endpoint's connections go on the host: Network
// "unix" with an absolute socket path, or "tcp" with a loopback address.
type Upstream struct {
	Network string
	Address string
}

// Endpoint is one egress endpoint of a session.
type Endpoint struct {
	PolicyID string
	Port     uint16
	Upstream Upstream
}

// Bounds are the relay's limits.
type Bounds struct {
	MaxConns int           // connections open at once, per session
	Idle     time.Duration // no byte either way for this long closes a connection
	Dial     time.Duration // bound on connecting to the upstream
}

// DefaultBounds are the supervisor's: a harness keeps a handful of
// connections to its model (a streaming response, a retry, a side
// request), and a model may think for minutes between bytes.
var DefaultBounds = Bounds{MaxConns: 32, Idle: 10 * time.Minute, Dial: 10 * time.Second}

// Record is one audit record. Event is "open" (accepted, before the
// upstream is dialled), "close" (with the byte counts and status) or
// "refused" (over MaxConns, never relayed).
type Record struct {
	Seq       uint64 `json:"seq"`
	Session   string `json:"session_id"`
	Policy    string `json:"egress_policy_id"`
	Port      uint16 `json:"port"`
	Conn      uint64 `json:"conn"`
	Event     string `json:"event"`
	BytesUp   uint64 `json:"bytes_up,omitempty"`
	BytesDown uint64 `json:"bytes_down,omitempty"`
	Ms        int64  `json:"ms,omitempty"`
	Status    string `json:"status,omitempty"`
}

// Statuses of a close record.
const (
	StatusOK         = "ok"                   // both sides ended the stream
	StatusDialFailed = "upstream_unreachable" // the upstream refused or timed out
	StatusIdle       = "idle"                 // Bounds.Idle passed with no byte
	StatusStopped    = "session_end"          // the session ended first
	StatusError      = "error"                // a read or write failed
	StatusRefused    = "max_connections"      // a refused record's status
)

// Audit appends records, one JSON line each, to a file it syncs after
// every record. The first failure sticks: every later Append returns it,
// and the relay stops accepting (fail closed: no connection is relayed
// whose open record could not be made durable).
type Audit struct {
	mu  sync.Mutex
	f   *os.File
	seq uint64
	err error
}

// NewAudit writes to f, which the caller owns and closes.
func NewAudit(f *os.File) *Audit { return &Audit{f: f} }

// Append writes r (its Seq is set here) and syncs the file.
func (a *Audit) Append(r Record) error {
	if a == nil || a.f == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return a.err
	}
	a.seq++
	r.Seq = a.seq
	b, err := json.Marshal(r)
	if err == nil {
		_, err = a.f.Write(append(b, '\n'))
	}
	if err == nil {
		err = a.f.Sync()
	}
	if err != nil {
		a.err = fmt.Errorf("egress audit: append record %d: %w", r.Seq, err)
	}
	return a.err
}

// CheckUpstream accepts a unix socket by absolute clean path, or a TCP
// address of the host's loopback (127.0.0.0/8 or ::1) with a port: the
// relay's connections stay on the host, never reach the network from
// the supervisor's side (threat: a policy turning the supervisor into an
// open proxy to the operator's network).
func CheckUpstream(u Upstream) error {
	switch u.Network {
	case "unix":
		if !path.IsAbs(u.Address) || path.Clean(u.Address) != u.Address || len(u.Address) > 107 {
			return fmt.Errorf("upstream unix socket %q is not an absolute clean path of at most 107 bytes", u.Address)
		}
	case "tcp":
		ap, err := netip.ParseAddrPort(u.Address)
		if err != nil || !ap.Addr().IsLoopback() || ap.Port() == 0 || ap.Addr().Zone() != "" {
			return fmt.Errorf("upstream tcp address %q is not a loopback address with a port", u.Address)
		}
	default:
		return fmt.Errorf("upstream network %q (unix or tcp)", u.Network)
	}
	return nil
}

// CheckListener refuses f unless it is a listening AF_INET stream socket
// bound to 127.0.0.1:port in a network namespace other than the caller's.
// The namespace is asked with SIOCGSKNS, which needs CAP_NET_ADMIN in the
// user namespace owning the socket's network namespace: the supervisor
// has it in a sandbox's (it owns the sandbox's user namespace) and not in
// the host's, so a listener of the host's namespace is refused either way.
func CheckListener(f *os.File, port uint16) error {
	fd := int(f.Fd())
	dom, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return fmt.Errorf("listener for port %d: getsockopt SO_DOMAIN: %w", port, err)
	}
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return fmt.Errorf("listener for port %d: getsockopt SO_TYPE: %w", port, err)
	}
	acc, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	if err != nil {
		return fmt.Errorf("listener for port %d: getsockopt SO_ACCEPTCONN: %w", port, err)
	}
	if dom != unix.AF_INET || typ != unix.SOCK_STREAM || acc != 1 {
		return fmt.Errorf("listener for port %d: domain %d type %d listening %d, want a listening AF_INET stream socket", port, dom, typ, acc)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return fmt.Errorf("listener for port %d: getsockname: %w", port, err)
	}
	in, ok := sa.(*unix.SockaddrInet4)
	if !ok || in.Addr != [4]byte{127, 0, 0, 1} || in.Port != int(port) {
		return fmt.Errorf("listener for port %d: bound to %v, want 127.0.0.1:%d", port, sa, port)
	}
	nsfd, err := unix.IoctlRetInt(fd, unix.SIOCGSKNS)
	if err != nil {
		return fmt.Errorf("listener for port %d: its network namespace (SIOCGSKNS): %w", port, err)
	}
	defer unix.Close(nsfd)
	var theirs, ours unix.Stat_t
	if err := unix.Fstat(nsfd, &theirs); err != nil {
		return fmt.Errorf("listener for port %d: fstat its network namespace: %w", port, err)
	}
	if err := unix.Stat("/proc/thread-self/ns/net", &ours); err != nil {
		return fmt.Errorf("listener for port %d: stat the supervisor's network namespace: %w", port, err)
	}
	if theirs.Dev == ours.Dev && theirs.Ino == ours.Ino {
		return fmt.Errorf("listener for port %d: in the supervisor's own network namespace, not the sandbox's", port)
	}
	return nil
}

// Relay serves a session's endpoints.
type Relay struct {
	session string
	bounds  Bounds
	audit   *Audit
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	lns     []net.Listener
	nconn   uint64
	stopped bool
	wg      sync.WaitGroup
	errs    []error
}

// Start relays each endpoint's listener (listeners[i] is eps[i]'s, checked
// by CheckListener). The listeners are the relay's from here on, whether
// Start succeeds or not.
func Start(session string, eps []Endpoint, listeners []*os.File, audit *Audit, b Bounds) (*Relay, error) {
	return start(session, eps, listeners, audit, b, CheckListener)
}

// start is Start with the listeners' check as a parameter: the tests'
// listeners live in the test's own network namespace.
func start(session string, eps []Endpoint, listeners []*os.File, audit *Audit, b Bounds, check func(*os.File, uint16) error) (*Relay, error) {
	r := &Relay{session: session, bounds: b, audit: audit, conns: map[net.Conn]struct{}{}}
	defer func() {
		for _, f := range listeners {
			if f != nil {
				f.Close()
			}
		}
	}()
	if len(eps) != len(listeners) {
		return nil, fmt.Errorf("egress: %d listeners for %d endpoints", len(listeners), len(eps))
	}
	for i, f := range listeners {
		if err := check(f, eps[i].Port); err != nil {
			r.closeListeners()
			return nil, fmt.Errorf("egress: %w", err)
		}
		ln, err := net.FileListener(f)
		if err != nil {
			r.closeListeners()
			return nil, fmt.Errorf("egress: listener for port %d: %w", eps[i].Port, err)
		}
		r.lns = append(r.lns, ln)
	}
	for i, ln := range r.lns {
		r.wg.Add(1)
		go r.accept(ln, eps[i])
	}
	return r, nil
}

func (r *Relay) closeListeners() {
	for _, ln := range r.lns {
		ln.Close()
	}
}

func (r *Relay) fail(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

func (r *Relay) accept(ln net.Listener, ep Endpoint) {
	defer r.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			r.mu.Lock()
			stopped := r.stopped
			r.mu.Unlock()
			if !stopped {
				r.fail(fmt.Errorf("egress: accept on port %d: %w", ep.Port, err))
			}
			return
		}
		r.mu.Lock()
		if r.stopped {
			r.mu.Unlock()
			c.Close()
			return
		}
		r.nconn++
		id := r.nconn
		over := len(r.conns) >= r.bounds.MaxConns
		if !over {
			r.conns[c] = struct{}{}
			r.wg.Add(1)
		}
		r.mu.Unlock()
		if over {
			c.Close()
			if err := r.audit.Append(Record{Session: r.session, Policy: ep.PolicyID, Port: ep.Port, Conn: id, Event: "refused", Status: StatusRefused}); err != nil {
				r.fail(err)
				r.closeListeners()
				return
			}
			continue
		}
		go r.serve(c, ep, id)
	}
}

func (r *Relay) forget(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
}

// serve relays one connection.
func (r *Relay) serve(c net.Conn, ep Endpoint, id uint64) {
	defer r.wg.Done()
	defer r.forget(c)
	defer c.Close()
	start := time.Now()
	rec := Record{Session: r.session, Policy: ep.PolicyID, Port: ep.Port, Conn: id}
	open := rec
	open.Event = "open"
	if err := r.audit.Append(open); err != nil {
		// Fail closed: nothing is relayed unrecorded, and no later
		// connection is accepted.
		r.fail(err)
		r.closeListeners()
		return
	}
	up, err := net.DialTimeout(ep.Upstream.Network, ep.Upstream.Address, r.bounds.Dial)
	status := StatusOK
	var nup, ndown uint64
	if err == nil {
		// Stop closes the upstream side too: a direction blocked reading
		// an upstream that neither answers nor closes would otherwise
		// outlive the session (until Bounds.Idle).
		r.mu.Lock()
		stopped := r.stopped
		if !stopped {
			r.conns[up] = struct{}{}
		}
		r.mu.Unlock()
		if stopped {
			up.Close()
			status = StatusStopped
		} else {
			defer r.forget(up)
			nup, ndown, status = r.pipe(c, up)
		}
	} else {
		status = StatusDialFailed
	}
	rec.Event, rec.BytesUp, rec.BytesDown, rec.Status = "close", nup, ndown, status
	rec.Ms = time.Since(start).Milliseconds()
	if err := r.audit.Append(rec); err != nil {
		r.fail(err)
		r.closeListeners()
	}
}

// pipe copies both ways until both have ended, one side fails, the
// connection idles for Bounds.Idle, or the relay stops.
func (r *Relay) pipe(c, up net.Conn) (nup, ndown uint64, status string) {
	defer up.Close()
	var mu sync.Mutex
	last := time.Now()
	touch := func() { mu.Lock(); last = time.Now(); mu.Unlock() }
	idleFor := func() time.Duration { mu.Lock(); defer mu.Unlock(); return time.Since(last) }
	type result struct {
		n   uint64
		err error
	}
	one := func(dst, src net.Conn, out chan<- result) {
		var n uint64
		buf := make([]byte, 32<<10)
		for {
			if err := src.SetReadDeadline(time.Now().Add(r.bounds.Idle)); err != nil {
				out <- result{n, err}
				return
			}
			k, err := src.Read(buf)
			if k > 0 {
				touch()
				if _, werr := dst.Write(buf[:k]); werr != nil {
					out <- result{n, werr}
					return
				}
				n += uint64(k)
			}
			if errors.Is(err, os.ErrDeadlineExceeded) && idleFor() < r.bounds.Idle {
				continue // the other direction is busy
			}
			if err == io.EOF {
				// Half-close: the peer learns that no more comes.
				if cw, ok := dst.(interface{ CloseWrite() error }); ok {
					if cerr := cw.CloseWrite(); cerr != nil {
						out <- result{n, cerr}
						return
					}
				}
				out <- result{n, nil}
				return
			}
			if err != nil {
				out <- result{n, err}
				return
			}
		}
	}
	upc, downc := make(chan result, 1), make(chan result, 1)
	go one(up, c, upc)
	go one(c, up, downc)
	status = StatusOK
	for i := 0; i < 2; i++ {
		select {
		case res := <-upc:
			nup = res.n
			upc = nil
			status = r.classify(status, res.err, c, up)
		case res := <-downc:
			ndown = res.n
			downc = nil
			status = r.classify(status, res.err, c, up)
		}
	}
	return nup, ndown, status
}

// classify keeps the first failure's status and, on a failure, closes
// both sides so that the other direction ends too. The status is decided
// before the close: the close is what the program sees end, and a Stop
// that follows it must not turn an idle close into a session end.
func (r *Relay) classify(status string, err error, c, up net.Conn) string {
	if err == nil {
		return status
	}
	if status == StatusOK {
		r.mu.Lock()
		stopped := r.stopped
		r.mu.Unlock()
		switch {
		case stopped:
			status = StatusStopped
		case errors.Is(err, os.ErrDeadlineExceeded):
			status = StatusIdle
		default:
			status = StatusError
		}
	}
	c.Close()
	up.Close()
	return status
}

// Stop closes the listeners and every connection, waits for the relay's
// goroutines and returns what failed during the session (an audit record
// that could not be made durable, an accept that failed).
func (r *Relay) Stop() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	r.stopped = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.closeListeners()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
}
