// SPDX-License-Identifier: Apache-2.0

package session

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/glove-sandbox/glove/spec"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

func servicesLaunch() *Launch {
	return &Launch{
		Name: "s1", Executable: "/usr/bin/true", Cwd: "/", Hostname: "glove",
		Env: []string{"PATH=/usr/bin"},
		Mounts: []Mount{
			{Target: "/usr", Kind: ReadOnlyBind, HostPath: "/usr"},
			{Target: ServiceDirTarget, Kind: ServiceDir, ReadOnly: true},
		},
		Limits:   policy.ResourceProfile{CPUTimeMs: 1, MemoryBytes: 1, Pids: 1, WallTimeMs: 1, DiskBytes: 1, TerminalOutputBytes: 1},
		Services: &Services{Aliases: []string{"model", "tools"}},
	}
}

// TestServicesCheck: Launch.Check's rows for the pathname transport.
func TestServicesCheck(t *testing.T) {
	if err := servicesLaunch().Check(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(*Launch){
		"no aliases":          func(l *Launch) { l.Services.Aliases = nil },
		"unsorted aliases":    func(l *Launch) { l.Services.Aliases = []string{"tools", "model"} },
		"repeated alias":      func(l *Launch) { l.Services.Aliases = []string{"model", "model"} },
		"bad alias":           func(l *Launch) { l.Services.Aliases = []string{"../x"} },
		"no directory":        func(l *Launch) { l.Mounts = l.Mounts[:1] },
		"directory, no alias": func(l *Launch) { l.Services = nil },
		"two directories": func(l *Launch) {
			l.Mounts = append(l.Mounts, Mount{Target: "/run/x", Kind: ServiceDir, ReadOnly: true})
		},
		"writable directory": func(l *Launch) { l.Mounts[1].ReadOnly = false },
		"elsewhere":          func(l *Launch) { l.Mounts[1].Target = "/run/other" },
		"a host path":        func(l *Launch) { l.Mounts[1].HostPath = "/run" },
		"a quota":            func(l *Launch) { l.Mounts[1].MaxBytes = 1 },
		"and a stream":       func(l *Launch) { l.Stream = &Stream{Alias: "model"} },
		"reserved env":       func(l *Launch) { l.Env = append(l.Env, ServiceDirEnv+"=/tmp") },
	}
	for name, mutate := range cases {
		l := servicesLaunch()
		mutate(l)
		if err := l.Check(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// TestServicesBundle: what the pathname transport adds to the bundle:
// the directory bound read-only from the scratch at ServiceDirTarget,
// only GLOVE_LOCAL_SERVICE_DIR, connect notified with the hand-off
// descriptor as the seccomp listener's path, and socket allowed for
// AF_UNIX streams only.
func TestServicesBundle(t *testing.T) {
	l := servicesLaunch()
	usr, err := os.Open("/usr")
	if err != nil {
		t.Fatal(err)
	}
	defer usr.Close()
	p := &prepared{pins: &Pins{}, mounts: []*os.File{usr, usr}, scratch: usr}
	files, srcs := p.descriptors(l)
	files = append(files, usr) // the hand-off socket's place
	dir, err := writeBundle(t.TempDir(), l, nil, srcs, len(files), 2+len(files), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := spec.DecodeStrict(data)
	if err != nil {
		t.Fatal(err)
	}
	var vars []string
	for _, v := range s.Process.Env {
		if len(v) > 6 && v[:6] == "GLOVE_" {
			vars = append(vars, v)
		}
	}
	if !slices.Equal(vars, []string{"GLOVE_LOCAL_SERVICE_DIR=/run/glove-services/local"}) {
		t.Errorf("GLOVE_ variables %v, want the directory's alone", vars)
	}
	var found bool
	for _, m := range s.Mounts {
		if m.Destination == ServiceDirTarget {
			found = true
			if m.Source != "/proc/self/fd/4/local-1" || !slices.Contains(m.Options, "ro") {
				t.Errorf("the directory's mount %+v, want read-only from the scratch (descriptor 4)", m)
			}
		}
	}
	if !found {
		t.Error("no mount at " + ServiceDirTarget)
	}
	sc := s.Linux.Seccomp
	if sc.ListenerPath != "/proc/self/fd/5" {
		t.Errorf("listenerPath %q, want the hand-off socket /proc/self/fd/5", sc.ListenerPath)
	}
	var notified, socket bool
	for _, r := range sc.Syscalls {
		if slices.Contains(r.Names, "connect") {
			notified = r.Action == specs.ActNotify && len(r.Args) == 0
		}
		if slices.Contains(r.Names, "socket") && r.Action == specs.ActAllow {
			socket = len(r.Args) == 2 && r.Args[0].Value == unix.AF_UNIX
		}
	}
	if !notified || !socket {
		t.Errorf("connect notified %v, socket for AF_UNIX only %v", notified, socket)
	}
}
