// SPDX-License-Identifier: Apache-2.0

// Command gloved is the Glove supervisor: the session service behind the
// control socket (docs/protocol.md). It runs as the service user, with
// no capability, inside its delegated cgroup subtree.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/glove-sandbox/glove/supervisor/engine/session"
	"github.com/glove-sandbox/glove/supervisor/service/daemon"
	"github.com/glove-sandbox/glove/supervisor/state/store"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

type uidList []int

func (u *uidList) String() string { return "" }

func (u *uidList) Set(v string) error {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || strconv.Itoa(n) != v {
		return fmt.Errorf("%q is not a uid", v)
	}
	*u = append(*u, n)
	return nil
}

func main() { os.Exit(run(os.Args[1:])) }

// redact replaces the configured paths in an error with their flag's
// name: the log never holds a host path.
func redact(cfg daemon.Config, err error) string {
	var pairs []string
	for _, p := range [][2]string{
		{cfg.PolicyFile, "SESSION-POLICY"}, {cfg.StoreDir, "SESSION-STORE"}, {cfg.MaterializationRoot, "MATERIALIZATION-ROOT"},
		{cfg.RuntimeDir, "RUNTIME-DIR"}, {cfg.Socket, "SOCKET"}, {cfg.KeyFile, "RECEIPT-KEY"}, {cfg.Libexec, "LIBEXEC"},
		{cfg.LocalServices, "LOCAL-SERVICES"},
	} {
		if p[0] != "" {
			pairs = append(pairs, p[0], p[1])
		}
	}
	return strings.NewReplacer(pairs...).Replace(err.Error())
}

// flagSet is gloved's command line, binding each flag to cfg or uids:
// one function, so that the man page's test (main_test.go) and the bash
// completion's see exactly the flags gloved parses.
func flagSet(cfg *daemon.Config, uids *uidList) *flag.FlagSet {
	fs := flag.NewFlagSet("gloved", flag.ContinueOnError)
	fs.StringVar(&cfg.PolicyFile, "session-policy", "", "session policy file (mode 0600, owned by the service user)")
	fs.StringVar(&cfg.StoreDir, "session-store", "", "session store, receipt journal and seccomp cache directory (mode 0700)")
	fs.StringVar(&cfg.MaterializationRoot, "materialization-root", "", "directory of session bundles (mode 0700)")
	fs.StringVar(&cfg.RuntimeDir, "runtime-dir", "", "runtime directory (mode 0700); holds the socket by default")
	fs.StringVar(&cfg.Socket, "socket", "", "control socket path (default: RUNTIME-DIR/gloved.sock)")
	fs.StringVar(&cfg.KeyFile, "receipt-key", "", "service key file (32-64 bytes, mode 0600)")
	fs.StringVar(&cfg.Anchor, "receipt-anchor", "", "the controller's trusted receipt anchor (64 hex)")
	fs.StringVar(&cfg.Libexec, "libexec", daemon.LibexecDir, "directory of the installed helpers")
	fs.Var(uids, "allow-uid", "uid allowed to connect (repeatable; default: gloved's own)")
	fs.StringVar(&cfg.LibraryBundleRoot, "library-bundle-root", "", "directory of digest-named library bundles (mode 0700, owned by the service user)")
	fs.DurationVar(&cfg.Retention, "idempotency-retention", store.DefaultRetention,
		fmt.Sprintf("how long a cleaned-up session's id and idempotency key are kept (%v..%v)", store.MinRetention, store.MaxRetention))
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", daemon.DefaultIdleTimeout,
		"close a control connection idle that long, unless attached to a running session (1s..1h)")
	fs.DurationVar(&cfg.LineTimeout, "line-timeout", daemon.DefaultLineTimeout,
		"close a control connection whose request line is not complete that long after its first byte (1s..1m)")
	fs.StringVar(&cfg.LocalServices, "local-services", "", "local-service forwarding configuration (mode 0600, owned by the service user; docs/local-services.md)")
	return fs
}

func run(args []string) int {
	if len(args) == 1 && args[0] == "--version" {
		fmt.Println("gloved", daemon.Version)
		return 0
	}
	var cfg daemon.Config
	var uids uidList
	fs := flagSet(&cfg, &uids)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0 // the flags, on stderr, as asked
		}
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "gloved: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg.AllowUIDs = uids
	log := logrus.New()
	log.SetOutput(os.Stderr)
	log.SetFormatter(&logrus.JSONFormatter{})
	cfg.Log, cfg.HelperLog = log, os.Stderr

	// Before anything that takes time, and before the socket exists: a
	// SIGTERM from the service manager (or a test) as soon as the socket
	// accepts must stop gloved cleanly, not kill it with the default
	// action (seen on an emulated VM-lane guest, where the socket accepted
	// before the handler was installed).
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT)
	signal.Ignore(unix.SIGPIPE, unix.SIGHUP)

	if err := session.BecomeSubreaper(); err != nil {
		log.WithField("event", "start").Error(err.Error())
		return 1
	}
	d, err := daemon.New(cfg)
	if err != nil {
		log.WithField("event", "start").Error("refusing to start: " + redact(cfg, err))
		return 1
	}
	ln, err := daemon.Listen(d.SocketPath())
	if err != nil {
		log.WithField("event", "start").Error("refusing to start: " + redact(cfg, err))
		if serr := d.Shutdown(0); serr != nil {
			log.WithField("event", "start").Error("shutdown: " + redact(cfg, serr))
		}
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- d.Serve(ln) }()
	log.WithFields(logrus.Fields{"event": "start", "methods": d.Methods(), "pid": os.Getpid()}).Info("serving")
	select {
	case s := <-sigs:
		log.WithFields(logrus.Fields{"event": "stop", "signal": s.String()}).Info("stopping")
	case err := <-done:
		msg := "serve ended"
		if err != nil {
			msg += ": " + err.Error()
		}
		log.WithField("event", "stop").Error(msg)
	}
	code := 0
	if err := d.Shutdown(5 * time.Second); err != nil {
		log.WithField("event", "stop").Error("shutdown: " + err.Error())
		code = 1
	}
	// Shutdown has closed every listener Serve was given (the close
	// ends Serve); this second close is kept for a Serve that ended
	// before Shutdown registered it. Its error, "use of closed network
	// connection" in the usual case, is harmless: the process exits
	// next, which closes the descriptor anyway, and nothing durable
	// waits on it.
	_ = ln.Close() // a second close (usually "use of closed network connection"); the process exits next
	return code
}
