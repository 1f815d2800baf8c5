// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/cgroup"
	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/mounter"
	"github.com/glove-sandbox/glove/supervisor/internal/cgleaf"
)

// The probes of what a session needs of this particular host beyond the
// kernel's features: the kernel release against the floor, the mount
// calls the helpers make, the delegated cgroup parent glove-cgroup will
// serve, and the service manager. Each problem comes with one line
// saying how to fix it (statusItem.Fix).

// KernelFloor is the oldest kernel Glove runs on: every call it makes
// exists there (cgroup.kill, 5.14, is the newest it cannot do without).
// The VM lane tests 6.1, 6.12 and 7.2 (README, "Supported hosts").
var KernelFloor = [2]int{5, 14}

// probeKernel compares the running kernel with KernelFloor.
func (p statusProbe) probeKernel() statusItem {
	it := statusItem{Name: "kernel", Required: true}
	rel := p.release()
	major, minor, ok := parseRelease(rel)
	switch {
	case !ok:
		it.Detail = fmt.Sprintf("release %q: not MAJOR.MINOR", rel)
		it.Fix = fmt.Sprintf("run a kernel of %d.%d or later", KernelFloor[0], KernelFloor[1])
	case major < KernelFloor[0] || (major == KernelFloor[0] && minor < KernelFloor[1]):
		it.Detail = fmt.Sprintf("%s, older than %d.%d (cgroup.kill)", rel, KernelFloor[0], KernelFloor[1])
		it.Fix = "install a newer kernel: Debian 12's 6.1 is the oldest the VM lane tests"
	default:
		it.OK = true
		it.Detail = rel + fmt.Sprintf(" (floor %d.%d; tested: 6.1, 6.12, 7.2)", KernelFloor[0], KernelFloor[1])
	}
	return it
}

func kernelRelease() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

func parseRelease(rel string) (int, int, bool) {
	var major, minor int
	if _, err := fmt.Sscanf(rel, "%d.%d", &major, &minor); err != nil {
		return 0, 0, false
	}
	return major, minor, true
}

// mountCall is one call the helpers or the shim make, probed with a
// descriptor of -1: where the kernel has the call, it fails with EBADF
// (or EINVAL), never ENOSYS, and does nothing.
type mountCall struct {
	name string
	nr   uintptr
	args [6]uintptr
}

func mountCalls() []mountCall {
	empty := uintptr(unsafe.Pointer(&emptyPath[0]))
	bad := ^uintptr(0)
	return []mountCall{
		{"open_tree", unix.SYS_OPEN_TREE, [6]uintptr{bad, empty, unix.AT_EMPTY_PATH}},
		{"move_mount", unix.SYS_MOVE_MOUNT, [6]uintptr{bad, empty, bad, empty, unix.MOVE_MOUNT_F_EMPTY_PATH}},
		{"fsopen", unix.SYS_FSOPEN, [6]uintptr{0, ^uintptr(0)}},
		{"fsmount", unix.SYS_FSMOUNT, [6]uintptr{bad}},
		{"mount_setattr", unix.SYS_MOUNT_SETATTR, [6]uintptr{bad, empty, unix.AT_EMPTY_PATH}},
		{"openat2", unix.SYS_OPENAT2, [6]uintptr{bad, empty, 0, 0}},
	}
}

var emptyPath = []byte{0}

// probeMountAPI: glove-mounter, glove-loopext4 and glove-shim need the
// new mount API (5.2), mount_setattr (5.12) and openat2 (5.6); bind
// clones use open_tree_attr (6.15) where it exists and the fallback
// (open_tree + mount_setattr from a private mount namespace) before.
func (p statusProbe) probeMountAPI() statusItem {
	it := statusItem{Name: "mount-api", Required: true}
	var missing []string
	for _, c := range p.mountCalls {
		_, _, errno := unix.Syscall6(c.nr, c.args[0], c.args[1], c.args[2], c.args[3], c.args[4], c.args[5])
		if errno == unix.ENOSYS {
			missing = append(missing, c.name)
		}
	}
	bind := "bind clones with open_tree_attr"
	if !p.openTreeAttr() {
		bind = "bind clones with open_tree + mount_setattr (no open_tree_attr before 6.15; glove-mounter works from a private copy of the mount namespace)"
	}
	if len(missing) > 0 {
		it.Detail = "the kernel lacks " + strings.Join(missing, ", ")
		it.Fix = "install a kernel of 5.14 or later (Debian 12's 6.1 is tested)"
		return it
	}
	it.OK = true
	it.Detail = "open_tree, move_mount, fsopen, fsmount, mount_setattr, openat2; " + bind
	return it
}

// probeDelegation checks the cgroup glove-cgroup will serve, as the
// supervisor would find it when started from here: the parent
// cgroup.json names (the one this process lies beneath, as glove-cgroup
// chooses), delegated to this user, with memory and pids enabled for
// its children or enableable (available in cgroup.controllers, and no
// process of its own once the supervisor is in its leaf), or, on a
// hybrid host, delegated in the v1 memory and pids hierarchies.
func (p statusProbe) probeDelegation() statusItem {
	it := statusItem{Name: "cgroup-delegation", Required: true}
	cfg, err := readCgroupConfig(p.cgroupConf)
	if err != nil {
		it.Detail = err.Error()
		it.Fix = "write the bounds (scripts/setup-host.sh USER, or install the Debian package)"
		return it
	}
	selfData, err := os.ReadFile(p.selfCgroup)
	if err != nil {
		it.Detail = err.Error()
		return it
	}
	own := cgleaf.ParseSelfCgroup(selfData)
	// glove-cgroup serves the parent its supervisor lies beneath; glove
	// status itself usually runs elsewhere (an operator's login), so
	// outside every parent it reports on the first one and says so.
	parent, err := cgroup.ChooseParent(cfg.Parents(), own)
	outside := err != nil
	if outside {
		parent = cfg.Parent
	}
	mi, err := os.ReadFile(p.mountinfo)
	if err != nil {
		it.Detail = err.Error()
		return it
	}
	var v2 string
	var v1 = map[string]string{}
	for _, m := range parseCgroupMounts(mi) {
		switch {
		case m.v2 && v2 == "":
			v2 = m.path
		case !m.v2:
			for _, c := range m.controllers {
				if c == "memory" || c == "pids" {
					v1[c] = m.path
				}
			}
		}
	}
	if v2 == "" {
		it.Detail = "no cgroup2 hierarchy mounted"
		it.Fix = "boot with cgroup v2 (systemd.unified_cgroup_hierarchy=1)"
		return it
	}
	fix := p.delegationFix(parent)
	dir := filepath.Join(v2, parent)
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		it.Detail = fmt.Sprintf("parent %s: %v", parent, err)
		it.Fix = fix
		return it
	}
	uid := p.uid()
	if int(st.Uid) != uid {
		it.Detail = fmt.Sprintf("parent %s is owned by uid %d, not delegated to uid %d", parent, st.Uid, uid)
		it.Fix = fix
		return it
	}
	where := "this process is inside it"
	switch {
	case outside && len(cfg.ExtraParents) > 0:
		where = fmt.Sprintf("this process (%s) is beneath none of %s: gloved and glove run must start inside one", own, strings.Join(cfg.Parents(), ", "))
	case own != parent && !strings.HasPrefix(own, parent+"/"):
		where = fmt.Sprintf("this process (%s) is outside it: gloved and glove run must start inside it", own)
	}
	ctl, _ := readTrim(filepath.Join(dir, "cgroup.subtree_control"))
	avail, _ := readTrim(filepath.Join(dir, "cgroup.controllers"))
	need := []string{"memory", "pids"}
	switch {
	case hasAll(strings.Fields(ctl), need):
		it.OK = true
		it.Detail = fmt.Sprintf("parent %s delegated to uid %d, memory and pids enabled for sessions; %s", parent, uid, where)
	case hasAll(strings.Fields(avail), need):
		var st2 unix.Stat_t
		if err := unix.Stat(filepath.Join(dir, "cgroup.subtree_control"), &st2); err != nil || int(st2.Uid) != uid {
			it.Detail = fmt.Sprintf("parent %s: memory and pids available but its cgroup.subtree_control is not delegated to uid %d", parent, uid)
			it.Fix = fix
			return it
		}
		if others := otherProcesses(filepath.Join(dir, "cgroup.procs"), os.Getpid()); len(others) > 0 {
			it.Detail = fmt.Sprintf("parent %s: memory and pids available but not enabled, and processes %s live in it (cgroup v2 enables controllers only above leaves)", parent, strings.Join(others, " "))
			it.Fix = fmt.Sprintf("move them into %s/%s, or restart the unit (gloved moves itself there)", parent, cgleaf.Leaf)
			return it
		}
		it.OK = true
		it.Detail = fmt.Sprintf("parent %s delegated to uid %d; memory and pids available, enabled by glove-cgroup at start (the supervisor first moves into %s/%s); %s", parent, uid, parent, cgleaf.Leaf, where)
	case v1["memory"] != "" && v1["pids"] != "":
		for _, c := range need {
			var s unix.Stat_t
			if err := unix.Stat(filepath.Join(v1[c], parent), &s); err != nil || int(s.Uid) != uid {
				it.Detail = fmt.Sprintf("hybrid host: parent %s in the v1 %s hierarchy missing or not delegated to uid %d", parent, c, uid)
				it.Fix = fix
				return it
			}
		}
		it.OK = true
		it.Detail = fmt.Sprintf("hybrid host: parent %s delegated to uid %d in v2 and in the v1 memory and pids hierarchies; %s", parent, uid, where)
	default:
		it.Detail = fmt.Sprintf("parent %s: memory and pids are not available to it (cgroup.controllers [%s])", parent, avail)
		it.Fix = fmt.Sprintf("enable them in every cgroup above it, as root: echo +memory +pids > %s/cgroup.subtree_control (and its ancestors')", filepath.Dir(dir))
	}
	return it
}

// delegationFix is the one line that makes parent delegated on this host.
func (p statusProbe) delegationFix(parent string) string {
	if p.pid1() == "systemd" && strings.HasPrefix(parent, "/system.slice/") {
		unit := strings.TrimPrefix(parent, "/system.slice/")
		if unit == "gloved.service" {
			return "systemctl start gloved (its unit has Delegate=yes); glove run: systemd-run --unit=glove-run as docs/packaging.md shows"
		}
		return fmt.Sprintf("run the supervisor in %s with Delegate=yes (systemd-run --unit=%s -p Delegate=yes ...)", unit, strings.TrimSuffix(unit, ".service"))
	}
	return "as root: scripts/setup-host.sh USER (cgroup directories do not survive a reboot: again after boot)"
}

// probeServiceManager says what runs as PID 1 and what that means for
// the delegation step.
func (p statusProbe) probeServiceManager() statusItem {
	it := statusItem{Name: "service-manager"}
	comm := p.pid1()
	if comm != "systemd" {
		it.Detail = fmt.Sprintf("PID 1 is %q, not systemd: no unit delegates a cgroup; the operator delegates one (scripts/setup-host.sh)", comm)
		it.Fix = "as root: scripts/setup-host.sh USER, then start the supervisor inside /glove-USER"
		return it
	}
	ver := p.systemdVersion()
	it.OK = true
	switch {
	case ver == 0:
		it.Detail = "systemd (version unknown)"
	case ver >= 254:
		it.Detail = fmt.Sprintf("systemd %d: DelegateSubgroup= starts gloved in .../gloved.service/%s", ver, cgleaf.Leaf)
	default:
		it.Detail = fmt.Sprintf("systemd %d: no DelegateSubgroup= (254): gloved moves itself into .../gloved.service/%s", ver, cgleaf.Leaf)
	}
	return it
}

func pid1Comm() string {
	b, err := os.ReadFile("/proc/1/comm")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return strings.TrimSpace(string(b))
}

// systemdVersion is the number in `systemctl --version`'s first line
// ("systemd 252 (252.38-1~deb12u1)"), or 0.
func systemdVersion() int {
	out, err := exec.Command("systemctl", "--version").Output()
	if err != nil {
		return 0
	}
	f := strings.Fields(string(out))
	if len(f) < 2 || f[0] != "systemd" {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// readCgroupConfig reads glove-cgroup's bounds as the helper would
// (strict decoding, validation; the trust chain is the helper's to
// check at start-up and is not repeated here).
func readCgroupConfig(path string) (*cgroup.Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("glove-cgroup's bounds: %w", err)
	}
	var cfg cgroup.Config
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("glove-cgroup's bounds %s: %w", path, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("glove-cgroup's bounds %s: %w", path, err)
	}
	return &cfg, nil
}

// otherProcesses lists the pids in a cgroup.procs file other than self.
func otherProcesses(procs string, self int) []string {
	b, err := os.ReadFile(procs)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return []string{"(unreadable: " + err.Error() + ")"}
	}
	var out []string
	for _, f := range strings.Fields(string(b)) {
		if f != strconv.Itoa(self) {
			out = append(out, f)
		}
	}
	return out
}

func hasAll(xs, want []string) bool {
	for _, w := range want {
		found := false
		for _, x := range xs {
			found = found || x == w
		}
		if !found {
			return false
		}
	}
	return true
}

// cgroupConfPath is where the installed glove-cgroup reads its bounds.
func cgroupConfPath() string {
	return filepath.Join(helperkit.ConfigDir, captable.MustLookup(cgroup.Name).Bounds)
}

// openTreeAttr is mounter.HasOpenTreeAttr, the same probe glove-mounter
// makes to choose how it clones.
func openTreeAttr() bool { return mounter.HasOpenTreeAttr() }
