// SPDX-License-Identifier: Apache-2.0

package seccomp

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func uptr(v uint) *uint { return &v }

func eperm() specs.LinuxSeccomp {
	return specs.LinuxSeccomp{DefaultAction: specs.ActErrno}
}

// TestCompileTable checks the translation: what is accepted and what the
// exported pseudo-filter says, and what is refused.
func TestCompileTable(t *testing.T) {
	rule := func(r ...specs.LinuxSyscall) *specs.LinuxSeccomp { s := eperm(); s.Syscalls = r; return &s }
	allow := func(name string, args ...specs.LinuxSeccompArg) specs.LinuxSyscall {
		return specs.LinuxSyscall{Names: []string{name}, Action: specs.ActAllow, Args: args}
	}
	listen := func(path string, r ...specs.LinuxSyscall) *specs.LinuxSeccomp {
		s := rule(r...)
		s.ListenerPath = path
		return s
	}
	notifyConnect := specs.LinuxSyscall{Names: []string{"connect"}, Action: specs.ActNotify}
	arg := func(i uint, op specs.LinuxSeccompOperator, v, v2 uint64) specs.LinuxSeccompArg {
		return specs.LinuxSeccompArg{Index: i, Op: op, Value: v, ValueTwo: v2}
	}
	cases := []struct {
		name    string
		s       *specs.LinuxSeccomp
		refused string   // substring of the error, "" if accepted
		pfc     []string // substrings of the PFC when accepted
	}{
		{"nil profile", nil, "no profile", nil},
		{"plain allow", rule(allow("read")), "", []string{"if ($syscall == 0)", "action ALLOW", "action ERRNO(1)"}},
		{"ANDed conditions", rule(allow("getsockopt", arg(0, specs.OpEqualTo, 3, 0), arg(1, specs.OpEqualTo, 1, 0), arg(2, specs.OpEqualTo, 3, 0))),
			"", []string{"if ($a0.hi32 == 0)", "if ($a0.lo32 == 3)", "if ($a1.lo32 == 1)", "if ($a2.lo32 == 3)"}},
		{"two conditions on one argument refused", rule(allow("getsockopt", arg(0, specs.OpGreaterEqual, 3, 0), arg(0, specs.OpLessThan, 4, 0))),
			"two conditions on argument 0", nil},
		{"unknown syscall refused", rule(specs.LinuxSyscall{Names: []string{"read", "no_such_call"}, Action: specs.ActAllow}), `unknown syscall "no_such_call"`, nil},
		{"known-missing name skipped in allow rule", rule(allow("mseal")), "", nil},
		{"known-missing name refused in deny rule", &specs.LinuxSeccomp{DefaultAction: specs.ActAllow,
			Syscalls: []specs.LinuxSyscall{{Names: []string{"mseal"}, Action: specs.ActErrno}}}, `unknown syscall "mseal"`, nil},
		{"unknown action refused", rule(specs.LinuxSyscall{Names: []string{"read"}, Action: "SCMP_ACT_MAYBE"}), "unknown action", nil},
		{"unknown default action refused", &specs.LinuxSeccomp{DefaultAction: "SCMP_ACT_NOPE"}, "unknown action", nil},
		{"notify without listenerPath refused", rule(specs.LinuxSyscall{Names: []string{"connect"}, Action: specs.ActNotify}), "without a listenerPath", nil},
		{"notify with listenerPath", listen("/proc/self/fd/3", specs.LinuxSyscall{Names: []string{"connect"}, Action: specs.ActNotify}), "",
			[]string{"if ($syscall == 42)", "action 0x7fc00000"}},
		{"notify as default action refused", &specs.LinuxSeccomp{DefaultAction: specs.ActNotify, ListenerPath: "/proc/self/fd/3"}, "default action SCMP_ACT_NOTIFY", nil},
		{"trace refused", rule(specs.LinuxSyscall{Names: []string{"read"}, Action: specs.ActTrace}), "unsupported action", nil},
		{"unknown operator refused", rule(allow("read", arg(0, "SCMP_CMP_ABOUT", 1, 0))), "unknown operator", nil},
		{"argument index refused", rule(allow("read", arg(6, specs.OpEqualTo, 1, 0))), "index 6", nil},
		{"masked equal", rule(allow("clone", arg(0, specs.OpMaskedEqual, 0x10000000, 0))), "", []string{"if ($a0.hi32 & 0x00000000 == 0)", "if ($a0.lo32 & 0x10000000 == 0)"}},
		{"masked equal impossible value refused", rule(allow("clone", arg(0, specs.OpMaskedEqual, 0xf0, 0x1))), "outside mask", nil},
		{"valueTwo outside masked equal refused", rule(allow("read", arg(0, specs.OpEqualTo, 1, 2))), "valueTwo", nil},
		{"errnoRet honoured", rule(allow("read"), specs.LinuxSyscall{Names: []string{"write"}, Action: specs.ActErrno, ErrnoRet: uptr(38)}), "",
			[]string{"action ERRNO(38)"}},
		{"default errnoRet honoured", &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, DefaultErrnoRet: uptr(13)}, "", []string{"action ERRNO(13)"}},
		{"errnoRet zero refused", rule(specs.LinuxSyscall{Names: []string{"write"}, Action: specs.ActErrno, ErrnoRet: uptr(0)}), "errnoRet 0", nil},
		{"errnoRet on allow refused", rule(specs.LinuxSyscall{Names: []string{"write"}, Action: specs.ActAllow, ErrnoRet: uptr(1)}), "errnoRet given", nil},
		{"rule with default action refused", rule(specs.LinuxSyscall{Names: []string{"write"}, Action: specs.ActErrno}), "is the default action", nil},
		{"empty names refused", rule(specs.LinuxSyscall{Action: specs.ActAllow}), "names no syscall", nil},
		{"architectures", &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Architectures: []specs.Arch{specs.ArchX86_64, specs.ArchX86}}, "",
			[]string{"if ($arch == 1073741827)", "if ($arch == 3221225534)"}},
		{"unknown architecture refused", &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Architectures: []specs.Arch{"SCMP_ARCH_Z80"}}, "unknown architecture", nil},
		{"architectures without native refused", &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Architectures: []specs.Arch{specs.ArchX86}}, "omit the native", nil},
		{"unknown flag refused", &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Flags: []specs.LinuxSeccompFlag{"SECCOMP_FILTER_FLAG_NEW"}}, "unsupported flag", nil},
		{"listenerPath without notify refused", &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, ListenerPath: "/proc/self/fd/3"}, "without a rule of action", nil},
		{"listenerPath as a host path refused", listen("/run/x", notifyConnect), "only /proc/self/fd/N", nil},
		{"listenerPath leading zero refused", listen("/proc/self/fd/03", notifyConnect), "only /proc/self/fd/N", nil},
		{"listenerPath sign refused", listen("/proc/self/fd/+3", notifyConnect), "only /proc/self/fd/N", nil},
		{"listenerPath negative refused", listen("/proc/self/fd/-3", notifyConnect), "only /proc/self/fd/N", nil},
		{"listenerPath empty number refused", listen("/proc/self/fd/", notifyConnect), "only /proc/self/fd/N", nil},
		{"listenerPath beneath refused", listen("/proc/self/fd/3/x", notifyConnect), "only /proc/self/fd/N", nil},
		{"listenerPath other process refused", listen("/proc/1/fd/3", notifyConnect), "only /proc/self/fd/N", nil},
		{"listenerPath huge refused", listen("/proc/self/fd/99999999999999999999", notifyConnect), "only /proc/self/fd/N", nil},
		{"listenerMetadata refused", &specs.LinuxSeccomp{DefaultAction: specs.ActErrno, ListenerPath: "/proc/self/fd/3", ListenerMetadata: "x",
			Syscalls: []specs.LinuxSyscall{notifyConnect}}, "listenerMetadata", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pfc, err := ExportPFC(c.s)
			if c.refused != "" {
				if err == nil || !strings.Contains(err.Error(), c.refused) || !errors.Is(err, ErrRefused) {
					t.Fatalf("err = %v, want ErrRefused containing %q", err, c.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("ExportPFC: %v", err)
			}
			// One spec rule with ANDed conditions is one nested chain
			// ending in a single ALLOW, never several ORed ones.
			if c.name == "ANDed conditions" && strings.Count(pfc, "action ALLOW") != 1 {
				t.Errorf("ANDed rule became %d ALLOW paths:\n%s", strings.Count(pfc, "action ALLOW"), pfc)
			}
			for _, want := range c.pfc {
				if !strings.Contains(pfc, want) {
					t.Errorf("PFC lacks %q:\n%s", want, pfc)
				}
			}
		})
	}
}

func TestExportBPF(t *testing.T) {
	b, err := ExportBPF(DefaultProfile(ProfileOptions{InheritedFDs: []uint32{3}}))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 || len(b)%8 != 0 {
		t.Fatalf("BPF program of %d bytes is not a whole number of instructions", len(b))
	}
}

// TestCompileForExport: compiling and exporting in two steps gives the
// program ExportBPF gives; the export happens once, a refused profile
// fails at the compile step (before glove-shim creates any namespace),
// and Release may follow BPF.
func TestCompileForExport(t *testing.T) {
	p := DefaultProfile(ProfileOptions{InheritedFDs: []uint32{3}})
	want, err := ExportBPF(p)
	if err != nil {
		t.Fatal(err)
	}
	c, err := CompileForExport(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.BPF()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("two-step export: %d bytes differing from ExportBPF's %d", len(got), len(want))
	}
	if b, err := c.BPF(); err == nil {
		t.Errorf("second BPF: %d bytes, want an error", len(b))
	}
	c.Release()
	bad := eperm()
	bad.Syscalls = []specs.LinuxSyscall{{Names: []string{"no_such_call"}, Action: specs.ActAllow}}
	if c, err := CompileForExport(&bad); !errors.Is(err, ErrRefused) {
		t.Errorf("CompileForExport of an unknown name: %v, %v; want ErrRefused", c, err)
	}
}

// FuzzListenerFD: whatever ListenerFD accepts is /proc/self/fd/ and the
// shortest decimal of a descriptor number, nothing else.
func FuzzListenerFD(f *testing.F) {
	for _, s := range []string{"/proc/self/fd/3", "/proc/self/fd/03", "/proc/self/fd/-1", "/proc/self/fd/3/", "/run/x", "", "/proc/self/fd/+4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := ListenerFD(s)
		if ok && (n < 0 || s != "/proc/self/fd/"+strconv.Itoa(n)) {
			t.Fatalf("ListenerFD(%q) accepted %d", s, n)
		}
	})
}
