// SPDX-License-Identifier: Apache-2.0

package spec

import (
	"slices"
	"strings"
	"testing"
)

func TestParseEgressListen(t *testing.T) {
	good := []struct {
		in   string
		want []uint16
	}{
		{"127.0.0.1:8787", []uint16{8787}},
		{"127.0.0.1:1,127.0.0.1:65535", []uint16{1, 65535}},
		{"127.0.0.1:1,127.0.0.1:2,127.0.0.1:3,127.0.0.1:4,127.0.0.1:5,127.0.0.1:6,127.0.0.1:7,127.0.0.1:8", []uint16{1, 2, 3, 4, 5, 6, 7, 8}},
	}
	for _, tc := range good {
		got, err := ParseEgressListen(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseEgressListen(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if back := FormatEgressListen(got); back != tc.in {
			t.Errorf("FormatEgressListen(%v) = %q, want %q", got, back, tc.in)
		}
	}
	bad := []struct{ in, phrase string }{
		{"", "no endpoint"},
		{"0.0.0.0:80", "not 127.0.0.1:PORT"},
		{"127.0.0.2:80", "not 127.0.0.1:PORT"},
		{"localhost:80", "not 127.0.0.1:PORT"},
		{"[::1]:80", "not 127.0.0.1:PORT"},
		{"127.0.0.1", "not 127.0.0.1:PORT"},
		{" 127.0.0.1:80", "not 127.0.0.1:PORT"},
		{"127.0.0.1:", "not a decimal"},
		{"127.0.0.1:0", "not a decimal"},
		{"127.0.0.1:080", "not a decimal"},
		{"127.0.0.1:+80", "not a decimal"},
		{"127.0.0.1:65536", "not a decimal"},
		{"127.0.0.1:80 ", "not a decimal"},
		{"127.0.0.1:80,", "not 127.0.0.1:PORT"},
		{"127.0.0.1:80,127.0.0.1:80", "twice"},
		{strings.Repeat("127.0.0.1:1,", 8) + "127.0.0.1:9", "more than 8"},
	}
	for _, tc := range bad {
		if got, err := ParseEgressListen(tc.in); err == nil || !strings.Contains(err.Error(), tc.phrase) {
			t.Errorf("ParseEgressListen(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.phrase)
		}
	}
}

func FuzzParseEgressListen(f *testing.F) {
	for _, s := range []string{"127.0.0.1:8787", "127.0.0.1:1,127.0.0.1:2", "127.0.0.1:0", "0.0.0.0:1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ports, err := ParseEgressListen(s)
		if err != nil {
			return
		}
		// What it accepts has one spelling: its own format.
		if back := FormatEgressListen(ports); back != s {
			t.Fatalf("accepted %q, which formats back as %q", s, back)
		}
		if len(ports) == 0 || len(ports) > MaxEgressPorts || slices.Contains(ports, 0) {
			t.Fatalf("accepted %q as %v", s, ports)
		}
	})
}

func TestBuildEgress(t *testing.T) {
	l := everyKind() // descriptors 3, 4, 5 are mount sources
	l.PreserveFDs = 4
	l.EgressPorts = []uint16{8787, 3128}
	l.EgressHandoffFD = 6
	s := roundTrip(t, l)
	if got := s.Annotations[EgressListenAnnotation]; got != "127.0.0.1:8787,127.0.0.1:3128" {
		t.Errorf("listen annotation %q", got)
	}
	if got := s.Annotations[EgressHandoffAnnotation]; got != "/proc/self/fd/6" {
		t.Errorf("hand-off annotation %q", got)
	}
	refused := []struct {
		name   string
		ports  []uint16
		fd     int
		phrase string
	}{
		{"no ports", nil, 6, "without an egress port"},
		{"port zero", []uint16{0}, 6, "not a decimal"},
		{"port twice", []uint16{80, 80}, 6, "twice"},
		{"stdio", []uint16{80}, 2, "outside the preserved range"},
		{"beyond range", []uint16{80}, 7, "outside the preserved range"},
		{"mount source", []uint16{80}, 4, "source of mounts"},
	}
	for _, tc := range refused {
		l := everyKind()
		l.PreserveFDs = 4
		l.EgressPorts, l.EgressHandoffFD = tc.ports, tc.fd
		if _, err := Build(l); err == nil || !strings.Contains(err.Error(), tc.phrase) {
			t.Errorf("%s: Build: %v, want an error with %q", tc.name, err, tc.phrase)
		}
	}
	l = everyKind()
	l.PreserveFDs = 4
	l.Seccomp.Syscalls = append(l.Seccomp.Syscalls, l.Seccomp.Syscalls[0])
	l.SeccompListenerFD, l.EgressPorts, l.EgressHandoffFD = 6, []uint16{80}, 6
	if _, err := Build(l); err == nil || !strings.Contains(err.Error(), "seccomp listener") {
		t.Errorf("hand-off on the seccomp listener's descriptor: %v", err)
	}
}
