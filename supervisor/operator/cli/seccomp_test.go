// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"bytes"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/glove-sandbox/glove/seccomp"
)

// exportBPF is what `glove seccomp dump` must print, from package seccomp
// directly.
func exportBPF(t *testing.T, fds ...uint32) []byte {
	t.Helper()
	b, err := seccomp.ExportBPF(seccomp.DefaultProfile(seccomp.ProfileOptions{InheritedFDs: fds}))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSeccompDump(t *testing.T) {
	cases := []struct {
		name string
		args []string
		fds  []uint32
	}{
		{"default", nil, nil},
		{"one inherited fd", []string{"--inherited-fd", "3"}, []uint32{3}},
		{"two inherited fds", []string{"--inherited-fd=3", "--inherited-fd", "1023"}, []uint32{3, 1023}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := exportBPF(t, c.fds...)

			code, raw, errs := run(append([]string{"seccomp", "dump", "--raw"}, c.args...)...)
			if code != ExitOK || errs != "" {
				t.Fatalf("--raw: exit %d, stderr %q", code, errs)
			}
			if len(raw) == 0 || len(raw)%8 != 0 || raw != string(want) {
				t.Fatalf("--raw: %d bytes, want ExportBPF's %d (a multiple of 8), unchanged", len(raw), len(want))
			}

			code, out, errs := run(append([]string{"seccomp", "dump"}, c.args...)...)
			if code != ExitOK || errs != "" {
				t.Fatalf("exit %d, stderr %q", code, errs)
			}
			n := len(want) / 8
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if !strings.HasPrefix(lines[0], "# ") || !strings.Contains(lines[0], fmt.Sprintf(": %d BPF instructions", n)) {
				t.Fatalf("header %q lacks the instruction count %d", lines[0], n)
			}
			if len(lines) != n+1 {
				t.Fatalf("%d instruction lines, want %d", len(lines)-1, n)
			}
			for i, l := range lines[1:] {
				var idx, code, jt, jf, k uint32
				if _, err := fmt.Sscanf(l, "%04d: 0x%x %d %d 0x%x", &idx, &code, &jt, &jf, &k); err != nil || idx != uint32(i) {
					t.Fatalf("line %d %q: %v", i+1, l, err)
				}
				ins := want[i*8 : i*8+8]
				if code != uint32(ins[0])|uint32(ins[1])<<8 || jt != uint32(ins[2]) || jf != uint32(ins[3]) ||
					k != uint32(ins[4])|uint32(ins[5])<<8|uint32(ins[6])<<16|uint32(ins[7])<<24 {
					t.Fatalf("line %d %q does not decode instruction % x", i+1, l, ins)
				}
			}
			if want := fmt.Sprintf("%04d: 0x%02x %d %d 0x%08x", 0, uint16(want[0])|uint16(want[1])<<8, want[2], want[3],
				uint32(want[4])|uint32(want[5])<<8|uint32(want[6])<<16|uint32(want[7])<<24); lines[1] != want {
				t.Fatalf("first instruction %q, want %q", lines[1], want)
			}

			code, pfc, errs := run(append([]string{"seccomp", "dump", "--pfc"}, c.args...)...)
			if code != ExitOK || errs != "" {
				t.Fatalf("--pfc: exit %d, stderr %q", code, errs)
			}
			if has := strings.Contains(pfc, "getsockopt"); has != (len(c.fds) > 0) {
				t.Fatalf("--pfc: mentions getsockopt %v with inherited fds %v", has, c.fds)
			}
			if def := fmt.Sprintf("# default action\n  action ERRNO(%d);\n", syscall.EPERM); !strings.Contains(pfc, def) {
				t.Fatalf("--pfc lacks the default action %q:\n%s", def, pfc)
			}
		})
	}
}

// TestSeccompDumpDeterministic: an auditor compares dumps, so two runs
// must print the same text.
func TestSeccompDumpDeterministic(t *testing.T) {
	for _, args := range [][]string{
		{"seccomp", "dump"},
		{"seccomp", "dump", "--raw", "--inherited-fd", "3"},
		{"seccomp", "dump", "--pfc", "--inherited-fd", "3", "--inherited-fd", "4"},
	} {
		code1, out1, _ := run(args...)
		code2, out2, _ := run(args...)
		if code1 != ExitOK || code2 != ExitOK || out1 == "" || out1 != out2 {
			t.Errorf("%q: two runs differ (exit %d, %d)", args, code1, code2)
		}
	}
	a, err := formatBPF(exportBPF(t, 3), fdList{3})
	if err != nil {
		t.Fatal(err)
	}
	b, err := formatBPF(exportBPF(t, 3), fdList{3})
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Error("formatBPF of two exports differs")
	}
	if _, err := formatBPF(make([]byte, 12), nil); err == nil {
		t.Error("formatBPF accepted a 12-byte program")
	}
}

func TestSeccompDumpUsage(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"seccomp"}, "missing subcommand"},
		{[]string{"seccomp", "show"}, `unknown subcommand "show"`},
		{[]string{"seccomp", "dump", "--inherited-fd", "-1"}, "0..1023"},
		{[]string{"seccomp", "dump", "--inherited-fd", "1024"}, "0..1023"},
		{[]string{"seccomp", "dump", "--inherited-fd", "abc"}, "0..1023"},
		{[]string{"seccomp", "dump", "--inherited-fd", "3", "--inherited-fd", "3"}, "descriptor 3 given twice"},
		{[]string{"seccomp", "dump", "--inherited-fd"}, "flag needs an argument"},
		{[]string{"seccomp", "dump", "extra"}, `unexpected argument "extra"`},
		{[]string{"seccomp", "dump", "--pfc", "extra"}, `unexpected argument "extra"`},
		{[]string{"seccomp", "dump", "--bpf"}, "flag provided but not defined: -bpf"},
		{[]string{"seccomp", "dump", "--pfc", "--raw"}, "exclude each other"},
	}
	for _, c := range cases {
		code, out, errs := run(c.args...)
		if code != ExitUsage || out != "" {
			t.Errorf("%q: exit %d, stdout %q", c.args, code, out)
		}
		// One "glove: " line naming the fault, then the usage line.
		first, rest, _ := strings.Cut(errs, "\n")
		if !strings.HasPrefix(first, "glove: seccomp") || !strings.Contains(first, c.want) ||
			rest != usageSeccompDump+"\n" {
			t.Errorf("%q: stderr %q, want one \"glove: \" line with %q and the usage line", c.args, errs, c.want)
		}
	}
}

// The usage text lists the command.
func TestSeccompInUsage(t *testing.T) {
	var out bytes.Buffer
	if Run([]string{"help"}, &out, &out) != ExitOK || !strings.Contains(out.String(), "glove seccomp dump") {
		t.Fatalf("usage lacks glove seccomp dump:\n%s", out.String())
	}
}
