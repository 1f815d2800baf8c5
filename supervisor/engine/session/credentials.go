// SPDX-License-Identifier: Apache-2.0

package session

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"golang.org/x/sys/unix"
)

// This file holds a launch's credentials: for each secret handle the plan
// names, the policy's source is read (protected-file rules) and brought
// into the handle's lease (package lease), the lease is held for the
// session, and its content is either written at the policy's destination
// in the private home before the program exists (after the program has
// ended what it left there becomes the lease's next version), or given
// to the program as one environment variable (never taken back: a
// program cannot change its parent's copy of its environment).
//
// Threats, and what stops each:
//   - the sandbox reading or changing the operator's source file: it is
//     never mounted (the session gets a copy in its own private home),
//     and gloved refuses a policy whose grants reach it (own state);
//   - two sessions of one handle racing on a rotating token: the lease's
//     exclusive lock, held from Resolve to the pins' release;
//   - the sandbox growing the credential to fill the host's disk: the
//     copy lives in the session's scratch (disk_bytes), and what is read
//     back is bounded by the policy's max_bytes;
//   - the sandbox leaving a link, a FIFO or a directory at the destination
//     to make gloved read elsewhere or block: the read-back opens beneath
//     the home's descriptor without following links, non-blocking, and
//     takes a regular file only;
//   - the secret reaching a log, the store, a status or a receipt: only
//     the handle, the lease identity and versions leave this file;
//   - a variable's value reaching the launch digest or anything derived
//     from the Launch: it is never in Launch.Env (which the digest
//     hashes) but joined to the environment only when the bundle is
//     written (secretEnv), and glove-shim unlinks that bundle's
//     config.json as soon as it has read it (spec.ConfigAnnotation);
//   - a lease whose content cannot be one variable (a NUL, which execve
//     would cut, a line break, which would make a second line of
//     anything that prints the environment, or bytes that are not
//     UTF-8): refused at start, the value never quoted in the error.

// ErrCredential is wrapped when a credential cannot be provided: the
// source fails the protected-file rules, the lease is unreadable or
// busy (lease.ErrBusy), or the runtime has no private home for it.
var ErrCredential = errors.New("credential unavailable")

// MaxCredentials bounds the credentials of one launch (each is read
// whole into memory and listed in the receipt).
const MaxCredentials = 8

// Credential is one credential of a launch, as the managed-launch digest
// and the receipt commit it: never its content.
type Credential struct {
	Handle string `json:"handle"`
	// Exactly one of Destination (a file in the private home) and
	// Variable (an environment variable's name).
	Destination string `json:"destination,omitzero"`
	Variable    string `json:"environment_variable,omitzero"`
	MaxBytes    uint64 `json:"max_bytes"`
	LeaseID     string `json:"lease_id"`
	Version     uint64 `json:"version"`
}

// file reports whether c is delivered as a file in the private home.
func (c Credential) file() bool { return c.Destination != "" }

// CredentialOutcome is what became of a credential after the session.
type CredentialOutcome struct {
	Handle  string
	LeaseID string
	// Version is the lease's version after the session: the launch's, or
	// a later one when the session changed the credential (each rotation
	// the watcher kept while it ran, then the end's take-back).
	Version uint64
	// Rotated: the lease's version moved during the session.
	Rotated bool
	// Kept names why the end's take-back did not read the session's copy
	// (the program removed it, or left something that is not a regular
	// file of at most max_bytes): the lease keeps what it held before,
	// the launch's version or a rotation the watcher kept.
	Kept string
}

// resolveCredentials acquires the lease of each handle the plan names.
// Called after the private home is known (l.Skills); the leases become
// pins, released by Pins.Close.
func resolveCredentials(l *Launch, pins *Pins, pol *policy.Policy, pl *plan.Plan, src Sources) error {
	if len(pl.SecretHandles) == 0 {
		return nil
	}
	if len(pl.SecretHandles) > MaxCredentials {
		return fmt.Errorf("resolve: secret_handles: %d, more than %d: %w", len(pl.SecretHandles), MaxCredentials, ErrInvalid)
	}
	if src.Leases == nil {
		return fmt.Errorf("resolve: secret_handles: no credential lease store here: %w", ErrUnsupported)
	}
	for _, h := range pl.SecretHandles {
		cp, ok := pol.Credential(h)
		if !ok {
			return fmt.Errorf("resolve: secret handle %q: the policy maps no credential source to it: %w", h, ErrUnsupported)
		}
		// A variable needs no private home; a file does.
		if cp.EnvironmentVariable == "" {
			if l.Skills == nil {
				return fmt.Errorf("resolve: secret handle %q: runtime template %q has no private home to hold a credential file: %w", h, pl.RuntimeTemplateID, ErrUnsupported)
			}
			if cp.DestinationPath == l.Skills.SkillDir || within(cp.DestinationPath, l.Skills.SkillDir) || within(l.Skills.SkillDir, cp.DestinationPath) {
				return fmt.Errorf("resolve: secret handle %q: its destination overlaps the skill directory %s: %w", h, l.Skills.SkillDir, ErrInvalid)
			}
			if _, ok := cutDir(cp.DestinationPath, l.Skills.Home); !ok {
				return fmt.Errorf("resolve: secret handle %q: its destination is not beneath the private home: %w", h, ErrInvalid)
			}
		}
		data, err := policy.ReadProtected(cp.SourcePath, int64(cp.MaxBytes))
		if err != nil {
			return fmt.Errorf("resolve: secret handle %q: its source: %w: %w", h, err, ErrCredential)
		}
		ls, err := src.Leases.Acquire(h, data)
		if err != nil {
			return fmt.Errorf("resolve: secret handle %q: %w: %w", h, err, ErrCredential)
		}
		if uint64(len(ls.Content())) > cp.MaxBytes {
			// A lease rotated under a larger bound than the policy's
			// present one: not handed out (the operator lowered it).
			rerr := ls.Release()
			return errors.Join(fmt.Errorf("resolve: secret handle %q: the lease holds more than max_bytes %d: %w", h, cp.MaxBytes, ErrCredential), rerr)
		}
		if cp.EnvironmentVariable != "" {
			if _, err := variableValue(ls.Content()); err != nil {
				rerr := ls.Release()
				return errors.Join(fmt.Errorf("resolve: secret handle %q: lease %s version %d cannot be variable %s: %w: %w", h, ls.ID(), ls.Version(), cp.EnvironmentVariable, err, ErrCredential), rerr)
			}
		}
		pins.leases = append(pins.leases, ls)
		l.Credentials = append(l.Credentials, Credential{Handle: h, Destination: cp.DestinationPath, Variable: cp.EnvironmentVariable,
			MaxBytes: cp.MaxBytes, LeaseID: ls.ID(), Version: ls.Version()})
	}
	return nil
}

// variableValue is a lease's content as one environment variable's
// value: one line, its one trailing newline ("\n" or "\r\n") removed, no
// other line break, no NUL, valid UTF-8. Its errors never quote the
// content (it is the secret).
func variableValue(content []byte) (string, error) {
	v := content
	if bytes.HasSuffix(v, []byte("\n")) {
		v = bytes.TrimSuffix(bytes.TrimSuffix(v, []byte("\n")), []byte("\r"))
	}
	switch {
	case len(v) == 0:
		return "", errors.New("it is empty")
	case bytes.IndexByte(v, 0) >= 0:
		return "", errors.New("it holds a NUL byte")
	case bytes.ContainsAny(v, "\r\n"):
		return "", errors.New("it is more than one line")
	case !utf8.Valid(v):
		return "", errors.New("it is not valid UTF-8")
	}
	return string(v), nil
}

// secretEnv is the environment entries of l's variable credentials,
// NAME=value, read from the pinned leases. Only writeBundle calls it:
// the values exist nowhere else of the launch.
func secretEnv(l *Launch, pins *Pins) ([]string, error) {
	var out []string
	for i, c := range l.Credentials {
		if c.file() {
			continue
		}
		if pins == nil || i >= len(pins.leases) {
			return nil, fmt.Errorf("credential %s: no pinned lease: %w", c.Handle, ErrInvalid)
		}
		v, err := variableValue(pins.leases[i].Content())
		if err != nil {
			return nil, fmt.Errorf("credential %s: lease %s cannot be variable %s: %w: %w", c.Handle, c.LeaseID, c.Variable, err, ErrCredential)
		}
		out = append(out, c.Variable+"="+v)
	}
	return out, nil
}

// within reports whether canonical path p lies beneath dir.
func within(p, dir string) bool {
	_, ok := cutDir(p, dir)
	return ok
}

// writeCredentials writes each lease's content at its destination in the
// home tmpfs (mode 0600, created, never opened through a link), before
// anything can see the home.
func writeCredentials(home *os.File, l *Launch, pins *Pins) error {
	for i, c := range l.Credentials {
		if !c.file() {
			continue // a variable (writeBundle)
		}
		rel, _ := cutDir(c.Destination, l.Skills.Home)
		dir, name := home, rel
		if d := path.Dir(rel); d != "." {
			sub, err := mkdirAll(home, d)
			if err != nil {
				return fmt.Errorf("private home: credential %s: create its directory: %w", c.Handle, err)
			}
			defer sub.Close()
			dir, name = sub, path.Base(rel)
		}
		fd, err := unix.Openat(int(dir.Fd()), name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return fmt.Errorf("private home: credential %s: create: %w", c.Handle, err)
		}
		f := os.NewFile(uintptr(fd), name)
		_, werr := f.Write(pins.leases[i].Content())
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			if errors.Is(werr, unix.ENOSPC) || errors.Is(werr, unix.EDQUOT) {
				return fmt.Errorf("%s: the private home's credentials need more than its quota: %w", LimitDisk, werr)
			}
			return fmt.Errorf("private home: credential %s: write: %w", c.Handle, werr)
		}
	}
	return nil
}

// returnCredentials reads back what the session left at each credential's
// destination and commits it to the lease. A copy the session removed or
// spoiled is not read (the lease keeps its version, Kept says why); a
// lease that cannot be written is an error: the session's rotation would
// be lost, which the operator must hear of.
func returnCredentials(home *os.File, l *Launch, pins *Pins) ([]CredentialOutcome, error) {
	var out []CredentialOutcome
	var errs []error
	for i, c := range l.Credentials {
		ls := pins.leases[i]
		o := CredentialOutcome{Handle: c.Handle, LeaseID: ls.ID(), Version: ls.Version()}
		if !c.file() {
			out = append(out, o) // a variable: nothing to take back
			continue
		}
		rel, _ := cutDir(c.Destination, l.Skills.Home)
		data, why := readBack(home, rel, c.MaxBytes)
		if why != "" {
			o.Kept = why
		} else if _, err := ls.Commit(data); err != nil {
			errs = append(errs, fmt.Errorf("credential %s: keep the session's rotation: %w", c.Handle, err))
			o.Kept = "the lease could not be written"
		}
		// Rotated: by the end's take-back or by the watcher meanwhile.
		o.Version = ls.Version()
		o.Rotated = o.Version != c.Version
		out = append(out, o)
	}
	return out, errors.Join(errs...)
}

// readBack reads the file at rel beneath home: a regular file of at most
// max bytes, reached without a link, a mount crossing or "..". It says
// why not otherwise.
func readBack(home *os.File, rel string, max uint64) ([]byte, string) {
	fd, err := unix.Openat2(int(home.Fd()), rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if errors.Is(err, unix.ENOENT) {
		return nil, "removed by the session"
	}
	if err != nil {
		return nil, "not reachable without a link: " + unix.ErrnoName(errnoOf(err))
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, "stat failed"
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, "not a regular file"
	}
	if uint64(st.Size) > max {
		return nil, fmt.Sprintf("larger than max_bytes %d", max)
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, "read failed"
	}
	if uint64(len(data)) > max {
		return nil, fmt.Sprintf("larger than max_bytes %d", max)
	}
	return data, ""
}

func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return 0
}

// home is the private home's directory in the scratch, or nil.
func (p *prepared) home(l *Launch) *os.File {
	for i, m := range l.Mounts {
		if m.Kind == PrivateHome && i < len(p.mounts) {
			return p.mounts[i]
		}
	}
	return nil
}

// credCommitGap is the least time between two commits of the watcher: a
// program that rewrites its credential in a loop costs the store one
// durable write a second at most (threat: a sandbox turning gloved's
// rotation persistence into an I/O flood on the session store).
const credCommitGap = time.Second

// credWatch keeps a session's rotations durable while it runs (threat:
// gloved dying mid-session after a harness rotated a token the vendor
// then invalidated: the copy goes with the session's scratch, and the
// operator would have to log in again). inotify on the destinations'
// directories in the private home says when a credential file was
// written and closed or renamed into place; the file is then read back
// exactly as at the end (readBack) and committed. The end's take-back
// still runs after the watcher has stopped, so nothing depends on an
// event arriving.
type credWatch struct {
	ino   *os.File // inotify descriptor
	wakeR *os.File // closed-by-stop pipe: wakes the loop
	wakeW *os.File
	done  chan struct{}
	errs  []error
}

// watchCredentials starts the watcher, before the program is released.
func (p *prepared) watchCredentials(l *Launch) (*credWatch, error) {
	home := p.home(l)
	if home == nil || !slices.ContainsFunc(l.Credentials, Credential.file) {
		return nil, nil
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("credential watch: inotify: %w", err)
	}
	w := &credWatch{ino: os.NewFile(uintptr(fd), "inotify"), done: make(chan struct{})}
	// Each destination's directory, by its path through the home's
	// descriptor: the directories were made by gloved and the program has
	// not run yet, so no name on the way is the sandbox's.
	dirs := map[int32]string{}
	for _, c := range l.Credentials {
		if !c.file() {
			continue
		}
		rel, _ := cutDir(c.Destination, l.Skills.Home)
		d := path.Dir(rel)
		// "/." for the home itself: IN_DONT_FOLLOW applies to the last
		// component, which must be the directory, not the magic link.
		name := fmt.Sprintf("/proc/self/fd/%d/%s", home.Fd(), d)
		wd, err := unix.InotifyAddWatch(fd, name, unix.IN_CLOSE_WRITE|unix.IN_MOVED_TO|unix.IN_ONLYDIR|unix.IN_DONT_FOLLOW)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("credential watch: %s: %w", c.Handle, err), w.ino.Close())
		}
		dirs[int32(wd)] = d
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("credential watch: pipe: %w", err), w.ino.Close())
	}
	w.wakeR, w.wakeW = pr, pw
	go w.loop(home, l, p.pins, dirs)
	return w, nil
}

// stop ends the watcher and returns what it failed to commit.
func (w *credWatch) stop() error {
	if w == nil {
		return nil
	}
	err := w.wakeW.Close()
	<-w.done
	return errors.Join(append(w.errs, err, w.wakeR.Close(), w.ino.Close())...)
}

func (w *credWatch) loop(home *os.File, l *Launch, pins *Pins, dirs map[int32]string) {
	defer close(w.done)
	dirty := make([]bool, len(l.Credentials))
	var last time.Time
	buf := make([]byte, 64<<10)
	for {
		timeout := -1
		if slices.Contains(dirty, true) {
			timeout = max(0, int(time.Until(last.Add(credCommitGap)).Milliseconds())+1)
		}
		fds := []unix.PollFd{{Fd: int32(w.ino.Fd()), Events: unix.POLLIN}, {Fd: int32(w.wakeR.Fd()), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, timeout); err != nil && !errors.Is(err, unix.EINTR) {
			w.errs = append(w.errs, fmt.Errorf("credential watch: poll: %w", err))
			return
		}
		if fds[1].Revents != 0 {
			return // stop: the end's take-back follows
		}
		if fds[0].Revents != 0 {
			n, err := unix.Read(int(w.ino.Fd()), buf)
			if err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
				w.errs = append(w.errs, fmt.Errorf("credential watch: read: %w", err))
				return
			}
			for _, ev := range parseInotify(buf[:max(n, 0)]) {
				for i, c := range l.Credentials {
					if !c.file() {
						continue
					}
					rel, _ := cutDir(c.Destination, l.Skills.Home)
					if ev.overflow || (dirs[ev.wd] == path.Dir(rel) && ev.name == path.Base(rel)) {
						dirty[i] = true
					}
				}
			}
		}
		if !slices.Contains(dirty, true) || time.Since(last) < credCommitGap {
			continue
		}
		last = time.Now()
		for i, c := range l.Credentials {
			if !dirty[i] {
				continue
			}
			dirty[i] = false
			rel, _ := cutDir(c.Destination, l.Skills.Home)
			if data, why := readBack(home, rel, c.MaxBytes); why == "" {
				if _, err := pins.leases[i].Commit(data); err != nil {
					w.errs = append(w.errs, fmt.Errorf("credential %s: keep a rotation during the session: %w", c.Handle, err))
				}
			}
		}
	}
}

// inotifyEvent is one event of an inotify read: its watch, the name in
// the watched directory, or a queue overflow (events were lost).
type inotifyEvent struct {
	wd       int32
	name     string
	overflow bool
}

// parseInotify decodes the events of one read (struct inotify_event:
// wd, mask, cookie, len, then len bytes of NUL-padded name), stopping at
// the first that does not fit the bytes read.
func parseInotify(b []byte) []inotifyEvent {
	var out []inotifyEvent
	for len(b) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(b[0:4]))
		mask := binary.NativeEndian.Uint32(b[4:8])
		n := int(binary.NativeEndian.Uint32(b[12:16]))
		if n > len(b)-unix.SizeofInotifyEvent {
			break
		}
		name := string(bytes.TrimRight(b[unix.SizeofInotifyEvent:unix.SizeofInotifyEvent+n], "\x00"))
		out = append(out, inotifyEvent{wd: wd, name: name, overflow: mask&unix.IN_Q_OVERFLOW != 0})
		b = b[unix.SizeofInotifyEvent+n:]
	}
	return out
}
