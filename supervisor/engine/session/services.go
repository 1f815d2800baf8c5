// SPDX-License-Identifier: Apache-2.0

package session

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"golang.org/x/sys/unix"
)

// The pathname compatibility transport of local-service forwarding
// (docs/local-services.md): the session gets the read-only directory
// ServiceDirTarget, holding one socket per alias it may reach, and only
// the variable ServiceDirEnv. The sockets are the supervisor's: each
// listens in a directory of the session's scratch (mode 0700, the
// sockets 0600), bound read-only at ServiceDirTarget. The program's
// connect(2) never resolves a path on its own: the sandbox's seccomp
// profile sends every connect to the supervisor (seccomp user
// notification, profile.ProfileOptions.LocalServiceConnect), which reads
// the address, refuses all but ServiceDirTarget/<alias>, and connects
// the alias's socket itself through the directory it holds open (threat:
// a program connecting to any other socket it can see, such as a host
// service's in a read-only bind, which DAC alone allows when the socket
// is world-writable).
const (
	// ServiceDir is the Mount kind of the alias directory: a directory
	// of the scratch, bound read-only at ServiceDirTarget.
	ServiceDir = "local_service_dir"
	// ServiceDirTarget is where the alias directory appears.
	ServiceDirTarget = "/run/glove-services/local"
	// ServiceDirEnv is the one variable a pathname session gets.
	ServiceDirEnv = "GLOVE_LOCAL_SERVICE_DIR"
	// serviceBacklog bounds the connections queued on one alias before
	// the supervisor accepts them.
	serviceBacklog = 8
)

// Services is a launch's pathname transport: the aliases of the services
// its runtime may reach, sorted and unique.
type Services struct {
	Aliases []string `json:"aliases"`
}

// ServiceHandles is what the supervisor's server of a pathname session
// gets once the shim is started (Env.ServeServices): the alias
// directory (open for reading), each alias's listening socket, and
// its end of the hand-off socket on which glove-shim sends the seccomp
// listener just before the program runs (end of file without one: the
// shim loaded no filter, which only a test build with the seccomp layer
// off does). The engine keeps and closes these after the server has
// stopped; the server duplicates what it keeps.
type ServiceHandles struct {
	Session   string
	Dir       *os.File
	Listeners map[string]*os.File
	Handoff   *os.File
}

// checkServices checks the transport's shape (Launch.Check): aliases
// sorted and unique, exactly one ServiceDir mount at ServiceDirTarget,
// read-only, and no inherited stream beside it.
func (l *Launch) checkServices() error {
	bad := func(f string, a ...any) error { return fmt.Errorf("session: %s: %w", fmt.Sprintf(f, a...), ErrInvalid) }
	n := 0
	for i, m := range l.Mounts {
		if m.Kind != ServiceDir {
			continue
		}
		n++
		if m.Target != ServiceDirTarget || !m.ReadOnly || m.HostPath != "" || m.MaxBytes != 0 {
			return bad("mounts[%d]: the local-service directory is read-only at %s, with no host path or quota", i, ServiceDirTarget)
		}
	}
	s := l.Services
	if s == nil {
		if n != 0 {
			return bad("a local-service directory without local services")
		}
		return nil
	}
	if n != 1 {
		return bad("local services need exactly one local-service directory mount, not %d", n)
	}
	if l.Stream != nil {
		return bad("local services: both the inherited stream and the pathname transport")
	}
	if len(s.Aliases) == 0 {
		return bad("local services: no alias")
	}
	for i, a := range s.Aliases {
		if !policy.ValidIdentifier(a) {
			return bad("local services: alias %q is not an identifier", a)
		}
		if i > 0 && s.Aliases[i-1] >= a {
			return bad("local services: aliases not sorted and unique at %q", a)
		}
	}
	return nil
}

// listenAliases makes a pathname session's alias sockets in dir, the
// alias directory (mode 0700, nothing of the sandbox sees it yet): one
// listening AF_UNIX stream socket per alias, mode 0600. bind(2) takes a
// path: the directory is named through its descriptor's /proc/self/fd
// link, so no path of the host is resolved again.
func listenAliases(dir *os.File, aliases []string) (map[string]*os.File, error) {
	out := map[string]*os.File{}
	fail := func(err error) (map[string]*os.File, error) {
		for _, f := range out {
			if cerr := f.Close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("close a listening socket: %w", cerr))
			}
		}
		return nil, err
	}
	for _, a := range aliases {
		s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
		if err != nil {
			return fail(fmt.Errorf("local service %s: socket: %w", a, err))
		}
		f := os.NewFile(uintptr(s), "alias-"+a)
		out[a] = f
		name := "/proc/self/fd/" + strconv.Itoa(int(dir.Fd())) + "/" + a
		if err := unix.Bind(s, &unix.SockaddrUnix{Name: name}); err != nil {
			return fail(fmt.Errorf("local service %s: bind: %w", a, err))
		}
		if err := unix.Fchmodat(int(dir.Fd()), a, 0o600, 0); err != nil {
			return fail(fmt.Errorf("local service %s: chmod: %w", a, err))
		}
		if err := unix.Listen(s, serviceBacklog); err != nil {
			return fail(fmt.Errorf("local service %s: listen: %w", a, err))
		}
	}
	return out, nil
}

// handoffSocket is the seccomp listener's hand-off socket: the shim's
// end (a preserved descriptor the shim never passes to the program) and
// the supervisor's.
func handoffSocket() (shim, sup *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("seccomp listener hand-off socket: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "handoff-shim"), os.NewFile(uintptr(fds[1]), "handoff"), nil
}

// serviceIndex is the index of l's ServiceDir mount, or -1.
func (l *Launch) serviceIndex() int {
	return slices.IndexFunc(l.Mounts, func(m Mount) bool { return m.Kind == ServiceDir })
}
