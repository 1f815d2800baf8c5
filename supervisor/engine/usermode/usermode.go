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
	}
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
	case f.AppArmorRestrict == "1":
		return "", &Refusal{
			Reason: "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1) and refused the service user's: " + oneLine(probe),
			Fix:    "load glove-shim's AppArmor profile: apparmor_parser -r /etc/apparmor.d/glove-shim",
		}
	}
	return "", &Refusal{
		Reason: "the service user cannot create a user namespace: " + oneLine(probe),
		Fix:    "see docs/running.md, \"Hosts that refuse unprivileged user namespaces\"",
	}
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// Probe creates a user namespace as the calling process's user, with the
// one-id maps glove-shim writes, in a child that executes /bin/true. It
// returns nil if the kernel allowed it.
func Probe() error { return probeAs(nil) }

// ProbeAs is Probe for another user (root's glove status probing for the
// service user): the child drops to uid and gid, then unshare(1) creates
// the namespace, so the attempt is the user's, not root's.
func ProbeAs(uid, gid uint32) error { return probeAs(&syscall.Credential{Uid: uid, Gid: gid}) }

func probeAs(cred *syscall.Credential) error {
	var cmd *exec.Cmd
	if cred == nil {
		cmd = exec.Command("/bin/true")
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:                 syscall.CLONE_NEWUSER,
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}},
			GidMappingsEnableSetgroups: false,
		}
	} else {
		// Go's clone flags would create the namespace before dropping to
		// the user (as root, which the switch never refuses): unshare(1)
		// runs after the drop.
		cmd = exec.Command("unshare", "--user", "--map-root-user", "/bin/true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
	}
	return runCmd(cmd)
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
