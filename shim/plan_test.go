// SPDX-License-Identifier: Apache-2.0

package shim

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/spec"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

const hostUID, hostGID = 4242, 4343

// goodSpec is a bundle glove-shim accepts: the shape `runc spec
// --rootless` writes, tightened as Glove runs it.
func goodSpec() *specs.Spec {
	return &specs.Spec{
		Version:  "1.0.2",
		Hostname: "sandbox",
		Root:     &specs.Root{Path: "rootfs", Readonly: true},
		Process: &specs.Process{
			User:            specs.User{UID: 1000, GID: 1000},
			Args:            []string{"sh"},
			Env:             []string{"PATH=/usr/bin:/bin", "TERM=xterm"},
			Cwd:             "/",
			NoNewPrivileges: true,
			Capabilities:    &specs.LinuxCapabilities{},
			Rlimits:         []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 1024}},
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
			{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
			{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}},
			{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
			{Destination: "/usr", Type: "bind", Source: "/usr", Options: []string{"rbind", "ro", "nosuid", "nodev"}},
			{Destination: "/work", Source: "/proc/self/fd/3", Options: []string{"bind", "nosuid", "nodev"}},
		},
		Linux: &specs.Linux{
			UIDMappings: []specs.LinuxIDMapping{{ContainerID: 1000, HostID: hostUID, Size: 1}},
			GIDMappings: []specs.LinuxIDMapping{{ContainerID: 1000, HostID: hostGID, Size: 1}},
			Namespaces: []specs.LinuxNamespace{{Type: "user"}, {Type: "mount"}, {Type: "pid"},
				{Type: "network"}, {Type: "ipc"}, {Type: "uts"}, {Type: "cgroup"}},
			MaskedPaths:   []string{"/proc/kcore"},
			ReadonlyPaths: []string{"/proc/sys"},
		},
	}
}

// listening is a profile whose connect is notified on the listener at
// path.
func listening(path string) *specs.LinuxSeccomp {
	return &specs.LinuxSeccomp{DefaultAction: specs.ActAllow, ListenerPath: path,
		Syscalls: []specs.LinuxSyscall{{Names: []string{"connect"}, Action: specs.ActNotify}}}
}

// TestValidateListener: the listener's descriptor is in the plan, and not
// among the descriptors the program receives.
func TestValidateListener(t *testing.T) {
	s := goodSpec()
	s.Linux.Seccomp = listening("/proc/self/fd/5")
	p, err := Validate(s, 3, hostUID, hostGID)
	if err != nil {
		t.Fatal(err)
	}
	if p.Process.SeccompListenerFD != 5 || !slices.Equal(p.Process.PassFDs, []int{4}) {
		t.Errorf("listener %d, passed %v; want 5 and [4]", p.Process.SeccompListenerFD, p.Process.PassFDs)
	}
	if f := seccompFlags(s.Linux.Seccomp); f&unix.SECCOMP_FILTER_FLAG_NEW_LISTENER == 0 || f&unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH == 0 {
		t.Errorf("flags %#x lack NEW_LISTENER|TSYNC_ESRCH", f)
	}
	if f := seccompFlags(&specs.LinuxSeccomp{}); f != unix.SECCOMP_FILTER_FLAG_TSYNC {
		t.Errorf("flags without a listener %#x, want TSYNC alone", f)
	}
}

func TestValidateAccepts(t *testing.T) {
	p, err := Validate(goodSpec(), 2, hostUID, hostGID)
	if err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if p.UID != 1000 || p.GID != 1000 || !p.RootReadonly || p.Hostname != "sandbox" {
		t.Errorf("plan identity/root/hostname wrong: %+v", p)
	}
	// Descriptor 3 is a mount source and is consumed; 4 reaches the program.
	if len(p.Process.PassFDs) != 1 || p.Process.PassFDs[0] != 4 {
		t.Errorf("PassFDs = %v, want [4]", p.Process.PassFDs)
	}
	var work, usr *MountPlan
	for i := range p.Mounts {
		switch p.Mounts[i].Destination {
		case "/work":
			work = &p.Mounts[i]
		case "/usr":
			usr = &p.Mounts[i]
		}
	}
	if work == nil || work.SourceFD != 3 || work.Kind != kindBind || !work.Writable {
		t.Errorf("/work plan wrong: %+v", work)
	}
	if usr == nil || usr.SourcePath != "/usr" || !usr.Recursive || usr.Writable || usr.SourceFD != -1 {
		t.Errorf("/usr plan wrong: %+v", usr)
	}
	// Landlock gets the writable mounts only.
	if strings.Join(p.Process.Writable, ",") != "/dev,/dev/pts,/work" {
		t.Errorf("Writable = %v", p.Process.Writable)
	}
	// No mappings: the default maps the process user to the caller.
	s := goodSpec()
	s.Linux.UIDMappings, s.Linux.GIDMappings = nil, nil
	if _, err := Validate(s, 1, hostUID, hostGID); err != nil {
		t.Errorf("no mappings: %v", err)
	}
}

// TestJoinUserns: with --userns-fd the plan carries the descriptor, and
// a devpts's gid= names the same host group as in the default mode: 0
// and process.user's gid exchanged (user namespace 1 maps that gid where
// the default mode's maps 0), every other id and every other option
// kept; a bundle whose gid is 0 keeps 0.
func TestJoinUserns(t *testing.T) {
	for _, c := range []struct {
		gid       uint32
		opt, want string
	}{
		{1000, "gid=0", "1000"},
		{1000, "gid=1000", "0"},
		{1000, "gid=00", "1000"},
		{1000, "gid=5", "5"},
		{0, "gid=0", "0"},
		{0, "gid=5", "5"},
	} {
		s := goodSpec()
		s.Process.User.GID = c.gid
		s.Linux.GIDMappings[0].ContainerID = c.gid
		for i := range s.Mounts {
			if s.Mounts[i].Type == "devpts" {
				s.Mounts[i].Options = append(s.Mounts[i].Options, c.opt)
			}
		}
		s.Mounts = append(s.Mounts, specs.Mount{Destination: "/tmp", Type: "tmpfs", Source: "tmpfs", Options: []string{"size=1m", "mode=1777"}})
		p, err := Validate(s, 2, hostUID, hostGID)
		if err != nil {
			t.Fatalf("gid %d, %s: Validate: %v", c.gid, c.opt, err)
		}
		before := slices.Clone(p.Mounts)
		for i := range before {
			before[i].Config = slices.Clone(before[i].Config)
		}
		p.joinUserns(7)
		if p.UsernsFD != 7 {
			t.Errorf("UsernsFD %d, want 7", p.UsernsFD)
		}
		gids := 0
		for i, m := range p.Mounts {
			for j, kv := range m.Config {
				want := before[i].Config[j]
				if m.Kind == kindDevpts && kv[0] == "gid" {
					want[1] = c.want
					gids++
				}
				if kv != want {
					t.Errorf("gid %d, %s: %s %s: %q, want %q", c.gid, c.opt, m.Kind, m.Destination, kv, want)
				}
			}
		}
		if gids != 1 {
			t.Errorf("gid %d, %s: %d devpts gid= in the plan, want 1", c.gid, c.opt, gids)
		}
	}
}

// TestValidateAcceptsSpecBuild checks that what package spec writes for
// gloved is a bundle glove-shim runs.
func TestValidateAcceptsSpecBuild(t *testing.T) {
	s, err := spec.Build(spec.Launch{
		Executable: "/usr/bin/env", Args: []string{"-i"}, Env: []string{"A=b"}, Cwd: "/workspace",
		UID: 1000, GID: 1000, HostUID: hostUID, HostGID: hostGID, Hostname: "glove",
		Mounts: []spec.Mount{
			{Target: "/proc", Kind: spec.KindProc, SourceFD: spec.NoFD},
			{Target: "/usr", Kind: spec.KindBind, SourceFD: 3, ReadOnly: true},
			{Target: "/dev", Kind: spec.KindDev, SourceFD: spec.NoFD, TmpfsBytes: 1 << 20, Mode: 0o755},
			{Target: "/dev/null", Kind: spec.KindBind, SourceFD: spec.NoFD, Source: "/dev/null"},
			{Target: "/dev/pts", Kind: spec.KindDevpts, SourceFD: spec.NoFD},
			{Target: "/workspace", Kind: spec.KindBind, SourceFD: 4},
			{Target: "/tmp", Kind: spec.KindTmpfs, SourceFD: spec.NoFD, TmpfsBytes: 1 << 20},
			{Target: "/sys", Kind: spec.KindSysfs, SourceFD: spec.NoFD},
			{Target: "/dev/mqueue", Kind: spec.KindMqueue, SourceFD: spec.NoFD},
		},
		NoNewPrivileges: true,
		PreserveFDs:     3,
	})
	if err != nil {
		t.Fatalf("spec.Build: %v", err)
	}
	b, err := spec.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := spec.DecodeStrict(b)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Validate(s2, 3, hostUID, hostGID)
	if err != nil {
		t.Fatalf("Validate(spec.Build(...)): %v", err)
	}
	if len(p.Process.PassFDs) != 1 || p.Process.PassFDs[0] != 5 {
		t.Errorf("PassFDs = %v, want [5]", p.Process.PassFDs)
	}
	if !p.RootTmpfs || !p.RootReadonly {
		t.Errorf("RootTmpfs %v RootReadonly %v: spec.Build's root must be a read-only tmpfs", p.RootTmpfs, p.RootReadonly)
	}
}

// TestValidateRefuses is the table of bundles glove-shim refuses, each
// with the member its error must name.
func TestCapSets(t *testing.T) {
	s := goodSpec()
	s.Process.Capabilities = &specs.LinuxCapabilities{
		Bounding:  []string{"CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"},
		Effective: []string{"CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"},
		Permitted: []string{"CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"},
		Ambient:   []string{"CAP_KILL", "CAP_CHECKPOINT_RESTORE"},
	}
	s.Process.Capabilities.Bounding = append(s.Process.Capabilities.Bounding, "CAP_CHECKPOINT_RESTORE")
	s.Process.Capabilities.Permitted = append(s.Process.Capabilities.Permitted, "CAP_CHECKPOINT_RESTORE")
	p, err := Validate(s, 2, hostUID, hostGID)
	if err != nil {
		t.Fatal(err)
	}
	const kill, bind, audit, cr = 1 << 5, 1 << 10, 1 << 29, 1 << 40
	want := CapSets{Bounding: kill | bind | audit | cr, Effective: kill | bind | audit, Permitted: kill | bind | audit | cr,
		Inheritable: kill | cr, Ambient: kill | cr}
	if p.Process.Caps != want {
		t.Errorf("caps %+v, want %+v", p.Process.Caps, want)
	}
	if len(capNames) != 41 || capNames[40] != "CAP_CHECKPOINT_RESTORE" {
		t.Errorf("capNames has %d names", len(capNames))
	}
}

func TestValidateRefuses(t *testing.T) {
	cases := []struct {
		name     string
		preserve int
		mutate   func(*specs.Spec)
		field    string
		notImpl  bool
	}{
		{"old version", 2, func(s *specs.Spec) { s.Version = "0.9.0" }, "ociVersion", true},
		{"domainname", 2, func(s *specs.Spec) { s.Domainname = "x" }, "domainname", true},
		{"hooks", 2, func(s *specs.Spec) { s.Hooks = &specs.Hooks{Poststart: []specs.Hook{{Path: "/bin/true"}}} }, "hooks", true},
		{"apparmor", 2, func(s *specs.Spec) { s.Process.ApparmorProfile = "x" }, "process.apparmorProfile", true},
		{"selinux", 2, func(s *specs.Spec) { s.Process.SelinuxLabel = "x" }, "process.selinuxLabel", true},
		{"oom score", 2, func(s *specs.Spec) { v := 5; s.Process.OOMScoreAdj = &v }, "process.oomScoreAdj", true},
		{"console size", 2, func(s *specs.Spec) { s.Process.ConsoleSize = &specs.Box{Height: 1} }, "process.consoleSize", true},
		{"additional gids", 2, func(s *specs.Spec) { s.Process.User.AdditionalGids = []uint32{5} }, "process.user.additionalGids", true},
		{"resources", 2, func(s *specs.Spec) { s.Linux.Resources = &specs.LinuxResources{Pids: &specs.LinuxPids{}} }, "linux.resources", true},
		{"empty resources", 2, func(s *specs.Spec) { s.Linux.Resources = &specs.LinuxResources{} }, "linux.resources", true},
		{"cgroups path", 2, func(s *specs.Spec) { s.Linux.CgroupsPath = "/x" }, "linux.cgroupsPath", true},
		{"sysctl", 2, func(s *specs.Spec) { s.Linux.Sysctl = map[string]string{"a": "b"} }, "linux.sysctl", true},
		{"devices", 2, func(s *specs.Spec) { s.Linux.Devices = []specs.LinuxDevice{{Path: "/dev/x"}} }, "linux.devices", true},
		{"personality", 2, func(s *specs.Spec) { s.Linux.Personality = &specs.LinuxPersonality{Domain: "LINUX32"} }, "linux.personality", true},
		{"mount label", 2, func(s *specs.Spec) { s.Linux.MountLabel = "x" }, "linux.mountLabel", true},
		{"mount idmap", 2, func(s *specs.Spec) {
			s.Mounts[5].UIDMappings = []specs.LinuxIDMapping{{Size: 1}}
		}, "mounts[5].uidMappings", true},
		{"namespace path", 2, func(s *specs.Spec) { s.Linux.Namespaces[3].Path = "/proc/1/ns/net" }, "linux.namespaces[3].path", true},
		{"no network namespace", 2, func(s *specs.Spec) { s.Linux.Namespaces = s.Linux.Namespaces[:3] }, "linux.namespaces", true},
		{"time namespace", 2, func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: "time"})
		}, "linux.namespaces[7].type", true},
		{"duplicate namespace", 2, func(s *specs.Spec) {
			s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: "user"})
		}, "linux.namespaces[7].type", false},
		{"shared propagation", 2, func(s *specs.Spec) { s.Linux.RootfsPropagation = "shared" }, "linux.rootfsPropagation", true},
		{"nnp false", 2, func(s *specs.Spec) { s.Process.NoNewPrivileges = false }, "process.noNewPrivileges", true},
		{"unknown capability", 2, func(s *specs.Spec) {
			s.Process.Capabilities.Bounding = []string{"CAP_KILL", "CAP_FLY"}
		}, "process.capabilities.bounding[1]", false},
		{"effective not permitted", 2, func(s *specs.Spec) {
			c := s.Process.Capabilities
			c.Bounding, c.Permitted, c.Effective = []string{"CAP_KILL", "CAP_CHOWN"}, []string{"CAP_KILL"}, []string{"CAP_CHOWN"}
		}, "process.capabilities.effective", false},
		{"ambient not permitted", 2, func(s *specs.Spec) {
			c := s.Process.Capabilities
			c.Bounding, c.Ambient = []string{"CAP_KILL"}, []string{"CAP_KILL"}
		}, "process.capabilities.ambient", false},
		{"permitted not bounded", 2, func(s *specs.Spec) {
			s.Process.Capabilities.Permitted = []string{"CAP_KILL"}
		}, "process.capabilities.permitted", false},
		{"no args", 2, func(s *specs.Spec) { s.Process.Args = nil }, "process.args", false},
		{"NUL arg", 2, func(s *specs.Spec) { s.Process.Args = []string{"sh", "a\x00b"} }, "process.args[1]", false},
		{"bad env", 2, func(s *specs.Spec) { s.Process.Env = []string{"NOEQUALS"} }, "process.env[0]", false},
		{"relative cwd", 2, func(s *specs.Spec) { s.Process.Cwd = "tmp" }, "process.cwd", false},
		{"unclean cwd", 2, func(s *specs.Spec) { s.Process.Cwd = "/a/../b" }, "process.cwd", false},
		{"umask", 2, func(s *specs.Spec) { v := uint32(0o7777); s.Process.User.Umask = &v }, "process.user.umask", false},
		{"unknown rlimit", 2, func(s *specs.Spec) { s.Process.Rlimits[0].Type = "RLIMIT_FOO" }, "process.rlimits[0].type", false},
		{"soft above hard", 2, func(s *specs.Spec) { s.Process.Rlimits[0].Soft = 2048 }, "process.rlimits[0]", false},
		{"duplicate rlimit", 2, func(s *specs.Spec) {
			s.Process.Rlimits = append(s.Process.Rlimits, s.Process.Rlimits[0])
		}, "process.rlimits[1].type", false},
		{"no hostname", 2, func(s *specs.Spec) { s.Hostname = "" }, "hostname", false},
		{"bad hostname", 2, func(s *specs.Spec) { s.Hostname = "a b" }, "hostname", false},
		{"two uid maps", 2, func(s *specs.Spec) {
			s.Linux.UIDMappings = append(s.Linux.UIDMappings, specs.LinuxIDMapping{ContainerID: 0, HostID: 0, Size: 1})
		}, "linux.uidMappings", true},
		{"map host root", 2, func(s *specs.Spec) { s.Linux.UIDMappings[0].HostID = 0 }, "linux.uidMappings", true},
		{"map range", 2, func(s *specs.Spec) { s.Linux.GIDMappings[0].Size = 65536 }, "linux.gidMappings", true},
		{"map other id", 2, func(s *specs.Spec) { s.Linux.UIDMappings[0].ContainerID = 0 }, "linux.uidMappings", false},
		{"no process", 2, func(s *specs.Spec) { s.Process = nil }, "process", false},
		{"no root", 2, func(s *specs.Spec) { s.Root = nil }, "root.path", false},
		{"no linux", 2, func(s *specs.Spec) { s.Linux = nil }, "linux", false},
		{"cgroup mount", 2, func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/sys/fs/cgroup", Type: "cgroup"})
		}, "mounts[7].type", true},
		{"overlay mount", 2, func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/o", Type: "overlay"})
		}, "mounts[7].type", true},
		{"unsized tmpfs", 2, func(s *specs.Spec) { s.Mounts[1].Options = []string{"nosuid"} }, "mounts[1].options", false},
		{"bad tmpfs size", 2, func(s *specs.Spec) { s.Mounts[1].Options = []string{"size=lots"} }, "mounts[1].options", false},
		{"bad tmpfs mode", 2, func(s *specs.Spec) { s.Mounts[1].Options = []string{"size=1m", "mode=999"} }, "mounts[1].options", false},
		{"unknown option", 2, func(s *specs.Spec) { s.Mounts[5].Options = append(s.Mounts[5].Options, "shared") }, "mounts[5].options", true},
		{"suid option", 2, func(s *specs.Spec) { s.Mounts[5].Options = append(s.Mounts[5].Options, "suid") }, "mounts[5].options", true},
		{"bind option on proc", 2, func(s *specs.Spec) { s.Mounts[0].Options = []string{"rbind"} }, "mounts[0].type", false},
		{"relative destination", 2, func(s *specs.Spec) { s.Mounts[5].Destination = "usr" }, "mounts[5].destination", false},
		{"dotdot destination", 2, func(s *specs.Spec) { s.Mounts[5].Destination = "/usr/../etc" }, "mounts[5].destination", false},
		{"root destination", 2, func(s *specs.Spec) { s.Mounts[5].Destination = "/" }, "mounts[5].destination", false},
		{"duplicate destination", 2, func(s *specs.Spec) { s.Mounts[6].Destination = "/usr" }, "mounts[6].destination", false},
		{"parent after child", 2, func(s *specs.Spec) { s.Mounts[5].Destination = "/" + "dev/x"; s.Mounts[6].Destination = "/dev" }, "mounts[6].destination", false},
		{"relative source", 2, func(s *specs.Spec) { s.Mounts[5].Source = "usr" }, "mounts[5].source", false},
		{"fd outside range", 2, func(s *specs.Spec) { s.Mounts[6].Source = "/proc/self/fd/5" }, "mounts[6].source", false},
		{"stdio as source", 2, func(s *specs.Spec) { s.Mounts[6].Source = "/proc/self/fd/0" }, "mounts[6].source", false},
		{"fd with zeros", 2, func(s *specs.Spec) { s.Mounts[6].Source = "/proc/self/fd/03" }, "mounts[6].source", false},
		{"fd twice", 2, func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/w2", Source: "/proc/self/fd/3", Options: []string{"bind"}})
		}, "mounts[7].source", false},
		{"fd whole and beneath", 2, func(s *specs.Spec) {
			s.Mounts = append(s.Mounts, specs.Mount{Destination: "/w2", Source: "/proc/self/fd/3/a", Options: []string{"bind"}})
		}, "mounts[7].source", false},
		{"fd beneath with ..", 2, func(s *specs.Spec) { s.Mounts[6].Source = "/proc/self/fd/3/../x" }, "mounts[6].source", false},
		{"fd beneath with .", 2, func(s *specs.Spec) { s.Mounts[6].Source = "/proc/self/fd/3/a/./b" }, "mounts[6].source", false},
		{"fd beneath empty", 2, func(s *specs.Spec) { s.Mounts[6].Source = "/proc/self/fd/3/" }, "mounts[6].source", false},
		{"fd beneath doubled slash", 2, func(s *specs.Spec) { s.Mounts[6].Source = "/proc/self/fd/3//a" }, "mounts[6].source", false},
		{"fd beneath trailing slash", 2, func(s *specs.Spec) { s.Mounts[6].Source = "/proc/self/fd/3/a/" }, "mounts[6].source", false},
		{"fs label with slash", 2, func(s *specs.Spec) { s.Mounts[0].Source = "/proc" }, "mounts[0].source", false},
		{"no proc", 2, func(s *specs.Spec) { s.Mounts = s.Mounts[1:] }, "mounts", true},
		{"masked relative", 2, func(s *specs.Spec) { s.Linux.MaskedPaths = []string{"proc/kcore"} }, "linux.maskedPaths[0]", false},
		{"masked root", 2, func(s *specs.Spec) { s.Linux.MaskedPaths = []string{"/"} }, "linux.maskedPaths[0]", false},
		{"readonly duplicate", 2, func(s *specs.Spec) { s.Linux.ReadonlyPaths = []string{"/a", "/a"} }, "linux.readonlyPaths[1]", false},
		{"root annotation value", 2, func(s *specs.Spec) {
			s.Annotations = map[string]string{spec.RootAnnotation: "overlay"}
		}, "annotations." + spec.RootAnnotation, true},
		{"tmpfs root writable", 2, func(s *specs.Spec) {
			s.Root.Readonly = false
			s.Annotations = map[string]string{spec.RootAnnotation: spec.RootTmpfs}
		}, "annotations." + spec.RootAnnotation, false},
		{"listener outside range", 2, func(s *specs.Spec) { s.Linux.Seccomp = listening("/proc/self/fd/5") }, "linux.seccomp.listenerPath", false},
		{"listener stdio", 2, func(s *specs.Spec) { s.Linux.Seccomp = listening("/proc/self/fd/1") }, "linux.seccomp.listenerPath", false},
		{"listener with zeros", 2, func(s *specs.Spec) { s.Linux.Seccomp = listening("/proc/self/fd/04") }, "linux.seccomp.listenerPath", false},
		{"listener host path", 2, func(s *specs.Spec) { s.Linux.Seccomp = listening("/run/gloved.sock") }, "linux.seccomp.listenerPath", false},
		{"listener is a mount source", 2, func(s *specs.Spec) { s.Linux.Seccomp = listening("/proc/self/fd/3") }, "linux.seccomp.listenerPath", false},
		{"egress listen alone", 2, func(s *specs.Spec) { egressAnn(s, "127.0.0.1:8787", "") }, "annotations." + spec.EgressListenAnnotation, false},
		{"egress hand-off alone", 2, func(s *specs.Spec) { egressAnn(s, "", "/proc/self/fd/4") }, "annotations." + spec.EgressHandoffAnnotation, false},
		{"egress wildcard", 2, func(s *specs.Spec) { egressAnn(s, "0.0.0.0:8787", "/proc/self/fd/4") }, "annotations." + spec.EgressListenAnnotation, false},
		{"egress port 0", 2, func(s *specs.Spec) { egressAnn(s, "127.0.0.1:0", "/proc/self/fd/4") }, "annotations." + spec.EgressListenAnnotation, false},
		{"egress hand-off path", 2, func(s *specs.Spec) { egressAnn(s, "127.0.0.1:8787", "/run/gloved.sock") }, "annotations." + spec.EgressHandoffAnnotation, false},
		{"egress hand-off stdio", 2, func(s *specs.Spec) { egressAnn(s, "127.0.0.1:8787", "/proc/self/fd/2") }, "annotations." + spec.EgressHandoffAnnotation, false},
		{"egress hand-off outside range", 2, func(s *specs.Spec) { egressAnn(s, "127.0.0.1:8787", "/proc/self/fd/5") }, "annotations." + spec.EgressHandoffAnnotation, false},
		{"egress hand-off is a mount source", 2, func(s *specs.Spec) { egressAnn(s, "127.0.0.1:8787", "/proc/self/fd/3") }, "annotations." + spec.EgressHandoffAnnotation, false},
		{"egress hand-off is the listener's", 2, func(s *specs.Spec) {
			s.Linux.Seccomp = listening("/proc/self/fd/4")
			egressAnn(s, "127.0.0.1:8787", "/proc/self/fd/4")
		}, "annotations." + spec.EgressHandoffAnnotation, false},
		{"preserve negative", -1, func(s *specs.Spec) {}, "--preserve-fds", false},
		{"preserve huge", 5000, func(s *specs.Spec) {}, "--preserve-fds", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := goodSpec()
			c.mutate(s)
			_, err := Validate(s, c.preserve, hostUID, hostGID)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.field) {
				t.Errorf("error %q does not name %s", err, c.field)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			if got := errors.Is(err, errNotImplemented); got != c.notImpl {
				t.Errorf("errors.Is(err, errNotImplemented) = %v, want %v (%v)", got, c.notImpl, err)
			}
			if !c.notImpl && !errors.Is(err, errInvalid) {
				t.Errorf("error does not wrap errInvalid: %v", err)
			}
		})
	}
}

// egressAnn sets the egress annotations that are not empty.
func egressAnn(s *specs.Spec, listen, handoff string) {
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	if listen != "" {
		s.Annotations[spec.EgressListenAnnotation] = listen
	}
	if handoff != "" {
		s.Annotations[spec.EgressHandoffAnnotation] = handoff
	}
}

// TestValidateEgress: the egress annotations become the plan's hand-off
// descriptor and ports, and the hand-off never reaches the program.
func TestValidateEgress(t *testing.T) {
	s := goodSpec()
	egressAnn(s, "127.0.0.1:8787,127.0.0.1:3128", "/proc/self/fd/4")
	p, err := Validate(s, 2, hostUID, hostGID)
	if err != nil {
		t.Fatal(err)
	}
	if p.EgressHandoffFD != 4 || !slices.Equal(p.EgressPorts, []uint16{8787, 3128}) {
		t.Errorf("egress hand-off %d, ports %v", p.EgressHandoffFD, p.EgressPorts)
	}
	if slices.Contains(p.Process.PassFDs, 4) {
		t.Errorf("the hand-off descriptor is passed to the program: %v", p.Process.PassFDs)
	}
}

func TestParseRun(t *testing.T) {
	good := []struct {
		args     []string
		bundle   string
		preserve int
		sync     int
		cache    int
		userns   int
		id       string
	}{
		{[]string{"--bundle", "/b", "x"}, "/b", 0, -1, -1, -1, "x"},
		{[]string{"-b", "/b", "--preserve-fds", "2", "x"}, "/b", 2, -1, -1, -1, "x"},
		{[]string{"--bundle=/b", "--preserve-fds=3", "id-1.a_b"}, "/b", 3, -1, -1, -1, "id-1.a_b"},
		{[]string{"--preserve-fds", "2", "--sync-fd", "5", "x"}, ".", 2, 5, -1, -1, "x"},
		{[]string{"--preserve-fds", "2", "--sync-fd", "5", "--seccomp-cache-fd", "6", "x"}, ".", 2, 5, 6, -1, "x"},
		{[]string{"--seccomp-cache-fd=3", "x"}, ".", 0, -1, 3, -1, "x"},
		{[]string{"--userns-fd", "3", "x"}, ".", 0, -1, -1, 3, "x"},
		{[]string{"--userns-fd=9", "x"}, ".", 0, -1, -1, 9, "x"},
		{[]string{"--preserve-fds", "2", "--sync-fd", "5", "--seccomp-cache-fd", "6", "--userns-fd", "7", "x"}, ".", 2, 5, 6, 7, "x"},
		{[]string{"x"}, ".", 0, -1, -1, -1, "x"},
	}
	for _, g := range good {
		r, err := parseRun(g.args)
		if err != nil || r.bundle != g.bundle || r.preserve != g.preserve || r.syncFD != g.sync || r.cacheFD != g.cache || r.usernsFD != g.userns || r.id != g.id {
			t.Errorf("parseRun(%q) = %+v %v", g.args, r, err)
		}
	}
	bad := [][]string{
		nil, {"--bundle"}, {"--bundle", "/b"}, {"--preserve-fds", "x", "id"}, {"--preserve-fds", "-1", "id"},
		{"--preserve-fds", "01", "id"}, {"--preserve-fds", "1025", "id"}, {"--detach", "id"}, {"a", "b"},
		{"--bundle", "/a", "--bundle", "/b", "id"}, {"bad/id"}, {strings.Repeat("a", 65)},
		{"--console-socket", "/s", "id"}, {"--pid-file=/p", "id"},
		{"--sync-fd", "2", "id"}, {"--preserve-fds", "2", "--sync-fd", "4", "id"}, {"--sync-fd", "x", "id"},
		{"--sync-fd", "5", "--sync-fd", "6", "id"},
		{"--seccomp-cache-fd", "2", "id"}, {"--preserve-fds", "2", "--seccomp-cache-fd", "4", "id"},
		{"--seccomp-cache-fd", "x", "id"}, {"--seccomp-cache-fd", "5", "--seccomp-cache-fd", "6", "id"},
		{"--sync-fd", "5", "--seccomp-cache-fd", "5", "id"}, {"--seccomp-cache-fd", "id"},
		{"--userns-fd", "0", "id"}, {"--userns-fd", "2", "id"}, {"--preserve-fds", "2", "--userns-fd", "4", "id"},
		{"--userns-fd=4", "--preserve-fds=2", "id"}, {"--userns-fd", "x", "id"}, {"--userns-fd", "-3", "id"},
		{"--userns-fd", "03", "id"}, {"--userns-fd", "1028", "id"}, {"--userns-fd=", "id"}, {"--userns-fd", "id"},
		{"--userns-fd", "5", "--userns-fd", "6", "id"}, {"--userns-fd=5", "--userns-fd=5", "id"},
		{"--sync-fd", "5", "--userns-fd", "5", "id"}, {"--seccomp-cache-fd", "6", "--userns-fd=6", "id"},
	}
	for _, a := range bad {
		if _, err := parseRun(a); err == nil {
			t.Errorf("parseRun(%q) accepted", a)
		}
	}
}

func TestMainUsage(t *testing.T) {
	for _, args := range [][]string{{"glove-shim"}, {"glove-shim", "create", "x"}, {"glove-shim", "--version", "x"}, {"glove-shim", "run"},
		{"glove-shim", "run", "--userns-fd", "2", "x"}, {"glove-shim", "run", "--userns-fd", "5", "--sync-fd", "5", "x"},
		{"glove-shim", "--cgroup-join", "5:7", "run", "--sync-fd", "5", "--userns-fd", "7", "x"},
		{"glove-shim", "probe", "x"}, {"glove-shim", "probe", ""}, {"glove-shim", "--cgroup-join", "5:7", "probe"}} {
		if got := Main(args); got != ExitUsage {
			t.Errorf("Main(%q) = %d, want %d", args, got, ExitUsage)
		}
	}
}

// TestMainStagesAreC: a stage 1 command line that reaches Go is refused
// with one line, as a failed start: stage 1 is C code the constructor in
// shim/cstage runs for a command line of exactly one argument, before the
// Go runtime (Main is called here without it), and stage 2 is C code
// stage 1 runs in its child; there is no Go stage left to fall back on.
// `glove-shim probe` is likewise the constructor's alone.
func TestMainStagesAreC(t *testing.T) {
	for _, args := range [][]string{{"glove-shim", argStage0}, {"glove-shim", argStage0, "3", "4"}} {
		if got := Main(args); got != ExitFailed {
			t.Errorf("Main(%q) = %d, want %d", args, got, ExitFailed)
		}
	}
	// The probe is C too (shim/cstage/probe.c): reaching Go, it fails as
	// a probe does, 1.
	if got := Main([]string{"glove-shim", argProbe}); got != 1 {
		t.Errorf("Main(probe) = %d, want 1", got)
	}
}

// FuzzValidate feeds arbitrary config.json bytes through the strict
// decoder and Validate: neither may panic, and an accepted plan must
// survive the JSON trip unchanged, and the trip between the stages (the
// plan's binary form, plancodec.go) too.
func FuzzValidate(f *testing.F) {
	b, err := json.Marshal(goodSpec())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b, 2)
	shared := goodSpec()
	shared.Mounts[6].Source = "/proc/self/fd/3/a"
	shared.Mounts = append(shared.Mounts, specs.Mount{Destination: "/w2", Source: "/proc/self/fd/3/b/c", Options: []string{"bind"}})
	if b, err = json.Marshal(shared); err != nil {
		f.Fatal(err)
	}
	f.Add(b, 2)
	f.Add([]byte(`{"ociVersion":"1.0.0"}`), 0)
	f.Add([]byte(`{"ociVersion":"1.0.0","process":{"user":{"uid":0,"gid":0},"cwd":"/","args":["a"],"noNewPrivileges":true},"root":{"path":"r"},"linux":{}}`), 0)
	f.Fuzz(func(t *testing.T, data []byte, preserve int) {
		s, err := spec.DecodeStrict(data)
		if err != nil {
			return
		}
		p, err := Validate(s, preserve, hostUID, hostGID)
		if err != nil {
			return
		}
		enc, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("marshal plan: %v", err)
		}
		var back Plan
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("unmarshal plan: %v", err)
		}
		enc2, _ := json.Marshal(&back)
		if string(enc) != string(enc2) {
			t.Fatalf("plan changed across the stages:\n%s\n%s", enc, enc2)
		}
		bin := encodePlan(p)
		got, err := decodePlan(bin)
		if err != nil {
			t.Fatalf("decode plan: %v", err)
		}
		if bin2 := encodePlan(got); string(bin) != string(bin2) {
			t.Fatalf("plan changed across the stages (binary form):\n%q\n%q", bin, bin2)
		}
	})
}

// TestValidateSharedDescriptor: one descriptor may be the source of
// several mounts when each names a directory beneath it.
func TestValidateSharedDescriptor(t *testing.T) {
	s := goodSpec()
	s.Mounts[6].Source = "/proc/self/fd/3/a"
	s.Mounts = append(s.Mounts, specs.Mount{Destination: "/w2", Source: "/proc/self/fd/3/b/c", Options: []string{"bind"}})
	p, err := Validate(s, 2, hostUID, hostGID)
	if err != nil {
		t.Fatal(err)
	}
	got := []MountPlan{p.Mounts[6], p.Mounts[7]}
	if got[0].SourceFD != 3 || got[0].SourceSub != "a" || got[1].SourceFD != 3 || got[1].SourceSub != "b/c" {
		t.Errorf("mounts %+v", got)
	}
	if len(p.Process.PassFDs) != 1 || p.Process.PassFDs[0] != 4 {
		t.Errorf("PassFDs %v, want [4]: 3 is a mount source", p.Process.PassFDs)
	}
}
