// SPDX-License-Identifier: Apache-2.0

package streamproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/streamwire"
	"github.com/glove-sandbox/glove/names"
	"golang.org/x/sys/unix"
)

// Stable codes of streamwire StatusReply.Err besides the relay's Errors':
// the guest closed its end between exchanges, and anything else.
const CodeEOF, CodeInternal = "eof", "internal"

// errCode is the stable code of what the relay returned.
func errCode(err error) string {
	var e *Error
	switch {
	case errors.Is(err, io.EOF):
		return CodeEOF
	case errors.As(err, &e):
		return e.Code
	}
	return CodeInternal
}

// server is one helper process's single stream.
type server struct {
	cfg       *Config
	uid       uint32
	exchanges atomic.Uint64 // delivered records written

	mu     sync.Mutex
	cancel context.CancelFunc // set by streamwire Open (once-only)
	done   chan struct{}      // closed once the relay stopped
	code   string             // why the relay stopped; "" while it runs
}

func refuse(code wire.ErrorCode, format string, args ...any) error {
	return &wire.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// closeFD closes fd, adding a failure to err.
func closeFD(err error, fd int) error {
	if cerr := unix.Close(fd); cerr != nil {
		return errors.Join(err, fmt.Errorf("streamproxy: close the audit file: %w", cerr))
	}
	return err
}

// checkStream checks fd is a connected AF_UNIX SOCK_STREAM socket and
// returns its peer's credentials (for a socketpair, its creator; for a
// connection, the listener's at listen(2)).
func checkStream(what string, fd int) (*unix.Ucred, error) {
	domain, typ, err := socketKind(fd)
	cred, cerr := peerCred(fd)
	switch {
	case err != nil:
		return nil, refuse(wire.ErrRefused, "%s is not a socket: %v", what, err)
	case domain != unix.AF_UNIX || typ != unix.SOCK_STREAM:
		return nil, refuse(wire.ErrRefused, "%s is not an AF_UNIX stream socket (domain %d, type %d)", what, domain, typ)
	case cerr != nil:
		return nil, refuse(wire.ErrRefused, "%s: peer credentials: %v", what, cerr)
	case cred.Pid == 0: // an unconnected (or listening) socket has no peer
		return nil, refuse(wire.ErrRefused, "%s is not connected", what)
	}
	return cred, nil
}

// checkAudit checks the audit file: a regular file owned by the service
// user, open write-only for appending.
func (s *server) checkAudit(fd int) error {
	st, err := fstat(fd)
	fl, ferr := statusFlags(fd)
	switch {
	case err != nil:
		return refuse(wire.ErrRefused, "audit file: fstat: %v", err)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return refuse(wire.ErrRefused, "audit file is not a regular file (mode %#o)", st.Mode)
	case st.Uid != s.uid:
		return refuse(wire.ErrRefused, "audit file is owned by uid %d, not %d", st.Uid, s.uid)
	case ferr != nil:
		return refuse(wire.ErrRefused, "audit file: status flags: %v", ferr)
	case fl&unix.O_ACCMODE != unix.O_WRONLY || fl&unix.O_APPEND == 0:
		return refuse(wire.ErrRefused, "audit file is not open O_WRONLY|O_APPEND (flags %#x)", fl)
	}
	return nil
}

// check checks the guest end, the upstream and the audit file, and
// returns the upstream's credentials.
func (s *server) check(guest, up, audit int) (*unix.Ucred, error) {
	if _, err := checkStream("guest end", guest); err != nil {
		return nil, err
	}
	peer, err := checkStream("upstream", up)
	if err != nil {
		return nil, err
	}
	// Threat: a compromised supervisor hands us a connection to a service
	// it should not reach (root's, another user's). The helper can only
	// vouch for its own uid: the upstream service must run as the Glove
	// service user. Which service it is, is the supervisor's check.
	if peer.Uid != s.uid {
		return nil, refuse(wire.ErrRefused, "upstream peer runs as uid %d, not %d", peer.Uid, s.uid)
	}
	gst, err := fstat(guest)
	ust, uerr := fstat(up)
	if err != nil || uerr != nil || gst.Dev == ust.Dev && gst.Ino == ust.Ino {
		return nil, refuse(wire.ErrRefused, "the guest end and the upstream are the same socket (%v)", errors.Join(err, uerr))
	}
	return peer, s.checkAudit(audit)
}

// streamOpen checks the three descriptors before keeping anything, then
// runs the relay in a goroutine.
func (s *server) streamOpen(_ uint32, req *streamwire.OpenRequest, files []*os.File) (*streamwire.OpenReply, []int, error) {
	if !names.Name(req.Session) {
		return nil, nil, refuse(wire.ErrBadRequest, "session %q does not match %s", req.Session, names.NamePattern)
	}
	if !names.Identifier(req.Alias) {
		return nil, nil, refuse(wire.ErrBadRequest, "alias %q does not match %s", req.Alias, names.IdentifierPattern)
	}
	var peer *unix.Ucred
	auditFD := -1
	err := control(func(fd []int) (err error) {
		if peer, err = s.check(fd[0], fd[1], fd[2]); err != nil {
			return err
		}
		// Kept past the handler, after which the wire server closes it.
		if auditFD, err = dupCloexec(fd[2]); err != nil {
			return fmt.Errorf("streamproxy: keep the audit file: %w", err)
		}
		return nil
	}, files[0], files[1], files[2])
	if err != nil {
		return nil, nil, err
	}
	guest, err := FromFile(files[0])
	if err != nil {
		return nil, nil, closeFD(fmt.Errorf("streamproxy: guest end: %w", err), auditFD)
	}
	upstream, err := FromFile(files[1])
	if err != nil {
		return nil, nil, closeFD(errors.Join(fmt.Errorf("streamproxy: upstream: %w", err), guest.Close()), auditFD)
	}
	audit := &auditLog{fd: auditFD, Session: req.Session, Alias: req.Alias, delivered: func() { s.exchanges.Add(1) }}
	r, err := NewRelay(RelayConfig{
		Guest: guest, Upstream: upstream,
		MaxFrame:    int(s.cfg.MaxFrameBytes),
		MaxExchange: time.Duration(s.cfg.MaxExchangeMS) * time.Millisecond,
		Audit:       audit,
		// The upstream's SO_PEERCRED must stay the one seen here.
		CheckUpstream: func() error {
			return control(func(fd []int) error {
				got, err := peerCred(fd[0])
				if err == nil && *got != *peer {
					err = fmt.Errorf("peer pid/uid/gid %d/%d/%d, was %d/%d/%d", got.Pid, got.Uid, got.Gid, peer.Pid, peer.Uid, peer.Gid)
				}
				return err
			}, upstream.(unixConn))
		},
	})
	if err != nil {
		return nil, nil, closeFD(errors.Join(fmt.Errorf("streamproxy: relay: %w", err), guest.Close(), upstream.Close()), auditFD)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.mu.Lock()
	s.cancel, s.done = cancel, done
	s.mu.Unlock()
	go func() {
		err := r.Serve(ctx) // closes guest and upstream
		if aerr := audit.close(); aerr != nil {
			err = fmt.Errorf("%w: last fdatasync or close: %v (stream: %v)", ErrAudit, aerr, err)
		}
		s.mu.Lock()
		s.code = errCode(err)
		s.mu.Unlock()
		close(done)
	}()
	return &streamwire.OpenReply{}, nil, nil
}

func (s *server) streamStatus(uint32, *streamwire.StatusRequest, []*os.File) (*streamwire.StatusReply, []int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel == nil {
		return nil, nil, refuse(wire.ErrBadRequest, "no stream is open")
	}
	return &streamwire.StatusReply{Open: s.code == "", Exchanges: s.exchanges.Load(), Err: s.code}, nil, nil
}

// streamClose cancels the relay and answers once it stopped, so the audit
// file is final. A kernel-blocked fdatasync cannot be interrupted: past
// one exchange budget the helper says so instead of waiting on.
func (s *server) streamClose(uint32, *streamwire.CloseRequest, []*os.File) (*streamwire.CloseReply, []int, error) {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel == nil {
		return nil, nil, refuse(wire.ErrBadRequest, "no stream is open")
	}
	cancel()
	select {
	case <-done:
		return &streamwire.CloseReply{}, nil, nil
	case <-time.After(time.Duration(s.cfg.MaxExchangeMS) * time.Millisecond):
		return nil, nil, errors.New("streamproxy: the relay did not stop within max_exchange_ms")
	}
}

// auditLog is the audit file: Record appends the JSON line of the exported
// fields, the audit format (nothing else is ever written), and, unless the
// record is deferred, makes the file durable (fdatasync) before it
// returns; only the relay's goroutine calls it, and close once it stopped.
type auditLog struct {
	Seq       uint64 `json:"seq"`
	Session   string `json:"session"`
	Alias     string `json:"alias"`
	Phase     string `json:"phase"`
	Status    string `json:"status"`
	LatencyMS uint64 `json:"latency_ms"`
	fd        int
	delivered func() // counts a delivered record (streamwire Status)
	unsynced  bool   // a deferred record is not durable yet
}

func (a *auditLog) Record(r Record) error {
	a.Seq++
	a.Phase, a.Status, a.LatencyMS = r.Phase, r.Status, r.LatencyMS
	line, err := json.Marshal(a)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	// One write(2) per line: with O_APPEND the line lands whole at the
	// end. A short write is a failure, never continued, so a record is
	// never split around another writer's.
	n, err := writeRetry(a.fd, line)
	if err != nil {
		return fmt.Errorf("append: %w", err)
	}
	if n != len(line) {
		return fmt.Errorf("append: short write %d of %d bytes", n, len(line))
	}
	// Never retried: a second fdatasync after a failed one may succeed, data lost.
	if a.unsynced = r.Deferred; !r.Deferred {
		if err := fdatasync(a.fd); err != nil {
			return fmt.Errorf("fdatasync: %w", err)
		}
	}
	if r.Status == StatusDelivered {
		a.delivered()
	}
	return nil
}

// close syncs a deferred last record and closes the file (streamwire Close waits).
func (a *auditLog) close() (err error) {
	if a.unsynced {
		err = fdatasync(a.fd)
	}
	return closeFD(err, a.fd)
}
