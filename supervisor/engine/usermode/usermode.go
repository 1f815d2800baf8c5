// SPDX-License-Identifier: Apache-2.0

// Package usermode decides how a host's sessions get their first user
// namespace: glove-shim creates it (the unprivileged mode, wherever the
// kernel lets the service user), or glove-userns makes it (where Debian's
// kernel.unprivileged_userns_clone=0 refuses the service user and the
// operator enabled the helper), or nothing can, and then the one line an
// operator needs. gloved and glove run decide once at start and refuse to
// start rather than run sessions that would all fail at glove-shim's
// first clone; glove status shows the same decision
// (docs/hardened-hosts-measured.md has the kernel's rules).
package usermode

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// The modes.
const (
	Unprivileged = "unprivileged" // glove-shim creates its user namespaces
	Helper       = "glove-userns" // glove-userns makes user namespace 1; no mount lock
)

// Facts are the host's switches over user namespaces, each the sysctl's
// value or "" when the kernel has no such file.
type Facts struct {
	UnprivilegedClone string // kernel.unprivileged_userns_clone (Debian's patch)
	MaxUserNamespaces string // user.max_user_namespaces
	AppArmorRestrict  string // kernel.apparmor_restrict_unprivileged_userns (Ubuntu's kernels)
	// ShimProfile is the mode of the loaded AppArmor profile glove-shim
	// ("enforce", "complain"), "" when none is loaded or AppArmor's list
	// cannot be read (it is root's alone on Debian).
	ShimProfile string
	// AppArmorUserns is "yes" when AppArmor mediates user-namespace
	// creation (features/namespaces/mask names userns_create: Debian 13's
	// and Ubuntu's kernels), which anyone may read.
	AppArmorUserns string
}

// ReadFacts reads the switches beneath procSys (/proc/sys).
func ReadFacts(procSys string) Facts {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(procSys, name))
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	return Facts{
		UnprivilegedClone: read("kernel/unprivileged_userns_clone"),
		MaxUserNamespaces: read("user/max_user_namespaces"),
		AppArmorRestrict:  read("kernel/apparmor_restrict_unprivileged_userns"),
		ShimProfile:       shimProfile(AppArmorProfiles),
		AppArmorUserns:    apparmorUserns(AppArmorMask),
	}
}

// AppArmorMask lists what AppArmor mediates of namespaces.
var AppArmorMask = "/sys/kernel/security/apparmor/features/namespaces/mask"

func apparmorUserns(mask string) string {
	if b, err := os.ReadFile(mask); err == nil && strings.Contains(string(b), "userns_create") {
		return "yes"
	}
	return ""
}

// AppArmorProfiles lists the loaded AppArmor profiles, one "NAME (MODE)"
// a line.
var AppArmorProfiles = "/sys/kernel/security/apparmor/profiles"

// shimProfile is the mode of profile glove-shim in list, or "".
func shimProfile(list string) string {
	b, err := os.ReadFile(list)
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if mode, ok := strings.CutPrefix(l, "glove-shim ("); ok {
			return strings.TrimSuffix(mode, ")")
		}
	}
	return ""
}

// Refusal is why no mode works on a host, with the operator's fix.
type Refusal struct {
	Reason string
	Fix    string
}

func (r *Refusal) Error() string { return r.Reason + "; fix: " + r.Fix }

// HelperConfig is glove-userns's bounds file, named in the fix lines.
const HelperConfig = "/etc/glove/userns.json"

// Choose decides from the facts, probe (the service user's own attempt to
// create a user namespace: nil if it could) and, only asked when needed,
// helper (a trial of glove-userns: nil if it made a namespace, else its
// refusal). The result is a mode or a *Refusal.
func Choose(f Facts, probe error, helper func() error) (string, error) {
	if probe == nil {
		return Unprivileged, nil
	}
	switch {
	case f.MaxUserNamespaces == "0":
		return "", &Refusal{
			Reason: "user.max_user_namespaces=0 refuses user namespaces to everyone, root and glove-userns included",
			Fix:    "sysctl -w user.max_user_namespaces=10000 (and the same line in /etc/sysctl.d/ to keep it)",
		}
	case f.UnprivilegedClone == "0":
		herr := helper()
		if herr == nil {
			return Helper, nil
		}
		return "", &Refusal{
			Reason: "kernel.unprivileged_userns_clone=0 refuses user namespaces to the service user, and glove-userns did not make one: " + oneLine(herr),
			Fix:    `set "enabled": true in ` + HelperConfig + " (glove-userns then makes one per session), or sysctl -w kernel.unprivileged_userns_clone=1",
		}
	case f.ShimProfile != "" || f.AppArmorUserns == "yes" && f.AppArmorRestrict != "1":
		profile := "glove-shim's profile " + f.ShimProfile
		if f.ShimProfile == "" {
			profile = "glove-shim's profile not readable by this user"
		}
		return "", &Refusal{
			Reason: "glove-shim cannot build its user namespaces and AppArmor mediates their creation (" + profile + "): " + oneLine(probe),
			Fix:    "load the package's profile again: apparmor_parser -r /etc/apparmor.d/glove-shim",
		}
	case f.AppArmorRestrict == "1":
		return "", &Refusal{
			Reason: "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1) and glove-shim has no profile loaded: " + oneLine(probe),
			Fix:    "load glove-shim's AppArmor profile: apparmor_parser -r /etc/apparmor.d/glove-shim",
		}
	}
	return "", &Refusal{
		Reason: "the service user cannot create a user namespace: " + oneLine(probe),
		Fix:    "see docs/running.md, \"Hosts that refuse unprivileged user namespaces\"",
	}
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// Probe runs `glove-shim probe` (shim is its path) as the calling
// process's user: the user-namespace steps of a start, under the shim's
// own AppArmor profile where one is loaded, which is what a session
// meets (an unconfined /bin/true would pass on Ubuntu where glove-shim
// without its profile fails). It returns nil if every step passed, else
// the probe's failing step.
func Probe(shim string) error { return probeAs(shim, nil) }

// ProbeAs is Probe for another user (root's glove status probing for the
// service user): the shim runs as uid and gid, so the attempt is the
// user's, not root's (whom the switches never refuse).
func ProbeAs(shim string, uid, gid uint32) error {
	return probeAs(shim, &syscall.Credential{Uid: uid, Gid: gid})
}

func probeAs(shim string, cred *syscall.Credential) error {
	cmd := exec.Command(shim, "probe")
	cmd.Env = []string{}
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	err := runCmd(cmd)
	if err == nil {
		return nil
	}
	// The probe's one line on the step that failed ("maps FAIL: EPERM:
	// ..."), rather than the steps that passed before it.
	for _, l := range strings.Split(err.Error(), "\n") {
		if strings.Contains(l, " FAIL: ") {
			return errors.New("glove-shim probe: " + strings.TrimSpace(l))
		}
	}
	return fmt.Errorf("glove-shim probe: %w", err)
}

func runCmd(cmd *exec.Cmd) error {
	out, err := cmd.CombinedOutput()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(out) > 0 {
			return fmt.Errorf("%s", strings.TrimSpace(string(out)))
		}
		return err
	}
	return nil
}
