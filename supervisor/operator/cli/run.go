// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/library"
	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/engine/helperproc"
	"github.com/glove-sandbox/glove/supervisor/engine/materialize"
	"github.com/glove-sandbox/glove/supervisor/engine/session"
	"github.com/glove-sandbox/glove/supervisor/engine/usermode"
	"github.com/glove-sandbox/glove/supervisor/internal/cgleaf"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/supervisor/state/store"
	"golang.org/x/sys/unix"
)

// ExitNotStarted is glove run's status when Glove fails before the program
// starts, as `docker run` does: anything else is the program's own status
// (128+N when it was killed by signal N).
const ExitNotStarted = 125

const usageRun = "usage: glove run [--workspace DIR] [--profile small|medium|harness] [--limit NAME=VALUE]... -- CMD [ARGS...]\n       glove run --policy F --plan P [--materialization-root DIR] [--library-bundle-root DIR] [--receipt FILE --receipt-key K [--receipt-anchor HEX]]"

// limitList is the repeatable --limit flag: NAME=VALUE for one of the six
// limits, replacing the profile's value.
type limitList map[string]uint64

func (l limitList) String() string { return "" }

func (l limitList) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	n, err := strconv.ParseUint(value, 10, 64)
	if !ok || err != nil || n == 0 || strconv.FormatUint(n, 10) != value {
		return fmt.Errorf("--limit %q: want NAME=VALUE with VALUE a positive integer", v)
	}
	var known []string
	var ceiling uint64
	for _, lim := range (&policy.ResourceProfile{}).Limits() {
		known = append(known, lim.Name)
		if lim.Name == name {
			ceiling = lim.Max
		}
	}
	if ceiling == 0 {
		return fmt.Errorf("--limit %q: unknown limit (%s)", v, strings.Join(known, ", "))
	}
	if n > ceiling {
		return fmt.Errorf("--limit %q: above the ceiling %d", v, ceiling)
	}
	if _, dup := l[name]; dup {
		return fmt.Errorf("--limit %s given twice", name)
	}
	l[name] = n
	return nil
}

func (l limitList) apply(p *policy.ResourceProfile) {
	for _, lim := range p.Limits() {
		if v, ok := l[lim.Name]; ok {
			*lim.Value = v
		}
	}
}

// runProfile is the shipped profile --profile names (policy.ShippedProfiles).
func runProfile(name string) (policy.ResourceProfile, bool) {
	for _, p := range policy.ShippedProfiles() {
		if p.ProfileID == name {
			return p, true
		}
	}
	return policy.ResourceProfile{}, false
}

// runPath is the program's PATH inside the sandbox, and where a command
// named without a slash is looked for (in the host's /usr, which the
// sandbox sees read-only).
var runPath = []string{"/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/sbin", "/sbin"}

// runFlags are glove run's flags: a command's run (workspace, profile,
// limit) or a plan's (the others).
type runFlags struct {
	workspace, profile                 string
	limits                             limitList
	policy, plan, matRoot, libRoot     string
	receipt, receiptKey, receiptAnchor string
}

func (o *runFlags) define(fs *flag.FlagSet) {
	o.limits = limitList{}
	fs.StringVar(&o.workspace, "workspace", "", "the directory copied to /workspace (default: the current directory)")
	fs.StringVar(&o.profile, "profile", "small", "the shipped resource profile: small, medium or harness")
	fs.Var(o.limits, "limit", "NAME=VALUE replacing one of the profile's limits (repeatable)")
	fs.StringVar(&o.policy, "policy", "", "the session policy file (with --plan)")
	fs.StringVar(&o.plan, "plan", "", "the plan file (with --policy)")
	fs.StringVar(&o.receipt, "receipt", "", "write the session's terminal receipt to this file")
	fs.StringVar(&o.receiptKey, "receipt-key", "", "the service key the receipt is authenticated with")
	fs.StringVar(&o.receiptAnchor, "receipt-anchor", strings.Repeat("0", 64), "the anchor the receipt chains from (64 hex)")
	fs.StringVar(&o.matRoot, "materialization-root", "", "the directory of the session's bundle")
	fs.StringVar(&o.libRoot, "library-bundle-root", "", "the directory of digest-named library bundles")
}

// runCommand runs `glove run`: one session, in this process, through the
// same session code gloved uses, with these defaults: the host's /usr and
// /etc read-only (and the usual /bin, /lib links), a fresh /proc and a
// minimal /dev, a tmpfs /tmp, the workspace (default: the current
// directory) as an ephemeral copy at /workspace, which is also the working
// directory, no network, and a small profile.
func runCommand(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var o runFlags
	fs := newFlags("run")
	o.define(fs)
	workspace, profile, limits := &o.workspace, &o.profile, o.limits
	polFile, planFile, matRoot, libRoot := &o.policy, &o.plan, &o.matRoot, &o.libRoot
	receiptFile, receiptKey, receiptAnchor := &o.receipt, &o.receiptKey, &o.receiptAnchor
	if err := fs.Parse(args); err != nil {
		if helpFlag(err, stdout, usageRun) {
			return ExitOK
		}
		fmt.Fprintf(stderr, "glove: run: %v\n%s\n", err, usageRun)
		return ExitUsage
	}
	cmdArgs := fs.Args()
	if *polFile != "" || *planFile != "" {
		if *polFile == "" || *planFile == "" || len(cmdArgs) != 0 || *workspace != "" || len(limits) != 0 {
			fmt.Fprintf(stderr, "glove: run: --policy and --plan go together, without a command, --workspace or --limit\n%s\n", usageRun)
			return ExitUsage
		}
		if (*receiptFile == "") != (*receiptKey == "") || !policy.ValidSHA256Hex(*receiptAnchor) {
			fmt.Fprintf(stderr, "glove: run: --receipt needs --receipt-key (and --receipt-anchor is 64 hex)\n%s\n", usageRun)
			return ExitUsage
		}
		return runPlan(*polFile, *planFile, *matRoot, *libRoot, receiptOptions{file: *receiptFile, key: *receiptKey, anchor: *receiptAnchor}, stdin, stdout, stderr)
	}
	if *receiptFile != "" || *receiptKey != "" || *matRoot != "" || *libRoot != "" {
		fmt.Fprintf(stderr, "glove: run: --receipt, --materialization-root and --library-bundle-root are for --policy/--plan runs\n%s\n", usageRun)
		return ExitUsage
	}
	if len(cmdArgs) == 0 {
		fmt.Fprintf(stderr, "glove: run: no command\n%s\n", usageRun)
		return ExitUsage
	}
	prof, ok := runProfile(*profile)
	if !ok {
		fmt.Fprintf(stderr, "glove: run: unknown profile %q (small, medium, harness)\n%s\n", *profile, usageRun)
		return ExitUsage
	}
	limits.apply(&prof)
	l, err := runLaunch(*workspace, prof, cmdArgs)
	if err != nil {
		fmt.Fprintf(stderr, "glove: run: %v\n", err)
		return ExitNotStarted
	}
	res, err := runSession(l, nil, "", stdin, stdout, stderr)
	status, _ := finish(res, err, stderr)
	return status
}

// finish reports how a session ended and returns glove run's status; ok
// is false when the program never started.
func finish(res *session.Result, err error, stderr io.Writer) (int, bool) {
	if err != nil {
		fmt.Fprintf(stderr, "glove: run: %s\n", flatten(err))
	}
	if res == nil {
		return ExitNotStarted, false
	}
	if strings.HasPrefix(res.Termination, "limit:") {
		fmt.Fprintf(stderr, "glove: run: session ended: %s\n", res.Termination)
	}
	return res.Status(), true
}

type receiptOptions struct{ file, key, anchor string }

// runPlan runs the session a plan selects from a policy, through the
// same resolution and session code as gloved's start_session, and writes
// its authenticated receipt.
func runPlan(polFile, planFile, matRoot, libRoot string, ro receiptOptions, stdin io.Reader, stdout, stderr io.Writer) int {
	pol, err := policy.Load(polFile)
	if err != nil {
		fmt.Fprintf(stderr, "glove: run: %s\n", flatten(err))
		return ExitNotStarted
	}
	pl, err := loadPlan(planFile, pol, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "glove: run: %s\n", flatten(err))
		return ExitNotStarted
	}
	var key []byte
	if ro.file != "" {
		if key, err = store.LoadKey(ro.key); err != nil {
			fmt.Fprintf(stderr, "glove: run: --receipt-key: %s\n", flatten(err))
			return ExitNotStarted
		}
	}
	var id [4]byte
	if _, err := rand.Read(id[:]); err != nil {
		fmt.Fprintf(stderr, "glove: run: session name: %v\n", err)
		return ExitNotStarted
	}
	var src session.Sources
	if libRoot != "" {
		r, err := library.OpenRoot(libRoot)
		if err != nil {
			fmt.Fprintf(stderr, "glove: run: --library-bundle-root: %s\n", flatten(err))
			return ExitNotStarted
		}
		defer r.Close()
		src.Libraries = r
	}
	l, pins, err := session.Resolve(pol, pl, "run-"+hex.EncodeToString(id[:]), src)
	if err != nil {
		fmt.Fprintf(stderr, "glove: run: %s\n", flatten(err))
		return ExitNotStarted
	}
	defer func() {
		// The bundles were only read; one that will not close is said,
		// and the session's outcome stands.
		if err := pins.Close(); err != nil {
			fmt.Fprintf(stderr, "glove: run: %s\n", flatten(err))
		}
	}()
	if len(l.Egress) > 0 {
		// The relay's audit is durable in gloved's session store, with
		// the session's receipt; a one-shot run has neither.
		fmt.Fprintf(stderr, "glove: run: egress policy %q: only gloved relays egress endpoints (their audit lives in its session store); run the plan as a managed session\n", l.Egress[0].PolicyID)
		return ExitNotStarted
	}
	if l.Retains() {
		if matRoot == "" {
			fmt.Fprintf(stderr, "glove: run: the plan has a retained_write grant: --materialization-root DIR (glove-loopext4's materialization_root) is required\n")
			return ExitNotStarted
		}
		if matRoot, err = filepath.Abs(matRoot); err != nil {
			fmt.Fprintf(stderr, "glove: run: --materialization-root: %v\n", err)
			return ExitNotStarted
		}
	}
	l.Terminal = isTerminal(os.Stdin)
	// Before the launch digest (the receipt's): TERM is part of the
	// environment the program runs with.
	l.SetTerm(termName())
	res, err := runSession(l, pins, matRoot, stdin, stdout, stderr)
	status, started := finish(res, err, stderr)
	if !started {
		return status
	}
	for _, r := range res.Retained {
		fmt.Fprintf(stderr, "glove: run: retained %s: staged in %s (frozen ext4 image)\n", r.Target, filepath.Join(matRoot, r.Image))
	}
	if ro.file != "" {
		digest := plan.ContentDigest(pl)
		body := session.Outcome(l, res)
		body.SessionID, body.ControllerPlanDigest, body.PlanContentDigest = l.Name, digest, digest
		body.PolicyRevision = pol.Revision
		body.LaunchDigest = session.LaunchDigest(l, pl.AdapterCommandDigest, nil)
		env, err := receipt.Seal(key, 1, ro.anchor, body)
		if err == nil {
			err = writeReceipt(ro.file, env)
		}
		if err != nil {
			fmt.Fprintf(stderr, "glove: run: receipt: %s\n", flatten(err))
			if res.Status() == 0 {
				return ExitFail
			}
		}
	}
	return res.Status()
}

// writeReceipt writes the envelope to a new file (never over an existing
// one: a receipt is evidence), mode 0600, synced before glove run exits.
func writeReceipt(path string, env receipt.Envelope) error {
	data, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return f.Close()
}

func flatten(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// runLaunch resolves glove run's launch.
func runLaunch(workspace string, prof policy.ResourceProfile, cmdArgs []string) (*session.Launch, error) {
	if workspace == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("current directory: %w", err)
		}
		workspace = wd
	}
	ws, err := filepath.Abs(workspace)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", workspace, err)
	}
	if st, err := os.Stat(ws); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("workspace %s: not a directory", ws)
	}
	exe, err := runExecutable(cmdArgs[0])
	if err != nil {
		return nil, err
	}
	var id [4]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("session name: %w", err)
	}
	l := &session.Launch{
		Name:       "run-" + hex.EncodeToString(id[:]),
		Executable: exe,
		Args:       cmdArgs[1:],
		Env:        []string{"PATH=" + strings.Join(runPath, ":"), "HOME=/workspace", "LANG=C.UTF-8", "TERM=" + termName()},
		Cwd:        "/workspace",
		Hostname:   "glove",
		Mounts: []session.Mount{
			{Target: "/usr", Kind: session.ReadOnlyBind, HostPath: "/usr"},
			{Target: "/etc", Kind: session.ReadOnlyBind, HostPath: "/etc"},
			// Both in the session's scratch: disk_bytes is what they
			// hold together.
			{Target: "/tmp", Kind: session.Tmpfs, Mode: 0o1777},
			{Target: "/workspace", Kind: session.EphemeralCopy, HostPath: ws, MaxBytes: prof.DiskBytes},
		},
		Limits:   prof,
		Terminal: isTerminal(os.Stdin),
	}
	// Checked once, here, as Resolve checks a plan's launch.
	if err := l.Check(); err != nil {
		return nil, err
	}
	return l, nil
}

// termName is the operator's TERM when it can be a terminal type name,
// else session.DefaultTerm.
func termName() string {
	if t := os.Getenv("TERM"); session.SaneTerm(t) {
		return t
	}
	return session.DefaultTerm
}

// runExecutable finds the program as the sandbox will: a name without a
// slash in runPath (which the sandbox sees read-only from the host), an
// absolute path as it is, a relative path in the workspace.
func runExecutable(name string) (string, error) {
	switch {
	case strings.HasPrefix(name, "/"):
		return filepath.Clean(name), nil
	case strings.Contains(name, "/"):
		return filepath.Join("/workspace", name), nil
	}
	for _, dir := range runPath {
		if st, err := os.Stat(filepath.Join(dir, name)); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return filepath.Join(dir, name), nil
		}
	}
	return "", fmt.Errorf("%s: not found in the sandbox's PATH (%s)", name, strings.Join(runPath, ":"))
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// runSession starts the helpers, runs the session and stops the helpers.
// glove-loopext4 is started only for a launch with retained copies,
// whose images go in matRoot (its configured materialization_root).
func runSession(l *session.Launch, pins *session.Pins, matRoot string, stdin io.Reader, stdout, stderr io.Writer) (res *session.Result, err error) {
	rt, err := os.MkdirTemp("", "glove-run-")
	if err != nil {
		return nil, fmt.Errorf("runtime directory: %w", err)
	}
	defer os.RemoveAll(rt)
	if err := session.BecomeSubreaper(); err != nil {
		return nil, err
	}
	env := &session.Env{ShimPath: filepath.Join(LibexecDir, "glove-shim"), RuntimeDir: rt, MaterializationRoot: matRoot,
		// The helpers are the service group's alone; the sandbox has the
		// caller's groups (session.Env.Hidden).
		Hidden: []string{LibexecDir}}
	// The helpers' JSON logs are kept, and shown only when the session
	// could not run: they say which request a helper refused and why.
	helperLog := &tailBuffer{max: 4096}
	defer func() {
		if err != nil {
			fmt.Fprintf(stderr, "glove: run: helper log:\n%s", helperLog.String())
		}
	}()
	type helper struct {
		name string
		into **helperproc.Proc
	}
	// Before the first helper starts (cgleaf's comment says why).
	if _, err := cgleaf.Enter(cgleaf.System); err != nil {
		return nil, err
	}
	helpers := []helper{{"glove-mounter", &env.Mounter}, {"glove-cgroup", &env.Cgroup}}
	if l.Retains() {
		helpers = append(helpers, helper{"glove-loopext4", &env.Loopext4})
	}
	for _, h := range helpers {
		p, err := helperproc.StartReady(helperproc.Options{Path: filepath.Join(LibexecDir, h.name), Name: h.name, Stderr: helperLog})
		if err != nil {
			return nil, err
		}
		defer p.Close()
		*h.into = p
	}

	// A helper that dies during the session is replaced by a fresh one
	// for the session's clean-up (usage, cgroup removal, image freezing).
	env.StartHelper = func(name string) (*helperproc.Proc, error) {
		return helperproc.StartReady(helperproc.Options{Path: filepath.Join(LibexecDir, name), Name: name, Stderr: helperLog})
	}
	// As gloved does (package usermode): on a host that refuses the
	// service user a user namespace, glove-userns makes the session's, or
	// glove run stops here with the line that fixes the host.
	mode, err := usermode.Decide(env.ShimPath, env.StartHelper)
	if err != nil {
		return nil, err
	}
	if mode == usermode.Helper {
		env.UserNamespace = func(id string, uid, gid uint32) (*os.File, error) {
			return usermode.Namespace(env.StartHelper, id, uid, gid)
		}
	}

	pio := session.IO{Input: stdin, Output: stdout}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGWINCH)
	defer signal.Stop(sigs)
	fwd := make(chan syscall.Signal, 8)
	resize := make(chan unix.Winsize, 8)
	pio.Signals = fwd
	if l.Terminal {
		pio.Resize = resize
		// The operator's size is the pty's from the start (a size of
		// 0×0, as a serial console may report, takes the default).
		if ws, err := unix.IoctlGetWinsize(int(os.Stdin.Fd()), unix.TIOCGWINSZ); err == nil {
			pio.Size = *ws
		}
		// Raw mode: every key, ^C included, goes to the program's own
		// terminal, which turns it into the program's signals.
		if old, err := makeRaw(int(os.Stdin.Fd())); err == nil {
			defer unix.IoctlSetTermios(int(os.Stdin.Fd()), unix.TCSETS, old)
		}
	}
	go func() {
		for s := range sigs {
			sig := s.(syscall.Signal)
			if sig == unix.SIGWINCH {
				if ws, err := unix.IoctlGetWinsize(int(os.Stdin.Fd()), unix.TIOCGWINSZ); err == nil && l.Terminal {
					resize <- *ws
				}
				continue
			}
			fwd <- sig
		}
	}()
	var bar *progressBar
	if isTerminal(os.Stderr) {
		bar = &progressBar{w: stderr, last: -1}
		pio.Progress = bar.draw
	}
	res, err = session.Run(context.Background(), env, l, pins, pio)
	if bar != nil {
		bar.clear()
	}
	return res, err
}

// progressBar draws a copy's progress on one terminal line, at most
// every 1% of the bytes, and erases the line when the copy is complete,
// so that the program's output starts on a clean line (it was appended
// to "100% 4.0 MiB / 4.0 MiB").
type progressBar struct {
	w     io.Writer
	last  int
	shown bool // a bar is on the line
}

func (b *progressBar) draw(target string, done, total materialize.Totals) {
	pct := 100
	if total.Bytes > 0 {
		// A file that grew since the scan may take done past total.
		pct = int(min(done.Bytes, total.Bytes) * 100 / total.Bytes)
	}
	if pct == b.last {
		return
	}
	b.last = pct
	if pct == 100 {
		b.last = -1 // the next copy's bar starts afresh
		b.clear()
		return
	}
	const width = 30
	fill := pct * width / 100
	fmt.Fprintf(b.w, "\r\033[Kcopying to %s [%s%s] %3d%% %s / %s", target,
		strings.Repeat("#", fill), strings.Repeat(".", width-fill), pct, size(done.Bytes), size(total.Bytes))
	b.shown = true
}

// clear erases the bar if one is on the line (a copy that failed midway):
// erasing unconditionally at the session's end would erase the program's
// last line when it ends without a newline (a prompt).
func (b *progressBar) clear() {
	if b.shown {
		fmt.Fprint(b.w, "\r\033[K")
		b.shown = false
	}
}

func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// makeRaw puts a terminal in raw mode and returns its previous state.
func makeRaw(fd int) (*unix.Termios, error) {
	t, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	old := *t
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, t); err != nil {
		return nil, err
	}
	return &old, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = b.buf[len(b.buf)-b.max:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
