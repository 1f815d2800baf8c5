// SPDX-License-Identifier: Apache-2.0

package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// HardenedCell is the cell of a hardened host (issue 35): Debian 13 with
// AppArmor enforcing and its package, Debian's
// kernel.unprivileged_userns_clone=0, Yama ptrace_scope 2, lockdown
// "integrity" and the strictest fs.protected_* values, all on the kernel
// command line (vmlane/cells). Its operator turns glove-userns on, with
// the one line docs/running.md gives, and every other check runs as in
// the other cells, through glove-userns.
const HardenedCell = "hardened"

// The hardened host's settings, as /proc/sys and /sys show them.
var hardenedSettings = []struct{ path, want string }{
	{"/proc/sys/kernel/unprivileged_userns_clone", "0"},
	{"/proc/sys/kernel/yama/ptrace_scope", "2"},
	{"/proc/sys/fs/protected_regular", "2"},
	{"/proc/sys/fs/protected_fifos", "2"},
	{"/proc/sys/fs/protected_symlinks", "1"},
	{"/proc/sys/fs/protected_hardlinks", "1"},
	{"/sys/module/apparmor/parameters/enabled", "Y"},
}

// UsernsEnableLine is the operator's one line (docs/running.md, "Hosts
// that refuse unprivileged user namespaces").
const UsernsEnableLine = `printf '{"schema_version":1,"enabled":true}\n' > /etc/glove/userns.json`

// usernsItem is glove status --json's user-namespaces item.
type usernsItem struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	Fix    string `json:"fix"`
}

// usernsStatus runs glove status --json as the glove user and returns its
// user-namespaces item (Name "(none)" when the report has none).
func (a *Agent) usernsStatus(ev *Evidence) (usernsItem, Result) {
	r := Run(ev, RunOpts{As: a.Cred(), Timeout: 120 * time.Second}, "/usr/bin/glove", "status", "--json")
	var rep struct {
		Items []usernsItem `json:"items"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		ev.Printf("glove status --json: %v", err)
	}
	for _, it := range rep.Items {
		if it.Name == "user-namespaces" {
			return it, r
		}
	}
	return usernsItem{Name: "(none)"}, r
}

// cell is this guest's cell (/lane/cell), "" without one.
func (a *Agent) cell() string {
	b, err := os.ReadFile(filepath.Join(a.cfg.Lane, "cell"))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			a.logf("cannot read the cell's name: %v", err)
		}
		return ""
	}
	return strings.TrimSpace(string(b))
}

// checkHardenedHost, after install: the host is what the cell says
// (settings, lockdown, AppArmor's user-namespace mediation); the package
// loaded glove-shim's profiles; glove status, as the service user, is not
// ready and names the fix; the operator's line; then status is ready in
// the glove-userns mode.
func (a *Agent) checkHardenedHost(ev *Evidence) error {
	var f faults
	for _, s := range hardenedSettings {
		b, err := os.ReadFile(s.path)
		got := strings.TrimSpace(string(b))
		ev.Printf("%s: %q %v", s.path, got, err)
		if err != nil || got != s.want {
			f.add("%s is %q (%v), the cell wants %s", s.path, got, err, s.want)
		}
	}
	if b, err := os.ReadFile("/sys/kernel/security/lockdown"); err != nil || !strings.Contains(string(b), "[integrity]") {
		f.add("lockdown: %q %v, want [integrity]", strings.TrimSpace(string(b)), err)
	} else {
		ev.Printf("lockdown: %s", strings.TrimSpace(string(b)))
	}
	if b, err := os.ReadFile("/sys/kernel/security/apparmor/features/namespaces/mask"); err != nil || !strings.Contains(string(b), "userns_create") {
		f.add("AppArmor's namespaces/mask: %q %v, want userns_create", strings.TrimSpace(string(b)), err)
	}
	// The package's postinst (dh_apparmor) loaded the profiles; the
	// parser accepts the shipped file.
	profiles, err := os.ReadFile("/sys/kernel/security/apparmor/profiles")
	if err != nil {
		f.add("AppArmor's loaded profiles: %v", err)
	}
	for _, p := range []string{"glove-shim (enforce)", "glove-sandbox (enforce)"} {
		if !strings.Contains(string(profiles), p+"\n") {
			f.add("the package did not load %s", p)
		}
	}
	Run(ev, RunOpts{}, "apparmor_parser", "--version")
	if r := Run(ev, RunOpts{}, "apparmor_parser", "-Q", "-K", "/etc/apparmor.d/glove-shim"); !r.OK() {
		f.add("apparmor_parser -Q -K /etc/apparmor.d/glove-shim: %s", r.Brief())
	}

	// glove status before the operator enables glove-userns, and after.
	it, r := a.usernsStatus(ev)
	switch {
	case r.Code == 0 || it.Name != "user-namespaces" || it.OK:
		f.add("glove status before glove-userns is enabled: exit %d, user-namespaces %+v; want not ready", r.Code, it)
	case !strings.Contains(it.Detail, "unprivileged_userns_clone=0") || !strings.Contains(it.Fix, "userns.json"):
		f.add("glove status names %q, fix %q; want the switch and userns.json", it.Detail, it.Fix)
	}
	if r := Run(ev, RunOpts{}, "sh", "-c", UsernsEnableLine); !r.OK() {
		return fmt.Errorf("the operator's line (%s): %s", UsernsEnableLine, r.Brief())
	}
	Run(ev, RunOpts{}, "ls", "-ln", "/etc/glove/userns.json")
	it, r = a.usernsStatus(ev)
	if !it.OK || !strings.Contains(it.Detail, "mode glove-userns") {
		f.add("glove status after the operator's line: exit %d, user-namespaces %+v; want ok in the glove-userns mode", r.Code, it)
	}
	return f.err()
}

// DenyCapsProfile is what Ubuntu's kernel gives a process without a
// profile that creates a user namespace (its unprivileged_userns
// profile: every capability denied), attached to glove-shim in its
// package profile's place: the lane's kernel (Debian 13's) mediates
// AppArmor's rules but has no such automatic move, so the cell loads it.
const DenyCapsProfile = `abi <abi/4.0>,
include <tunables/global>
profile glove-shim /usr/{,local/}libexec/glove/glove-shim flags=(attach_disconnected,mediate_deleted) {
  userns,
  audit deny capability,
  network, unix, signal, ptrace, mqueue, mount, umount, remount, pivot_root, dbus, io_uring,
  /{,**} rwlkmix,
}
`

// gloveRunLabel is the documented glove run command with a program that
// prints its AppArmor label.
const gloveRunLabel = `systemd-run --unit=glove-run --uid=glove --gid=glove -p Delegate=yes --collect --wait --pipe --same-dir /usr/bin/glove run -- cat /proc/self/attr/current`

// checkHardenedAppArmor reproduces Ubuntu 24.04's rule where the lane's
// kernel can: with Debian's switch lifted (an Ubuntu host has none), glove
// run works under the package's profile and its program runs under
// glove-sandbox; with glove-shim's profile replaced by one that denies
// every capability (what Ubuntu gives a profile-less process), glove run
// fails with one line and glove status names AppArmor and the fix; the fix
// (the package's profile loaded again) makes both work. The switch is put
// back at the end, and glove status is in the glove-userns mode again.
func (a *Agent) checkHardenedAppArmor(ev *Evidence) (err error) {
	var f faults
	const sw = "/proc/sys/kernel/unprivileged_userns_clone"
	dir := filepath.Join(DataDir, "run-ws")
	run := func() Result {
		r := Run(ev, RunOpts{Dir: dir, Timeout: 180 * time.Second}, "sh", "-c", gloveRunLabel)
		Run(ev, RunOpts{}, "systemctl", "reset-failed", "glove-run.service")
		return r
	}
	status := func() usernsItem { it, _ := a.usernsStatus(ev); return it }
	if err := os.WriteFile(sw, []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("lift %s: %w", sw, err)
	}
	defer func() {
		var back faults
		if werr := os.WriteFile(sw, []byte("0\n"), 0o644); werr != nil {
			back.add("put %s back to 0: %v", sw, werr)
		}
		if it := status(); !it.OK || !strings.Contains(it.Detail, "mode glove-userns") {
			back.add("glove status with the switch back: %+v, want the glove-userns mode", it)
		}
		err = errors.Join(err, back.err())
	}()
	// The label of a stack: glove-shim and glove-sandbox, in the
	// kernel's order ("glove-sandbox//&glove-shim (enforce)").
	stacked := func(out string) bool {
		return strings.Contains(out, "glove-sandbox") && strings.Contains(out, "glove-shim") && strings.Contains(out, "(enforce)")
	}
	if r := run(); !r.OK() || !stacked(r.Stdout) {
		f.add("glove run under the package's profile: %s; want the program under glove-sandbox stacked on glove-shim", r.Brief())
	}
	if it := status(); !it.OK || !strings.Contains(it.Detail, "mode unprivileged") {
		f.add("glove status with the switch lifted: %+v, want the unprivileged mode", it)
	}
	deny := filepath.Join(DataDir, "files", "glove-shim-deny-caps")
	if err := os.WriteFile(deny, []byte(DenyCapsProfile), 0o644); err != nil {
		return err
	}
	if r := Run(ev, RunOpts{}, "apparmor_parser", "-r", "-K", deny); !r.OK() {
		return fmt.Errorf("load the capability-denying profile: %s", r.Brief())
	}
	r := run()
	if r.OK() || r.Code != 125 {
		f.add("glove run under a profile denying every capability: %s; want exit 125", r.Brief())
	}
	if it := status(); it.OK || !strings.Contains(it.Detail, "AppArmor") || !strings.Contains(it.Fix, "apparmor_parser -r /etc/apparmor.d/glove-shim") {
		f.add("glove status under the capability-denying profile: %+v; want not ready, naming AppArmor, the fix reloading the package's profile", it)
	}
	// The fix status names.
	if r := Run(ev, RunOpts{}, "apparmor_parser", "-r", "/etc/apparmor.d/glove-shim"); !r.OK() {
		return fmt.Errorf("reload the package's profile: %s", r.Brief())
	}
	if r := run(); !r.OK() || !stacked(r.Stdout) {
		f.add("glove run after the fix: %s", r.Brief())
	}
	return f.err()
}
