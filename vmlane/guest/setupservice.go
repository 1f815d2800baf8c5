// SPDX-License-Identifier: Apache-2.0

package guest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
)

// SetupServiceCell is the cell whose operator files come from `glove
// setup service` alone (issue 34): the operator's path from install to a
// running service, with nothing written by hand. One cell is enough, the
// command being the same everywhere; trixie, since it carries no
// harness binaries (bookworm's lane disk is the large one) and has the
// newest systemd of the supported hosts. The other cells keep writing
// the files by hand, as docs/packaging.md's manual path.
const SetupServiceCell = "trixie"

// The starter policy's template (glove setup service --runtime): the
// lane's runtime, /bin/sh printing SetupMarker.
const (
	SetupTemplate = "t-setup"
	SetupMarker   = "lane-setup-service"
)

// setupCell reports whether this guest's cell is SetupServiceCell
// (/lane/cell; development runs without one take the hand-written path).
func (a *Agent) setupCell() bool {
	b, err := os.ReadFile(filepath.Join(a.cfg.Lane, "cell"))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			a.logf("cannot read the cell's name: %v", err)
		}
		return false
	}
	return strings.TrimSpace(string(b)) == SetupServiceCell
}

// SetupAnchor is the anchor glove setup service's report prints for the
// controller, on its one line "receipt anchor for the controller (...): HEX".
func SetupAnchor(report string) (string, error) {
	var found []string
	for _, l := range strings.Split(report, "\n") {
		if strings.HasPrefix(l, "receipt anchor for the controller") {
			if i := strings.LastIndex(l, ": "); i >= 0 {
				found = append(found, l[i+2:])
			}
		}
	}
	if len(found) != 1 || !policy.ValidSHA256Hex(found[0]) {
		return "", fmt.Errorf("the report names %d anchors (%q), want one of 64 hex digits", len(found), found)
	}
	return found[0], nil
}

// setupService runs glove setup service as root on the freshly installed
// package and checks what an operator would see: the three files with
// the owners and modes gloved needs, the anchor printed once and the one
// gloved.env holds (it becomes the lane's anchor: the controller
// verifies receipts from it), a second run that changes nothing, the
// starter policy accepted by glove policy validate, then gloved started
// on these files alone (systemctl start), glove status ready, and one
// session of the starter policy's template under its small profile.
func (a *Agent) setupService(ev *Evidence) error {
	shell, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		return err
	}
	args := []string{"setup", "service", "--runtime", RuntimeID, "--template-id", SetupTemplate, "--executable", shell,
		"--arg", "-c", "--arg", "echo " + SetupMarker}
	for _, p := range readOnlyPaths(ev) {
		args = append(args, "--read-only-path", p)
	}
	for _, p := range []string{PolicyFile, KeyFile, EnvFile} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s exists before glove setup service", p)
		}
	}
	r := Run(ev, RunOpts{}, append([]string{"/usr/bin/glove"}, args...)...)
	if !r.OK() {
		return errors.New(r.Brief())
	}
	anchor, err := SetupAnchor(r.Stdout)
	if err != nil {
		return err
	}
	env, err := ReadEnvFile(EnvFile)
	if err != nil {
		return err
	}
	if env["GLOVED_RECEIPT_ANCHOR"] != anchor {
		return fmt.Errorf("%s sets GLOVED_RECEIPT_ANCHOR=%q, the report printed %s", EnvFile, env["GLOVED_RECEIPT_ANCHOR"], anchor)
	}
	a.mu.Lock()
	a.st.Anchor = anchor
	a.saveState()
	a.mu.Unlock()
	Run(ev, RunOpts{}, "ls", "-ln", "/etc/glove")
	var f faults
	sums := map[string]string{}
	for _, c := range []struct {
		path     string
		uid, gid int
		mode     uint32
	}{{KeyFile, a.st.GloveUID, a.st.GloveGID, 0o600}, {PolicyFile, a.st.GloveUID, a.st.GloveGID, 0o600}, {EnvFile, 0, 0, 0o644}} {
		var st syscall.Stat_t
		if err := syscall.Lstat(c.path, &st); err != nil {
			f.add("%s: %v", c.path, err)
			continue
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFREG || int(st.Uid) != c.uid || int(st.Gid) != c.gid || st.Mode&0o7777 != c.mode || st.Nlink != 1 {
			f.add("%s: uid %d gid %d mode %04o links %d, want %d:%d %04o and one link", c.path, st.Uid, st.Gid, st.Mode&0o7777, st.Nlink, c.uid, c.gid, c.mode)
		}
		data, err := os.ReadFile(c.path)
		if err != nil {
			f.add("read %s: %v", c.path, err)
			continue
		}
		if c.path == KeyFile && (len(data) < 32 || len(data) > 64) {
			f.add("%s: %d bytes, want 32 to 64", c.path, len(data))
		}
		if c.path == KeyFile && strings.Contains(r.Stdout+r.Stderr, fmt.Sprintf("%x", data)) {
			f.add("the report prints the key")
		}
		sums[c.path] = sha256Hex(data)
	}
	if len(f) > 0 {
		return f.err()
	}
	// Again, as an operator who is not sure it ran: nothing changes.
	r2 := Run(ev, RunOpts{}, append([]string{"/usr/bin/glove"}, args...)...)
	if !r2.OK() || !strings.Contains(r2.Stdout, "nothing changed") || strings.Contains(r2.Stdout, anchor) {
		f.add("the second glove setup service: %s; stdout %q, want exit 0, \"nothing changed\" and no anchor", r2.Brief(), r2.Stdout)
	}
	for p, sum := range sums {
		if data, err := os.ReadFile(p); err != nil || sha256Hex(data) != sum {
			f.add("the second run changed %s (%v)", p, err)
		}
	}
	if r := Run(ev, RunOpts{As: a.Cred()}, "/usr/bin/glove", "policy", "validate", "--file", PolicyFile); !r.OK() {
		f.add("glove policy validate of the starter policy: %s", r.Brief())
	}
	if len(f) > 0 {
		return f.err()
	}
	starter, err := readStarter()
	if err != nil {
		return err
	}
	// systemctl start gloved on these three files alone.
	if err := a.svc.Start(ev); err != nil {
		return fmt.Errorf("start gloved: %v: %s", err, a.svc.Diagnose(ev))
	}
	if err := a.waitServing(ev, 60*time.Second); err != nil {
		return err
	}
	if r := Run(ev, RunOpts{As: a.Cred()}, "/usr/bin/glove", "status"); !r.OK() {
		f.add("glove status as glove with gloved on the starter files: %s", r.Brief())
	}
	// One session of the starter template, small profile, as a
	// controller would run it against this policy.
	lane := a.lp
	a.lp = &LanePolicy{Policy: starter}
	defer func() { a.lp = lane }()
	c, err := a.Dial(ev)
	if err != nil {
		return err
	}
	defer c.Close()
	s, st, err := a.Run(ev, c, "setup-starter", SetupTemplate, policy.GuidedSmall.ProfileID, nil)
	switch {
	case err != nil:
		f.add("a session of the starter policy: %v", err)
	case st.State != "exited" || st.ExitCode == nil || *st.ExitCode != 0 || !strings.Contains(s.Output(), SetupMarker):
		f.add("the starter session: %s, output %q; want exited 0 printing %s", st, Tail(s.Output(), 300), SetupMarker)
	}
	return f.err()
}

// readStarter reads back the starter policy setup service wrote.
func readStarter() (*policy.Policy, error) {
	data, err := os.ReadFile(PolicyFile)
	if err != nil {
		return nil, err
	}
	p, err := policy.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("the starter policy: %w", err)
	}
	if err := policy.Validate(p); err != nil {
		return nil, fmt.Errorf("the starter policy: %w", err)
	}
	if p.MaxPlanTTLMs != policy.GuidedMaxPlanTTLMs {
		return nil, fmt.Errorf("the starter policy's max_plan_ttl_ms is %d, want %d", p.MaxPlanTTLMs, policy.GuidedMaxPlanTTLMs)
	}
	return p, nil
}
