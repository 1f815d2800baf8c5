// SPDX-License-Identifier: Apache-2.0

package session

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/spec"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"golang.org/x/sys/unix"
)

func streamLaunch(t *testing.T, guest *os.File) (*Launch, *Pins) {
	t.Helper()
	return &Launch{
		Name: "s1", Executable: "/usr/bin/true", Cwd: "/", Hostname: "glove",
		Env: []string{"PATH=/usr/bin"},
		Mounts: []Mount{
			{Target: "/usr", Kind: ReadOnlyBind, HostPath: "/usr"},
			{Target: "/tmp", Kind: Tmpfs},
		},
		Limits: policy.ResourceProfile{CPUTimeMs: 1, MemoryBytes: 1, Pids: 1, WallTimeMs: 1, DiskBytes: 1, TerminalOutputBytes: 1},
		Stream: &Stream{Alias: "sage"},
	}, &Pins{Stream: guest}
}

func socketpair(t *testing.T, typ int) (*os.File, *os.File) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	a, b := os.NewFile(uintptr(fds[0]), "a"), os.NewFile(uintptr(fds[1]), "b")
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// TestStreamBundle checks what an inherited stream adds to the bundle:
// descriptor 3 preserved for the program and named in its environment,
// the mounts from descriptor 4 on, and the seccomp profile bound to
// exactly descriptor 3.
func TestStreamBundle(t *testing.T) {
	guest, _ := socketpair(t, unix.SOCK_STREAM)
	l, pins := streamLaunch(t, guest)
	if err := l.Check(); err != nil {
		t.Fatal(err)
	}
	if err := checkPins(l, pins); err != nil {
		t.Fatal(err)
	}
	// Any open files stand for the mounts: descriptors only places them.
	usr, err := os.Open("/usr")
	if err != nil {
		t.Fatal(err)
	}
	defer usr.Close()
	p := &prepared{pins: pins, mounts: []*os.File{usr, nil}, scratch: usr}
	files, srcs := p.descriptors(l)
	if len(files) != 3 || files[0] != guest {
		t.Fatalf("descriptors %v, want the stream, /usr and the scratch", files)
	}
	dir, err := writeBundle(t.TempDir(), l, nil, srcs, len(files), 0, 0, nil)
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
	if !slices.Contains(s.Process.Env, `GLOVE_LOCAL_SERVICE_FDS_V1={"sage":3}`) || !slices.Contains(s.Process.Env, "GLOVE_LOCAL_SERVICE_ALIAS=sage") {
		t.Errorf("env %v lacks the stream's descriptor map", s.Process.Env)
	}
	var sources []string
	for _, m := range s.Mounts {
		if strings.HasPrefix(m.Source, "/proc/self/fd/") {
			sources = append(sources, m.Source)
		}
	}
	slices.Sort(sources)
	if strings.Join(sources, " ") != "/proc/self/fd/4 /proc/self/fd/5/tmp-1" {
		t.Errorf("mount descriptors %v, want 4 (/usr) and /tmp beneath the scratch, 5 (3 is the stream)", sources)
	}
	bound := 0
	for _, r := range s.Linux.Seccomp.Syscalls {
		for _, a := range r.Args {
			if a.Index == 0 && slices.Contains(r.Names, "getsockopt") {
				if a.Value != StreamFD {
					t.Errorf("getsockopt allowed on descriptor %d", a.Value)
				}
				bound++
			}
		}
	}
	if bound != 1 {
		t.Errorf("%d getsockopt rules bound to a descriptor, want 1", bound)
	}
}

func TestStreamCheck(t *testing.T) {
	guest, _ := socketpair(t, unix.SOCK_STREAM)
	dgram, _ := socketpair(t, unix.SOCK_DGRAM)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	cases := map[string]func(*Launch, *Pins){
		"datagram socket":   func(_ *Launch, p *Pins) { p.Stream = dgram },
		"pipe":              func(_ *Launch, p *Pins) { p.Stream = pr },
		"no descriptor":     func(_ *Launch, p *Pins) { p.Stream = nil },
		"no stream":         func(l *Launch, _ *Pins) { l.Stream = nil },
		"bad alias":         func(l *Launch, _ *Pins) { l.Stream.Alias = "Sage!" },
		"reserved env":      func(l *Launch, _ *Pins) { l.Env = append(l.Env, "GLOVE_LOCAL_SERVICE_FDS_V1={}") },
		"other GLOVE_ name": func(l *Launch, _ *Pins) { l.Env = append(l.Env, "GLOVE_X=1") },
	}
	for name, mutate := range cases {
		// The launch's shape (Check) and its pins (checkPins, which
		// Prepare runs) are its checks together.
		l, pins := streamLaunch(t, guest)
		mutate(l, pins)
		if err := errors.Join(l.Check(), checkPins(l, pins)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
