// SPDX-License-Identifier: Apache-2.0

//go:build userns_experiment

// Command agent is a throwaway VM-lane agent for issue 35's measurements
// (docs/hardened-hosts-measured.md): in the guest it records the facts of
// the kernel's user-namespace switches and AppArmor, installs the embedded
// userns-probe (a static C program, ../probe) twice, plain and with the
// file capability cap_sys_admin=ep (and a third with
// cap_sys_admin,cap_sys_chroot=ep for case 8), runs it as root, as nobody
// and as nobody through the capable copies, and writes everything to
// /lane/evidence and /lane/result (which vmlane/run.sh copies back). It
// always passes: it measures, it does not judge. The unit powers the
// guest off when it ends.
//
//	make -C vmlane/experiments/userns   # builds probe, then this (build tag
//	userns_experiment: go build ./... and go vet ./... leave it out, as the
//	embedded probe is not in git)
package main

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

//go:embed userns-probe
var probe []byte

const (
	plain   = "/usr/local/bin/userns-probe"
	capable = "/usr/local/bin/userns-probe-cap"
	// case 8 only: CAP_SYS_ADMIN and CAP_SYS_CHROOT (setns into a mount
	// namespace needs both in the caller's user namespace)
	capable2 = "/usr/local/bin/userns-probe-cap-chroot"
	nobody   = 65534
)

func main() {
	if len(os.Args) != 4 || os.Args[1] != "run" || os.Args[2] != "--lane" {
		fmt.Fprintln(os.Stderr, "usage: glove-lane-guest run --lane DIR")
		os.Exit(2)
	}
	lane := os.Args[3]
	ev := filepath.Join(lane, "evidence")
	if err := os.MkdirAll(ev, 0o755); err != nil {
		fail(lane, err)
	}
	var all strings.Builder
	record := func(name, text string) {
		fmt.Print(text)
		all.WriteString("=== " + name + "\n" + text)
		if err := os.WriteFile(filepath.Join(ev, name), []byte(text), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "agent:", err)
		}
	}

	record("facts.txt", facts())

	if err := os.WriteFile(plain, probe, 0o755); err != nil {
		fail(lane, err)
	}
	if err := os.WriteFile(capable, probe, 0o755); err != nil {
		fail(lane, err)
	}
	if err := os.WriteFile(capable2, probe, 0o755); err != nil {
		fail(lane, err)
	}
	record("install.txt", shAll(
		"setcap cap_sys_admin=ep "+capable,
		"setcap cap_sys_admin,cap_sys_chroot=ep "+capable2,
		"getcap "+plain+" "+capable+" "+capable2,
		"ls -l "+plain+" "+capable+" "+capable2,
		"findmnt -no TARGET,OPTIONS -T /usr/local/bin",
	))

	type run struct {
		name string
		uid  int
		argv []string
	}
	for _, r := range []run{
		{"root-basic.txt", 0, []string{plain, "basic"}},
		{"root-helper.txt", 0, []string{plain, "helper", plain}},
		{"nobody-basic.txt", nobody, []string{plain, "basic"}},
		{"nobody-helper.txt", nobody, []string{plain, "helper", plain}},
		{"nobody-cap-basic.txt", nobody, []string{capable, "basic"}},
		{"nobody-cap-helper.txt", nobody, []string{capable, "helper", plain}},
		{"nobody-cap-helper-dumpable.txt", nobody, []string{capable, "helper", plain, "dumpable"}},
		{"nobody-cap-helper-child-dumpable.txt", nobody, []string{capable, "helper", plain, "child-dumpable"}},
		{"nobody-lock.txt", nobody, []string{plain, "lock", plain}},
		{"nobody-cap-lock-dumpable.txt", nobody, []string{capable, "lock", plain, "dumpable"}},
		{"nobody-cap-chroot-lock.txt", nobody, []string{capable2, "lock", plain}},
		{"nobody-cap-chroot-lock-dumpable.txt", nobody, []string{capable2, "lock", plain, "dumpable"}},
		{"root-lock.txt", 0, []string{plain, "lock", plain}},
	} {
		record(r.name, probeRun(r.uid, r.argv))
	}
	writeFile(filepath.Join(lane, "result"), "pass\n"+all.String())
	syscall.Sync()
}

// probeRun runs argv as uid (gid the same, no supplementary groups).
func probeRun(uid int, argv []string) string {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}},
		}
	}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	head := fmt.Sprintf("$ (uid %d gid %d, no groups) %s\n", uid, uid, strings.Join(argv, " "))
	tail := fmt.Sprintf("(exit: %v, %.1f s)\n", err, time.Since(start).Seconds())
	return head + string(out) + tail
}

func facts() string {
	return shAll(
		"uname -r",
		"cat /proc/version",
		"cat /proc/cmdline",
		"cat /etc/debian_version",
		"cat /proc/sys/kernel/unprivileged_userns_clone",
		"cat /proc/sys/user/max_user_namespaces",
		"grep . /proc/sys/user/*",
		"ls -l /proc/sys/kernel/apparmor_restrict_unprivileged_userns* /proc/sys/kernel/apparmor* 2>&1",
		"cat /sys/kernel/security/lsm; echo",
		"cat /sys/module/apparmor/parameters/enabled",
		"cat /sys/module/apparmor/parameters/mode 2>&1",
		"ls /sys/kernel/security/apparmor/features/",
		"ls -la /sys/kernel/security/apparmor/features/namespaces/ 2>&1",
		"for f in /sys/kernel/security/apparmor/features/namespaces/*; do echo \"$f: $(cat $f 2>&1 | tr '\\n' ' ')\"; done",
		"ls /sys/kernel/security/apparmor/features/domain/ 2>&1",
		"cat /sys/kernel/security/apparmor/profiles 2>&1 | head -20",
		"command -v apparmor_parser aa-status 2>&1; dpkg -l apparmor 2>&1 | tail -1",
		"grep -E 'CONFIG_USER_NS|CONFIG_SECURITY_APPARMOR|CONFIG_LSM=|CONFIG_DEFAULT_SECURITY' /boot/config-$(uname -r)",
		"cat /proc/sys/kernel/yama/ptrace_scope /proc/sys/fs/suid_dumpable",
		"getent passwd nobody",
		"dpkg -l libcap2-bin util-linux | tail -2",
	)
}

func shAll(cmds ...string) string {
	var b strings.Builder
	for _, c := range cmds {
		out, err := exec.Command("/bin/sh", "-c", c).CombinedOutput()
		fmt.Fprintf(&b, "$ %s\n%s", c, out)
		if len(out) > 0 && out[len(out)-1] != '\n' {
			b.WriteString("\n")
		}
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
	}
	return b.String()
}

func fail(lane string, err error) {
	fmt.Fprintln(os.Stderr, "agent:", err)
	writeFile(filepath.Join(lane, "result"), "fail\n"+err.Error()+"\n")
	syscall.Sync()
	os.Exit(1)
}

func writeFile(path, s string) {
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
	}
}
