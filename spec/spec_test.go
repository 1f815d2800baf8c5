// SPDX-License-Identifier: Apache-2.0

package spec

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func minimal() Launch {
	return Launch{
		Executable:      "/usr/bin/true",
		Cwd:             "/",
		UID:             1000,
		GID:             1000,
		HostUID:         2001,
		HostGID:         2001,
		Hostname:        "sandbox",
		NoNewPrivileges: true,
	}
}

func everyKind() Launch {
	l := minimal()
	l.Args = []string{"-c", "echo hi"}
	l.Env = []string{"PATH=/usr/bin:/bin", "HOME=/work", "EMPTY="}
	l.Cwd = "/work"
	l.PreserveFDs = 3
	l.Mounts = []Mount{
		{Target: "/usr", Kind: KindBind, SourceFD: 3, ReadOnly: true},
		{Target: "/work", Kind: KindBind, SourceFD: 4, NoExec: true},
		{Target: "/proc", Kind: KindProc, SourceFD: NoFD},
		{Target: "/sys", Kind: KindSysfs, SourceFD: NoFD},
		{Target: "/dev", Kind: KindDev, SourceFD: NoFD, TmpfsBytes: 64 << 10, Mode: 0o755},
		{Target: "/dev/null", Kind: KindBind, SourceFD: NoFD, Source: "/dev/null"},
		{Target: "/dev/pts", Kind: KindDevpts, SourceFD: NoFD},
		{Target: "/dev/mqueue", Kind: KindMqueue, SourceFD: NoFD},
		{Target: "/tmp", Kind: KindTmpfs, SourceFD: NoFD, TmpfsBytes: 1 << 20, Mode: 0o1777, NoExec: true},
		{Target: "/tmp/cache", Kind: KindBind, SourceFD: 5},
	}
	l.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Hard: 1024, Soft: 512}}
	l.ReadOnlyPaths = []string{"/proc/sys"}
	l.MaskedPaths = []string{}
	l.Seccomp = &specs.LinuxSeccomp{
		DefaultAction: specs.ActErrno,
		Architectures: []specs.Arch{specs.ArchX86_64},
		Syscalls:      []specs.LinuxSyscall{{Names: []string{"read", "write"}, Action: specs.ActAllow}},
	}
	return l
}

func TestBuildRefuses(t *testing.T) {
	long := strings.Repeat("a", 65)
	cases := []struct {
		name, field string
		mod         func(*Launch)
	}{
		{"empty executable", "executable", func(l *Launch) { l.Executable = "" }},
		{"relative executable", "executable", func(l *Launch) { l.Executable = "bin/sh" }},
		{"dotdot executable", "executable", func(l *Launch) { l.Executable = "/usr/../bin/sh" }},
		{"unclean executable", "executable", func(l *Launch) { l.Executable = "/usr//bin/sh" }},
		{"no new privileges false", "noNewPrivileges", func(l *Launch) { l.NoNewPrivileges = false }},
		{"NUL in arg", "args[0]", func(l *Launch) { l.Args = []string{"a\x00b"} }},
		{"env without =", "env[0]", func(l *Launch) { l.Env = []string{"PATH"} }},
		{"env empty name", "env[0]", func(l *Launch) { l.Env = []string{"=x"} }},
		{"env odd name", "env[0]", func(l *Launch) { l.Env = []string{"A-B=x"} }},
		{"env duplicate", "env[1]", func(l *Launch) { l.Env = []string{"A=1", "A=2"} }},
		{"env NUL value", "env[0]", func(l *Launch) { l.Env = []string{"A=\x00"} }},
		{"cwd relative", "cwd", func(l *Launch) { l.Cwd = "work" }},
		{"cwd empty", "cwd", func(l *Launch) { l.Cwd = "" }},
		{"hostname too long", "hostname", func(l *Launch) { l.Hostname = long }},
		{"hostname empty", "hostname", func(l *Launch) { l.Hostname = "" }},
		{"hostname bad char", "hostname", func(l *Launch) { l.Hostname = "a_b" }},
		{"preserve fds negative", "preserveFDs", func(l *Launch) { l.PreserveFDs = -1 }},
		{"relative target", "mounts[0].target", func(l *Launch) { l.Mounts = []Mount{{Target: "tmp", Kind: KindProc, SourceFD: NoFD}} }},
		{"dotdot target", "mounts[0].target", func(l *Launch) {
			l.Mounts = []Mount{{Target: "/tmp/../etc", Kind: KindProc, SourceFD: NoFD}}
		}},
		{"root target", "mounts[0].target", func(l *Launch) { l.Mounts = []Mount{{Target: "/", Kind: KindProc, SourceFD: NoFD}} }},
		{"duplicate target", "mounts[1].target", func(l *Launch) {
			l.Mounts = []Mount{{Target: "/proc", Kind: KindProc, SourceFD: NoFD}, {Target: "/proc", Kind: KindProc, SourceFD: NoFD}}
		}},
		{"parent after child", "mounts[1].target", func(l *Launch) {
			l.Mounts = []Mount{{Target: "/dev/mqueue", Kind: KindMqueue, SourceFD: NoFD}, {Target: "/dev", Kind: KindDev, SourceFD: NoFD, TmpfsBytes: 4096}}
		}},
		{"source fd below range", "mounts[0].sourceFD", func(l *Launch) {
			l.PreserveFDs = 2
			l.Mounts = []Mount{{Target: "/w", Kind: KindBind, SourceFD: 0}}
		}},
		{"source fd above range", "mounts[0].sourceFD", func(l *Launch) {
			l.PreserveFDs = 2
			l.Mounts = []Mount{{Target: "/w", Kind: KindBind, SourceFD: 5}}
		}},
		{"source fd with no preserved fds", "mounts[0].sourceFD", func(l *Launch) { l.Mounts = []Mount{{Target: "/w", Kind: KindBind, SourceFD: 3}} }},
		{"bind without source", "mounts[0].sourceFD", func(l *Launch) { l.Mounts = []Mount{{Target: "/w", Kind: KindBind, SourceFD: NoFD}} }},
		{"sub without a descriptor", "mounts[0].sourceSub", func(l *Launch) {
			l.Mounts = []Mount{{Target: "/w", Kind: KindBind, SourceFD: NoFD, Source: "/dev/null", SourceSub: "a"}}
		}},
		{"sub climbing", "mounts[0].sourceSub", func(l *Launch) {
			l.PreserveFDs = 1
			l.Mounts = []Mount{{Target: "/w", Kind: KindBind, SourceFD: 3, SourceSub: "a/../../b"}}
		}},
		{"sub absolute", "mounts[0].sourceSub", func(l *Launch) {
			l.PreserveFDs = 1
			l.Mounts = []Mount{{Target: "/w", Kind: KindBind, SourceFD: 3, SourceSub: "/a"}}
		}},
		{"sub dot", "mounts[0].sourceSub", func(l *Launch) {
			l.PreserveFDs = 1
			l.Mounts = []Mount{{Target: "/w", Kind: KindBind, SourceFD: 3, SourceSub: "."}}
		}},
		{"bind with fd and source", "mounts[0].source", func(l *Launch) {
			l.PreserveFDs = 1
			l.Mounts = []Mount{{Target: "/dev/null", Kind: KindBind, SourceFD: 3, Source: "/dev/null"}}
		}},
		{"bind of a non-device path", "mounts[0].source", func(l *Launch) {
			l.Mounts = []Mount{{Target: "/etc/shadow", Kind: KindBind, SourceFD: NoFD, Source: "/etc/shadow"}}
		}},
		{"tmpfs without size", "mounts[0].tmpfsBytes", func(l *Launch) { l.Mounts = []Mount{{Target: "/tmp", Kind: KindTmpfs, SourceFD: NoFD}} }},
		{"tmpfs mode too wide", "mounts[0].mode", func(l *Launch) {
			l.Mounts = []Mount{{Target: "/tmp", Kind: KindTmpfs, SourceFD: NoFD, TmpfsBytes: 1, Mode: 0o17777}}
		}},
		{"size on proc", "mounts[0].tmpfsBytes", func(l *Launch) {
			l.Mounts = []Mount{{Target: "/proc", Kind: KindProc, SourceFD: NoFD, TmpfsBytes: 1}}
		}},
		{"fd on proc", "mounts[0].sourceFD", func(l *Launch) {
			l.PreserveFDs = 1
			l.Mounts = []Mount{{Target: "/proc", Kind: KindProc, SourceFD: 3}}
		}},
		{"unknown mount kind", "mounts[0].kind", func(l *Launch) { l.Mounts = []Mount{{Target: "/x", Kind: "overlay", SourceFD: NoFD}} }},
		{"relative masked path", "maskedPaths[0]", func(l *Launch) { l.MaskedPaths = []string{"proc/kcore"} }},
		{"duplicate readonly path", "readOnlyPaths[1]", func(l *Launch) { l.ReadOnlyPaths = []string{"/proc/sys", "/proc/sys"} }},
		{"unknown rlimit", "rlimits[0].type", func(l *Launch) { l.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_FOO"}} }},
		{"duplicate rlimit", "rlimits[1].type", func(l *Launch) {
			l.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_CORE"}, {Type: "RLIMIT_CORE"}}
		}},
		{"soft above hard", "rlimits[0].soft", func(l *Launch) { l.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_CORE", Soft: 2, Hard: 1}} }},
		{"seccomp without default action", "seccomp.defaultAction", func(l *Launch) { l.Seccomp = &specs.LinuxSeccomp{} }},
		{"listener without seccomp", "seccompListenerFD", func(l *Launch) { l.PreserveFDs = 1; l.SeccompListenerFD = 3 }},
		{"listener below the preserved range", "seccompListenerFD", func(l *Launch) {
			l.PreserveFDs = 1
			l.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActErrno}
			l.SeccompListenerFD = 2
		}},
		{"listener negative", "seccompListenerFD", func(l *Launch) {
			l.PreserveFDs = 1
			l.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActErrno}
			l.SeccompListenerFD = -1
		}},
		{"listener beyond the preserved range", "seccompListenerFD", func(l *Launch) {
			l.PreserveFDs = 1
			l.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActErrno}
			l.SeccompListenerFD = 4
		}},
		{"listener is a mount source", "seccompListenerFD", func(l *Launch) {
			l.PreserveFDs = 1
			l.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActErrno}
			l.Mounts = append(l.Mounts, Mount{Target: "/data", Kind: KindBind, SourceFD: 3})
			l.SeccompListenerFD = 3
		}},
		{"listenerPath written by the caller", "seccomp.listenerPath", func(l *Launch) {
			l.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, ListenerPath: "/run/x"}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := minimal()
			c.mod(&l)
			s, err := Build(l)
			if err == nil {
				t.Fatalf("Build accepted it: %+v", s)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), "spec: build: "+c.field+":") {
				t.Errorf("error %q does not name field %q", err, c.field)
			}
		})
	}
}

// roundTrip builds l, validates it against the schema, and checks that
// Marshal then DecodeStrict gives back an equal spec and equal bytes.
func roundTrip(t *testing.T, l Launch) *specs.Spec {
	t.Helper()
	s, err := Build(l)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	data, err := Marshal(s)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	if err := ValidateSchema(t, data); err != nil {
		t.Fatalf("schema: %v\n%s", err, data)
	}
	back, err := DecodeStrict(data)
	if err != nil {
		t.Fatalf("DecodeStrict: %v", err)
	}
	if !reflect.DeepEqual(s, back) {
		t.Fatalf("round trip differs:\nbuilt   %+v\ndecoded %+v", s, back)
	}
	again, err := Marshal(back)
	if err != nil || !bytes.Equal(data, again) {
		t.Fatalf("Marshal is not deterministic (%v)", err)
	}
	return s
}

func TestBuildMinimal(t *testing.T) {
	s := roundTrip(t, minimal())
	if s.Root == nil || s.Root.Path != "rootfs" || !s.Root.Readonly {
		t.Errorf("root %+v", s.Root)
	}
	p := s.Process
	if !p.NoNewPrivileges || p.Terminal || !reflect.DeepEqual(p.Args, []string{"/usr/bin/true"}) {
		t.Errorf("process %+v", p)
	}
	if c := p.Capabilities; c == nil || c.Bounding != nil || c.Effective != nil || c.Permitted != nil || c.Inheritable != nil || c.Ambient != nil {
		t.Errorf("capabilities not all empty: %+v", c)
	}
	lx := s.Linux
	if lx.Resources != nil {
		t.Error("linux.resources present")
	}
	want := []specs.LinuxIDMapping{{ContainerID: 1000, HostID: 2001, Size: 1}}
	if !reflect.DeepEqual(lx.UIDMappings, want) || !reflect.DeepEqual(lx.GIDMappings, want) {
		t.Errorf("mappings %+v %+v", lx.UIDMappings, lx.GIDMappings)
	}
	var ns []string
	for _, n := range lx.Namespaces {
		if n.Path != "" {
			t.Errorf("namespace %s joins %s", n.Type, n.Path)
		}
		ns = append(ns, string(n.Type))
	}
	if got := strings.Join(ns, ","); got != "user,mount,pid,network,ipc,uts,cgroup" {
		t.Errorf("namespaces %s", got)
	}
	if !reflect.DeepEqual(lx.MaskedPaths, defaultMaskedPaths) || !reflect.DeepEqual(lx.ReadonlyPaths, defaultReadOnlyPaths) {
		t.Errorf("default paths %v %v", lx.MaskedPaths, lx.ReadonlyPaths)
	}
	if lx.Seccomp != nil || s.Mounts != nil {
		t.Error("unexpected seccomp or mounts")
	}
}

func TestBuildEveryMountKind(t *testing.T) {
	s := roundTrip(t, everyKind())
	got := map[string]string{}
	for _, m := range s.Mounts {
		got[m.Destination] = m.Type + " " + m.Source + " " + strings.Join(m.Options, ",")
	}
	want := map[string]string{
		"/usr":        "bind /proc/self/fd/3 bind,nosuid,nodev,ro",
		"/work":       "bind /proc/self/fd/4 bind,nosuid,nodev,noexec",
		"/proc":       "proc proc nosuid,noexec,nodev",
		"/sys":        "sysfs sysfs nosuid,noexec,nodev,ro",
		"/dev":        "tmpfs tmpfs nosuid,nodev,strictatime,mode=0755,size=65536",
		"/dev/null":   "bind /dev/null bind,nosuid,noexec",
		"/dev/pts":    "devpts devpts nosuid,noexec,newinstance,ptmxmode=0666,mode=0620",
		"/dev/mqueue": "mqueue mqueue nosuid,noexec,nodev",
		"/tmp":        "tmpfs tmpfs nosuid,nodev,noexec,mode=01777,size=1048576",
		"/tmp/cache":  "bind /proc/self/fd/5 bind,nosuid,nodev",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mounts:\n got %v\nwant %v", got, want)
	}
	if s.Linux.MaskedPaths != nil || !reflect.DeepEqual(s.Linux.ReadonlyPaths, []string{"/proc/sys"}) {
		t.Errorf("explicit paths not used: %v %v", s.Linux.MaskedPaths, s.Linux.ReadonlyPaths)
	}
	if s.Linux.Seccomp == nil || s.Linux.Seccomp.DefaultAction != specs.ActErrno {
		t.Error("seccomp not carried")
	}
}

func TestBuildTerminal(t *testing.T) {
	l := minimal()
	l.Terminal = true
	if s := roundTrip(t, l); !s.Process.Terminal {
		t.Error("terminal not set")
	}
}

func TestBuildDoesNotAlias(t *testing.T) {
	l := everyKind()
	s, err := Build(l)
	if err != nil {
		t.Fatal(err)
	}
	l.Env[0] = "PATH=/evil"
	l.ReadOnlyPaths[0] = "/nothing"
	if s.Process.Env[0] != "PATH=/usr/bin:/bin" || s.Linux.ReadonlyPaths[0] != "/proc/sys" {
		t.Error("spec aliases the launch's slices")
	}
}

func TestDecodeStrictRefuses(t *testing.T) {
	s, err := Build(minimal())
	if err != nil {
		t.Fatal(err)
	}
	good, err := Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	misspelled := bytes.Replace(good, []byte(`"noNewPrivileges": true`), []byte(`"noNewPrivilege": true`), 1)
	if bytes.Equal(misspelled, good) {
		t.Fatal("fixture: noNewPrivileges not found")
	}
	// The schema lets the misspelling through: that is why DecodeStrict
	// exists.
	if err := ValidateSchema(t, misspelled); err != nil {
		t.Fatalf("schema now rejects the misspelling (good news, update the test): %v", err)
	}
	cases := map[string][]byte{
		"misspelled key":       misspelled,
		"unknown top field":    bytes.Replace(good, []byte(`{`), []byte(`{"extra": 1,`), 1),
		"unknown nested field": bytes.Replace(good, []byte(`"readonly": true`), []byte(`"readonly": true, "propagation": "x"`), 1),
		"case-folded key":      bytes.Replace(good, []byte(`"noNewPrivileges"`), []byte(`"NoNewPrivileges"`), 1),
		"duplicate key":        bytes.Replace(good, []byte(`"cwd": "/"`), []byte(`"cwd": "/", "cwd": "/etc"`), 1),
		"trailing document":    append(append([]byte{}, good...), []byte(`{}`)...),
		"trailing garbage":     append(append([]byte{}, good...), 'x'),
		"two documents":        []byte(`{} {}`),
		"not an object":        []byte(`[]`),
		"empty":                nil,
		"negative uid":         bytes.Replace(good, []byte(`"uid": 1000`), []byte(`"uid": -1`), 1),
	}
	for name, data := range cases {
		if name != "empty" && name != "two documents" && name != "not an object" && bytes.Equal(data, good) {
			t.Fatalf("%s: fixture did not change the document", name)
		}
		if _, err := DecodeStrict(data); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.HasPrefix(err.Error(), "spec: decode: ") {
			t.Errorf("%s: error %q does not name the operation", name, err)
		}
	}
	// Trailing whitespace is not data.
	if _, err := DecodeStrict(append(append([]byte{}, good...), " \n\t"...)); err != nil {
		t.Errorf("trailing whitespace refused: %v", err)
	}
}

// TestRuncRootlessSpec records whether the bundle runc writes decodes
// strictly; it only logs, as runc's output may carry fields Glove accepts.
func TestRuncRootlessSpec(t *testing.T) {
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Skip("runc not installed")
	}
	dir := t.TempDir()
	cmd := exec.Command(runc, "spec", "--rootless", "--bundle", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("runc spec: %v: %s", err, out)
	}
	data, err := os.ReadFile(dir + "/config.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateSchema(t, data); err != nil {
		t.Errorf("runc's own spec fails the schema: %v", err)
	}
	s, err := DecodeStrict(data)
	if err != nil {
		t.Logf("runc spec --rootless refused by DecodeStrict: %v", err)
		return
	}
	t.Logf("runc spec --rootless decodes strictly: ociVersion %s, %d mounts", s.Version, len(s.Mounts))
}

// TestBuildSeccompListener: the listener descriptor becomes
// /proc/self/fd/N in the spec, without changing the caller's profile.
func TestBuildSeccompListener(t *testing.T) {
	l := everyKind()
	l.PreserveFDs = 4
	prof := &specs.LinuxSeccomp{DefaultAction: specs.ActErrno,
		Syscalls: []specs.LinuxSyscall{{Names: []string{"connect"}, Action: specs.ActNotify}}}
	l.Seccomp = prof
	l.SeccompListenerFD = 6
	s := roundTrip(t, l)
	if got := s.Linux.Seccomp.ListenerPath; got != "/proc/self/fd/6" {
		t.Errorf("listenerPath %q, want /proc/self/fd/6", got)
	}
	if prof.ListenerPath != "" {
		t.Errorf("the caller's profile was changed: %q", prof.ListenerPath)
	}
	l.SeccompListenerFD = 0
	if s := roundTrip(t, l); s.Linux.Seccomp.ListenerPath != "" {
		t.Errorf("listenerPath %q without a listener", s.Linux.Seccomp.ListenerPath)
	}
}
