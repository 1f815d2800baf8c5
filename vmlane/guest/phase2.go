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

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/captable/captext"
)

// LibexecDir is where the package installs the helpers.
const LibexecDir = "/usr/libexec/glove"

func (a *Agent) phase2() {
	a.ensureSelf()
	if a.lp == nil {
		ev := &Evidence{}
		if err := a.loadPolicy(ev); err != nil {
			a.logf("cannot rebuild the lane policy: %v", err)
		}
	}
	if a.st.Reboot != nil {
		a.Check("recovery", []string{"reboot-prep"}, a.checkRecovery)
	} else if _, done := a.st.Outcome("recovery"); !done {
		a.record(Outcome{Name: "recovery", Reason: "skipped, needs reboot-prep"}, nil)
	}
	a.Check("purge", []string{"install"}, a.checkPurge)
}

func (a *Agent) checkRecovery(ev *Evidence) error {
	rb := a.st.Reboot
	var f faults
	boot := BootID()
	ev.Printf("before: %+v; boot id now %s", *rb, boot)
	if !a.cfg.NoSystemd && boot == rb.BootID {
		f.add("the boot id did not change (%s): the guest did not reboot", boot)
	}
	if a.cfg.NoSystemd {
		if err := a.svc.Start(ev); err != nil {
			return fmt.Errorf("dev: start gloved: %v", err)
		}
	} else {
		// The unit is enabled: systemd starts it at boot.
		deadline := time.Now().Add(180 * time.Second)
		for {
			active, state := a.svc.Active(nil)
			if active {
				break
			}
			if time.Now().After(deadline) || state == "failed" {
				why := a.svc.Diagnose(ev)
				f.add("gloved is %s after boot (enabled in phase 1): %s", state, why)
				Run(ev, RunOpts{}, "systemctl", "is-enabled", UnitName)
				// Start it by hand to check the rest.
				if err := a.svc.Start(ev); err != nil {
					f.add("systemctl start: %v", err)
				}
				break
			}
			time.Sleep(2 * time.Second)
		}
	}
	if err := a.waitServing(ev, 120*time.Second); err != nil {
		f.add("%v", err)
		return f.err()
	}
	if !a.cfg.NoSystemd {
		Run(ev, RunOpts{}, "journalctl", "-u", UnitName, "-b", "-n", "40", "--no-pager", "-o", "cat")
	}
	c, err := a.Dial(ev)
	if err != nil {
		f.add("%v", err)
		return f.err()
	}
	defer c.Close()
	// session_status: failed, recovered (docs/protocol.md "Recovery":
	// recovered:gone after a reboot, the boot id differs;
	// recovered:killed when the processes were still there).
	st, err := a.Status(c, rb.SessionID)
	ev.Printf("session_status %s: %s (%v)", rb.SessionID, st, err)
	want := "recovered:gone"
	if a.cfg.NoSystemd {
		want = "recovered:killed"
	}
	switch {
	case err != nil:
		f.add("session_status %s: %v", rb.SessionID, err)
	case st.State != "failed" || !strings.HasPrefix(st.Reason, "recovered:"):
		f.add("the session running at the reboot is %s, want failed with a recovered reason (%s)", st, want)
	case st.Reason != want:
		f.add("the session running at the reboot is failed with %q, want %q", st.Reason, want)
	}
	// Its receipt: failed, with the launch digest recorded before.
	if e, err := a.ReceiptFor(ev, c, rb.SessionID); err != nil {
		f.add("%v", err)
	} else {
		if e.Body.Termination != "failed" {
			f.add("receipt termination %s, want failed", e.Body.Termination)
		}
		if e.Body.LaunchDigest != rb.LaunchDigest {
			f.add("receipt launch_digest %q, before the reboot %q", e.Body.LaunchDigest, rb.LaunchDigest)
		}
	}
	// The retained image: re-attached (the journal replayed), frozen,
	// released.
	img := filepath.Join(MaterializationRoot, rb.Image)
	if fa, err := inspectImage(ev, img, "/pre-reboot.txt"); err != nil {
		f.add("%v", err)
	} else {
		if len(fa.Loops) > 0 {
			f.add("loop devices %v back the image after recovery", fa.Loops)
		}
		if fa.Recovery || !fa.Clean {
			f.add("the image's ext4 is %q needs_recovery=%v: not re-attached by recovery (its journal was not replayed)", fa.State, fa.Recovery)
		}
		if fa.Content != "lane-pre-reboot" {
			f.add("the image's /pre-reboot.txt is %q, want lane-pre-reboot (written and synced before the reboot)", fa.Content)
		}
	}
	// Nothing of the session is left.
	f = append(f, a.leftovers(ev, rb)...)
	var cl struct {
		Cleaned bool `json:"cleaned"`
	}
	err = c.Call("cleanup_session", map[string]any{"session_id": rb.SessionID}, &cl, 30*time.Second)
	ev.Printf("cleanup_session of the recovered session: cleaned=%v %v", cl.Cleaned, err)
	return f.err()
}

// leftovers checks the host for anything of the recovered session.
func (a *Agent) leftovers(ev *Evidence, rb *RebootInfo) faults {
	var f faults
	cg, err := ReadCgroups()
	if err != nil {
		f.add("%v", err)
		return f
	}
	unit := UnitCgroup()
	own := ""
	pid, err := a.svc.MainPID(ev)
	if err == nil {
		if rel, err := ProcCgroupV2(pid); err == nil && strings.HasPrefix(rel, unit+"/") {
			own = strings.SplitN(strings.TrimPrefix(rel, unit+"/"), "/", 2)[0]
		}
	}
	roots := []string{cg.V2}
	for _, c := range []string{"memory", "pids"} {
		if p, ok := cg.V1[c]; ok {
			roots = append(roots, p)
		}
	}
	for _, r := range roots {
		dir := filepath.Join(r, unit)
		kids := SubDirs(dir, 1)
		ev.Printf("%s: children %v (gloved's own leaf %q)", dir, kids, own)
		for _, k := range kids {
			if k != own {
				f.add("cgroup left below the unit: %s", filepath.Join(dir, k))
			}
		}
	}
	for _, l := range LoopDevices() {
		if strings.HasPrefix(l.Backing, MaterializationRoot) || strings.Contains(l.Backing, rb.Image) {
			f.add("loop device %s still backed by %s", l.Dev, l.Backing)
		}
	}
	f = append(f, mountsOf(ev, a, rb.SessionID)...)
	var gloved string
	if pid > 0 {
		gloved, _ = ProcCgroupV2(pid)
	}
	for _, p := range ProcessesOf(a.st.GloveUID) {
		if p.Cgroup != gloved {
			f.add("process of glove outside gloved's cgroup: %s", p)
		} else {
			ev.Printf("glove process %s", p)
		}
	}
	for _, pat := range []string{filepath.Join(MaterializationRoot, "bundle-"+rb.SessionID+"-*"), "/run/glove/bundle-" + rb.SessionID + "-*"} {
		if m, _ := filepath.Glob(pat); len(m) > 0 {
			f.add("bundle left: %v", m)
		}
	}
	return f
}

func (a *Agent) checkPurge(ev *Evidence) error {
	var f faults
	list := a.st.DpkgList
	if len(list) == 0 {
		list = strings.Fields(Run(ev, RunOpts{}, "dpkg", "-L", "glove").Stdout)
	}
	if err := a.svc.Stop(ev); err != nil {
		f.add("stop gloved: %v", err)
	}
	a.stopUpstream()
	if d, ok := a.svc.(*devService); ok {
		d.removeCgroups(ev)
	}
	// The lane's own files (some the glove user's) go first.
	if err := os.RemoveAll(DataDir); err != nil {
		f.add("remove %s: %v", DataDir, err)
	}
	a.self = ""
	r := Run(ev, RunOpts{Timeout: 10 * time.Minute}, "dpkg", "--purge", "glove")
	if !r.OK() {
		f.add("dpkg --purge: %s", r.Brief())
	}
	if r := Run(ev, RunOpts{}, "dpkg", "-s", "glove"); r.OK() && strings.Contains(r.Stdout, "Status: install") {
		f.add("dpkg still has the package installed")
	}
	if r := Run(ev, RunOpts{}, "getent", "passwd", "glove"); r.OK() {
		f.add("user glove left: %s", strings.TrimSpace(r.Stdout))
	}
	if a.cell() == HardenedCell {
		// The AppArmor profiles left the kernel (postrm, on remove) and
		// their files the disk (dpkg's conffile purge, dh_apparmor's
		// local include).
		profiles, err := os.ReadFile("/sys/kernel/security/apparmor/profiles")
		if err != nil {
			f.add("AppArmor's loaded profiles: %v", err)
		}
		for _, p := range []string{"glove-shim (", "glove-sandbox ("} {
			if strings.Contains(string(profiles), p) {
				f.add("AppArmor profile %s...) is still loaded after purge", p)
			}
		}
		for _, p := range []string{"/etc/apparmor.d/glove-shim", "/etc/apparmor.d/local/glove-shim"} {
			if _, err := os.Lstat(p); err == nil {
				f.add("%s is left after purge", p)
			}
		}
	}
	if r := Run(ev, RunOpts{}, "getent", "group", "glove"); r.OK() != a.st.PreGroup {
		f.add("group glove present=%v after purge, before the install present=%v (%s)", r.OK(), a.st.PreGroup, strings.TrimSpace(r.Stdout))
	}
	if len(a.st.PreVarLib) > 0 {
		var now []string
		if ents, err := os.ReadDir("/var/lib/glove"); err == nil {
			for _, e := range ents {
				now = append(now, e.Name())
			}
		}
		if strings.Join(now, " ") != strings.Join(a.st.PreVarLib, " ") {
			f.add("/var/lib/glove holds %v, before the install %v", now, a.st.PreVarLib)
		}
	} else if _, err := os.Lstat("/var/lib/glove"); err == nil {
		f.add("/var/lib/glove is left")
	}
	for _, p := range []string{"/etc/glove", "/run/glove", DropInDir,
		"/etc/systemd/system/multi-user.target.wants/gloved.service"} {
		if _, err := os.Lstat(p); err == nil {
			f.add("%s is left", p)
		}
	}
	left := 0
	for _, p := range list {
		p = filepath.Clean(p)
		if p == "/" || a.st.PreExisting[p] {
			continue
		}
		if _, err := os.Lstat(p); err == nil {
			left++
			if left <= 10 {
				f.add("%s (from dpkg -L) is left", p)
			}
		}
	}
	if left > 10 {
		f.add("%d paths of dpkg -L left in all", left)
	}
	if cg, err := ReadCgroups(); err == nil {
		roots := []string{cg.V2}
		for _, p := range cg.V1 {
			roots = append(roots, p)
		}
		for _, r := range roots {
			if r == "" {
				continue
			}
			if _, err := os.Stat(filepath.Join(r, UnitCgroupDefault)); err == nil {
				f.add("cgroup %s is left", filepath.Join(r, UnitCgroupDefault))
			}
		}
	}
	for _, l := range LoopDevices() {
		if !a.cfg.NoSystemd || strings.Contains(l.Backing, "/var/lib/glove") {
			f.add("loop device %s (%s) is left", l.Dev, l.Backing)
		}
	}
	if ps := ProcessesOf(a.st.GloveUID); len(ps) > 0 {
		f.add("processes of the old glove uid %d: %v", a.st.GloveUID, ps)
	}
	if !a.cfg.NoSystemd {
		Run(ev, RunOpts{}, "systemctl", "daemon-reload")
		Run(ev, RunOpts{}, "systemctl", "status", UnitName, "--no-pager")
	}
	return f.err()
}

// checkHelperFile checks an installed helper against its capability
// table row from the host: root-owned, group glove, mode 0750, the row's
// file capabilities exactly, executable by the glove user.
func checkHelperFile(ev *Evidence, binary string, gid int, cred *syscall.Credential, self string) (string, error) {
	e, ok := captable.Lookup(binary)
	if !ok {
		return "(not in the capability table)", nil
	}
	p := filepath.Join(LibexecDir, binary)
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return "", err
	}
	perm, inh, eff, err := FileCaps(p)
	if err != nil {
		return "", err
	}
	desc := fmt.Sprintf("%s uid %d gid %d mode %04o caps %s eff %v", p, st.Uid, st.Gid, st.Mode&0o7777, captext.MaskString(perm), eff)
	var errs []string
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Uid != 0 || int(st.Gid) != gid || st.Mode&0o7777 != 0o750 {
		errs = append(errs, "not a regular file root:glove 0750")
	}
	if perm != e.Mask() || inh != 0 || eff != (e.Mask() != 0) {
		errs = append(errs, fmt.Sprintf("file capabilities %s, the table's %s", captext.MaskString(perm), captext.MaskString(e.Mask())))
	}
	if r := Run(ev, RunOpts{As: cred, Quiet: true}, "/usr/bin/test", "-x", p); !r.OK() {
		errs = append(errs, "not executable by glove")
	}
	if len(errs) > 0 {
		return desc, errors.New(strings.Join(errs, "; "))
	}
	return desc, nil
}
