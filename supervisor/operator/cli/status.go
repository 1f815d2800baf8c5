// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/captable/captext"
	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/userns"
	"github.com/glove-sandbox/glove/mountinfo"
	"github.com/glove-sandbox/glove/seccomp/notify"
	"github.com/glove-sandbox/glove/supervisor/engine/usermode"
	"github.com/glove-sandbox/glove/supervisor/state/journal"
	"github.com/glove-sandbox/glove/supervisor/state/lease"
)

// statusItem is one thing `glove status` probes.
type statusItem struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Required items must be ok for a sandboxed session (glove-shim
	// refuses to build one without them); the others only narrow what
	// a session may use.
	Required bool   `json:"required"`
	Detail   string `json:"detail"`
	// Fix is one line saying how to mend the item when it is not ok.
	Fix string `json:"fix,omitempty"`
}

// statusReport is `glove status --json`.
type statusReport struct {
	Ready bool `json:"ready"`
	// Missing names the required items that are not ok.
	Missing []string     `json:"missing"`
	Items   []statusItem `json:"items"`
}

// statusProbe says where the probes look; tests point it at fakes.
type statusProbe struct {
	mountinfo   string // /proc/self/mountinfo
	loopControl string // /dev/loop-control
	mkfs        string // /usr/sbin/mkfs.ext4
	libexec     string // the installed helpers
	procSys     string // /proc/sys
	// userns runs the glove-shim at its argument's probe as the service
	// user; usernsHelper says whether glove-userns is enabled (nil) or
	// why not.
	userns       func(shim string) error
	usernsHelper func() error
	// selfCgroup is /proc/self/cgroup, cgroupConf glove-cgroup's bounds.
	selfCgroup, cgroupConf string
	// The kernel release, PID 1's name, systemd's version, this user.
	release        func() string
	pid1           func() string
	systemdVersion func() int
	uid            func() int
	// openTreeAttr says whether bind clones use open_tree_attr.
	openTreeAttr func() bool
	mountCalls   []mountCall
	// storeDir is gloved's --session-store; freeBytes says how much
	// room the file system holding a directory has for the caller.
	storeDir  string
	freeBytes func(dir string) (uint64, error)
	// socket is gloved's control socket (supervisor_status).
	socket string
}

func defaultStatusProbe() statusProbe {
	return statusProbe{
		mountinfo:    "/proc/self/mountinfo",
		loopControl:  "/dev/loop-control",
		mkfs:         "/usr/sbin/mkfs.ext4",
		libexec:      LibexecDir,
		procSys:      "/proc/sys",
		userns:       serviceUserns,
		usernsHelper: usernsEnabled(usermode.HelperConfig),
		selfCgroup:   "/proc/self/cgroup",
		cgroupConf:   cgroupConfPath(),
		release:      kernelRelease, pid1: pid1Comm, systemdVersion: systemdVersion, uid: os.Geteuid,
		openTreeAttr: openTreeAttr,
		mountCalls:   mountCalls(),
		storeDir:     DefaultStoreDir,
		freeBytes:    freeBytes,
		socket:       DefaultSocket,
	}
}

// DefaultStoreDir is the packaged gloved's --session-store.
const DefaultStoreDir = "/var/lib/glove/store"

func freeBytes(dir string) (uint64, error) {
	var sf unix.Statfs_t
	if err := unix.Statfs(dir, &sf); err != nil {
		return 0, fmt.Errorf("statfs: %w", err)
	}
	return sf.Bavail * uint64(sf.Bsize), nil
}

// statusFlags are glove status's flags.
type statusFlags struct {
	json                      bool
	libexec, storeDir, socket string
}

func (o *statusFlags) define(fs *flag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, "print one JSON object")
	fs.StringVar(&o.libexec, "libexec", LibexecDir, "directory of the installed helpers")
	fs.StringVar(&o.storeDir, "session-store", DefaultStoreDir, "gloved's session store directory")
	fs.StringVar(&o.socket, "socket", DefaultSocket, "gloved's control socket")
}

func statusCommand(args []string, stdout, stderr io.Writer) int {
	var o statusFlags
	fs := newFlags("glove status")
	o.define(fs)
	if err := fs.Parse(args); err != nil {
		if helpFlag(err, stdout, usageStatus) {
			return ExitOK
		}
		fmt.Fprintf(stderr, "glove status: %v\n%s\n", err, usageStatus)
		return ExitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "glove status: unexpected argument %q\n", fs.Arg(0))
		return ExitUsage
	}
	p := defaultStatusProbe()
	p.libexec, p.storeDir, p.socket = o.libexec, o.storeDir, o.socket
	return writeStatus(p.run(), o.json, stdout)
}

// statusNames is every item a report has, in order.
func statusNames() []string {
	names := []string{"kernel", "user-namespaces", "landlock", "seccomp", "local-services", "mount-api", "cgroups", "cgroup-delegation", "loop-devices", "mkfs.ext4", "service-manager", "session-store", "supervisor"}
	for _, e := range captable.Table {
		if e.Helper {
			names = append(names, "helper "+e.Binary)
		}
	}
	return names
}

func (p statusProbe) run() statusReport {
	items := []statusItem{
		p.probeKernel(),
		p.probeUserns(),
		probeLandlock(),
		probeSeccomp(),
		p.probeLocalServices(),
		p.probeMountAPI(),
		p.probeCgroups(),
		p.probeDelegation(),
		p.probeLoop(),
		p.probeMkfs(),
		p.probeServiceManager(),
		p.probeStore(),
		p.probeSupervisor(),
	}
	for _, e := range captable.Table {
		if e.Helper {
			items = append(items, p.probeHelper(e))
		}
	}
	r := statusReport{Ready: true, Missing: []string{}, Items: items}
	for _, it := range items {
		if it.Required && !it.OK {
			r.Ready = false
			r.Missing = append(r.Missing, it.Name)
		}
	}
	return r
}

func writeStatus(r statusReport, asJSON bool, w io.Writer) int {
	code := ExitOK
	if !r.Ready {
		code = ExitFail
	}
	if asJSON {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			panic(err) // plain strings and bools
		}
		fmt.Fprintf(w, "%s\n", b)
		return code
	}
	for _, it := range r.Items {
		word := "ok"
		switch {
		case !it.OK && it.Required:
			word = "FAIL"
		case !it.OK:
			word = "weak" // not required: the session runs, with less
		}
		fmt.Fprintf(w, "%-24s %-4s  %s\n", it.Name, word, it.Detail)
		if !it.OK && it.Fix != "" {
			fmt.Fprintf(w, "%-24s fix:  %s\n", "", it.Fix)
		}
	}
	if r.Ready {
		fmt.Fprintln(w, "ready: everything a sandboxed session needs is ok")
	} else {
		fmt.Fprintf(w, "not ready: %s\n", strings.Join(r.Missing, ", "))
	}
	return code
}

// probeUserns says how sessions will get their user namespace on this
// host, as gloved decides it at start (package usermode): the service
// user's own attempt (probed as that user when status runs as root, who
// the switches never refuse), the switches, and glove-userns's opt-in;
// where no mode works, the line that fixes the host.
func (p statusProbe) probeUserns() statusItem {
	it := statusItem{Name: "user-namespaces", Required: true}
	f := usermode.ReadFacts(p.procSys)
	mode, err := usermode.Choose(f, p.userns(filepath.Join(p.libexec, "glove-shim")), p.usernsHelper)
	var switches []string
	for _, s := range []struct{ name, v string }{
		{"kernel.unprivileged_userns_clone", f.UnprivilegedClone},
		{"kernel.apparmor_restrict_unprivileged_userns", f.AppArmorRestrict},
		{"user.max_user_namespaces", f.MaxUserNamespaces},
		{"AppArmor profile glove-shim", f.ShimProfile},
		{"AppArmor userns mediation", f.AppArmorUserns},
	} {
		if s.v != "" {
			switches = append(switches, s.name+"="+s.v)
		}
	}
	host := " (" + strings.Join(switches, ", ") + ")"
	var r *usermode.Refusal
	switch {
	case errors.As(err, &r):
		it.Detail, it.Fix = r.Reason+host, r.Fix
	case err != nil:
		it.Detail = err.Error() + host
	case mode == usermode.Helper:
		it.OK = true
		it.Detail = "mode glove-userns: it makes each session's user namespace; no mount lock (the host refuses nested user namespaces)" + host
	default:
		it.OK = true
		it.Detail = "mode unprivileged: glove-shim creates them" + host
	}
	return it
}

// serviceUserns runs glove-shim's probe (at shim) as the service user:
// the packaged "glove" when status runs as root, else the caller.
func serviceUserns(shim string) error {
	if os.Geteuid() != 0 {
		return usermode.Probe(shim)
	}
	u, err := user.Lookup("glove")
	if err != nil {
		return fmt.Errorf("no service user glove to probe for: %w", err)
	}
	uid, uerr := strconv.ParseUint(u.Uid, 10, 32)
	gid, gerr := strconv.ParseUint(u.Gid, 10, 32)
	if uerr != nil || gerr != nil {
		return fmt.Errorf("service user glove: uid %q gid %q", u.Uid, u.Gid)
	}
	return usermode.ProbeAs(shim, uint32(uid), uint32(gid))
}

// usernsEnabled reads glove-userns's opt-in from its bounds file: nil
// when it says "enabled": true. Status does not run the helper (its
// caller need not be in the service group); the helper item checks the
// executable and its capability.
func usernsEnabled(path string) func() error {
	return func() error {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("glove-userns's bounds: %w", err)
		}
		var c userns.Config
		if err := helperkit.DecodeStrict(b, &c); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if !c.Enabled {
			return fmt.Errorf("glove-userns is not enabled in %s", path)
		}
		return nil
	}
}

// probeLandlock reports the ABI and what glove-shim's ruleset lacks at
// it (shim/cstage/stage2.c), each gap naming the layer that still
// holds. Without Landlock at all glove-shim refuses every sandbox.
func probeLandlock() statusItem {
	it := statusItem{Name: "landlock", Required: true}
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		it.Detail = "unavailable: " + errno.Error() + " (glove-shim refuses to build a sandbox without it)"
		it.Fix = "boot with landlock in the LSM list (lsm=...,landlock; Debian's kernels have it from 5.13)"
		return it
	}
	it.OK = true
	it.Detail = fmt.Sprintf("ABI %d", abi)
	var gaps []string
	if abi < 2 {
		gaps = append(gaps, "no rename/link across directories (REFER, ABI 2)")
	}
	if abi < 3 {
		gaps = append(gaps, "truncation not restricted (ABI 3; the read-only mounts still refuse it)")
	}
	if abi < 6 {
		gaps = append(gaps, "abstract unix sockets and signals not scoped (ABI 6; the sandbox's own network and pid namespaces still isolate both)")
	}
	if abi < 9 {
		gaps = append(gaps, "pathname unix sockets not restricted (ABI 9; seccomp alone keeps a program from sending to or connecting by a path)")
	}
	if len(gaps) > 0 {
		it.Detail += ": " + strings.Join(gaps, "; ")
	}
	return it
}

// probeSeccomp asks the kernel, without installing anything: the mode of
// this process, whether SECCOMP_RET_KILL_PROCESS is available, and
// whether SECCOMP_FILTER_FLAG_TSYNC is known (a filter pointer of NULL
// fails with EFAULT once the flags are accepted, EINVAL before).
func probeSeccomp() statusItem {
	it := statusItem{Name: "seccomp", Required: true}
	mode, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0)
	if err != nil {
		it.Detail = "PR_GET_SECCOMP: " + err.Error()
		return it
	}
	var fails []string
	action := uint32(unix.SECCOMP_RET_KILL_PROCESS)
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))
	if errno != 0 {
		fails = append(fails, "SECCOMP_RET_KILL_PROCESS: "+errno.Error())
	}
	_, _, errno = unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, 0)
	if errno != unix.EFAULT {
		fails = append(fails, fmt.Sprintf("SECCOMP_FILTER_FLAG_TSYNC: %v", errno))
	}
	if len(fails) > 0 {
		it.Detail = strings.Join(fails, "; ")
		return it
	}
	it.OK = true
	it.Detail = fmt.Sprintf("filters with TSYNC and KILL_PROCESS (this process: mode %d)", mode)
	return it
}

// probeLocalServices says whether the pathname compatibility transport
// of local services (docs/local-services.md) can work here: gloved
// answers a sandboxed program's connect by seccomp user notification
// and reads the address from the program's memory, which Yama's
// ptrace_scope 3 forbids (then every such connect fails, closed); 1 and 2
// allow it, since gloved owns the sandbox's user namespaces (Yama asks
// for CAP_SYS_PTRACE in the target's user namespace).
// Not required: sessions, and the inherited-stream-v1 transport, need
// neither.
func (p statusProbe) probeLocalServices() statusItem {
	it := statusItem{Name: "local-services"}
	action := uint32(unix.SECCOMP_RET_USER_NOTIF)
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action))); errno != 0 {
		it.Detail = "pathname transport unavailable: SECCOMP_RET_USER_NOTIF: " + errno.Error()
		it.Fix = "run a kernel of 5.9 or later, or select the inherited-stream-v1 transport"
		return it
	}
	if err := notify.CheckSizes(); err != nil {
		it.Detail = "pathname transport unavailable: " + err.Error()
		it.Fix = "run a kernel of 5.9 or later, or select the inherited-stream-v1 transport"
		return it
	}
	yama := "no Yama"
	if v, err := readTrim(filepath.Join(p.procSys, "kernel/yama/ptrace_scope")); err == nil {
		if v != "0" && v != "1" && v != "2" {
			it.Detail = "pathname transport: every connect refused: Yama ptrace_scope " + v + " keeps gloved from reading a sandboxed program's connect address"
			it.Fix = "boot with kernel.yama.ptrace_scope 2 or lower (3 holds until reboot), or select the inherited-stream-v1 transport"
			return it
		}
		yama = "Yama ptrace_scope " + v
	}
	it.OK = true
	it.Detail = "pathname transport: seccomp user notification, and gloved may read a sandboxed program's connect address (" + yama + ")"
	return it
}

// cgroupMount is one mounted hierarchy's root.
type cgroupMount struct {
	v2          bool
	path        string
	controllers []string
}

func parseCgroupMounts(info []byte) []cgroupMount {
	var out []cgroupMount
	for _, e := range mountinfo.Parse(string(info)) {
		if e.Root != "/" {
			continue
		}
		switch e.FSType {
		case "cgroup2":
			out = append(out, cgroupMount{v2: true, path: mountinfo.Unescape(e.Point)})
		case "cgroup":
			out = append(out, cgroupMount{path: mountinfo.Unescape(e.Point), controllers: e.CgroupControllers()})
		}
	}
	return out
}

// probeCgroups: glove-cgroup needs a cgroup2 hierarchy (it kills with
// cgroup.kill) and memory and pids controllers, in v2 or, on a hybrid
// host, in v1 hierarchies.
func (p statusProbe) probeCgroups() statusItem {
	it := statusItem{Name: "cgroups", Required: true}
	data, err := os.ReadFile(p.mountinfo)
	if err != nil {
		it.Detail = err.Error()
		return it
	}
	mounts := parseCgroupMounts(data)
	var v2 *cgroupMount
	var parts []string
	have := map[string]string{}
	for i := range mounts {
		m := &mounts[i]
		if !m.v2 {
			continue
		}
		if v2 == nil {
			v2 = m
		}
		c, err := readTrim(filepath.Join(m.path, "cgroup.controllers"))
		if err != nil {
			parts = append(parts, fmt.Sprintf("v2 %s: %v", m.path, err))
			continue
		}
		m.controllers = strings.Fields(c)
		parts = append(parts, fmt.Sprintf("v2 %s [%s]", m.path, strings.Join(m.controllers, " ")))
		for _, c := range m.controllers {
			have[c] = "v2"
		}
	}
	var v1 []string
	for _, m := range mounts {
		if m.v2 || len(m.controllers) == 0 {
			continue
		}
		for _, c := range m.controllers {
			if _, ok := have[c]; !ok {
				have[c] = "v1"
			}
		}
		v1 = append(v1, strings.Join(m.controllers, ","))
	}
	sort.Strings(v1)
	if len(v1) > 0 {
		parts = append(parts, "v1 ["+strings.Join(v1, " ")+"]")
	}
	var missing []string
	if v2 == nil {
		missing = append(missing, "no cgroup2 hierarchy (glove-cgroup refuses pure v1 hosts)")
	} else if _, err := os.Stat(filepath.Join(v2.path, "cgroup.kill")); err != nil {
		// cgroup.kill exists in every non-root cgroup; at the root,
		// look at the kernel's list of v2 features.
		if !cgroupKillFeature() {
			missing = append(missing, "kernel without cgroup.kill")
		}
	}
	for _, c := range []string{"memory", "pids"} {
		if v, ok := have[c]; ok {
			parts = append(parts, c+" in "+v)
		} else {
			missing = append(missing, "no "+c+" controller")
		}
	}
	if len(mounts) == 0 {
		parts = append(parts, "no cgroup hierarchy mounted")
	}
	it.Detail = strings.Join(parts, "; ")
	if len(missing) > 0 {
		it.Detail = strings.Join(missing, "; ") + "; " + it.Detail
		return it
	}
	it.OK = true
	return it
}

func cgroupKillFeature() bool {
	// /sys/kernel/cgroup/features lists nsdelegate, memory_localevents,
	// ...; cgroup.kill arrived in 5.14 with no entry, so fall back to
	// the kernel version.
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	rel := unix.ByteSliceToString(u.Release[:])
	var major, minor int
	if _, err := fmt.Sscanf(rel, "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 5 || (major == 5 && minor >= 14)
}

func (p statusProbe) probeLoop() statusItem {
	it := statusItem{Name: "loop-devices", Required: true}
	var st unix.Stat_t
	if err := unix.Stat(p.loopControl, &st); err != nil {
		it.Detail = p.loopControl + ": " + err.Error()
		return it
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Major(st.Rdev) != 10 || unix.Minor(st.Rdev) != 237 {
		it.Detail = fmt.Sprintf("%s is not the loop-control device (mode %o, device %d:%d)",
			p.loopControl, st.Mode, unix.Major(st.Rdev), unix.Minor(st.Rdev))
		return it
	}
	it.OK = true
	it.Detail = fmt.Sprintf("%s char 10:237 mode %04o uid %d", p.loopControl, st.Mode&0o7777, st.Uid)
	return it
}

// probeMkfs: glove-loopext4 executes mkfs.ext4 only if it and every
// directory above it are root's and not group/other-writable.
func (p statusProbe) probeMkfs() statusItem {
	it := statusItem{Name: "mkfs.ext4", Required: true}
	resolved, err := filepath.EvalSymlinks(p.mkfs)
	if err != nil {
		it.Detail = err.Error()
		return it
	}
	var st unix.Stat_t
	if err := unix.Stat(resolved, &st); err != nil {
		it.Detail = err.Error()
		return it
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		it.Detail = resolved + " is not a regular file"
		return it
	}
	for d := resolved; ; d = filepath.Dir(d) {
		if err := unix.Lstat(d, &st); err != nil {
			it.Detail = err.Error()
			return it
		}
		if st.Uid != 0 || st.Mode&0o022 != 0 {
			it.Detail = fmt.Sprintf("%s is uid %d mode %04o: not root's or group/other-writable", d, st.Uid, st.Mode&0o7777)
			return it
		}
		if d == "/" {
			break
		}
	}
	it.OK = true
	it.Detail = p.mkfs + " -> " + resolved + ", root's, not group/other-writable"
	return it
}

// probeHelper checks an installed helper against its table row: a
// regular file owned by root, mode 0750 (no setuid or setgid), group
// not root, file capabilities equal to the row (permitted and
// effective, nothing inheritable), and executable by the caller.
func (p statusProbe) probeHelper(e captable.Entry) statusItem {
	it := statusItem{Name: "helper " + e.Binary, Required: true}
	path := filepath.Join(p.libexec, e.Binary)
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		it.Detail = path + ": " + err.Error()
		return it
	}
	group := strconv.Itoa(int(st.Gid))
	if g, err := user.LookupGroupId(group); err == nil {
		group = g.Name
	}
	var faults []string
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		faults = append(faults, "not a regular file")
	}
	if st.Uid != 0 {
		faults = append(faults, fmt.Sprintf("owner uid %d, not root", st.Uid))
	}
	if st.Mode&0o7777 != 0o750 {
		faults = append(faults, fmt.Sprintf("mode %04o, not 0750", st.Mode&0o7777))
	}
	if st.Gid == 0 {
		faults = append(faults, "group root, not the service group")
	}
	caps, err := fileCaps(path)
	capText := "none"
	if err != nil {
		faults = append(faults, "file capabilities: "+err.Error())
	} else {
		if caps.permitted != 0 {
			capText = captext.MaskString(caps.permitted)
		}
		want := e.Mask()
		if caps.permitted != want || caps.inheritable != 0 || (want != 0) != caps.effective {
			faults = append(faults, fmt.Sprintf("file capabilities permitted %s inheritable %s effective %v, table %s",
				captext.MaskString(caps.permitted), captext.MaskString(caps.inheritable), caps.effective, captext.MaskString(want)))
		}
	}
	if err := unix.Faccessat(unix.AT_FDCWD, path, unix.X_OK, unix.AT_EACCESS); err != nil {
		faults = append(faults, "not executable by you ("+err.Error()+"; join group "+group+" and log in again)")
	}
	it.Detail = fmt.Sprintf("%s %04o root:%s caps %s", path, st.Mode&0o7777, group, capText)
	if len(faults) > 0 {
		it.Detail += ": " + strings.Join(faults, "; ")
		return it
	}
	it.OK = true
	return it
}

// fileCapSet is a decoded security.capability attribute.
type fileCapSet struct {
	permitted, inheritable uint64
	effective              bool
}

// fileCaps reads a file's capabilities; a file without the attribute
// has none.
func fileCaps(path string) (fileCapSet, error) {
	buf := make([]byte, 64)
	n, err := unix.Lgetxattr(path, "security.capability", buf)
	if errors.Is(err, unix.ENODATA) {
		return fileCapSet{}, nil
	}
	if err != nil {
		return fileCapSet{}, err
	}
	return decodeFileCaps(buf[:n])
}

// decodeFileCaps decodes struct vfs_cap_data (revision 2) or
// vfs_ns_cap_data (revision 3, which adds the namespace root uid).
func decodeFileCaps(b []byte) (fileCapSet, error) {
	const (
		revMask   = 0xff000000
		rev1      = 0x01000000
		rev2      = 0x02000000
		rev3      = 0x03000000
		effective = 0x000001
	)
	if len(b) < 4 {
		return fileCapSet{}, fmt.Errorf("attribute of %d bytes", len(b))
	}
	le := binary.LittleEndian
	magic := le.Uint32(b)
	var want int
	switch magic & revMask {
	case rev1:
		want = 12
	case rev2:
		want = 20
	case rev3:
		want = 24
	default:
		return fileCapSet{}, fmt.Errorf("unknown revision %#x", magic&revMask)
	}
	if len(b) != want {
		return fileCapSet{}, fmt.Errorf("revision %#x attribute of %d bytes, want %d", magic>>24, len(b), want)
	}
	if magic&^uint32(revMask|effective) != 0 {
		return fileCapSet{}, fmt.Errorf("unknown flags %#x", magic&^uint32(revMask))
	}
	c := fileCapSet{effective: magic&effective != 0}
	c.permitted = uint64(le.Uint32(b[4:]))
	c.inheritable = uint64(le.Uint32(b[8:]))
	if magic&revMask != rev1 {
		c.permitted |= uint64(le.Uint32(b[12:])) << 32
		c.inheritable |= uint64(le.Uint32(b[16:])) << 32
	}
	return c, nil
}

func readTrim(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(bytes.TrimSpace(b)), err
}

// leasesPart says which credential leases the store holds: each handle
// with its version (0: a lease file gloved will refuse until the
// operator removes it), never a credential.
func leasesPart(dir string) string {
	infos, err := lease.List(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "credential leases: none"
	case err != nil:
		return fmt.Sprintf("credential leases: %v", errors.Unwrap(err))
	case len(infos) == 0:
		return "credential leases: none"
	}
	var hs []string
	for _, i := range infos {
		if i.Version == 0 {
			hs = append(hs, i.Handle+" (not valid: remove it to import the source again)")
		} else {
			hs = append(hs, fmt.Sprintf("%s version %d", i.Handle, i.Version))
		}
	}
	return "credential leases: " + strings.Join(hs, ", ")
}

// storeLowSpace is the free room under which the store's file system
// counts as full: less than one compaction of a full journal needs.
const storeLowSpace = 16 << 20

// probeStore reports gloved's durable store: each journal's use of its
// bounds (from the headers, without the writer's lock) and the room left
// on its file system. A full disk or a full journal fails the item (no
// session can be created); a store not set up yet, or one this user
// cannot read, is only reported.
func (p statusProbe) probeStore() statusItem {
	it := statusItem{Name: "session-store"}
	if _, err := os.Stat(p.storeDir); err != nil {
		it.OK = true
		it.Detail = fmt.Sprintf("no session store at %s (gloved not set up here): %v", p.storeDir, errors.Unwrap(err))
		if errors.Is(err, os.ErrPermission) {
			it.OK = false
			it.Detail = fmt.Sprintf("%s: cannot read it as uid %d (run as root or the service user)", p.storeDir, p.uid())
		}
		return it
	}
	var parts []string
	full := false
	for _, j := range []struct{ name, kind string }{{"sessions.journal", "sessions"}, {"receipts.journal", "receipts"}} {
		st, err := journal.Peek(p.storeDir, j.name, j.kind)
		switch {
		case errors.Is(err, os.ErrNotExist):
			parts = append(parts, j.name+": not created yet")
			continue
		case err != nil:
			parts = append(parts, fmt.Sprintf("%s: %v", j.name, err))
			full = full || !errors.Is(err, os.ErrPermission)
			continue
		}
		const maxRecords, maxBytes = 10000, 64 << 20
		parts = append(parts, fmt.Sprintf("%s: %d of %d records, %.1f of %d MiB (chain at record %d)",
			j.name, st.Records, maxRecords, float64(st.Bytes)/(1<<20), maxBytes>>20, st.Seq))
		if st.Records >= maxRecords*9/10 || st.Bytes >= maxBytes*9/10 {
			parts[len(parts)-1] += ": nearly full (gloved compacts it on its own; clean up ended sessions and acknowledge receipts)"
		}
	}
	parts = append(parts, leasesPart(filepath.Join(p.storeDir, "leases")))
	free, err := p.freeBytes(p.storeDir)
	switch {
	case err != nil:
		parts = append(parts, fmt.Sprintf("free space: %v", err))
	case free < storeLowSpace:
		full = true
		parts = append(parts, fmt.Sprintf("no space left on device: %d bytes free", free))
		it.Fix = "free space on the file system holding " + p.storeDir + " (gloved accepts writes again as soon as there is room)"
	default:
		parts = append(parts, fmt.Sprintf("%.1f GiB free", float64(free)/(1<<30)))
	}
	it.OK, it.Required = !full, full
	it.Detail = p.storeDir + ": " + strings.Join(parts, "; ")
	return it
}
