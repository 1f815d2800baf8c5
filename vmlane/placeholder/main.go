// SPDX-License-Identifier: Apache-2.0

// Command placeholder stands in for the VM lane's in-guest agent
// (glove-lane-guest) so that vmlane/run.sh can be tested end to end: on
// the first boot it records the guest's facts and reboots; on the second
// it records them again, writes /lane/result and powers off. If
// /lane/glove.deb is not a Debian package it fails at once: it writes a
// failing result and exits 1 without powering off, which the unit then
// does (the driver's failure path).
//
//	CGO_ENABLED=0 go build -o bin/vmlane-placeholder ./vmlane/placeholder
//	glove-lane-guest run --lane /lane
package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

func main() {
	if len(os.Args) != 4 || os.Args[1] != "run" || os.Args[2] != "--lane" {
		fmt.Fprintln(os.Stderr, "usage: glove-lane-guest run --lane DIR")
		os.Exit(2)
	}
	lane := os.Args[3]
	if err := run(lane); err != nil {
		fmt.Fprintln(os.Stderr, "placeholder:", err)
		writeFile(filepath.Join(lane, "result"), "fail\n"+err.Error()+"\n")
		syscall.Sync()
		os.Exit(1)
	}
}

func run(lane string) error {
	deb, err := os.ReadFile(filepath.Join(lane, "glove.deb"))
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(deb, []byte("!<arch>\ndebian-binary")) {
		return fmt.Errorf("%s/glove.deb (%d bytes) is not a Debian package", lane, len(deb))
	}
	state := filepath.Join(lane, "placeholder-state")
	f := facts()
	fmt.Print(f)
	if _, err := os.Stat(state); os.IsNotExist(err) {
		writeFile(filepath.Join(lane, "facts-boot1"), f)
		writeFile(state, "rebooted\n")
		syscall.Sync()
		fmt.Println("placeholder: first boot done, rebooting")
		return systemctl("reboot")
	}
	boot1, err := os.ReadFile(filepath.Join(lane, "facts-boot1"))
	if err != nil {
		return err
	}
	writeFile(filepath.Join(lane, "result"), "pass\n"+f+"--- first boot:\n"+string(boot1))
	syscall.Sync()
	fmt.Println("placeholder: second boot done, powering off")
	return systemctl("poweroff")
}

// facts is what the lane needs to know about a guest, one "name: value" a
// line (multi-line values indented).
func facts() string {
	loop := "present at start"
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		loop = "absent at start; modprobe loop: " + strings.TrimSpace(sh("modprobe loop && echo ok"))
		if _, err := os.Stat("/dev/loop-control"); err == nil {
			loop += "; then present"
		}
	}
	var b strings.Builder
	for _, q := range []struct{ name, cmd string }{
		{"uname -r", "uname -r"},
		{"systemd", "systemctl --version | head -1"},
		{"cgroup.controllers", "cat /sys/fs/cgroup/cgroup.controllers"},
		{"system.slice subtree_control", "cat /sys/fs/cgroup/system.slice/cgroup.subtree_control"},
		{"cgroup2 mounts", "grep -c cgroup2 /proc/mounts; grep -c ' cgroup ' /proc/mounts || true"},
		{"lsm", "cat /sys/kernel/security/lsm"},
		{"loop module", "grep -w ^loop /proc/modules || grep /loop.ko /lib/modules/$(uname -r)/modules.builtin || echo none"},
		{"loop device", "f=$(mktemp); truncate -s 16M $f; d=$(losetup --find --show $f) && echo $d works && losetup -d $d; rm -f $f"},
		{"loop module after losetup", "grep -w ^loop /proc/modules || echo none"},
		{"kernel.unprivileged_userns_clone", "sysctl -n kernel.unprivileged_userns_clone 2>&1"},
		{"user.max_user_namespaces", "sysctl -n user.max_user_namespaces"},
		{"glove.deb", "ls -l /lane/glove.deb"},
		{"cmdline", "cat /proc/cmdline"},
	} {
		fmt.Fprintf(&b, "%s: %s\n", q.name, strings.ReplaceAll(strings.TrimSpace(sh(q.cmd)), "\n", "\n  "))
	}
	fmt.Fprintf(&b, "/dev/loop-control: %s\n", loop)
	return b.String()
}

func sh(cmd string) string {
	out, err := exec.Command("/bin/sh", "-c", cmd).CombinedOutput()
	if err != nil {
		return string(out) + "(" + err.Error() + ")"
	}
	return string(out)
}

func systemctl(verb string) error {
	cmd := exec.Command("systemctl", verb)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

func writeFile(path, s string) {
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "placeholder:", err)
	}
}
