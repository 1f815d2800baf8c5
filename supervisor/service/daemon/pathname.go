// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/glove-sandbox/glove/helpers/wire/streamwire"
	"github.com/glove-sandbox/glove/helpers/wire/wirecall"
	"github.com/glove-sandbox/glove/seccomp/notify"
	"github.com/glove-sandbox/glove/supervisor/authority/localservice"
	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/engine/helperproc"
	"github.com/glove-sandbox/glove/supervisor/engine/session"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// The pathname compatibility transport (a --local-services file without
// "transport"): each service's upstream directory is pinned at start-up
// (openEndpoint, as for the inherited stream), and a session of an
// allowed runtime gets the read-only alias directory
// session.ServiceDirTarget with one socket per alias it may reach
// (session/services.go). This file serves a session's aliases:
//
//	program connect(2) ──seccomp user notification──► handleConnect:
//	    the address read once from the program's memory (parseConnectAddr),
//	    only ServiceDirTarget/<alias of the session> accepted; the alias
//	    socket connected by gloved through the directory it holds, the
//	    connection installed at the program's descriptor (ADDFD)
//	alias socket accept ──► SO_PEERCRED the service user ──► upstream
//	    connected through its pinned directory (endpoint.connect: identity
//	    before and after, SO_PEERCRED) ──► one glove-streamproxy per
//	    connection: the bounded, audited relay of inherited-stream-v1
//
// Threats: a program reaching any socket but its aliases (a host
// service's socket in a read-only bind, an abstract socket, the upstream
// itself by a name it guessed): connect never resolves a name the
// program chose, gloved connects only its own alias sockets; a program
// opening connections without end (each a helper process and audit
// records): at most maxRelays relays live, at most maxConnections per
// session.
const (
	// TransportPathname is the pathname transport's kind in the launch
	// digest.
	TransportPathname = "pathname-compat-v1"
	// maxRelays bounds a session's live relays (glove-streamproxy
	// processes); a connection beyond is closed at once.
	maxRelays = 4
	// maxConnections bounds the connections a session may open in all;
	// beyond, connect fails with ECONNREFUSED.
	maxConnections = 256
)

// pathnameFor lists, in alias order, the pathname transport's upstreams
// a session of the plan may reach: none unless the transport is
// configured and the plan's runtime template's runtime_id is allowed.
func (d *Daemon) pathnameFor(pl *plan.Plan) []*endpoint {
	if len(d.pathname) == 0 {
		return nil
	}
	t, ok := d.pol.Template(pl.RuntimeTemplateID)
	if !ok {
		return nil
	}
	var out []*endpoint
	for _, s := range localservice.ServicesFor(d.services, t.RuntimeID) {
		for _, e := range d.pathname {
			if e.alias == s.Alias {
				out = append(out, e)
			}
		}
	}
	return out
}

// pathnameTransport is what the launch digest binds of a pathname
// session: the kind, the directory, and each alias's configured socket
// with the identity of its socket file at launch.
func pathnameTransport(eps []*endpoint) (*session.Transport, []string, error) {
	tr := &session.Transport{Kind: TransportPathname, FDs: map[string]int{}, Dir: session.ServiceDirTarget}
	var aliases []string
	for _, e := range eps {
		dev, ino, err := e.identity()
		if err != nil {
			return nil, nil, fmt.Errorf("upstream %s: %w", e.alias, err)
		}
		tr.Manifest = append(tr.Manifest, session.ManifestEntry{Alias: e.alias, Socket: e.socket})
		tr.Upstreams = append(tr.Upstreams, session.EndpointID{Dev: dev, Ino: ino, UID: uint32(os.Geteuid())})
		aliases = append(aliases, e.alias)
	}
	return tr, aliases, nil
}

// parseConnectAddr decodes connect(2)'s address, read from the
// program's memory (untrusted bytes: the program chose them), and
// returns the alias it names: a struct sockaddr_un of family AF_UNIX
// whose path, up to its first NUL, is exactly
// session.ServiceDirTarget + "/" + an identifier. Anything else (another
// family, an unnamed or abstract address, any other path, a relative
// one, "." or ".." or a second "/" in it) is an error. Which aliases the
// session has is the caller's check.
func parseConnectAddr(b []byte) (string, error) {
	const pathMax = len(unix.RawSockaddrUnix{}.Path)
	switch {
	case len(b) < 2:
		return "", fmt.Errorf("address of %d bytes, shorter than its family", len(b))
	case len(b) > 2+pathMax:
		return "", fmt.Errorf("address of %d bytes, longer than sockaddr_un", len(b))
	}
	if fam := binary.NativeEndian.Uint16(b); fam != unix.AF_UNIX {
		return "", fmt.Errorf("address family %d, not AF_UNIX", fam)
	}
	p := b[2:]
	if len(p) == 0 {
		return "", errors.New("an unnamed address")
	}
	if p[0] == 0 {
		return "", errors.New("an abstract address")
	}
	if i := strings.IndexByte(string(p), 0); i >= 0 {
		p = p[:i]
	}
	alias, ok := strings.CutPrefix(string(p), session.ServiceDirTarget+"/")
	if !ok || !policy.ValidIdentifier(alias) {
		return "", errors.New("not the path of a local service's alias")
	}
	return alias, nil
}

// serviceServer serves one pathname session (session.ServiceHandles):
// the seccomp listener's connects and the alias sockets' connections.
type serviceServer struct {
	d   *Daemon
	id  string
	log *logrus.Entry
	eps map[string]*endpoint
	dir int // the alias directory (a duplicate, O_PATH)

	stopR, stopW *os.File // a byte on stopW wakes the notify loop
	handoff      *net.UnixConn
	listeners    []*net.UnixListener
	wg           sync.WaitGroup

	mu      sync.Mutex
	relays  []*helperproc.Proc // live glove-streamproxy helpers
	conns   int                // connections the notify loop made
	audit   *os.File           // the session's stream audit file, opened at the first relay
	stopped bool
	errs    []error
}

// serveServices is gloved's session.Env.ServeServices for a session
// whose aliases are eps.
func (d *Daemon) serveServices(id string, eps []*endpoint) func(session.ServiceHandles) (func() error, error) {
	return func(h session.ServiceHandles) (func() error, error) {
		s := &serviceServer{d: d, id: id, log: d.log.WithField("session_id", id).WithField("event", "local_service"), eps: map[string]*endpoint{}, dir: -1}
		for _, e := range eps {
			s.eps[e.alias] = e
		}
		if err := s.start(h); err != nil {
			return nil, errors.Join(err, s.stop())
		}
		return s.stop, nil
	}
}

func (s *serviceServer) start(h session.ServiceHandles) error {
	fd, err := unix.Openat(int(h.Dir.Fd()), ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the alias directory: %w", err)
	}
	s.dir = fd
	if s.stopR, s.stopW, err = os.Pipe(); err != nil {
		return fmt.Errorf("stop pipe: %w", err)
	}
	c, err := net.FileConn(h.Handoff)
	if err != nil {
		return fmt.Errorf("the seccomp listener's hand-off socket: %w", err)
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return errors.Join(errors.New("the seccomp listener's hand-off socket is not a unix socket"), c.Close())
	}
	s.handoff = uc
	for alias, f := range h.Listeners {
		if _, ok := s.eps[alias]; !ok {
			return fmt.Errorf("alias %s: a listening socket of no service", alias)
		}
		l, err := net.FileListener(f)
		if err != nil {
			return fmt.Errorf("alias %s: listening socket: %w", alias, err)
		}
		ul, ok := l.(*net.UnixListener)
		if !ok {
			return errors.Join(fmt.Errorf("alias %s: not a unix socket", alias), l.Close())
		}
		// The engine removes the scratch, and the socket file with it.
		ul.SetUnlinkOnClose(false)
		s.listeners = append(s.listeners, ul)
		s.wg.Add(1)
		go s.accept(alias, ul)
	}
	s.wg.Add(1)
	go s.notifyLoop()
	return nil
}

// stop ends the server: no connect is answered any more (the program is
// gone), the alias sockets stop accepting, and every relay ends with its
// audit's last record.
func (s *serviceServer) stop() error {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	var errs []error
	if s.stopW != nil {
		if _, err := s.stopW.Write([]byte{1}); err != nil {
			errs = append(errs, fmt.Errorf("wake the notify loop: %w", err))
		}
	}
	for _, l := range s.listeners {
		if err := l.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close an alias socket: %w", err))
		}
	}
	if s.handoff != nil {
		// Wakes a notify loop still waiting for the listener.
		if err := s.handoff.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close the hand-off socket: %w", err))
		}
	}
	s.wg.Wait()
	s.mu.Lock()
	relays := s.relays
	s.relays = nil
	errs = append(errs, s.errs...)
	s.mu.Unlock()
	settleStreams(relays)
	for _, sp := range relays {
		if err := endStream(sp); err != nil {
			errs = append(errs, err)
		}
	}
	for _, f := range []*os.File{s.stopR, s.stopW, s.audit} {
		if f != nil {
			if err := f.Close(); err != nil {
				errs = append(errs, fmt.Errorf("local services: close: %w", err))
			}
		}
	}
	if s.dir >= 0 {
		if err := unix.Close(s.dir); err != nil {
			errs = append(errs, fmt.Errorf("close the alias directory: %w", err))
		}
	}
	return errors.Join(errs...)
}

func (s *serviceServer) fail(err error) {
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
}

// accept serves one alias socket: each connection, from the service
// user (the only identity a sandbox has, and gloved's own connect on
// its behalf), is relayed to the upstream by a glove-streamproxy.
func (s *serviceServer) accept(alias string, l *net.UnixListener) {
	defer s.wg.Done()
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return // closed by stop
		}
		if err := s.relay(alias, c); err != nil {
			s.log.WithField("alias", alias).WithField("error", oneLine(err.Error())).Warn("local service connection refused")
		}
	}
}

// relay checks one accepted connection and hands it, with a checked
// upstream connection and the session's audit file, to a fresh
// glove-streamproxy.
func (s *serviceServer) relay(alias string, c *net.UnixConn) error {
	guest, err := c.File() // a duplicate, blocking: the helper's to check
	if cerr := c.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close the accepted connection: %w", cerr))
	}
	if err != nil {
		return fmt.Errorf("accepted connection: %w", err)
	}
	defer guest.Close()
	cred, err := unix.GetsockoptUcred(int(guest.Fd()), unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return fmt.Errorf("SO_PEERCRED of the guest connection: %w", err)
	}
	if int(cred.Uid) != os.Geteuid() {
		return fmt.Errorf("the guest connection's peer runs as uid %d, not the service user", cred.Uid)
	}
	if err := s.reap(); err != nil {
		return err
	}
	s.mu.Lock()
	full, stopped := len(s.relays) >= maxRelays, s.stopped
	s.mu.Unlock()
	if stopped {
		return errors.New("the session is ending")
	}
	if full {
		return fmt.Errorf("%d connections are open already", maxRelays)
	}
	up, _, err := s.eps[alias].connect()
	if err != nil {
		return err
	}
	defer up.Close()
	audit, err := s.auditFile()
	if err != nil {
		return err
	}
	sp, err := s.d.startHelper("glove-streamproxy")
	if err != nil {
		return err
	}
	if _, _, err := wirecall.Call(streamwire.Open, sp.Client, &streamwire.OpenRequest{Session: s.id, Alias: alias},
		[]int{int(guest.Fd()), int(up.Fd()), int(audit.Fd())}); err != nil {
		if cerr := sp.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("end it: %w", cerr))
		}
		return fmt.Errorf("glove-streamproxy: %w", err)
	}
	s.mu.Lock()
	if s.stopped {
		// stop took the list already: this one is ended here.
		s.mu.Unlock()
		return endStream(sp)
	}
	s.relays = append(s.relays, sp)
	s.mu.Unlock()
	return nil
}

// auditFile is the session's stream audit file, shared by its relays:
// each record is one whole line (O_APPEND), its alias says which
// service, and its seq counts within one connection.
func (s *serviceServer) auditFile() (*os.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.audit != nil {
		return s.audit, nil
	}
	f, err := s.d.createStreamAudit(s.id)
	if err != nil {
		return nil, err
	}
	s.audit = f
	return f, nil
}

// reap ends the relays whose stream is closed (the program closed its
// connection, or the relay closed it for a fault).
func (s *serviceServer) reap() error {
	s.mu.Lock()
	relays := s.relays
	s.relays = nil
	s.mu.Unlock()
	var keep []*helperproc.Proc
	var errs []error
	for _, sp := range relays {
		st, _, err := wirecall.Call(streamwire.Status, sp.Client, &streamwire.StatusRequest{}, nil)
		if err == nil && st.Open {
			keep = append(keep, sp)
			continue
		}
		if eerr := endStream(sp); eerr != nil {
			errs = append(errs, eerr)
		}
	}
	s.mu.Lock()
	s.relays = append(s.relays, keep...)
	s.mu.Unlock()
	return errors.Join(errs...)
}

// notifyLoop takes the seccomp listener from the hand-off socket, then
// answers the program's connects until the program and all its
// descendants are gone (the listener hangs up) or stop wakes it.
func (s *serviceServer) notifyLoop() {
	defer s.wg.Done()
	listener, err := s.receiveListener()
	if err != nil {
		s.mu.Lock()
		stopped := s.stopped
		s.mu.Unlock()
		if !stopped {
			s.fail(err)
			s.log.WithField("error", oneLine(err.Error())).Error("no seccomp listener: the program's connects stay unanswered")
		}
		return
	}
	if listener < 0 {
		// The shim loaded no filter (a test build with the seccomp
		// layer off): connect is the kernel's, and nothing is asked.
		s.log.Warn("the shim sent no seccomp listener (its seccomp layer is off, or it failed before)")
		return
	}
	defer func() {
		if err := unix.Close(listener); err != nil {
			s.fail(fmt.Errorf("close the seccomp listener: %w", err))
		}
	}()
	fds := []unix.PollFd{{Fd: int32(listener), Events: unix.POLLIN}, {Fd: int32(s.stopR.Fd()), Events: unix.POLLIN}}
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		if _, err := unix.Poll(fds, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			s.fail(fmt.Errorf("poll the seccomp listener: %w", err))
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents&unix.POLLIN == 0 {
			return // POLLHUP: no process of the session is left
		}
		n, err := notify.Recv(listener)
		if errors.Is(err, notify.ErrGone) {
			continue
		}
		if err != nil {
			s.fail(fmt.Errorf("receive a notification: %w", err))
			return
		}
		if err := s.handleConnect(listener, n); err != nil && !errors.Is(err, notify.ErrGone) {
			s.fail(err)
			return
		}
	}
}

// receiveListener reads the seccomp listener the shim sends on the
// hand-off socket: -1 at end of file without one.
func (s *serviceServer) receiveListener() (int, error) {
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := s.handoff.ReadMsgUnix(buf, oob)
	if errors.Is(err, io.EOF) && oobn == 0 {
		return -1, nil
	}
	if err != nil {
		return -1, fmt.Errorf("read the hand-off socket: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return -1, fmt.Errorf("the hand-off message: %w", err)
	}
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			return -1, fmt.Errorf("the hand-off message: %w", err)
		}
		fds = append(fds, got...)
	}
	if n == 0 && len(fds) == 0 {
		return -1, nil
	}
	if len(fds) != 1 {
		for _, fd := range fds {
			if err := unix.Close(fd); err != nil {
				return -1, fmt.Errorf("close a stray descriptor: %w", err)
			}
		}
		return -1, fmt.Errorf("the hand-off message carries %d descriptors, not one", len(fds))
	}
	// What the kernel names a seccomp listener (threat: a descriptor of
	// another kind answering nothing, so that connect waits forever or
	// reaches what it should not).
	if link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fds[0])); err != nil || link != "anon_inode:seccomp notify" {
		return -1, errors.Join(fmt.Errorf("the hand-off descriptor is not a seccomp listener (%q)", link), err, unix.Close(fds[0]))
	}
	return fds[0], nil
}

// handleConnect answers one connect(2) of the program. The address is
// read once, after the notification is known valid, so the pid still
// names the calling thread; what the program's memory holds later does
// not matter, since gloved connects by the alias it read and never lets
// the call proceed with the program's address.
func (s *serviceServer) handleConnect(listener int, n notify.Notif) error {
	deny := func(errno unix.Errno) error { return notify.RespondError(listener, n.ID, errno) }
	if n.Nr != unix.SYS_CONNECT {
		return deny(unix.EPERM)
	}
	fd, addr, addrlen := int(int32(n.Args[0])), n.Args[1], n.Args[2]
	if addrlen > uint64(unix.SizeofSockaddrUnix) || addrlen < 2 {
		return deny(unix.EINVAL)
	}
	mem, err := os.Open("/proc/" + strconv.Itoa(int(n.Pid)) + "/mem")
	if err != nil {
		s.log.WithField("error", oneLine(err.Error())).Warn("cannot read a sandboxed program's memory: connect refused")
		return deny(unix.EACCES)
	}
	defer mem.Close()
	if err := notify.IDValid(listener, n.ID); err != nil {
		return err
	}
	buf := make([]byte, addrlen)
	if k, err := mem.ReadAt(buf, int64(addr)); err != nil || k != len(buf) {
		return deny(unix.EFAULT)
	}
	alias, err := parseConnectAddr(buf)
	if err != nil {
		return deny(unix.EACCES)
	}
	ep, ok := s.eps[alias]
	if !ok {
		return deny(unix.EACCES)
	}
	flags, errno := targetSocketFlags(int(n.Pid), fd)
	if errno != 0 {
		return deny(errno)
	}
	s.mu.Lock()
	over := s.conns >= maxConnections
	if !over {
		s.conns++
	}
	s.mu.Unlock()
	if over {
		return deny(unix.ECONNREFUSED)
	}
	c, err := s.connectAlias(ep.alias, flags&unix.O_NONBLOCK != 0)
	if err != nil {
		s.log.WithField("alias", alias).WithField("error", oneLine(err.Error())).Warn("local service connect failed")
		return deny(unix.ECONNREFUSED)
	}
	defer c.Close() // installed as a duplicate, or not at all
	if _, err := notify.InstallAt(listener, n.ID, int(c.Fd()), fd, flags&unix.O_CLOEXEC != 0); err != nil {
		if errors.Is(err, notify.ErrGone) {
			return err
		}
		return deny(unix.EMFILE)
	}
	return notify.RespondValue(listener, n.ID, 0)
}

// connectAlias connects a socket of gloved's to the session's alias
// socket, reached through the alias directory it holds, with the
// upstream's checks (endpoint.connect): the socket file the service
// user's, mode 0600, the same before and after the connect, its listener
// the service user (SO_PEERCRED). The connection is the caller's to
// close; it is non-blocking when the program's socket was.
func (s *serviceServer) connectAlias(alias string, nonblock bool) (*os.File, error) {
	ep := &endpoint{alias: alias, parent: s.dir, name: alias, role: "alias socket", mode: 0o600}
	f, _, err := ep.connect()
	if err != nil {
		return nil, err
	}
	// Fd leaves the descriptor blocking; the program's flag is set after.
	if err := unix.SetNonblock(int(f.Fd()), nonblock); err != nil {
		return nil, errors.Join(fmt.Errorf("alias socket %s: set O_NONBLOCK: %w", alias, err), f.Close())
	}
	return f, nil
}

// targetSocketFlags reads the status flags of the program's descriptor
// fd (its fdinfo), which must be a socket: the connection installed in
// its place keeps O_NONBLOCK and O_CLOEXEC, as connect would have kept
// them. An error is the errno connect would have returned.
func targetSocketFlags(pid, fd int) (int, unix.Errno) {
	if fd < 0 {
		return 0, unix.EBADF
	}
	base := "/proc/" + strconv.Itoa(pid) + "/"
	link, err := os.Readlink(base + "fd/" + strconv.Itoa(fd))
	if err != nil {
		return 0, unix.EBADF
	}
	if !strings.HasPrefix(link, "socket:[") {
		return 0, unix.ENOTSOCK
	}
	info, err := os.ReadFile(base + "fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return 0, unix.EBADF
	}
	for _, line := range strings.Split(string(info), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			f, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			if err != nil {
				return 0, unix.EBADF
			}
			return int(f), 0
		}
	}
	return 0, unix.EBADF
}
