// SPDX-License-Identifier: Apache-2.0

package guest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Unit paths.
const (
	UnitName   = "gloved"
	UnitFile   = "/lib/systemd/system/gloved.service"
	DropInDir  = "/etc/systemd/system/gloved.service.d"
	DropInFile = DropInDir + "/lane.conf"
	EnvFile    = "/etc/glove/gloved.env"
	SocketPath = "/run/glove/gloved.sock"
)

// Service is how the agent starts and stops gloved: through systemd in a
// lane guest, or (--no-systemd, for development on a machine without
// systemd) as a child started the way the unit would start it.
type Service interface {
	Enable(ev *Evidence) error
	Start(ev *Evidence) error
	Stop(ev *Evidence) error
	Restart(ev *Evidence) error
	// Active reports whether the service is running ("active" for
	// systemd), with the state word.
	Active(ev *Evidence) (bool, string)
	MainPID(ev *Evidence) (int, error)
	// Diagnose records why the service is not running and returns the
	// most telling line.
	Diagnose(ev *Evidence) string
	// SetExtraArgs appends arguments to gloved's command line from the
	// next start (nil: none).
	SetExtraArgs(ev *Evidence, args []string) error
	// Crash ends gloved without letting it stop its sessions (for the
	// development stand-in of a reboot).
	Crash(ev *Evidence) error
}

// unitExecStart is gloved's packaged ExecStart= command.
func unitExecStart() (string, error) {
	unit, err := os.ReadFile(UnitFile)
	if err != nil {
		return "", fmt.Errorf("read the unit file: %w", err)
	}
	return ParseExecStart(string(unit))
}

// ParseExecStart returns the first non-empty ExecStart= command of a unit
// file's text, with continuation lines joined.
func ParseExecStart(unit string) (string, error) {
	var joined []string
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(unit))
	for sc.Scan() {
		l := sc.Text()
		if strings.HasSuffix(l, `\`) {
			cur.WriteString(strings.TrimSuffix(l, `\`))
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(l)
		joined = append(joined, cur.String())
		cur.Reset()
	}
	if cur.Len() > 0 {
		joined = append(joined, cur.String())
	}
	for _, l := range joined {
		l = strings.TrimSpace(l)
		if v, ok := strings.CutPrefix(l, "ExecStart="); ok {
			if v = strings.Join(strings.Fields(v), " "); v != "" {
				return v, nil
			}
		}
	}
	return "", errors.New("no ExecStart= in the unit")
}

// DropIn is the drop-in that adds args to the unit's ExecStart.
func DropIn(execStart string, args []string) string {
	return "# written by glove-lane-guest (vmlane/guest): the lane's local services (inherited-stream upstream)\n" +
		"[Service]\nExecStart=\nExecStart=" + execStart + " " + strings.Join(args, " ") + "\n"
}

// ReadEnvFile reads KEY=VALUE lines.
func ReadEnvFile(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if k, v, ok := strings.Cut(l, "="); ok {
			out[k] = v
		}
	}
	return out, nil
}

// ExpandEnv replaces ${NAME} and $NAME as systemd does in ExecStart=.
func ExpandEnv(s string, env map[string]string) string {
	return os.Expand(s, func(k string) string { return env[k] })
}

// --- systemd ---

type systemdService struct{}

func systemctl(ev *Evidence, timeout time.Duration, args ...string) Result {
	return Run(ev, RunOpts{Timeout: timeout}, append([]string{"systemctl"}, args...)...)
}

// unit runs systemctl verb on gloved's unit, failing with its output.
func unit(ev *Evidence, timeout time.Duration, verb string) error {
	if r := systemctl(ev, timeout, verb, UnitName); !r.OK() {
		return errors.New(r.Brief())
	}
	return nil
}

func (systemdService) Enable(ev *Evidence) error  { return unit(ev, 60*time.Second, "enable") }
func (systemdService) Start(ev *Evidence) error   { return unit(ev, 120*time.Second, "start") }
func (systemdService) Stop(ev *Evidence) error    { return unit(ev, 150*time.Second, "stop") }
func (systemdService) Restart(ev *Evidence) error { return unit(ev, 150*time.Second, "restart") }

func (systemdService) Active(ev *Evidence) (bool, string) {
	r := systemctl(ev, 30*time.Second, "is-active", UnitName)
	s := strings.TrimSpace(r.Stdout)
	return s == "active", s
}

func (systemdService) MainPID(ev *Evidence) (int, error) {
	r := systemctl(ev, 30*time.Second, "show", "-p", "MainPID", "--value", UnitName)
	pid, err := strconv.Atoi(strings.TrimSpace(r.Stdout))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("no main pid (%q)", strings.TrimSpace(r.Stdout))
	}
	return pid, nil
}

func (systemdService) Diagnose(ev *Evidence) string {
	systemctl(ev, 30*time.Second, "status", UnitName, "--no-pager", "-l")
	r := Run(ev, RunOpts{Timeout: 30 * time.Second}, "journalctl", "-u", UnitName, "-n", "20", "--no-pager", "-o", "cat")
	return TellingLine(r.Stdout)
}

func (systemdService) SetExtraArgs(ev *Evidence, args []string) error {
	if len(args) == 0 {
		if err := os.Remove(DropInFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		// The directory may hold an operator's own drop-ins: removing it
		// is best effort, and one left behind changes nothing.
		if err := os.Remove(DropInDir); err != nil && !errors.Is(err, os.ErrNotExist) {
			ev.Printf("kept %s: %v", DropInDir, err)
		}
		ev.Printf("removed %s", DropInFile)
	} else {
		es, err := unitExecStart()
		if err != nil {
			return err
		}
		if err := os.MkdirAll(DropInDir, 0o755); err != nil {
			return err
		}
		d := DropIn(es, args)
		if err := WriteFileSync(DropInFile, []byte(d), 0o644); err != nil {
			return err
		}
		ev.Printf("wrote %s:\n%s", DropInFile, indent(d))
	}
	if r := systemctl(ev, 60*time.Second, "daemon-reload"); !r.OK() {
		return errors.New(r.Brief())
	}
	return nil
}

func (systemdService) Crash(ev *Evidence) error {
	if r := systemctl(ev, 30*time.Second, "kill", "--signal=SIGKILL", "--kill-whom=main", UnitName); !r.OK() {
		return errors.New(r.Brief())
	}
	return nil
}

// TellingLine picks the line of a journal that best says why gloved is
// not running: the last "refusing" line, else the last error-like one,
// else the last line.
func TellingLine(journal string) string {
	lines := strings.Split(strings.TrimSpace(journal), "\n")
	for _, words := range [][]string{{"refusing"}, {"fatal", "error", "failed", "Assertion"}} {
		for i := len(lines) - 1; i >= 0; i-- {
			for _, w := range words {
				if strings.Contains(strings.ToLower(lines[i]), strings.ToLower(w)) {
					return strings.TrimSpace(lines[i])
				}
			}
		}
	}
	if len(lines) > 0 {
		return strings.TrimSpace(lines[len(lines)-1])
	}
	return ""
}

// --- development stand-in ---

// devService runs gloved as the unit would (the glove user, the unit's
// ExecStart with gloved.env, inside a delegated cgroup at the unit's
// path) for hosts without systemd. It does not reproduce the unit's
// namespaces.
type devService struct {
	ids     func() (uid, gid int) // the glove user's, once installed
	logPath string
	uid     int
	gid     int

	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	extra   []string
	cgDirs  []string
	exitErr error
}

func (d *devService) cred() *syscall.Credential {
	d.uid, d.gid = d.ids()
	return &syscall.Credential{Uid: uint32(d.uid), Gid: uint32(d.gid), Groups: []uint32{uint32(d.gid)}}
}

// delegate creates the unit's cgroup in every hierarchy and hands it to
// glove, as systemd's Delegate=yes does.
func (d *devService) delegate(ev *Evidence) (string, error) {
	d.uid, d.gid = d.ids()
	cg, err := ReadCgroups()
	if err != nil {
		return "", err
	}
	if cg.V2 == "" {
		return "", errors.New("no cgroup2 hierarchy")
	}
	rel := UnitCgroup()
	points := []string{cg.V2}
	seen := map[string]bool{cg.V2: true}
	for _, p := range cg.V1 {
		if !seen[p] {
			seen[p] = true
			points = append(points, p)
		}
	}
	for _, p := range points {
		dir := filepath.Join(p, rel)
		var missing []string
		for x := dir; x != p; x = filepath.Dir(x) {
			if _, err := os.Stat(x); err != nil {
				missing = append([]string{x}, missing...)
			}
		}
		for _, x := range missing {
			if err := os.Mkdir(x, 0o755); err != nil {
				return "", err
			}
			d.cgDirs = append(d.cgDirs, x)
		}
		for _, name := range []string{".", "cgroup.procs", "tasks", "cgroup.subtree_control", "cgroup.threads"} {
			if err := os.Chown(filepath.Join(dir, name), d.uid, d.gid); err != nil && !errors.Is(err, os.ErrNotExist) {
				return "", err
			}
		}
		ev.Printf("dev: delegated %s to uid %d", dir, d.uid)
	}
	return filepath.Join(cg.V2, rel), nil
}

func (d *devService) Enable(ev *Evidence) error {
	ev.Printf("dev: no systemd; enable is a no-op")
	return nil
}

func (d *devService) Start(ev *Evidence) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd != nil {
		return nil
	}
	v2dir, err := d.delegate(ev)
	if err != nil {
		return err
	}
	es, err := unitExecStart()
	if err != nil {
		return err
	}
	env, err := ReadEnvFile(EnvFile)
	if err != nil {
		return err
	}
	argv := append(strings.Fields(ExpandEnv(es, env)), d.extra...)
	for _, dir := range []string{"/run/glove", "/var/lib/glove/store", "/var/lib/glove/materialization"} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		if err := os.Chown(dir, d.uid, d.gid); err != nil {
			return err
		}
		if err := os.Chmod(dir, 0o700); err != nil {
			return err
		}
	}
	cgfd, err := unix.Open(v2dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(cgfd)
	logf, err := os.OpenFile(d.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: d.cred(), UseCgroupFD: true, CgroupFD: cgfd, Setpgid: true}
	ev.Printf("dev: starting %s (as uid %d, in %s; log %s)", shellQuote(argv), d.uid, v2dir, d.logPath)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	logf.Close()
	d.cmd, d.done, d.exitErr = cmd, make(chan struct{}), nil
	go func(cmd *exec.Cmd, done chan struct{}) {
		err := cmd.Wait()
		d.mu.Lock()
		d.exitErr = err
		if d.cmd == cmd {
			d.cmd = nil
		}
		d.mu.Unlock()
		close(done)
	}(cmd, d.done)
	return nil
}

func (d *devService) signal(ev *Evidence, sig syscall.Signal, wait time.Duration) error {
	d.mu.Lock()
	cmd, done := d.cmd, d.done
	d.mu.Unlock()
	if cmd == nil {
		return nil
	}
	ev.Printf("dev: %v to gloved %d", sig, cmd.Process.Pid)
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("gloved did not exit within %v of %v", wait, sig)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	ev.Printf("dev: gloved exited: %v", d.exitErr)
	return nil
}

func (d *devService) Stop(ev *Evidence) error { return d.signal(ev, syscall.SIGTERM, 90*time.Second) }

func (d *devService) Crash(ev *Evidence) error { return d.signal(ev, syscall.SIGKILL, 30*time.Second) }

func (d *devService) Restart(ev *Evidence) error {
	if err := d.Stop(ev); err != nil {
		return err
	}
	return d.Start(ev)
}

func (d *devService) Active(ev *Evidence) (bool, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd != nil {
		return true, "active"
	}
	if d.exitErr != nil {
		return false, "failed (" + d.exitErr.Error() + ")"
	}
	return false, "inactive"
}

func (d *devService) MainPID(ev *Evidence) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return 0, errors.New("gloved is not running")
	}
	return d.cmd.Process.Pid, nil
}

func (d *devService) Diagnose(ev *Evidence) string {
	data, _ := os.ReadFile(d.logPath)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	ev.Printf("dev: the last lines of %s:\n%s", d.logPath, indent(strings.Join(lines, "\n")))
	return TellingLine(strings.Join(lines, "\n"))
}

func (d *devService) SetExtraArgs(ev *Evidence, args []string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.extra = append([]string(nil), args...)
	ev.Printf("dev: gloved's extra arguments from the next start: %q", args)
	return nil
}

// removeCgroups removes the cgroups the stand-in created (after purge).
func (d *devService) removeCgroups(ev *Evidence) {
	for i := len(d.cgDirs) - 1; i >= 0; i-- {
		dir := d.cgDirs[i]
		for _, sub := range reverse(SubDirs(dir, 8)) {
			_ = rmdirKilling(filepath.Join(dir, sub))
		}
		if err := rmdirKilling(dir); err != nil {
			ev.Printf("dev: %v", err)
		} else {
			ev.Printf("dev: removed %s", dir)
		}
	}
	d.cgDirs = nil
}

func reverse(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[len(s)-1-i] = x
	}
	return out
}

func rmdirKilling(dir string) error {
	var err error
	for range 100 {
		for _, pid := range CgroupProcs(dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if err = syscall.Rmdir(dir); err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: %w", dir, err)
}
