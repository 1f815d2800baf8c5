// SPDX-License-Identifier: Apache-2.0

// Package helperkit is the part every Glove helper shares: how it starts,
// where its bounds come from, how it confines itself, and its serve loop
// (the contract, check by check: docs/helpers.md). Before it reads a
// request a helper refuses arguments, any environment variable and uid 0,
// closes every descriptor above 3, checks the peer of its control socket
// (descriptor 3), reads its bounds from ConfigDir (root-owned all the way
// up) and drops to exactly its capability table row on every thread under
// no_new_privs and its seccomp allowlist (start, Restrict). Then it
// answers one request at a time of its protocol (declared in
// helpers/wire/NAMEwire), exits 0 on EOF, and non-zero on any protocol error.
package helperkit

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/seccomp/bpf"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// ControlFD is the descriptor of the helper's end of the socketpair.
const ControlFD = 3

// Exit statuses of a helper.
const (
	ExitEOF      = 0 // the supervisor closed the connection
	ExitStartup  = 1 // refused to start: environment, configuration, capabilities
	ExitProtocol = 2 // the peer sent something the protocol does not allow
	ExitIO       = 3 // the connection failed
)

// Spec describes one helper.
type Spec struct {
	Name     string         // the executable name; it must have a captable row
	Protocol *wire.Protocol // the helper's protocol; its name is Name
	Config   Config         // receives the decoded bounds (a pointer)
	Syscalls []bpf.Rule     // the helper's additions to BaseSyscalls (its seccomp.go)
	// Handlers returns the handlers of the helper's routes other than
	// Hello (each made by the route's Handle). It runs once the
	// configuration is loaded and BEFORE the helper restricts itself, so
	// it may open what the handlers will need (bound roots,
	// /dev/loop-control) while those calls are still allowed. peer is the
	// control socket's peer (SO_PEERCRED).
	Handlers func(peer *unix.Ucred) ([]wire.Handler, error)
	// Done, if set, runs once serving has ended, before the helper exits
	// (glove-loopext4 reaps its formatter there).
	Done   func() error
	Serial bool // no goroutine beside the serve loop: GOMAXPROCS 1 (Run)
}

// Main runs the helper and exits with its status.
func Main(spec Spec) { os.Exit(Run(spec)) }

// Run runs the helper and returns its exit status.
func Run(spec Spec) int {
	if spec.Serial {
		// sysmon polls a P blocked in recvmsg for 10 ms while another is idle
		// (up to ~1 ms of CPU a wait when loaded); the only one, at once.
		runtime.GOMAXPROCS(1)
	}
	log := logrus.New() // to stderr
	log.SetFormatter(&logrus.JSONFormatter{})
	entry := log.WithFields(logrus.Fields{"helper": spec.Name, "pid": os.Getpid()})
	srv, err := start(spec)
	if err != nil {
		entry.WithError(err).Error("refusing to start")
		return ExitStartup
	}
	srv.Log = func(msg string, kv ...any) {
		fields := logrus.Fields{}
		for i := 0; i+1 < len(kv); i += 2 {
			fields[fmt.Sprint(kv[i])] = kv[i+1]
		}
		entry.WithFields(fields).Info(msg)
	}
	entry.Info("serving")
	err = srv.Serve()
	if spec.Done != nil {
		if derr := spec.Done(); derr != nil {
			entry.WithError(derr).Error("ending")
		}
	}
	var perr *wire.ProtocolError
	switch {
	case err == nil:
		return ExitEOF
	case errors.As(err, &perr):
		entry.WithError(err).Error("protocol error")
		return ExitProtocol
	}
	entry.WithError(err).Error("connection failed")
	return ExitIO
}

func start(spec Spec) (*wire.Server, error) {
	// Logs carry UTC times. Left at Local, the first log line after the
	// seccomp filter would load /etc/localtime with openat, which the
	// allowlist (rightly) kills.
	time.Local = time.UTC
	row, ok := captable.Lookup(spec.Name)
	if !ok || !row.Helper || spec.Protocol == nil || spec.Protocol.Name != spec.Name {
		return nil, fmt.Errorf("start: %q has no helper row in the capability table or no protocol of its name", spec.Name)
	}
	// Threat: anything inherited beyond the control socket (a descriptor
	// a compromised or buggy supervisor forgot to mark close-on-exec) is
	// authority this helper was not meant to hold.
	if err := unix.CloseRange(ControlFD+1, ^uint(0), 0); err != nil {
		return nil, fmt.Errorf("start: close inherited descriptors: %w", err)
	}
	if len(os.Args) != 1 {
		return nil, fmt.Errorf("start: takes no arguments, got %d", len(os.Args)-1)
	}
	// Threat: GODEBUG, GOMAXPROCS and friends change the Go runtime's
	// behaviour, and the supervisor chooses the environment. The one
	// entry allowed is the one the Go runtime itself adds when it starts
	// a binary with file capabilities (secure mode): GOTRACEBACK=none.
	if env := os.Environ(); len(env) > 1 || (len(env) == 1 && env[0] != "GOTRACEBACK=none") {
		return nil, fmt.Errorf("start: the environment must be empty, it has %d entries", len(env))
	}
	if os.Getuid() == 0 || os.Geteuid() == 0 {
		return nil, errors.New("start: refusing to run as uid 0; run as the Glove service user")
	}
	// Descriptor 3 must be a socket whose peer has our uid or is root: the
	// parties a helper serves are the supervisor, running as the service
	// user that may execute it, and root (operator tooling, tests), who
	// could run the helper's system calls directly anyway.
	peer, err := unix.GetsockoptUcred(ControlFD, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return nil, fmt.Errorf("start: descriptor %d is not a connected unix socket: %w", ControlFD, err)
	}
	if peer.Uid != uint32(os.Getuid()) && peer.Uid != 0 {
		return nil, fmt.Errorf("start: control socket peer runs as uid %d, not %d", peer.Uid, os.Getuid())
	}
	if err := loadConfigFrom("/", ConfigDir, row.Bounds, 0, spec.Config); err != nil {
		return nil, err
	}
	var handlers []wire.Handler
	if spec.Handlers != nil {
		if handlers, err = spec.Handlers(peer); err != nil {
			return nil, fmt.Errorf("start: %w", err)
		}
	}
	handlers = append(handlers, wire.HelloRoute.Handle(func(uint32, *wire.Hello, []*os.File) (*wire.HelloReply, []int, error) {
		eff, prm, err := CurrentCaps()
		if err != nil {
			return nil, nil, err
		}
		return &wire.HelloReply{Name: spec.Name, Protocol: wire.Version, CapEffective: eff, CapPermitted: prm}, nil, nil
	}))
	conn, err := wire.FromFile(os.NewFile(ControlFD, "control"))
	if err != nil {
		return nil, fmt.Errorf("start: control socket: %w", err)
	}
	rules := append(append([]bpf.Rule{}, BaseSyscalls...), spec.Syscalls...)
	if err := Restrict(row, rules); err != nil {
		conn.Close()
		return nil, err
	}
	return &wire.Server{Protocol: spec.Protocol, Conn: conn, Handlers: handlers}, nil
}
