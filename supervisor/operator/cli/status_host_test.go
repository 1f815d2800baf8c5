// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// delegationProbe is a fake host: a cgroup2 hierarchy under a temporary
// directory with the unit's cgroup, glove-cgroup's bounds, and this
// process in the unit's supervisor leaf.
func delegationProbe(t *testing.T, controllers, subtree, procs string) (statusProbe, string) {
	t.Helper()
	p := fakeProbe(t, otherLine+"40 30 0:37 / DIR/cg rw,relatime - cgroup2 cgroup2 rw\n")
	dir := filepath.Dir(p.mountinfo)
	unit := filepath.Join(dir, "cg/system.slice/gloved.service")
	if err := os.MkdirAll(unit, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"cgroup.controllers": controllers, "cgroup.subtree_control": subtree, "cgroup.procs": procs} {
		if err := os.WriteFile(filepath.Join(unit, name), []byte(text+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p.cgroupConf = filepath.Join(dir, "cgroup.json")
	conf := `{"schema_version":1,"parent":"/system.slice/gloved.service","extra_parents":["/system.slice/glove-run.service"],"max_memory_bytes":1073741824,"max_pids":64}`
	if err := os.WriteFile(p.cgroupConf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	p.selfCgroup = filepath.Join(dir, "self-cgroup")
	if err := os.WriteFile(p.selfCgroup, []byte("0::/system.slice/gloved.service/supervisor\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, unit
}

func TestStatusDelegation(t *testing.T) {
	for _, c := range []struct {
		name                        string
		controllers, subtree, procs string
		edit                        func(t *testing.T, p *statusProbe, unit string)
		ok                          bool
		detail, fix                 string
	}{
		{name: "enabled", controllers: "cpu memory pids", subtree: "memory pids", ok: true, detail: "memory and pids enabled"},
		{name: "available, the unit's cgroup empty (systemd 252 before gloved moves)", controllers: "cpuset cpu io memory pids", ok: true, detail: "enabled by glove-cgroup at start"},
		{name: "available, other processes in the unit's cgroup", controllers: "memory pids", procs: "4242", detail: "processes 4242 live in it", fix: "move them into /system.slice/gloved.service/supervisor"},
		{name: "not available", controllers: "cpu", detail: "not available", fix: "echo +memory +pids"},
		{name: "no bounds file", controllers: "memory pids", subtree: "memory pids",
			edit: func(t *testing.T, p *statusProbe, _ string) { p.cgroupConf += ".absent" }, detail: "no such file", fix: "scripts/setup-host.sh"},
		{name: "bounds file refused by the helper's rules", controllers: "memory pids", subtree: "memory pids",
			edit: func(t *testing.T, p *statusProbe, _ string) {
				if err := os.WriteFile(p.cgroupConf, []byte(`{"schema_version":1,"parent":"/","max_memory_bytes":1,"max_pids":1}`), 0o644); err != nil {
					t.Fatal(err)
				}
			}, detail: "never delegated", fix: "scripts/setup-host.sh"},
		{name: "unit cgroup missing (unit not running)", controllers: "memory pids",
			edit: func(t *testing.T, p *statusProbe, unit string) {
				if err := os.RemoveAll(unit); err != nil {
					t.Fatal(err)
				}
			}, detail: "no such file", fix: "systemctl start gloved"},
		{name: "not delegated to this user", controllers: "memory pids", subtree: "memory pids",
			edit: func(t *testing.T, p *statusProbe, _ string) { p.uid = func() int { return 54321 } }, detail: "not delegated to uid 54321", fix: "systemctl start gloved"},
		{name: "run from a login, beneath none of two parents: reported on the first", controllers: "memory pids", subtree: "memory pids",
			edit: func(t *testing.T, p *statusProbe, _ string) {
				if err := os.WriteFile(p.selfCgroup, []byte("0::/user.slice/session-1.scope\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}, ok: true, detail: "is beneath none of /system.slice/gloved.service, /system.slice/glove-run.service"},
		{name: "no systemd: the operator's set-up", controllers: "cpu",
			edit: func(t *testing.T, p *statusProbe, unit string) {
				p.pid1 = func() string { return "init" }
				if err := os.RemoveAll(unit); err != nil {
					t.Fatal(err)
				}
			}, detail: "no such file", fix: "scripts/setup-host.sh USER"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, unit := delegationProbe(t, c.controllers, c.subtree, c.procs)
			if c.edit != nil {
				c.edit(t, &p, unit)
			}
			it := p.probeDelegation()
			if it.OK != c.ok || !it.Required || !strings.Contains(it.Detail, c.detail) || !strings.Contains(it.Fix, c.fix) || (c.fix == "") != (it.Fix == "") {
				t.Errorf("probeDelegation = %+v; want ok %v, detail containing %q, fix containing %q", it, c.ok, c.detail, c.fix)
			}
		})
	}
}

func TestStatusKernelAndMountAPI(t *testing.T) {
	p := fakeProbe(t, otherLine)
	for _, c := range []struct {
		release string
		ok      bool
	}{{"6.1.0-30-cloud-amd64", true}, {"5.14.0", true}, {"5.13.19", false}, {"4.19.0-27-amd64", false}, {"garbage", false}} {
		p.release = func() string { return c.release }
		if it := p.probeKernel(); it.OK != c.ok || (!c.ok && it.Fix == "") {
			t.Errorf("kernel %s: %+v, want ok %v (with a fix when not)", c.release, it, c.ok)
		}
	}
	if it := p.probeMountAPI(); !it.OK || !strings.Contains(it.Detail, "open_tree + mount_setattr") {
		t.Errorf("mount-api without open_tree_attr: %+v, want ok naming the fallback", it)
	}
	p.openTreeAttr = func() bool { return true }
	if it := p.probeMountAPI(); !it.OK || !strings.Contains(it.Detail, "with open_tree_attr") {
		t.Errorf("mount-api with open_tree_attr: %+v", it)
	}
	// A call number no kernel has stands for a call this one lacks.
	p.mountCalls = append(p.mountCalls, mountCall{name: "future_call", nr: 100000})
	if it := p.probeMountAPI(); it.OK || !strings.Contains(it.Detail, "future_call") || it.Fix == "" {
		t.Errorf("mount-api with a missing call: %+v", it)
	}
}

func TestStatusServiceManager(t *testing.T) {
	p := fakeProbe(t, otherLine)
	for _, c := range []struct {
		pid1    string
		version int
		ok      bool
		detail  string
	}{
		{"systemd", 252, true, "no DelegateSubgroup="},
		{"systemd", 257, true, "DelegateSubgroup= starts gloved"},
		{"init", 0, false, "not systemd"},
	} {
		p.pid1 = func() string { return c.pid1 }
		p.systemdVersion = func() int { return c.version }
		it := p.probeServiceManager()
		if it.OK != c.ok || it.Required || !strings.Contains(it.Detail, c.detail) {
			t.Errorf("%s %d: %+v, want ok %v detail %q", c.pid1, c.version, it, c.ok, c.detail)
		}
	}
}
