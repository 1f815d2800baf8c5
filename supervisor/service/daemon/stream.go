// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/streamwire"
	"github.com/glove-sandbox/glove/helpers/wire/wirecall"
	"github.com/glove-sandbox/glove/seccomp/notify"
	"github.com/glove-sandbox/glove/supervisor/authority/localservice"
	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/engine/helperproc"
	"github.com/glove-sandbox/glove/supervisor/engine/session"
	"golang.org/x/sys/unix"
)

// The inherited-stream-v1 upstream is the one service of the operator's
// --local-services file (supervisor/authority/localservice) when that
// file selects the transport: its socket's parent directory is opened
// once at start-up and kept (descriptor-pinned); it must be the service
// user's, mode 0700.

// endpoint is the configured upstream, pinned by its parent directory,
// or a pathname session's alias socket in its alias directory
// (pathname.go), reached the same way.
type endpoint struct {
	alias  string
	socket string // the configured path, for the manifest only
	parent int    // O_PATH descriptor of the socket's directory
	name   string // the socket's name in it
	// role names the socket in errors ("upstream", "alias socket"), and
	// mode, when set, is the permission bits it must have.
	role string
	mode uint32
}

// openEndpoint pins the upstream socket's parent directory.
func openEndpoint(c localservice.Service) (*endpoint, error) {
	dir := filepath.Dir(c.Socket)
	if err := CheckDir(dir); err != nil {
		return nil, fmt.Errorf("its directory: %w", err)
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, fmt.Errorf("open its directory: %w", err)
	}
	// The check again, on the descriptor kept from now on: the name
	// checked above may have been swapped for another directory before
	// the open (threat: an upstream directory others can write or enter,
	// where the socket could be replaced).
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, errors.Join(fmt.Errorf("stat its directory: %w", err), unix.Close(fd))
	}
	if int(st.Uid) != os.Geteuid() || st.Mode&0o7777 != 0o700 {
		return nil, errors.Join(fmt.Errorf("its directory, as opened: owner uid %d mode %04o, want uid %d mode 0700", st.Uid, st.Mode&0o7777, os.Geteuid()), unix.Close(fd))
	}
	return &endpoint{alias: c.Alias, socket: c.Socket, parent: fd, name: filepath.Base(c.Socket), role: "upstream"}, nil
}

// identity is the socket file's device and inode.
func (e *endpoint) identity() (uint64, uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(e.parent, e.name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return 0, 0, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK || int(st.Uid) != os.Geteuid() {
		return 0, 0, errors.New("not a socket of the service user")
	}
	if e.mode != 0 && st.Mode&0o7777 != e.mode {
		return 0, 0, fmt.Errorf("mode %04o, not %04o", st.Mode&0o7777, e.mode)
	}
	return st.Dev, st.Ino, nil
}

// connect opens a connection to the upstream service and returns the
// socket file's identity with the listening peer's uid: the socket file's
// identity is the same before and after connect (threat: the name
// swapped for another socket in between), and the listening peer is the
// service user (SO_PEERCRED). The name is reached through the pinned
// directory, never through a path resolved again from /.
func (e *endpoint) connect() (*os.File, session.EndpointID, error) {
	var id session.EndpointID
	dev, ino, err := e.identity()
	if err != nil {
		return nil, id, fmt.Errorf("%s %s: %w", e.role, e.alias, err)
	}
	s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, id, fmt.Errorf("%s %s: socket: %w", e.role, e.alias, err)
	}
	f := os.NewFile(uintptr(s), "upstream-"+e.alias)
	path := "/proc/self/fd/" + strconv.Itoa(e.parent) + "/" + e.name
	if err := unix.Connect(s, &unix.SockaddrUnix{Name: path}); err != nil {
		f.Close()
		return nil, id, fmt.Errorf("%s %s: connect: %w", e.role, e.alias, err)
	}
	cred, err := unix.GetsockoptUcred(s, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil || int(cred.Uid) != os.Geteuid() {
		f.Close()
		return nil, id, fmt.Errorf("%s %s: the peer is not the service user", e.role, e.alias)
	}
	if dev2, ino2, err := e.identity(); err != nil || dev2 != dev || ino2 != ino {
		f.Close()
		return nil, id, fmt.Errorf("%s %s: the socket changed during connect", e.role, e.alias)
	}
	return f, session.EndpointID{Dev: dev, Ino: ino, UID: cred.Uid}, nil
}

// ErrExposed is wrapped by exposedBy's refusal; a session it ends has
// the store reason stream_exposed.
var ErrExposed = errors.New("a path grant would expose a local service's upstream")

// exposedBy refuses the host tree open at fd, the very descriptor a
// launch materializes a grant from (session.Env.Guard), if it is the
// upstream socket, its directory, or an ancestor of that directory: a
// grant of any of them would hand the sandbox the socket by another way
// than the inherited stream. Compared by identity (device and inode)
// with the pinned directory and each of its actual ancestors, reached
// through ".." from that descriptor, so no name of the grant matters: a
// symbolic link, a bind mount of the directory elsewhere, or ".." in the
// path reach the same inode and are refused alike. A descendant of the
// directory (a sibling of the socket) does not expose it and passes.
// Anything it cannot tell fails closed.
func (e *endpoint) exposedBy(fd int) error {
	var g unix.Stat_t
	if err := unix.Fstat(fd, &g); err != nil {
		return fmt.Errorf("%w: stat the grant: %v", ErrExposed, err)
	}
	switch g.Mode & unix.S_IFMT {
	case unix.S_IFSOCK:
		dev, ino, err := e.identity()
		if err != nil || (dev == g.Dev && ino == g.Ino) {
			return fmt.Errorf("%w: the grant is the upstream socket, or the socket cannot be told from it", ErrExposed)
		}
		return nil
	case unix.S_IFDIR:
	case unix.S_IFLNK:
		// A grant opened as the link itself (a bind's O_PATH|O_NOFOLLOW
		// open of a host path whose last component is a link): what it
		// names is not this descriptor, so nothing here can say it does
		// not reach the socket. glove-mounter refuses to bind a link
		// too; this check fails closed on its own (each layer alone).
		return fmt.Errorf("%w: the grant is a symbolic link, which this check does not follow", ErrExposed)
	default:
		return nil // a file other than a socket holds no socket
	}
	cur, err := unix.Openat(e.parent, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%w: open the upstream's directory: %v", ErrExposed, err)
	}
	defer func() { unix.Close(cur) }()
	for range 512 {
		var st unix.Stat_t
		if err := unix.Fstat(cur, &st); err != nil {
			return fmt.Errorf("%w: stat an ancestor of the upstream: %v", ErrExposed, err)
		}
		if st.Dev == g.Dev && st.Ino == g.Ino {
			return fmt.Errorf("%w: the grant is the upstream's directory or one of its ancestors", ErrExposed)
		}
		up, err := unix.Openat(cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%w: open an ancestor of the upstream: %v", ErrExposed, err)
		}
		unix.Close(cur)
		cur = up
		var ust unix.Stat_t
		if err := unix.Fstat(cur, &ust); err != nil {
			return fmt.Errorf("%w: stat an ancestor of the upstream: %v", ErrExposed, err)
		}
		if ust.Dev == st.Dev && ust.Ino == st.Ino {
			return nil // "/" (its ".." is itself): no ancestor is the grant
		}
	}
	return fmt.Errorf("%w: the upstream's directory is deeper than 512 levels", ErrExposed)
}

// streamFor reports whether a session of the plan gets the inherited
// stream: one is configured, and the runtime_id of the plan's runtime
// template is in its service's runtime_ids (the plan's own runtime_id
// was checked equal to it). Any other session runs with no stream: no
// descriptor 3, no GLOVE_LOCAL_SERVICE_* variable, no connection to the
// upstream (threat: a runtime the operator did not allow reaching the
// service).
func (d *Daemon) streamFor(pl *plan.Plan) bool {
	if d.stream == nil {
		return false
	}
	t, ok := d.pol.Template(pl.RuntimeTemplateID)
	if !ok {
		return false
	}
	_, ok = localservice.ServiceFor(d.services, t.RuntimeID)
	return ok
}

// openLocalServices loads --local-services and pins each upstream's
// directory: the one service of inherited-stream-v1 (d.stream), or every
// service of the pathname compatibility transport (d.pathname, which
// also needs the kernel's seccomp user notification, checked here so
// that gloved fails at start-up, not at a session). Then it checks that
// glove-streamproxy answers.
func (d *Daemon) openLocalServices(path string) error {
	c, err := localservice.Load(path)
	if err != nil {
		return err
	}
	d.services = c
	if c.Transport == nil {
		if err := notify.CheckSizes(); err != nil {
			return fmt.Errorf("the pathname transport needs seccomp user notification: %w", err)
		}
		for i, svc := range c.Services {
			ep, err := openEndpoint(svc)
			if err != nil {
				return fmt.Errorf("/services/%d/socket: %w", i, err)
			}
			d.pathname = append(d.pathname, ep)
		}
	} else {
		svc := c.Services[0] // Validate: inherited-stream-v1 has exactly one
		ep, err := openEndpoint(svc)
		if err != nil {
			return fmt.Errorf("/services/0/socket: %w", err)
		}
		d.stream = ep
	}
	p, err := d.startHelper("glove-streamproxy")
	if err != nil {
		return err
	}
	// The probe's verdict is Hello's; Close returns only the helper's
	// exit status after EOF, which is reported all the same.
	if err := p.Close(); err != nil {
		return fmt.Errorf("glove-streamproxy probe: %w", err)
	}
	return nil
}

// openStream prepares a session's stream: the socketpair (the guest end,
// returned, becomes the session's Pins.Stream), a checked upstream connection, an audit file of
// the session in the store directory, and a glove-streamproxy holding
// the peer end. The returned helper must get streamwire Close before it is
// closed.
func (d *Daemon) openStream(id string) (*os.File, *session.Transport, *helperproc.Proc, error) {
	e := d.stream
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	guest, peer := os.NewFile(uintptr(pair[0]), "guest"), os.NewFile(uintptr(pair[1]), "peer")
	defer peer.Close()
	up, upID, err := e.connect()
	if err != nil {
		guest.Close()
		return nil, nil, nil, err
	}
	var gst unix.Stat_t
	if err := unix.Fstat(int(guest.Fd()), &gst); err != nil {
		guest.Close()
		up.Close()
		return nil, nil, nil, fmt.Errorf("guest end: %w", err)
	}
	tr := &session.Transport{Kind: "inherited-stream-v1", FDs: map[string]int{e.alias: session.StreamFD},
		Guest:    session.EndpointID{Dev: gst.Dev, Ino: gst.Ino, UID: uint32(os.Geteuid())},
		Upstream: upID, Manifest: []session.ManifestEntry{{Alias: e.alias, Socket: e.socket}}}
	defer up.Close()
	audit, err := d.createStreamAudit(id)
	if err != nil {
		guest.Close()
		return nil, nil, nil, err
	}
	defer audit.Close()
	sp, err := d.startHelper("glove-streamproxy")
	if err != nil {
		guest.Close()
		return nil, nil, nil, err
	}
	if _, _, err := wirecall.Call(streamwire.Open, sp.Client, &streamwire.OpenRequest{Session: id, Alias: e.alias},
		[]int{int(peer.Fd()), int(up.Fd()), int(audit.Fd())}); err != nil {
		guest.Close()
		// The helper is ended either way; a failed end is reported with
		// the Open that failed, so an operator sees both.
		if cerr := sp.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("end it: %w", cerr))
		}
		return nil, nil, nil, fmt.Errorf("glove-streamproxy: %w", err)
	}
	return guest, tr, sp, nil
}

// streamSettle bounds how long gloved lets a session's relays stop on
// their own once its program is gone, before it cancels them.
const streamSettle = 250 * time.Millisecond

// settleStreams waits, at most streamSettle in all, until each relay has
// stopped on its own; call it only once the program and its descendants
// are gone. Their guest ends then have hung up, so a relay reads end of
// stream as soon as it is back to idle. Why: a relay that released the
// last response (step 8) and was not scheduled again before the session
// ended would be cancelled by Close before its post-send check and its
// delivered record (steps 9 and 10), and the audit would say
// delivery_failed for a response the program got. A relay still waiting
// on its upstream after the bound is cancelled, as before; any Status
// failure ends its wait (endStream's Close reports it).
func settleStreams(sps []*helperproc.Proc) {
	deadline := time.Now().Add(streamSettle)
	for _, sp := range sps {
		for {
			st, _, err := wirecall.Call(streamwire.Status, sp.Client, &streamwire.StatusRequest{}, nil)
			if err != nil || !st.Open || !time.Now().Before(deadline) {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}

// endStream ends a session's stream and its helper after the session,
// reporting what failed: a streamwire Close that failed at the connection
// means glove-streamproxy died during the session (a
// session.HelperLostError: the store's reason names it). Its death cut
// the stream (both of its ends were the helper's descriptors), so nothing
// flowed unbounded; what is lost is the audit's last record.
func endStream(sp *helperproc.Proc) error {
	var errs []error
	if _, _, err := wirecall.Call(streamwire.Close, sp.Client, &streamwire.CloseRequest{}, nil); err != nil {
		var we *wire.Error
		if errors.As(err, &we) {
			errs = append(errs, fmt.Errorf("glove-streamproxy close: %w", err))
		} else {
			errs = append(errs, &session.HelperLostError{Helper: sp.Name, Op: "close", Err: err})
		}
	}
	if err := sp.Close(); err != nil {
		errs = append(errs, fmt.Errorf("glove-streamproxy exit: %w", err))
	}
	return errors.Join(errs...)
}
