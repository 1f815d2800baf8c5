// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/captable/captext"
	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

// The integration lock testenv takes (testenv.go, setup): one
// integration test process at a time on a host, so that this test's
// install, cgroups and leak check do not meet another package's.
const integrationLock = "/var/lib/glove-testenv/.lock"

// TestDebInstallRunPurge builds the package, installs it with dpkg -i,
// checks what postinst made against the capability table, runs one
// session with the installed binaries as the glove user (without
// systemd: the test delegates the cgroup the unit would get), purges the
// package and checks that nothing is left.
func TestDebInstallRunPurge(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root to install a package (CI runs as root)")
	}
	for _, tool := range []string{"dpkg", "dpkg-deb", "setpriv", "getcap"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipped: %s not found", tool)
		}
	}
	if _, err := user.Lookup(Group); err == nil {
		t.Skipf("skipped: a user named %q already exists on this host; the package would adopt it and purge could not tell it apart (remove it, or run on a fresh machine)", Group)
	}
	if st := packageState(); st != "" && st != "not-installed" {
		t.Skipf("skipped: the glove package is already on this host (dpkg: %s)", st)
	}
	for _, p := range []string{"/run/glove", "/var/lib/glove/store", "/var/lib/glove/materialization"} {
		if _, err := os.Lstat(p); err == nil {
			t.Skipf("skipped: %s already exists (not made by this test)", p)
		}
	}
	lockIntegration(t)
	// Host-wide state (mounts, loop devices, cgroups, descriptors) is the
	// same after install, session and purge; the glove user's processes
	// are checked apart (the user does not exist yet).
	testenv.CheckLeaks(t, -1)
	v2 := testenv.V2Root(t)

	// What the host holds before: the group (an operator may have made
	// it, as scripts/setup-host.sh does), /var/lib/glove's entries,
	// /etc/glove (moved aside and restored).
	_, groupErr := user.LookupGroup(Group)
	hadGroup := groupErr == nil
	varBefore := listDir(t, "/var/lib/glove")
	moveAside(t, "/etc/glove")
	before, err := testenv.Take(-1)
	if err != nil {
		t.Fatal(err)
	}

	deb, _ := buildDeb(t)
	checkControlArchive(t, deb)
	contents := debPaths(t, deb)
	existed := map[string]bool{}
	for _, p := range contents {
		if _, err := os.Lstat(p); err == nil {
			existed[p] = true
		}
	}

	t.Run("preinst refuses setup-host's bounds", func(t *testing.T) { checkPreinstRefuses(t, deb) })
	if _, err := os.Lstat("/usr/bin/glove"); err == nil && !existed["/usr/bin/glove"] {
		t.Fatal("the refused install left /usr/bin/glove")
	}

	run(t, "dpkg", "-i", deb)
	purged := false
	t.Cleanup(func() {
		if !purged {
			_, _ = exec.Command("dpkg", "--purge", "glove").CombinedOutput()
		}
	})

	u, err := user.Lookup(Group)
	if err != nil {
		t.Fatalf("after dpkg -i: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	g, err := user.LookupGroup(Group)
	if err != nil || g.Gid != u.Gid {
		t.Fatalf("after dpkg -i: group %v (%v), want the user's primary group %s", g, err, u.Gid)
	}

	t.Run("capabilities", func(t *testing.T) { checkCapabilities(t) })
	t.Run("no setuid or setgid", func(t *testing.T) { checkNoSetid(t) })
	t.Run("modes and owners", func(t *testing.T) { checkModes(t, gid) })
	t.Run("directories", func(t *testing.T) { checkDirs(t, uid, gid) })
	t.Run("unit verifies", func(t *testing.T) { checkUnit(t) })
	t.Run("man pages", func(t *testing.T) { checkManPages(t) })
	t.Run("bash completion", func(t *testing.T) { checkCompletion(t) })
	t.Run("apparmor", func(t *testing.T) {
		// dh_apparmor's postinst makes the profile's local include (the
		// operator's additions); loading is the VM lane's hardened
		// cell's to show (AppArmor 4 there).
		for _, p := range []string{"/etc/apparmor.d/glove-shim", "/etc/apparmor.d/local/glove-shim"} {
			if _, err := os.Lstat(p); err != nil {
				t.Errorf("after dpkg -i: %v", err)
			}
		}
	})
	t.Run("session", func(t *testing.T) { runSession(t, v2, uid, gid) })

	if t.Failed() {
		t.Log("continuing to purge after failures")
	}
	if procs := processesOf(uid); len(procs) > 0 {
		t.Errorf("processes of glove left before purge: %v", procs)
	}
	run(t, "dpkg", "--purge", "glove")
	purged = true

	// Nothing is left.
	for _, p := range contents {
		_, err := os.Lstat(p)
		if existed[p] && err != nil {
			t.Errorf("after purge: %s existed before the install and is gone: %v", p, err)
		}
		if !existed[p] && err == nil {
			t.Errorf("after purge: %s is left", p)
		}
	}
	for _, p := range []string{"/etc/glove", "/run/glove", "/var/lib/glove/store", "/var/lib/glove/materialization", "/etc/apparmor.d/local/glove-shim"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("after purge: %s is left", p)
		}
	}
	if got := listDir(t, "/var/lib/glove"); !equal(got, varBefore) {
		t.Errorf("after purge: /var/lib/glove holds %v, before the install %v", got, varBefore)
	}
	if _, err := user.Lookup(Group); err == nil {
		t.Errorf("after purge: the user %s is left", Group)
	}
	if _, err := user.LookupGroup(Group); (err == nil) != hadGroup {
		t.Errorf("after purge: group %s present=%v, before the install present=%v", Group, err == nil, hadGroup)
	}
	if st := packageState(); st != "" && st != "not-installed" {
		t.Errorf("after purge: dpkg still has the package: %s", st)
	}
	if procs := processesOf(uid); len(procs) > 0 {
		t.Errorf("after purge: processes of uid %d: %v", uid, procs)
	}
	after, err := testenv.Take(-1)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range testenv.Diff(before, after) {
		t.Errorf("leak: %s", d)
	}
}

func lockIntegration(t *testing.T) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(integrationLock), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(integrationLock, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
}

// moveAside renames an existing path out of the way for the test and
// puts it back afterwards (after the purge has removed the package's).
func moveAside(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); err != nil {
		return
	}
	aside := fmt.Sprintf("%s.deb-test-%d", p, os.Getpid())
	if err := os.Rename(p, aside); err != nil {
		t.Fatal(err)
	}
	t.Logf("moved the host's %s aside to %s for the test", p, aside)
	t.Cleanup(func() {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists at the end of the test; the host's copy stays in %s", p, aside)
			return
		}
		if err := os.Rename(aside, p); err != nil {
			t.Errorf("restore %s: %v", p, err)
		}
	})
}

// debBuild is `make deb`'s result, built once per test process:
// TestDebInstallRunPurge and TestDebLintian share it.
var debBuild struct {
	once    sync.Once
	deb     string // bin/deb/glove_<version>_<arch>.deb
	changes string // bin/deb/glove_<version>_<arch>.changes
	err     error
}

// buildDeb runs `make deb` (dpkg-buildpackage on debian/, through
// scripts/build-deb.sh) and returns the .deb and the .changes.
func buildDeb(t *testing.T) (deb, changes string) {
	t.Helper()
	debBuild.once.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			debBuild.err = fmt.Errorf("go env GOMOD: %w", err)
			return
		}
		root := filepath.Dir(strings.TrimSpace(string(out)))
		cmd := exec.Command("make", "-s", "deb")
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			debBuild.err = fmt.Errorf("make deb: %w\n%s", err, b)
			return
		}
		debs, _ := filepath.Glob(filepath.Join(root, "bin/deb/glove_*.deb"))
		chs, _ := filepath.Glob(filepath.Join(root, "bin/deb/glove_*.changes"))
		if len(debs) != 1 || len(chs) != 1 {
			debBuild.err = fmt.Errorf("bin/deb holds %v and %v, want one package and one .changes", debs, chs)
			return
		}
		debBuild.deb, debBuild.changes = debs[0], chs[0]
	})
	if debBuild.err != nil {
		t.Fatal(debBuild.err)
	}
	return debBuild.deb, debBuild.changes
}

// checkControlArchive: the control archive holds the control file, the
// conffiles, the md5sums and exactly the maintainer scripts, each
// executable.
func checkControlArchive(t *testing.T, deb string) {
	t.Helper()
	tar := exec.Command("tar", "-tv")
	tar.Stdin = bytes.NewReader(run(t, "dpkg-deb", "--ctrl-tarfile", deb))
	out, err := tar.Output()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		if name := strings.TrimPrefix(f[len(f)-1], "./"); name != "" {
			got[name] = f[0]
		}
	}
	want := map[string]string{"control": "-rw-r--r--", "conffiles": "-rw-r--r--", "md5sums": "-rw-r--r--"}
	for _, s := range maintainerScripts {
		want[s] = "-rwxr-xr-x"
	}
	for name, mode := range want {
		if got[name] != mode {
			t.Errorf("control archive: %s is %q, want %s", name, got[name], mode)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("control archive: unexpected %s", name)
		}
	}
}

// checkPreinstRefuses runs dpkg -i (no terminal, stdin /dev/null) with
// an /etc/glove that scripts/setup-host.sh wrote, marker included: the
// preinst refuses in one line before anything is unpacked, no conffile
// prompt is reached, the package is not installed and /etc/glove is as it
// was. /etc/glove is removed again at the end (the host's copy is moved
// aside by the caller).
func checkPreinstRefuses(t *testing.T, deb string) {
	if err := os.Mkdir("/etc/glove", 0o755); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := os.RemoveAll("/etc/glove"); err != nil {
			t.Error(err)
		}
	}()
	files := map[string]string{
		".setup-host": "The bounds in this directory were written by Glove's scripts/setup-host.sh (for test), not by the glove package.\n",
		"cgroup.json": `{"schema_version":1,"parent":"/glove-test","max_memory_bytes":4294967296,"max_pids":1024}` + "\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join("/etc/glove", name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("dpkg", "-i", deb)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil {
		t.Errorf("dpkg -i over setup-host's /etc/glove succeeded\n%s%s", stdout.Bytes(), stderr.Bytes())
	}
	var line string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.HasPrefix(l, "glove: /etc/glove holds bounds written by scripts/setup-host.sh") {
			line = l
		}
	}
	if !strings.Contains(line, "mv /etc/glove ") {
		t.Errorf("dpkg -i: no one-line refusal naming the fix from preinst\nstdout: %s\nstderr: %s", stdout.Bytes(), stderr.Bytes())
	} else {
		t.Logf("dpkg -i refused: %s", line)
	}
	if strings.Contains(stdout.String()+stderr.String(), "Configuration file") {
		t.Errorf("dpkg -i reached a conffile prompt\n%s%s", stdout.Bytes(), stderr.Bytes())
	}
	if st := packageState(); st != "" && st != "not-installed" {
		t.Errorf("after the refused dpkg -i: the package is %s", st)
	}
	for name, data := range files {
		if b, err := os.ReadFile(filepath.Join("/etc/glove", name)); err != nil || string(b) != data {
			t.Errorf("after the refused dpkg -i: /etc/glove/%s is %q (%v), want it unchanged", name, b, err)
		}
	}
	if ents, _ := os.ReadDir("/etc/glove"); len(ents) != len(files) {
		t.Errorf("after the refused dpkg -i: /etc/glove holds %v", ents)
	}
}

// packageState is dpkg's state of the glove package ("installed",
// "config-files", ...), or "" when dpkg has no record of it. A refused
// first install (preinst failing) leaves a record in state
// "not-installed", for which dpkg -s succeeds: it is not an install.
func packageState() string {
	out, err := exec.Command("dpkg-query", "-W", "-f=${db:Status-Status}", "glove").Output()
	if err != nil {
		return ""
	}
	return string(out)
}

// debPaths lists the package's paths (dpkg-deb -c), "/" excluded.
func debPaths(t *testing.T, deb string) []string {
	t.Helper()
	out := run(t, "dpkg-deb", "--fsys-tarfile", deb)
	tar := exec.Command("tar", "-t")
	tar.Stdin = bytes.NewReader(out)
	names, err := tar.Output()
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, n := range strings.Split(string(names), "\n") {
		p := filepath.Clean("/" + strings.TrimPrefix(n, "./"))
		if n != "" && p != "/" {
			paths = append(paths, p)
		}
	}
	return paths
}

func installedPaths(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(string(run(t, "dpkg", "-L", "glove")), "\n") {
		if strings.HasPrefix(l, "/") && l != "/." {
			out = append(out, l)
		}
	}
	return out
}

// checkCapabilities compares getcap of every executable with its row.
func checkCapabilities(t *testing.T) {
	for _, e := range captable.Table {
		p := InstalledPath("/usr", e)
		out := strings.TrimSpace(string(run(t, "getcap", p)))
		want := ""
		if text := captext.SetcapText(e); text != "" {
			want = p + " " + text
		}
		if out != want {
			t.Errorf("getcap %s: %q, the table says %q", p, out, want)
		} else {
			t.Logf("getcap %s: %q", p, out)
		}
	}
}

func checkNoSetid(t *testing.T) {
	paths := installedPaths(t)
	if len(paths) < len(captable.Table) {
		t.Fatalf("dpkg -L glove lists %d paths", len(paths))
	}
	for _, p := range paths {
		st, err := os.Lstat(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if st.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			t.Errorf("%s is setuid or setgid: %v", p, st.Mode())
		}
	}
}

func checkModes(t *testing.T, gid int) {
	want := func(p string, mode fs.FileMode, uid, gid int) {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Errorf("%s: %v", p, err)
			return
		}
		if got := fs.FileMode(st.Mode & 0o7777); got != mode || int(st.Uid) != uid || int(st.Gid) != gid {
			t.Errorf("%s: %04o %d:%d, want %04o %d:%d", p, got, st.Uid, st.Gid, mode, uid, gid)
		}
	}
	want("/usr/libexec/glove", 0o755, 0, 0)
	for _, e := range captable.Table {
		if e.Helper {
			want(InstalledPath("/usr", e), 0o750, 0, gid)
		} else {
			want(InstalledPath("/usr", e), 0o755, 0, 0)
		}
	}
	want("/etc/glove", 0o755, 0, 0)
	for _, f := range []string{"mounter.json", "loopext4.json", "cgroup.json", "streamproxy.json", "userns.json"} {
		want(filepath.Join("/etc/glove", f), 0o644, 0, 0)
	}
	want("/lib/systemd/system/gloved.service", 0o644, 0, 0)
}

func checkDirs(t *testing.T, uid, gid int) {
	u, _ := user.Lookup(Group)
	if u.HomeDir != "/nonexistent" {
		t.Errorf("user glove: home %s", u.HomeDir)
	}
	for _, p := range []string{"/run/glove", "/var/lib/glove/store", "/var/lib/glove/materialization"} {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&0o7777 != 0o700 || int(st.Uid) != uid || int(st.Gid) != gid {
			t.Errorf("%s: mode %o %d:%d, want a directory 0700 glove:glove", p, st.Mode, st.Uid, st.Gid)
		}
	}
}

// checkUnit runs systemd-analyze verify on the installed unit (which
// needs the ExecStart binary present; it does not need systemd running).
func checkUnit(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("skipped: systemd-analyze not found")
	}
	out, err := exec.Command("systemd-analyze", "verify", "/lib/systemd/system/gloved.service").CombinedOutput()
	// systemd before 254 (Debian 12's 252) does not know
	// DelegateSubgroup= and says so; gloved makes the same move itself
	// there. That line, and only it, is expected from such a systemd.
	var rest []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l == "" || (systemdVersion(t) < 254 && strings.HasSuffix(l, "Unknown key 'DelegateSubgroup' in section [Service], ignoring.")) {
			continue
		}
		rest = append(rest, l)
	}
	if err != nil || len(rest) != 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// checkManPages: man finds the installed pages of the command line, the
// supervisor and a helper (an auditor's entry point), and renders one.
func checkManPages(t *testing.T) {
	if _, err := exec.LookPath("man"); err != nil {
		t.Fatal("man not found (scripts/install-deps.sh test installs man-db)")
	}
	for _, page := range []string{"glove", "gloved", "glove-mounter"} {
		out, err := exec.Command("man", "-w", page).CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "/usr/share/man/man") {
			t.Errorf("man -w %s: %v %q, want the package's page under /usr/share/man", page, err, out)
		} else {
			t.Logf("man -w %s: %s", page, strings.TrimSpace(string(out)))
		}
	}
	cmd := exec.Command("man", "glove")
	cmd.Env = append(os.Environ(), "MANPAGER=cat", "MANWIDTH=80", "LANG=C.UTF-8")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "NAME") || !strings.Contains(string(out), "glove") {
		t.Errorf("MANPAGER=cat man glove: %v\n%s", err, out)
	}
}

// checkCompletion: bash-completion finds the scripts by command name.
func checkCompletion(t *testing.T) {
	for _, c := range []string{"glove", "gloved"} {
		p := filepath.Join("/usr/share/bash-completion/completions", c)
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o644 {
			t.Errorf("%s: %v, want a 0644 file", p, err)
		}
	}
}

// systemdVersion is the number systemd-analyze --version prints first.
func systemdVersion(t *testing.T) int {
	out, err := exec.Command("systemd-analyze", "--version").Output()
	if err != nil {
		t.Fatalf("systemd-analyze --version: %v", err)
	}
	f := strings.Fields(string(out))
	if len(f) < 2 {
		t.Fatalf("systemd-analyze --version: %q", out)
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatalf("systemd-analyze --version: %q", out)
	}
	return n
}

// runSession delegates the cgroup the unit would get
// (/system.slice/gloved.service, cgroup.json's parent) to glove in every
// hierarchy, as systemd's Delegate=yes does, and runs `glove run` there
// as glove with the unit's capability bounding set, as systemd would
// start gloved: the shipped configuration must work as it is.
func runSession(t *testing.T, v2 string, uid, gid int) {
	parent := "/system.slice/gloved.service"
	delegateCgroup(t, parent, uid, gid)
	cg, err := unix.Open(filepath.Join(v2, parent), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(cg)
	ws, err := os.MkdirTemp("", "glove-deb-ws-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	if err := os.Chown(ws, uid, gid); err != nil {
		t.Fatal(err)
	}
	bset := []string{"-all"}
	for _, c := range BoundingSet() {
		bset = append(bset, "+"+strings.TrimPrefix(strings.ToLower(c), "cap_"))
	}
	asGlove := func(args ...string) (string, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		argv := []string{"--reuid", strconv.Itoa(uid), "--regid", strconv.Itoa(gid), "--groups", strconv.Itoa(gid),
			"--bounding-set", strings.Join(bset, ",")}
		if args[0] == "--no-new-privs" {
			argv, args = append(argv, args[0]), args[1:]
		}
		argv = append(append(argv, "--"), args...)
		cmd := exec.CommandContext(ctx, "setpriv", argv...)
		cmd.Dir = ws
		cmd.Env = []string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8"}
		cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cg}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	out, errOut, err := asGlove("/usr/bin/glove", "helpers")
	if err != nil {
		t.Errorf("glove helpers: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	for _, e := range captable.Table {
		if !e.Helper || e.Binary == "glove-shim" || e.StartedBy != "" {
			continue
		}
		// Between requests: the row without its OnDemand capabilities,
		// which the helper raises per call; permitted is the whole row.
		want := "CapEff " + captext.MaskString(e.Effective()) + "  CapPrm " + captext.MaskString(e.Mask())
		if !strings.Contains(lineOf(out, e.Binary), want) || !strings.HasSuffix(strings.TrimSpace(lineOf(out, e.Binary)), "ok") {
			t.Errorf("glove helpers: %s: %q, want %s ... ok", e.Binary, lineOf(out, e.Binary), want)
		}
	}
	t.Logf("glove helpers:\n%s", out)

	// Why the unit must not set no_new_privs: under it, execve ignores
	// the helpers' file capabilities and they refuse to start.
	out, errOut, err = asGlove("--no-new-privs", "/usr/bin/glove", "helpers")
	if err == nil || !strings.Contains(errOut, "missing capabilities cap_sys_admin") {
		t.Errorf("glove helpers under no_new_privs: %v, want glove-mounter refusing for missing capabilities\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	out, errOut, err = asGlove("/usr/bin/glove", "run", "--", "sh", "-c", "echo hi")
	if err != nil || out != "hi\n" {
		t.Errorf("glove run -- sh -c 'echo hi': %v, stdout %q, want \"hi\\n\" and status 0\nstderr: %s", err, out, errOut)
	} else {
		t.Logf("glove run -- sh -c 'echo hi': stdout %q, status 0", out)
	}

	// The same session inside an approximation of the unit's mount,
	// network and IPC sandboxing (ProtectSystem=strict with the state and
	// runtime directories writable, ProtectHome=, PrivateTmp=,
	// PrivateNetwork=, PrivateIPC=, UMask=0077), built with unshare(1)
	// and mount(8) as systemd would build it, since systemd does not run
	// here. The mounts vanish with the namespace.
	ws2, err := os.MkdirTemp(filepath.Dir(integrationLock), "deb-ws-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ws2) })
	if err := os.Chmod(ws2, 0o755); err != nil {
		t.Fatal(err)
	}
	script := `set -e
awk '{print $5}' /proc/self/mountinfo | sort -u | while read -r m; do
  case "$m" in /dev|/dev/*|/proc|/proc/*|/sys|/sys/*) continue ;; esac
  mount -o remount,bind,ro "$m"
done
for d in /var/lib/glove/store /var/lib/glove/materialization /run/glove; do
  mount --bind "$d" "$d"; mount -o remount,bind,rw "$d"
done
for d in /home /root /run/user; do
  if [ -d "$d" ]; then mount -t tmpfs -o ro,mode=0755 tmpfs "$d"; fi
done
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=1777 tmpfs /var/tmp
umask 0077
exec setpriv "$@"`
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	argv := []string{"--mount", "--propagation", "slave", "--net", "--ipc", "sh", "-c", script, "sh",
		"--reuid", strconv.Itoa(uid), "--regid", strconv.Itoa(gid), "--groups", strconv.Itoa(gid),
		"--bounding-set", strings.Join(bset, ","), "--", "/usr/bin/glove", "run", "--", "sh", "-c", "echo hi"}
	cmd := exec.CommandContext(ctx, "unshare", argv...)
	cmd.Dir = ws2
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cg}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil || stdout.String() != "hi\n" {
		t.Errorf("glove run under the unit's sandboxing: %v, stdout %q, want \"hi\\n\" and status 0\nstderr: %s", err, stdout.String(), stderr.String())
	} else {
		t.Logf("glove run under the unit's sandboxing (approximated): stdout %q, status 0", stdout.String())
	}
}

func lineOf(text, prefix string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix+" ") {
			return l
		}
	}
	return ""
}

// delegateCgroup creates parent in every mounted hierarchy (and its
// missing ancestors), owned by uid as the unit's delegation would make
// it, and removes what it created when the test ends.
func delegateCgroup(t *testing.T, parent string, uid, gid int) {
	mounts, err := testenv.CgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	var created []string
	t.Cleanup(func() {
		// Deepest first; anything left inside is killed.
		sort.Slice(created, func(i, j int) bool { return len(created[i]) > len(created[j]) })
		for _, d := range created {
			var sub []string
			_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
				if err == nil && e.IsDir() {
					sub = append(sub, p)
				}
				return nil
			})
			sort.Sort(sort.Reverse(sort.StringSlice(sub)))
			for _, s := range sub {
				if err := testenv.RmdirKilling(s); err != nil {
					t.Errorf("remove cgroup: %v", err)
				}
			}
		}
	})
	for _, m := range mounts {
		d := m
		for _, part := range strings.Split(strings.Trim(parent, "/"), "/") {
			d = filepath.Join(d, part)
			if err := os.Mkdir(d, 0o755); err == nil {
				created = append(created, d)
			} else if !errors.Is(err, fs.ErrExist) {
				t.Fatalf("create cgroup %s: %v", d, err)
			}
		}
		for _, f := range []string{".", "cgroup.procs", "tasks", "cgroup.subtree_control", "cgroup.threads"} {
			if err := os.Chown(filepath.Join(d, f), uid, gid); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("delegate cgroup %s: %v", d, err)
			}
		}
	}
}

func processesOf(uid int) []string {
	s, err := testenv.Take(uid)
	if err != nil {
		return []string{err.Error()}
	}
	return s["process"]
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func run(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.Bytes()
}
