// SPDX-License-Identifier: Apache-2.0

// Package daemon is gloved: the supervisor's session service. It loads
// the operator's policy, opens the session store and the receipt
// journal, checks the helpers, and serves the control protocol
// (docs/protocol.md): JSON-RPC 2.0, one object per line, over a unix
// stream socket whose peers are checked with SO_PEERCRED.
//
// The methods it advertises are derived from the components it actually
// constructed (docs/protocol.md, "Capabilities"); a method that is not
// advertised answers "method not found", whatever its name.
package daemon

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/library"
	"github.com/glove-sandbox/glove/supervisor/authority/localservice"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/engine/helperproc"
	"github.com/glove-sandbox/glove/supervisor/engine/usermode"
	"github.com/glove-sandbox/glove/supervisor/internal/cgleaf"
	"github.com/glove-sandbox/glove/supervisor/internal/ownpaths"
	"github.com/glove-sandbox/glove/supervisor/state/lease"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/supervisor/state/store"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// LibexecDir is where the helpers are installed: the default of
// --libexec. The Makefile may set it with -X, as it sets cli.LibexecDir.
var LibexecDir = "/usr/local/libexec/glove"

// Version is the release; the Makefile may set it.
var Version = "dev"

// ProtocolVersion is the control protocol's version (docs/protocol.md).
const ProtocolVersion = 1

// StartTokenTTL is the lifetime of a start authorization.
const StartTokenTTL = 5 * time.Minute

// Config is gloved's configuration: its command line.
type Config struct {
	PolicyFile          string // --session-policy
	StoreDir            string // --session-store: sessions.journal and receipts.journal
	MaterializationRoot string // --materialization-root
	RuntimeDir          string // --runtime-dir
	Socket              string // --socket (default: RuntimeDir/gloved.sock)
	KeyFile             string // --receipt-key: the service key
	Anchor              string // --receipt-anchor: the controller's trusted anchor
	Libexec             string // --libexec
	AllowUIDs           []int  // --allow-uid (default: our own uid)
	LocalServices       string // --local-services: the forwarded local services (localservice)
	LibraryBundleRoot   string // --library-bundle-root
	// Retention is how long a cleaned-up session's id and idempotency
	// key are kept (--idempotency-retention; store.DefaultRetention
	// when 0).
	Retention time.Duration
	// IdleTimeout closes a control connection idle that long (no
	// complete request, nothing written to it, not attached to a running
	// session); LineTimeout bounds one request line from its first byte.
	// Zero: DefaultIdleTimeout, DefaultLineTimeout; otherwise within
	// MinConnTimeout..MaxIdleTimeout and MinConnTimeout..MaxLineTimeout.
	IdleTimeout time.Duration // --idle-timeout
	LineTimeout time.Duration // --line-timeout
	// Log receives the JSON log; HelperLog the helpers' own logs.
	Log       *logrus.Logger
	HelperLog io.Writer
}

// Daemon is a constructed gloved.
type Daemon struct {
	cfg      Config
	log      *logrus.Logger
	allow    map[int]bool
	pol      *policy.Policy
	store    *store.Store
	auth     *store.Authorizer
	receipts *receipt.Journal
	// own is Glove's own state, which no session may be given
	// (ownpaths): checked against the policy at start and against each
	// launch's host trees by identity.
	own *ownpaths.Set
	// lifecycle is set when the local session runtime is operational:
	// materialization root checked, helpers answering Hello, shim present.
	lifecycle bool
	// pool holds the next session's helpers, started ahead of demand
	// (pool.go); set with lifecycle, filled once gloved serves.
	pool *helperPool
	// stream is the inherited-stream-v1 upstream, when configured and
	// its helper works; sessions of an allowed runtime then get the
	// stream at descriptor 3. services is the --local-services file it
	// comes from (nil without one).
	stream   *endpoint
	services *localservice.Config
	// pathname are the pathname compatibility transport's upstreams, in
	// alias order, when the file selects it (pathname.go).
	pathname []*endpoint
	// seccompCache is glove-shim's seccomp cache directory in the session
	// store (O_PATH), made and opened once at start-up, passed to every
	// shim, closed at shutdown (openSeccompCache).
	seccompCache *os.File
	// userMode is how sessions get their user namespace (package
	// usermode): glove-shim creates it, or glove-userns makes it.
	userMode string
	// libraries is the pinned library bundle root (--library-bundle-root),
	// opened once at start-up; without it, plans with library
	// projections are refused.
	libraries *library.Root
	// leases is the credential lease store (LeaseDir in the session
	// store), open when the policy has credential policies.
	leases  *lease.Store
	methods map[string]bool
	order   []string
	// idleTimeout and lineTimeout are the configured or default bounds
	// of a control connection (rpc.go).
	idleTimeout, lineTimeout time.Duration

	// started is when New returned (supervisor_status's uptime).
	started time.Time

	mu        sync.Mutex
	sessions  map[string]*live // sessions started by this process
	claims    map[string]bool  // start_session in progress
	conns     map[*conn]bool
	connSeq   uint64 // connections accepted so far
	listeners []net.Listener
	wg        sync.WaitGroup // running sessions
	closing   bool
}

// Capability groups, in the order of the reference's table.
var (
	receiptMethods   = []string{"receipts_page", "receipts_ack"}
	policyMethods    = []string{"validate_plan"}
	storeMethods     = []string{"create_session", "session_status"}
	lifecycleMethods = []string{"start_session", "attach", "write_stdin", "resize", "signal", "detach", "stop_session", "cleanup_session"}
)

// New constructs the components the configuration names. A component
// that is named but cannot be constructed is an error (gloved refuses to
// start rather than serve less than it was asked to).
func New(cfg Config) (*Daemon, error) {
	if cfg.Log == nil {
		cfg.Log = logrus.New()
		cfg.Log.SetOutput(io.Discard)
	}
	if cfg.HelperLog == nil {
		cfg.HelperLog = io.Discard
	}
	if cfg.Libexec == "" {
		cfg.Libexec = LibexecDir
	}
	d := &Daemon{cfg: cfg, log: cfg.Log, allow: map[int]bool{}, methods: map[string]bool{},
		sessions: map[string]*live{}, claims: map[string]bool{}, conns: map[*conn]bool{}, started: time.Now()}
	var err error
	if d.idleTimeout, err = connTimeout(cfg.IdleTimeout, DefaultIdleTimeout, MaxIdleTimeout); err != nil {
		return nil, fmt.Errorf("--idle-timeout: %w", err)
	}
	if d.lineTimeout, err = connTimeout(cfg.LineTimeout, DefaultLineTimeout, MaxLineTimeout); err != nil {
		return nil, fmt.Errorf("--line-timeout: %w", err)
	}
	if len(cfg.AllowUIDs) == 0 {
		d.allow[os.Getuid()] = true
	}
	for _, u := range cfg.AllowUIDs {
		if u < 0 {
			return nil, fmt.Errorf("--allow-uid %d: not a uid", u)
		}
		d.allow[u] = true
	}
	if cfg.RuntimeDir != "" {
		if err := CheckDir(cfg.RuntimeDir); err != nil {
			return nil, fmt.Errorf("--runtime-dir: %w", err)
		}
	}
	var key []byte
	if cfg.KeyFile != "" {
		k, err := store.LoadKey(cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--receipt-key: %w", err)
		}
		key = k
	}
	ok := false
	defer func() {
		if !ok {
			d.closeComponents()
		}
	}()
	if cfg.PolicyFile != "" {
		pol, err := policy.Load(cfg.PolicyFile)
		if err != nil {
			return nil, fmt.Errorf("--session-policy: %w", err)
		}
		d.pol = pol
	}
	if cfg.StoreDir != "" {
		if key == nil {
			return nil, errors.New("--session-store needs --receipt-key (start authorizations and receipts are keyed)")
		}
		if err := CheckDir(cfg.StoreDir); err != nil {
			return nil, fmt.Errorf("--session-store: %w", err)
		}
		st, _, err := store.Open(store.Options{Dir: cfg.StoreDir, Retention: cfg.Retention, OnCompact: d.logStoreCompaction,
			MaxRecords: testJournalRecords(), Now: testStoreNow()})
		if err != nil {
			return nil, fmt.Errorf("--session-store: %w", err)
		}
		d.store = st
		if err := d.sweepStreamAudits(); err != nil {
			// Not fatal: what is left is disk use, and a session that
			// reuses such an id fails to start with "audit file".
			d.log.WithField("event", "stream_audit_remove_failed").WithField("error", err.Error()).Error("cannot remove the stream audits of sessions the store no longer has")
		}
		if e := st.Stats().ReserveErr; e != nil {
			// Recovery still runs: its records are within the bounds.
			d.log.WithField("event", "store").WithField("error", e.Error()).Error("cannot reserve disk room for the sessions' records")
		}
		if d.auth, err = store.NewAuthorizer(key, StartTokenTTL, nil); err != nil {
			return nil, fmt.Errorf("--receipt-key: %w", err)
		}
		if cfg.Anchor != "" {
			if !policy.ValidSHA256Hex(cfg.Anchor) {
				return nil, errors.New("--receipt-anchor: not 64 lowercase hex characters")
			}
			rj, _, err := receipt.Open(receipt.Options{Dir: cfg.StoreDir, Key: key, Anchor: cfg.Anchor, OnCompact: d.logReceiptCompaction,
				MaxRecords: testJournalRecords()})
			if err != nil {
				return nil, fmt.Errorf("--receipt-anchor: %w", err)
			}
			d.receipts = rj
			if out := rj.Outstanding(); len(out) > 0 && cfg.MaterializationRoot == "" {
				// Recovery needs the session runtime (--materialization-root):
				// without it, they are reported and left for a gloved that has it.
				d.log.WithField("outstanding_receipts", len(out)).Warn("reserved receipts without a terminal receipt")
			}
		}
	} else if cfg.Anchor != "" {
		return nil, errors.New("--receipt-anchor needs --session-store (the receipt journal lives there)")
	}
	if cfg.MaterializationRoot != "" {
		if err := CheckDir(cfg.MaterializationRoot); err != nil {
			return nil, fmt.Errorf("--materialization-root: %w", err)
		}
		if d.pol == nil || d.store == nil || d.receipts == nil {
			return nil, errors.New("--materialization-root needs --session-policy, --session-store, --receipt-key and --receipt-anchor")
		}
		// Before the first helper starts: every helper and session
		// starts from the supervisor's leaf (cgleaf's comment says why).
		leaf, err := cgleaf.Enter(cgleaf.System)
		if err != nil {
			return nil, fmt.Errorf("sessions: %w", err)
		}
		d.log.WithFields(logrus.Fields{"cgroup": leaf.Cgroup, "moved": leaf.Moved, "why": leaf.Why}).Info("supervisor cgroup")
		if err := d.checkRuntime(); err != nil {
			return nil, err
		}
		// Before any session (recovery's included): a host where no
		// mode works refuses gloved's start with the line that fixes it,
		// rather than failing every session at glove-shim's first clone.
		if d.userMode, err = usermode.Decide(filepath.Join(d.cfg.Libexec, "glove-shim"), d.startHelper); err != nil {
			return nil, fmt.Errorf("sessions: %w", err)
		}
		if m := testUserMode(); m != "" {
			d.userMode = m
		}
		d.log.WithFields(logrus.Fields{"event": "user_namespaces", "mode": d.userMode}).Info("how sessions get their user namespace")
		if err := d.openOwnState(); err != nil {
			return nil, err
		}
		if err := d.openLeases(); err != nil {
			return nil, fmt.Errorf("--session-store: %w", err)
		}
		if d.seccompCache, err = openSeccompCache(cfg.StoreDir); err != nil {
			if errors.Is(err, errUnsafeCache) {
				return nil, fmt.Errorf("--session-store: %w", err)
			}
			// The cache only saves time: without it each shim compiles
			// its profile. A store that cannot take a directory (full,
			// read-only) must not stop gloved, which serves on a full
			// disk (TestGlovedDiskFull).
			d.log.WithFields(logrus.Fields{"event": "seccomp_cache", "error": err.Error()}).Warn("no seccomp cache: every start compiles its profile")
		}
		if err := d.recoverSessions(); err != nil {
			return nil, err
		}
		d.lifecycle = true
		d.pool = newHelperPool(d.startHelper, d.log)
		if cfg.LocalServices != "" {
			if err := d.openLocalServices(cfg.LocalServices); err != nil {
				return nil, fmt.Errorf("--local-services: %w", err)
			}
		}
		if cfg.LibraryBundleRoot != "" {
			r, err := library.OpenRoot(cfg.LibraryBundleRoot)
			if err != nil {
				return nil, fmt.Errorf("--library-bundle-root: %w", err)
			}
			d.libraries = r
		}
	} else if cfg.LocalServices != "" {
		return nil, errors.New("--local-services needs --materialization-root (sessions)")
	} else if cfg.LibraryBundleRoot != "" {
		return nil, errors.New("--library-bundle-root needs --materialization-root (sessions)")
	}
	if d.receipts != nil {
		d.advertise(receiptMethods)
	}
	if d.pol != nil {
		d.advertise(policyMethods)
		if d.store != nil {
			d.advertise(storeMethods)
			if d.lifecycle {
				d.advertise(lifecycleMethods)
			}
		}
	}
	ok = true
	return d, nil
}

// openOwnState opens Glove's own state and refuses a policy that would
// grant any of it: a path alias's host path, a template's executable,
// search paths or read-only paths that are, lie in, or contain the
// session store, the receipt key, the policy file, the runtime directory
// or the materialization root. Each launch checks again by identity.
func (d *Daemon) openOwnState() error {
	named := []ownpaths.Named{
		{What: "the session store", Path: d.cfg.StoreDir}, {What: "the receipt key", Path: d.cfg.KeyFile},
		{What: "the session policy", Path: d.cfg.PolicyFile}, {What: "the runtime directory", Path: d.cfg.RuntimeDir},
		{What: "the materialization root", Path: d.cfg.MaterializationRoot},
	}
	// A credential source is the operator's secret: a session gets a
	// copy of its lease, and no grant may reach the file itself (threat:
	// a path alias over its directory handing the sandbox the operator's
	// token, or the means to replace it).
	for _, c := range d.pol.CredentialPolicies {
		named = append(named, ownpaths.Named{What: fmt.Sprintf("the credential source of handle %q", c.Handle), Path: c.SourcePath})
	}
	own, err := ownpaths.Open(named)
	if err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	d.own = own
	for _, a := range d.pol.PathAliases {
		if err := own.CheckPath(a.HostPath); err != nil {
			return fmt.Errorf("--session-policy: path alias %q: host_path %s: %w", a.Alias, a.HostPath, err)
		}
	}
	for _, t := range d.pol.RuntimeTemplates {
		paths := append([]string{t.Launch.ExecutablePath}, t.Launch.ExecutableSearchPaths...)
		for _, p := range append(paths, t.Launch.ReadOnlyPaths...) {
			if p == "" {
				continue
			}
			if err := own.CheckPath(p); err != nil {
				return fmt.Errorf("--session-policy: runtime template %q: %s: %w", t.RuntimeTemplateID, p, err)
			}
		}
	}
	return nil
}

// connTimeout is a configured connection timeout: def when zero,
// otherwise within MinConnTimeout..max (a timeout cannot be disabled).
func connTimeout(v, def, max time.Duration) (time.Duration, error) {
	switch {
	case v == 0:
		return def, nil
	case v < MinConnTimeout || v > max:
		return 0, fmt.Errorf("%v is not within %v..%v", v, MinConnTimeout, max)
	}
	return v, nil
}

func (d *Daemon) advertise(ms []string) {
	for _, m := range ms {
		d.methods[m] = true
		d.order = append(d.order, m)
	}
}

// Methods lists the advertised methods (capabilities included).
func (d *Daemon) Methods() []string {
	return append([]string{"capabilities", "supervisor_status"}, d.order...)
}

// checkRuntime checks that sessions can be run: the shim is an
// executable regular file and each helper starts and answers Hello.
func (d *Daemon) checkRuntime() error {
	shim := filepath.Join(d.cfg.Libexec, "glove-shim")
	st, err := os.Stat(shim)
	if err != nil || !st.Mode().IsRegular() || unix.Access(shim, unix.X_OK) != nil {
		return errors.New("--libexec: glove-shim is missing or not executable")
	}
	for _, name := range []string{"glove-mounter", "glove-cgroup"} {
		p, err := d.startHelper(name)
		if err != nil {
			return fmt.Errorf("--libexec: %w", err)
		}
		// The probe's verdict is Hello's; a helper that then does not
		// exit cleanly is a fault of the installation all the same.
		if err := p.Close(); err != nil {
			return fmt.Errorf("--libexec: %s probe: %w", name, err)
		}
	}
	return nil
}

// startHelper starts one helper, checked against its capability table
// row (helperproc.StartReady).
func (d *Daemon) startHelper(name string) (*helperproc.Proc, error) {
	return helperproc.StartReady(helperproc.Options{Path: filepath.Join(d.cfg.Libexec, name), Name: name, Stderr: d.cfg.HelperLog})
}

// SeccompCacheDir is glove-shim's seccomp cache, beneath the session
// store: compiled BPF programs, one per profile (shim/seccompcache.go).
const SeccompCacheDir = "seccomp-cache"

// LeaseDir is the credential lease store's directory in the session
// store (package lease).
const LeaseDir = "leases"

// openLeases opens the credential lease store when the policy maps any
// secret handle, and removes the leases of handles it no longer maps
// (also when it maps none and a store is left from an earlier policy):
// a credential the operator took out of the policy does not stay on disk.
// The store is inside the session store: Glove's own state, which no
// grant may reach (ownpaths).
func (d *Daemon) openLeases() error {
	dir := filepath.Join(d.cfg.StoreDir, LeaseDir)
	if len(d.pol.CredentialPolicies) == 0 {
		if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
			return nil
		}
	}
	s, err := lease.Open(dir)
	if err != nil {
		return err
	}
	var keep []string
	for _, c := range d.pol.CredentialPolicies {
		keep = append(keep, c.Handle)
	}
	removed, err := s.Prune(keep)
	if len(removed) > 0 {
		d.log.WithFields(logrus.Fields{"event": "credential_lease_removed", "handles": removed}).Info("leases of handles the policy no longer maps removed")
	}
	if err != nil {
		return errors.Join(err, s.Close())
	}
	if len(keep) == 0 {
		return s.Close()
	}
	d.leases = s
	return nil
}

// errUnsafeCache is wrapped by a refusal of the cache directory's owner
// or mode, which stops gloved: someone else changed what gloved made.
var errUnsafeCache = errors.New("seccomp cache directory not the service user's alone")

// openSeccompCache makes the seccomp cache directory in the session store
// if it is missing and opens it O_PATH; a directory of another owner or
// mode is refused with errUnsafeCache. Threat: an entry planted there
// would weaken the filter of every later sandbox of its profile. So it
// must be writable by the service user alone (mode 0700, ours, refused
// otherwise, as CheckDir refuses the store itself) and reachable from no
// sandbox: it lies beneath the session store, which ownpaths refuses to
// every mount, and the shim gets it beyond its preserved range.
func openSeccompCache(storeDir string) (*os.File, error) {
	sfd, err := unix.Open(storeDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	defer unix.Close(sfd)
	if err := unix.Mkdirat(sfd, SeccompCacheDir, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
		return nil, fmt.Errorf("make %s: %w", SeccompCacheDir, err)
	}
	fd, err := unix.Openat(sfd, SeccompCacheDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", SeccompCacheDir, err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(storeDir, SeccompCacheDir))
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", SeccompCacheDir, err)
	}
	switch {
	case int(st.Uid) != os.Geteuid():
		err = fmt.Errorf("%s: %w: owned by uid %d, not by uid %d", SeccompCacheDir, errUnsafeCache, st.Uid, os.Geteuid())
	case st.Mode&0o7777 != 0o700:
		err = fmt.Errorf("%s: %w: mode %04o, want 0700", SeccompCacheDir, errUnsafeCache, st.Mode&0o7777)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// CheckDir checks a runtime, materialization or store directory: an
// absolute path to a directory (not a symbolic link) owned by the
// current user, mode 0700.
func CheckDir(path string) error {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return errors.New("not an absolute clean path")
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return errors.New("not a directory")
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("owned by uid %d, not by uid %d", st.Uid, os.Geteuid())
	case st.Mode&0o7777 != 0o700:
		return fmt.Errorf("mode %04o, want 0700", st.Mode&0o7777)
	}
	return nil
}

// SocketPath is where gloved listens.
func (d *Daemon) SocketPath() string {
	if d.cfg.Socket != "" {
		return d.cfg.Socket
	}
	if d.cfg.RuntimeDir != "" {
		return filepath.Join(d.cfg.RuntimeDir, "gloved.sock")
	}
	return ""
}

// Shutdown stops serving (the listener and every connection are
// closed), stops every running session (SIGTERM, then after grace a
// kill), waits until each has its terminal receipt, and closes the
// journals.
func (d *Daemon) Shutdown(grace time.Duration) error {
	d.mu.Lock()
	d.closing = true
	var ls []*live
	for _, l := range d.sessions {
		ls = append(ls, l)
	}
	conns := make([]*conn, 0, len(d.conns))
	for c := range d.conns {
		conns = append(conns, c)
	}
	lns := d.listeners
	d.mu.Unlock()
	for _, ln := range lns {
		// Serve returns on the close; a listener that reports an error
		// closing is released all the same, and Shutdown goes on.
		_ = ln.Close() // Serve returns on the close; a close error still releases the listener
	}
	for _, c := range conns {
		c.close()
	}
	for _, l := range ls {
		l.stop(grace)
	}
	d.wg.Wait()
	if d.pool != nil {
		// After the sessions: no helper is started ahead of a session
		// that cannot come, and none is left running.
		d.pool.close()
	}
	return d.closeComponents()
}

func (d *Daemon) closeComponents() error {
	var errs []error
	d.own.Close()
	if d.seccompCache != nil {
		errs = append(errs, d.seccompCache.Close())
		d.seccompCache = nil
	}
	if d.stream != nil {
		if err := unix.Close(d.stream.parent); err != nil {
			errs = append(errs, fmt.Errorf("close the inherited stream's upstream directory: %w", err))
		}
		d.stream = nil
	}
	for _, e := range d.pathname {
		if err := unix.Close(e.parent); err != nil {
			errs = append(errs, fmt.Errorf("close local service %s's upstream directory: %w", e.alias, err))
		}
	}
	d.pathname, d.services = nil, nil
	if d.libraries != nil {
		errs = append(errs, d.libraries.Close())
		d.libraries = nil
	}
	if d.leases != nil {
		errs = append(errs, d.leases.Close())
		d.leases = nil
	}
	if d.store != nil {
		errs = append(errs, d.store.Close())
	}
	if d.receipts != nil {
		errs = append(errs, d.receipts.Close())
	}
	return errors.Join(errs...)
}

// logStoreCompaction logs an automatic compaction of the session store:
// the figures an operator needs to see the store stays within its bounds.
func (d *Daemon) logStoreCompaction(info store.CompactInfo, err error) {
	d.logCompaction("sessions", "session store", "store", logrus.Fields{"records_before": info.RecordsBefore,
		"records_after": info.RecordsAfter, "bytes_before": info.BytesBefore, "bytes_after": info.BytesAfter,
		"sessions": info.Sessions, "dropped": info.Dropped}, err)
	if err == nil && len(info.DroppedIDs) > 0 {
		if rerr := d.removeStreamAudits(info.DroppedIDs, "its session left the store"); rerr != nil {
			d.log.WithField("event", "stream_audit_remove_failed").WithField("error", rerr.Error()).Error("cannot remove the stream audits of sessions that left the store")
		}
	}
}

// logReceiptCompaction logs an automatic compaction of the receipts.
func (d *Daemon) logReceiptCompaction(info receipt.CompactInfo, err error) {
	d.logCompaction("receipts", "receipt journal", "journal", logrus.Fields{"records_before": info.RecordsBefore,
		"records_after": info.RecordsAfter, "bytes_before": info.BytesBefore, "bytes_after": info.BytesAfter,
		"dropped": info.Dropped, "carried": info.Carried}, err)
}

// logCompaction logs one compaction of journal name (what and short
// name it in words) with its figures f.
func (d *Daemon) logCompaction(name, what, short string, f logrus.Fields, err error) {
	f["event"], f["journal"] = "compacted", name
	if err != nil {
		d.log.WithFields(f).WithField("error", err.Error()).Error(what + " compaction failed; the " + short + " is unchanged")
		return
	}
	d.log.WithFields(f).Info(what + " compacted")
}
