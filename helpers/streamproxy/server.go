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

	"github.com/glove-sandbox/glove/helpers/streamproxy/relay"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/streamwire"
	"github.com/glove-sandbox/glove/names"
	"golang.org/x/sys/unix"
)

// Stable codes of streamwire StatusReply.Err, the reason a stream closed.
const (
	CodeEOF       = "eof"            // the guest closed its end between exchanges
	CodeFraming   = "framing"        // a zero, oversized or truncated frame
	CodePipelined = "pipelined"      // guest input queued around an exchange
	CodeDrift     = "upstream_drift" // the upstream's SO_PEERCRED changed
	CodeTimeout   = "timeout"        // the exchange deadline passed
	CodeCanceled  = "canceled"       // streamwire Close
	CodeAudit     = "audit"          // an audit append or fdatasync failed
	CodeTransport = "transport"      // a read, write or queue check failed
	CodeInternal  = "internal"       // anything else
)

// errCode maps what relay.Serve returned to its stable code. The relay
// wraps exactly one sentinel, so the order only matters for readability.
func errCode(err error) string {
	for _, c := range []struct {
		err  error
		code string
	}{
		{io.EOF, CodeEOF}, {relay.ErrCanceled, CodeCanceled}, {relay.ErrAudit, CodeAudit},
		{relay.ErrFraming, CodeFraming}, {relay.ErrPipelined, CodePipelined},
		{relay.ErrUpstreamDrift, CodeDrift}, {relay.ErrTimeout, CodeTimeout},
		{relay.ErrTransport, CodeTransport},
	} {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return CodeInternal
}

// server is one helper process's single stream.
type server struct {
	cfg *Config
	uid uint32

	mu        sync.Mutex
	opened    bool // Open succeeded (at most once: the route is once-only)
	open      bool // the relay still runs
	exchanges uint64
	code      string
	cancel    context.CancelFunc
	done      chan struct{}
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

// control runs fn on f's descriptor without changing its blocking mode
// (File.Fd would).
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// checkStream checks f is a connected AF_UNIX SOCK_STREAM socket and
// returns its peer's credentials (for a socketpair, its creator; for a
// connection, the listener's at listen(2)).
func checkStream(what string, f *os.File) (*unix.Ucred, error) {
	var cred *unix.Ucred
	err := control(f, func(fd int) error {
		domain, typ, err := socketKind(fd)
		if err != nil {
			return refuse(wire.ErrRefused, "%s is not a socket: %v", what, err)
		}
		if domain != unix.AF_UNIX || typ != unix.SOCK_STREAM {
			return refuse(wire.ErrRefused, "%s is not an AF_UNIX stream socket (domain %d, type %d)", what, domain, typ)
		}
		if cred, err = peerCred(fd); err != nil {
			return refuse(wire.ErrRefused, "%s: peer credentials: %v", what, err)
		}
		// An unconnected (or listening) socket has no peer: pid 0.
		if cred.Pid == 0 {
			return refuse(wire.ErrRefused, "%s is not connected", what)
		}
		return nil
	})
	return cred, err
}

// checkAudit checks the audit file: a regular file owned by the service
// user, open write-only for appending.
func (s *server) checkAudit(f *os.File) error {
	return control(f, func(fd int) error {
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
	})
}

// sameFile reports whether a and b are the same inode (fstat).
func sameFile(a, b *os.File) (bool, error) {
	var sa, sb unix.Stat_t
	if err := control(a, func(fd int) (err error) { sa, err = fstat(fd); return err }); err != nil {
		return false, err
	}
	if err := control(b, func(fd int) (err error) { sb, err = fstat(fd); return err }); err != nil {
		return false, err
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino, nil
}

// dup duplicates f's descriptor (close-on-exec) for the stream to keep:
// the wire server closes received descriptors after the handler.
func dup(f *os.File) (int, error) {
	fd := -1
	err := control(f, func(raw int) error {
		var err error
		fd, err = dupCloexec(raw)
		return err
	})
	return fd, err
}

func (s *server) streamOpen(_ uint32, req *streamwire.OpenRequest, fds []*os.File) (*streamwire.OpenReply, []int, error) {
	if !names.Name(req.Session) {
		return nil, nil, refuse(wire.ErrBadRequest, "session %q does not match %s", req.Session, names.NamePattern)
	}
	if !names.Identifier(req.Alias) {
		return nil, nil, refuse(wire.ErrBadRequest, "alias %q does not match %s", req.Alias, names.IdentifierPattern)
	}
	if _, err := checkStream("guest end", fds[0]); err != nil {
		return nil, nil, err
	}
	peer, err := checkStream("upstream", fds[1])
	if err != nil {
		return nil, nil, err
	}
	// Threat: a compromised supervisor hands us a connection to a
	// service it should not reach (root's, another user's). The helper
	// can only vouch for one identity, its own uid: the upstream service
	// must run as the Glove service user. Which service it is, is the
	// supervisor's check.
	if peer.Uid != s.uid {
		return nil, nil, refuse(wire.ErrRefused, "upstream peer runs as uid %d, not %d", peer.Uid, s.uid)
	}
	if same, err := sameFile(fds[0], fds[1]); err != nil || same {
		return nil, nil, refuse(wire.ErrRefused, "the guest end and the upstream are the same socket (%v)", err)
	}
	if err := s.checkAudit(fds[2]); err != nil {
		return nil, nil, err
	}
	return s.start(req, fds, *peer)
}

// start builds the relay from checked descriptors and runs it.
func (s *server) start(req *streamwire.OpenRequest, fds []*os.File, peer unix.Ucred) (*streamwire.OpenReply, []int, error) {
	auditFD, err := dup(fds[2])
	if err != nil {
		return nil, nil, fmt.Errorf("streamproxy: keep audit file: %w", err)
	}
	upFD, err := dup(fds[1])
	if err != nil {
		unix.Close(auditFD)
		return nil, nil, fmt.Errorf("streamproxy: keep upstream: %w", err)
	}
	closeFDs := func() { unix.Close(auditFD); unix.Close(upFD) }
	guest, err := relay.FromFile(fds[0])
	if err != nil {
		closeFDs()
		return nil, nil, fmt.Errorf("streamproxy: guest end: %w", err)
	}
	upstream, err := relay.FromFile(fds[1])
	if err != nil {
		guest.Close()
		closeFDs()
		return nil, nil, fmt.Errorf("streamproxy: upstream: %w", err)
	}
	audit := &auditLog{fd: auditFD, session: req.Session, alias: req.Alias, delivered: s.delivered}
	r, err := relay.New(relay.Config{
		Guest: guest, Upstream: upstream,
		MaxFrame:      int(s.cfg.MaxFrameBytes),
		MaxExchange:   time.Duration(s.cfg.MaxExchangeMS) * time.Millisecond,
		Audit:         audit,
		CheckUpstream: func() error { return checkPeer(upFD, peer) },
	})
	if err != nil {
		guest.Close()
		upstream.Close()
		closeFDs()
		return nil, nil, fmt.Errorf("streamproxy: relay: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	s.opened, s.open, s.cancel, s.done = true, true, cancel, make(chan struct{})
	done := s.done
	s.mu.Unlock()
	go func() {
		err := r.Serve(ctx) // closes guest and upstream
		closeFDs()
		s.mu.Lock()
		s.open, s.code = false, errCode(err)
		s.mu.Unlock()
		close(done)
	}()
	return &streamwire.OpenReply{}, nil, nil
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
	if !s.opened {
		return nil, nil, refuse(wire.ErrBadRequest, "no stream is open")
	}
	return &streamwire.StatusReply{Open: s.open, Exchanges: s.exchanges, Err: s.code}, nil, nil
}

// streamClose cancels the relay and answers once it has stopped, so the
// supervisor reads a final audit file after the reply. An fdatasync the
// kernel blocks cannot be interrupted; past one exchange budget the
// helper says so instead of waiting on.
func (s *server) streamClose(uint32, *streamwire.CloseRequest, []*os.File) (*streamwire.CloseReply, []int, error) {
	s.mu.Lock()
	opened, cancel, done := s.opened, s.cancel, s.done
	s.mu.Unlock()
	if !opened {
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

func (a *auditLog) Record(r relay.Record) error {
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
	if r.Status == relay.StatusDelivered {
		a.delivered()
	}
	return nil
}
