package streamproxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/streamwire"
	"github.com/glove-sandbox/glove/names"
	"golang.org/x/sys/unix"
)

// Stable codes of streamwire StatusReply.Err besides the relay's Error
// codes.
const (
	CodeEOF      = "eof"      // the guest closed its end between exchanges
	CodeInternal = "internal" // anything else
)

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
	cfg *Config
	uid uint32

	mu        sync.Mutex
	cancel    context.CancelFunc // set by streamwire Open (once-only)
	done      chan struct{}      // closed once the relay stopped
	exchanges uint64
	code      string // why the relay stopped; "" while it runs
}

func newServer(cfg *Config) *server {
	return &server{cfg: cfg, uid: uint32(os.Getuid())}
}

func (s *server) handlers() []wire.Handler {
	return []wire.Handler{streamwire.Open.Handle(s.streamOpen), streamwire.Status.Handle(s.streamStatus), streamwire.Close.Handle(s.streamClose)}
}

func refuse(code wire.ErrorCode, format string, args ...any) error {
	return &wire.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// control runs fn on the files' descriptors without changing their
// blocking mode (File.Fd would).
func control(files []*os.File, fds []int, fn func(fds []int) error) error {
	if len(files) == 0 {
		return fn(fds)
	}
	rc, err := files[0].SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = control(files[1:], append(fds, int(fd)), fn) }); err != nil {
		return err
	}
	return ferr
}

// closeFDs closes fds, adding any failure to err.
func closeFDs(err error, fds ...int) error {
	for _, fd := range fds {
		if cerr := unix.Close(fd); cerr != nil {
			err = errors.Join(err, fmt.Errorf("streamproxy: close descriptor %d: %w", fd, cerr))
		}
	}
	return err
}

// checkStream checks fd is a connected AF_UNIX SOCK_STREAM socket and
// returns its peer's credentials (for a socketpair, its creator; for a
// connection, the listener's at listen(2)).
func checkStream(what string, fd int) (*unix.Ucred, error) {
	domain, typ, err := socketKind(fd)
	if err != nil {
		return nil, refuse(wire.ErrRefused, "%s is not a socket: %v", what, err)
	}
	if domain != unix.AF_UNIX || typ != unix.SOCK_STREAM {
		return nil, refuse(wire.ErrRefused, "%s is not an AF_UNIX stream socket (domain %d, type %d)", what, domain, typ)
	}
	cred, err := peerCred(fd)
	if err != nil {
		return nil, refuse(wire.ErrRefused, "%s: peer credentials: %v", what, err)
	}
	// An unconnected (or listening) socket has no peer: pid 0.
	if cred.Pid == 0 {
		return nil, refuse(wire.ErrRefused, "%s is not connected", what)
	}
	return cred, nil
}

// checkAudit checks the audit file: a regular file owned by the service
// user, open write-only for appending.
func (s *server) checkAudit(fd int) error {
	st, err := fstat(fd)
	if err != nil {
		return refuse(wire.ErrRefused, "audit file: fstat: %v", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return refuse(wire.ErrRefused, "audit file is not a regular file (mode %#o)", st.Mode)
	}
	if st.Uid != s.uid {
		return refuse(wire.ErrRefused, "audit file is owned by uid %d, not %d", st.Uid, s.uid)
	}
	fl, err := statusFlags(fd)
	if err != nil {
		return refuse(wire.ErrRefused, "audit file: status flags: %v", err)
	}
	if fl&unix.O_ACCMODE != unix.O_WRONLY || fl&unix.O_APPEND == 0 {
		return refuse(wire.ErrRefused, "audit file is not open O_WRONLY|O_APPEND (flags %#x)", fl)
	}
	return nil
}

// sameFile reports whether a and b are the same inode (fstat).
func sameFile(a, b int) (bool, error) {
	sa, err := fstat(a)
	if err != nil {
		return false, err
	}
	sb, err := fstat(b)
	return err == nil && sa.Dev == sb.Dev && sa.Ino == sb.Ino, err
}

// streamOpen checks the guest end, the upstream and the audit file before
// keeping anything, then starts the relay.
func (s *server) streamOpen(_ uint32, req *streamwire.OpenRequest, files []*os.File) (*streamwire.OpenReply, []int, error) {
	if !names.Name(req.Session) {
		return nil, nil, refuse(wire.ErrBadRequest, "session %q does not match %s", req.Session, names.NamePattern)
	}
	if !names.Identifier(req.Alias) {
		return nil, nil, refuse(wire.ErrBadRequest, "alias %q does not match %s", req.Alias, names.IdentifierPattern)
	}
	var peer *unix.Ucred
	var kept []int // the upstream and the audit file, past the handler
	err := control(files, nil, func(fd []int) (err error) {
		if _, err = checkStream("guest end", fd[0]); err != nil {
			return err
		}
		if peer, err = checkStream("upstream", fd[1]); err != nil {
			return err
		}
		// Threat: a compromised supervisor hands us a connection to a
		// service it should not reach (root's, another user's). The helper
		// can only vouch for one identity, its own uid: the upstream service
		// must run as the Glove service user. Which service it is, is the
		// supervisor's check.
		if peer.Uid != s.uid {
			return refuse(wire.ErrRefused, "upstream peer runs as uid %d, not %d", peer.Uid, s.uid)
		}
		if same, err := sameFile(fd[0], fd[1]); err != nil || same {
			return refuse(wire.ErrRefused, "the guest end and the upstream are the same socket (%v)", err)
		}
		if err := s.checkAudit(fd[2]); err != nil {
			return err
		}
		// The wire server closes received descriptors after the handler.
		for _, d := range fd[1:] {
			if d, err = dupCloexec(d); err != nil {
				return fmt.Errorf("streamproxy: keep a descriptor: %w", err)
			}
			kept = append(kept, d)
		}
		return nil
	})
	if err == nil {
		err = s.start(req, files[0], files[1], kept[0], kept[1], *peer)
	}
	if err != nil {
		return nil, nil, closeFDs(err, kept...)
	}
	return &streamwire.OpenReply{}, nil, nil
}

// start runs the relay in a goroutine, which closes upFD and auditFD once
// it stopped; on failure they are the caller's.
func (s *server) start(req *streamwire.OpenRequest, guestF, upF *os.File, upFD, auditFD int, peer unix.Ucred) error {
	guest, err := FromFile(guestF)
	if err != nil {
		return fmt.Errorf("streamproxy: guest end: %w", err)
	}
	upstream, err := FromFile(upF)
	if err != nil {
		return errors.Join(fmt.Errorf("streamproxy: upstream: %w", err), guest.Close())
	}
	r, err := NewRelay(RelayConfig{
		Guest: guest, Upstream: upstream,
		MaxFrame:      int(s.cfg.MaxFrameBytes),
		MaxExchange:   time.Duration(s.cfg.MaxExchangeMS) * time.Millisecond,
		Audit:         &auditLog{fd: auditFD, session: req.Session, alias: req.Alias, delivered: s.delivered},
		CheckUpstream: func() error { return checkPeer(upFD, peer) },
	})
	if err != nil {
		return errors.Join(fmt.Errorf("streamproxy: relay: %w", err), guest.Close(), upstream.Close())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.mu.Lock()
	s.cancel, s.done = cancel, done
	s.mu.Unlock()
	go func() {
		// Serve closes guest and upstream.
		code := errCode(closeFDs(r.Serve(ctx), upFD, auditFD))
		s.mu.Lock()
		s.code = code
		s.mu.Unlock()
		close(done)
	}()
	return nil
}

// checkPeer is the relay's CheckUpstream: the upstream's SO_PEERCRED must
// be the one seen at streamwire Open.
func checkPeer(fd int, want unix.Ucred) error {
	got, err := peerCred(fd)
	if err != nil {
		return err
	}
	if *got != want {
		return fmt.Errorf("peer pid/uid/gid %d/%d/%d, was %d/%d/%d", got.Pid, got.Uid, got.Gid, want.Pid, want.Uid, want.Gid)
	}
	return nil
}

func (s *server) delivered() {
	s.mu.Lock()
	s.exchanges++
	s.mu.Unlock()
}

func (s *server) streamStatus(uint32, *streamwire.StatusRequest, []*os.File) (*streamwire.StatusReply, []int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel == nil {
		return nil, nil, refuse(wire.ErrBadRequest, "no stream is open")
	}
	return &streamwire.StatusReply{Open: s.code == "", Exchanges: s.exchanges, Err: s.code}, nil, nil
}

// streamClose cancels the relay and answers once it has stopped, so the
// supervisor reads a final audit file after the reply. An fdatasync the
// kernel blocks cannot be interrupted; past one exchange budget the
// helper says so instead of waiting on.
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

// auditLog appends one JSON line per record to the audit file and makes
// it durable (fdatasync) before returning. Only the relay's goroutine
// calls Record.
type auditLog struct {
	fd             int
	session, alias string
	seq            uint64
	delivered      func()
}

// auditLine is the audit format; nothing else is ever written.
type auditLine struct {
	Seq       uint64 `json:"seq"`
	Session   string `json:"session"`
	Alias     string `json:"alias"`
	Phase     string `json:"phase"`
	Status    string `json:"status"`
	LatencyMS uint64 `json:"latency_ms"`
}

func (a *auditLog) Record(r Record) error {
	a.seq++
	line, err := json.Marshal(auditLine{Seq: a.seq, Session: a.session, Alias: a.alias, Phase: r.Phase, Status: r.Status, LatencyMS: r.LatencyMS})
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
	if err := fdatasync(a.fd); err != nil {
		return fmt.Errorf("fdatasync: %w", err)
	}
	if r.Status == StatusDelivered {
		a.delivered()
	}
	return nil
}
