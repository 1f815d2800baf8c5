// SPDX-License-Identifier: Apache-2.0

// Package testenv is the environment of Glove's root-only integration
// tests: a test-unique service user and group, the executables built by
// the Makefile's own rule against a private configuration directory,
// installed by the production installer (file capabilities included) into
// a private prefix, root-owned helper configuration, helpers started as
// that user, and leak checks (leak.go).
//
// A package using it calls Main from TestMain so that the user, group and
// files are removed when its tests end. Tests that need root call Get,
// which skips them with a reason when the test is not root.
package testenv

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/install"
	"github.com/glove-sandbox/glove/supervisor/engine/helperproc"
)

// baseDir holds each run's private tree. Its ancestors (/var, /var/lib)
// are root-owned and not writable by others, as the helpers require of
// their configuration directory, and it lies on a file system that honours
// file capabilities (not nosuid).
const baseDir = "/var/lib/glove-testenv"

// Env is one test process's environment.
type Env struct {
	// Base is the private tree: build/, prefix/, etc/.
	Base string
	// Install describes where the executables were installed.
	Install install.Options
	// ConfDir is the helpers' compiled-in configuration directory.
	ConfDir string
	// User and Group name the service account; UID and GID are its ids.
	User, Group string
	UID, GID    int
	// cgroupDirs are the delegated cgroup parents setup created.
	cgroupDirs []string
	// lock is the host-wide integration lock, held until teardown.
	lock *os.File
}

var (
	once    sync.Once
	shared  *Env
	initErr error
)

// Main runs the package's tests and removes the environment afterwards.
func Main(m *testing.M) {
	code := m.Run()
	if shared != nil {
		if err := shared.teardown(); err != nil {
			fmt.Fprintln(os.Stderr, "testenv: teardown:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// Get returns the environment, setting it up on first use. It skips the
// test when not running as root: such tests never pass silently.
func Get(t testing.TB) *Env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root to create a service user and install file capabilities (CI runs as root)")
	}
	once.Do(func() { shared, initErr = setup() })
	if initErr != nil {
		t.Fatalf("testenv: %v", initErr)
	}
	return shared
}

func setup() (e *Env, err error) {
	var suffix [4]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return nil, fmt.Errorf("random suffix: %w", err)
	}
	name := "glove-t-" + hex.EncodeToString(suffix[:])
	e = &Env{User: name, Group: name}
	defer func() {
		if err != nil {
			// Both are reported: what failed, and anything of the
			// half-made environment teardown could not remove.
			err = errors.Join(err, e.teardown())
		}
	}()
	if err := os.MkdirAll(baseDir, 0o755); err != nil {
		return e, fmt.Errorf("create %s: %w", baseDir, err)
	}
	// One integration test process at a time on a host: `go test ./...`
	// runs packages in parallel, and the leak check compares host-wide
	// state (mounts, loop devices, cgroups), so another package's set-up
	// or teardown would show up as this one's leak.
	if e.lock, err = os.OpenFile(filepath.Join(baseDir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		return e, fmt.Errorf("open the integration lock: %w", err)
	}
	if err := syscall.Flock(int(e.lock.Fd()), syscall.LOCK_EX); err != nil {
		return e, fmt.Errorf("take the integration lock: %w", err)
	}
	prebuilt := os.Getenv(PrebuiltEnv)
	if prebuilt != "" {
		// The fixed tree its helpers were built for (tools.go). One
		// left by a run that was killed is not reused: its user,
		// cgroups and files are the leftovers a leak check reports.
		if err := os.Mkdir(PrebuiltBase, 0o755); err != nil {
			return e, fmt.Errorf("create private tree: %w", err)
		}
		e.Base = PrebuiltBase
	} else if e.Base, err = os.MkdirTemp(baseDir, "run-"); err != nil {
		return e, fmt.Errorf("create private tree: %w", err)
	}
	// The service user must traverse to its executables.
	if err := os.Chmod(e.Base, 0o755); err != nil {
		return e, fmt.Errorf("chmod private tree: %w", err)
	}
	e.ConfDir = filepath.Join(e.Base, "etc")
	if err := os.Mkdir(e.ConfDir, 0o755); err != nil {
		return e, fmt.Errorf("create configuration directory: %w", err)
	}
	// sources/ is the root glove-mounter may bind from (root-owned,
	// like a host's shared tree).
	if err := os.Mkdir(filepath.Join(e.Base, "sources"), 0o755); err != nil {
		return e, fmt.Errorf("create sources directory: %w", err)
	}
	if err := run("useradd", "--system", "--user-group", "--no-create-home",
		"--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name); err != nil {
		return e, err
	}
	u, err := user.Lookup(name)
	if err != nil {
		return e, fmt.Errorf("look up %s: %w", name, err)
	}
	e.UID, _ = strconv.Atoi(u.Uid)
	e.GID, _ = strconv.Atoi(u.Gid)
	if err := e.delegateCgroups(); err != nil {
		return e, err
	}
	// images/ is glove-loopext4's materialization root: the service
	// user's own, mode 0700.
	images := filepath.Join(e.Base, "images")
	if err := os.Mkdir(images, 0o700); err != nil {
		return e, fmt.Errorf("create images directory: %w", err)
	}
	if err := os.Chown(images, e.UID, e.GID); err != nil {
		return e, fmt.Errorf("chown images directory: %w", err)
	}

	build := filepath.Join(prebuilt, "build")
	if prebuilt == "" {
		build = filepath.Join(e.Base, "build")
		root, err := moduleRoot()
		if err != nil {
			return e, err
		}
		if err := makeBuild(root, build, e.ConfDir, filepath.Join(e.Base, "prefix")); err != nil {
			return e, err
		}
	}
	e.Install = install.Options{BinDir: build, Prefix: filepath.Join(e.Base, "prefix"), Group: name}
	if err := install.Install(e.Install); err != nil {
		return e, err
	}
	for file, cfg := range DefaultConfigs(e.Base) {
		if err := e.WriteConfig(file, cfg); err != nil {
			return e, err
		}
	}
	return e, nil
}

// DefaultConfigs are the helpers' bounds in the test environment.
func DefaultConfigs(base string) map[string]any {
	return map[string]any{
		"mounter.json": map[string]any{
			"schema_version": 1, "source_roots": []string{"/usr", filepath.Join(base, "sources")},
			"max_tmpfs_bytes": 64 << 20, "max_tmpfs_inodes": 4096,
		},
		"loopext4.json": map[string]any{
			"schema_version": 1, "materialization_root": filepath.Join(base, "images"),
			"max_image_bytes": 256 << 20,
		},
		"cgroup.json": map[string]any{
			"schema_version": 1, "parent": CgroupParent(base),
			"max_memory_bytes": 1 << 30, "max_pids": 256,
		},
		"streamproxy.json": map[string]any{
			"schema_version": 1, "max_frame_bytes": 16 << 10, "max_exchange_ms": 30000,
		},
		// On here, where the package ships it off: the tests exercise
		// glove-userns on any host (it works where unprivileged user
		// namespaces are allowed too).
		"userns.json": map[string]any{"schema_version": 1, "enabled": true},
	}
}

// WriteConfig writes a helper configuration file, root-owned, mode 0644.
// v is marshalled to JSON unless it is already []byte.
func (e *Env) WriteConfig(file string, v any) error {
	data, ok := v.([]byte)
	if !ok {
		var err error
		if data, err = json.Marshal(v); err != nil {
			return fmt.Errorf("encode %s: %w", file, err)
		}
	}
	p := filepath.Join(e.ConfDir, file)
	tmp := p + ".new"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := os.Chmod(tmp, 0o644); err != nil { // umask-proof
		return fmt.Errorf("chmod %s: %w", file, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("rename %s: %w", file, err)
	}
	return nil
}

// HelperPath is where a table entry is installed.
func (e *Env) HelperPath(binary string) string {
	ent, ok := captable.Lookup(binary)
	if !ok {
		panic("testenv: no capability table row for " + binary)
	}
	return install.Path(e.Install, ent)
}

// Credential runs a process as the service user, with the service group
// as its only group (that group may execute the helpers).
func (e *Env) Credential() *syscall.Credential {
	return &syscall.Credential{Uid: uint32(e.UID), Gid: uint32(e.GID), Groups: []uint32{uint32(e.GID)}}
}

// StartHelper starts an installed helper as the service user. Its JSON
// log goes to the returned buffer.
func (e *Env) StartHelper(t testing.TB, binary string) (*helperproc.Proc, *SyncBuffer) {
	t.Helper()
	return e.StartHelperAt(t, e.HelperPath(binary), binary)
}

// StartHelperAt is StartHelper for an executable outside the install
// (FallbackMounter), started under the wire name binary.
func (e *Env) StartHelperAt(t testing.TB, path, binary string) (*helperproc.Proc, *SyncBuffer) {
	t.Helper()
	log := &SyncBuffer{}
	p, err := helperproc.Start(helperproc.Options{
		Path: path, Name: binary, Stderr: log, Credential: e.Credential(),
	})
	if err != nil {
		t.Fatalf("start %s: %v", binary, err)
	}
	// A test that stops early must not leave the helper running: the
	// leak check (registered earlier, run later) would report it.
	t.Cleanup(func() {
		if p.Cmd.ProcessState == nil {
			if err := p.Cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
				t.Errorf("kill %s: %v", binary, err)
			}
			// Close reaps it; its error is the kill's own status.
			_ = p.Close() // reaps the helper killed above: its error is the kill's own status
		}
	})
	return p, log
}

// StartServing starts an installed helper as the service user, checks it
// answers Hello, and, when the test ends, closes its connection and
// fails the test unless it exits 0 (a helper that was stopped earlier is
// left alone). It is how tests get a helper to send requests to.
func (e *Env) StartServing(t testing.TB, binary string) (*helperproc.Proc, *SyncBuffer) {
	t.Helper()
	return e.StartServingAt(t, e.HelperPath(binary), binary)
}

// StartServingAt is StartServing for an executable outside the install.
func (e *Env) StartServingAt(t testing.TB, path, binary string) (*helperproc.Proc, *SyncBuffer) {
	t.Helper()
	p, log := e.StartHelperAt(t, path, binary)
	t.Cleanup(func() {
		if p.Cmd.ProcessState != nil {
			return
		}
		if err := p.Close(); err != nil {
			t.Errorf("%s exit after EOF: %v (want 0)\nhelper log: %s", binary, err, log)
		}
	})
	if _, err := p.Hello(); err != nil {
		t.Fatalf("hello: %v\nhelper log: %s", err, log)
	}
	return p, log
}

func (e *Env) teardown() error {
	var errs []string
	if err := e.removeCgroups(); err != nil {
		errs = append(errs, err.Error())
	}
	if e.User != "" {
		if _, err := user.Lookup(e.User); err == nil {
			// A process of the test user still exiting (killed by the
			// last test, not yet reaped by its parent) makes userdel
			// refuse; wait for such processes boundedly, and name any
			// that stays, so a leak says what it is.
			if left := e.waitUserProcesses(10 * time.Second); len(left) > 0 {
				errs = append(errs, "processes of "+e.User+" left at teardown: "+strings.Join(left, "; "))
			}
			if err := run("userdel", e.User); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	if e.Group != "" {
		if _, err := user.LookupGroup(e.Group); err == nil {
			if err := run("groupdel", e.Group); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	if e.Base != "" {
		if err := os.RemoveAll(e.Base); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if e.lock != nil {
		e.lock.Close() // releases the lock
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// makeBuild runs the Makefile's own rule, so tests run what `make build`
// produces.
func makeBuild(root, bindir, confDir, prefix string) error {
	mk := exec.Command("make", "-s", "-C", root, "build", "BINDIR="+bindir, "CONFDIR="+confDir, "PREFIX="+prefix)
	if out, err := mk.CombinedOutput(); err != nil {
		return fmt.Errorf("make build: %w\n%s", err, out)
	}
	return nil
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the Glove module")
	}
	return filepath.Dir(mod), nil
}

// SyncBuffer is a bytes.Buffer safe for a process's writer goroutine and
// the test reading it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// WaitExit waits for a helper that is expected to exit on its own and
// returns its exit code (-1 with the signal when killed). It fails the
// test if the helper is still running after the timeout.
func WaitExit(t testing.TB, p *helperproc.Proc, timeout time.Duration) (code int, sig syscall.Signal) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.Wait() }()
	select {
	case <-done:
	case <-time.After(timeout):
		// It may have exited just now; the wait below reaps it.
		if err := p.Cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Errorf("kill helper %d: %v", p.Pid(), err)
		}
		<-done
		t.Fatalf("helper %d still running after %v", p.Pid(), timeout)
	}
	ws := p.Cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return -1, ws.Signal()
	}
	return ws.ExitStatus(), 0
}

// WaitCount waits until s occurs at least n times in the buffer and
// reports whether it did within timeout. A helper's log reaches the
// buffer through a pipe and a copying goroutine, so a line written
// before a reply may arrive after it.
func (b *SyncBuffer) WaitCount(s string, n int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if strings.Count(b.String(), s) >= n {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitUserProcesses waits up to timeout until no process of the test user
// is left, and describes those that are (pid, state, parent, command
// line, cgroup).
func (e *Env) waitUserProcesses(timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for {
		procs, err := processes(e.UID)
		if err != nil {
			return []string{err.Error()}
		}
		if len(procs) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var out []string
			for _, p := range procs {
				out = append(out, p+describeProcess("+process "+p))
			}
			return out
		}
		time.Sleep(50 * time.Millisecond)
	}
}
