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
	status := func() (usernsItem, Result) {
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
	it, r := status()
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
	it, r = status()
	if !it.OK || !strings.Contains(it.Detail, "mode glove-userns") {
		f.add("glove status after the operator's line: exit %d, user-namespaces %+v; want ok in the glove-userns mode", r.Code, it)
	}
	return f.err()
}
