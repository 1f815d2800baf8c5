// SPDX-License-Identifier: Apache-2.0

package bpf_test

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/seccomp/bpf"
	"github.com/glove-sandbox/glove/seccomp/bpf/bpftest"
	"golang.org/x/sys/unix"
)

// seccompData mirrors struct seccomp_data for building test inputs.
type seccompData struct {
	nr   uint32
	arch uint32
	args [6]uint64
}

// bytes encodes d in native (little-endian on amd64/arm64) order, exactly
// as the kernel presents it to the filter.
func (d seccompData) bytes() []byte {
	b := make([]byte, 64)
	binary.LittleEndian.PutUint32(b[0:], d.nr)
	binary.LittleEndian.PutUint32(b[4:], d.arch)
	binary.LittleEndian.PutUint64(b[8:], 0xdeadbeefcafef00d) // instruction_pointer: must not matter
	for i, a := range d.args {
		binary.LittleEndian.PutUint64(b[16+8*i:], a)
	}
	return b
}

// runFilter is a minimal classic-BPF interpreter with kernel seccomp
// semantics: 32-bit loads from seccomp_data in native byte order, aligned
// and in bounds. golang.org/x/net/bpf's VM loads big-endian (packet order),
// so it cannot execute a seccomp program on a real seccomp_data layout; it
// is used below only as a cross-check on a word-swapped buffer.
func runFilter(t *testing.T, prog []unix.SockFilter, data []byte) uint32 {
	t.Helper()
	var a uint32
	for pc := 0; pc < len(prog); pc++ {
		ins := prog[pc]
		jump := func(cond bool) {
			if cond {
				pc += int(ins.Jt)
			} else {
				pc += int(ins.Jf)
			}
		}
		switch ins.Code {
		case unix.BPF_LD | unix.BPF_W | unix.BPF_ABS:
			if ins.K%4 != 0 || int(ins.K)+4 > len(data) {
				t.Fatalf("pc %d: load at offset %d is misaligned or outside seccomp_data", pc, ins.K)
			}
			a = binary.LittleEndian.Uint32(data[ins.K:])
		case unix.BPF_ALU | unix.BPF_AND | unix.BPF_K:
			a &= ins.K
		case unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K:
			jump(a == ins.K)
		case unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K:
			jump(a&ins.K != 0)
		case unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K:
			jump(a >= ins.K)
		case unix.BPF_JMP | unix.BPF_JA:
			pc += int(ins.K)
		case unix.BPF_RET | unix.BPF_K:
			return ins.K
		default:
			t.Fatalf("pc %d: unsupported opcode %#x", pc, ins.Code)
		}
	}
	t.Fatalf("program fell off its end")
	return 0
}

// runXVM runs prog through Evaluate's x/net/bpf VM, the second
// interpreter the kernel-semantics one is checked against.
func runXVM(t *testing.T, prog []unix.SockFilter, data []byte) uint32 {
	t.Helper()
	a, err := bpftest.EvaluateData(prog, data)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(a)
}

// eval runs both interpreters and insists they agree.
func eval(t *testing.T, prog []unix.SockFilter, d seccompData) bpf.Action {
	t.Helper()
	data := d.bytes()
	got := runFilter(t, prog, data)
	if x := runXVM(t, prog, data); x != got {
		t.Fatalf("interpreters disagree: ours %#x, x/net/bpf %#x", got, x)
	}
	return bpf.Action(got)
}

const (
	allow = bpf.Action(unix.SECCOMP_RET_ALLOW)
	kill  = bpf.Action(unix.SECCOMP_RET_KILL_PROCESS)
)

var eperm = bpftest.Errno(unix.EPERM)

var testRules = []bpf.Rule{
	{Name: "read", Nr: unix.SYS_READ},
	// Low-word-only mask: the high word of arg2 is unconstrained.
	{Name: "mmap-prot", Nr: unix.SYS_MMAP, Conds: []bpf.Cond{{Arg: 2, Mask: 0xffffffff, Value: unix.PROT_READ}}},
	// High-word-only mask.
	{Name: "lseek-high", Nr: unix.SYS_LSEEK, Conds: []bpf.Cond{{Arg: 1, Mask: 0xffffffff00000000, Value: 1 << 32}}},
	// Two conditions, ANDed; the first is a full 64-bit equality.
	{Name: "fcntl", Nr: unix.SYS_FCNTL, Conds: []bpf.Cond{
		{Arg: 0, Mask: math.MaxUint64, Value: 3},
		{Arg: 1, Mask: math.MaxUint64, Value: unix.F_GETFD},
	}},
	// Two rules with one nr, ORed.
	{Name: "ioctl-tcgets", Nr: unix.SYS_IOCTL, Conds: []bpf.Cond{{Arg: 1, Mask: math.MaxUint64, Value: unix.TCGETS}}},
	{Name: "ioctl-tiocgwinsz", Nr: unix.SYS_IOCTL, Conds: []bpf.Cond{{Arg: 1, Mask: math.MaxUint64, Value: unix.TIOCGWINSZ}}},
	// Last argument, partial mask (exercises the AND).
	{Name: "splice-flags", Nr: unix.SYS_SPLICE, Conds: []bpf.Cond{{Arg: 5, Mask: 0xff, Value: 0x04}}},
}

func TestCompileActions(t *testing.T) {
	native := uint32(bpf.AuditArch)
	foreign := uint32(unix.AUDIT_ARCH_I386)
	if native != unix.AUDIT_ARCH_X86_64 {
		foreign = unix.AUDIT_ARCH_ARM
	}
	args := func(kv ...uint64) (a [6]uint64) {
		for i := 0; i+1 < len(kv); i += 2 {
			a[kv[i]] = kv[i+1]
		}
		return a
	}
	x32Want := func(deflt bpf.Action) bpf.Action {
		if bpf.X32SyscallBit != 0 {
			return kill
		}
		return deflt
	}
	type tc struct {
		name  string
		deflt bpf.Action
		d     seccompData
		want  bpf.Action
	}
	cases := []tc{
		{"allowed nr", kill, seccompData{nr: unix.SYS_READ}, allow},
		{"allowed nr, errno default", eperm, seccompData{nr: unix.SYS_READ}, allow},
		{"unlisted nr, kill default", kill, seccompData{nr: unix.SYS_GETPPID}, kill},
		{"unlisted nr, errno default", eperm, seccompData{nr: unix.SYS_GETPPID}, eperm},
		{"wrong arch, kill default", kill, seccompData{nr: unix.SYS_READ, arch: foreign}, kill},
		{"wrong arch beats errno default", eperm, seccompData{nr: unix.SYS_READ, arch: foreign}, kill},
		{"x32 alias of allowed nr", eperm, seccompData{nr: unix.SYS_READ | 0x40000000}, x32Want(eperm)},
		{"x32 alias of unlisted nr", eperm, seccompData{nr: unix.SYS_GETPPID | 0x40000000}, x32Want(eperm)},
		{"low word match", kill, seccompData{nr: unix.SYS_MMAP, args: args(2, unix.PROT_READ)}, allow},
		{"low word match, high word free", kill, seccompData{nr: unix.SYS_MMAP, args: args(2, 7<<32|unix.PROT_READ)}, allow},
		{"low word mismatch", eperm, seccompData{nr: unix.SYS_MMAP, args: args(2, unix.PROT_READ|unix.PROT_EXEC)}, eperm},
		{"low word value in wrong arg", eperm, seccompData{nr: unix.SYS_MMAP, args: args(1, unix.PROT_READ)}, eperm},
		{"high word match, low word free", kill, seccompData{nr: unix.SYS_LSEEK, args: args(1, 1<<32|12345)}, allow},
		{"high word mismatch (zero)", eperm, seccompData{nr: unix.SYS_LSEEK, args: args(1, 12345)}, eperm},
		{"high word mismatch (other)", eperm, seccompData{nr: unix.SYS_LSEEK, args: args(1, 3<<32)}, eperm},
		{"two conds both hold", kill, seccompData{nr: unix.SYS_FCNTL, args: args(0, 3, 1, unix.F_GETFD)}, allow},
		{"two conds, second fails", eperm, seccompData{nr: unix.SYS_FCNTL, args: args(0, 3, 1, unix.F_SETFD)}, eperm},
		{"two conds, first fails", eperm, seccompData{nr: unix.SYS_FCNTL, args: args(0, 4, 1, unix.F_GETFD)}, eperm},
		{"full 64-bit cond, high word set", eperm, seccompData{nr: unix.SYS_FCNTL, args: args(0, 1<<32|3, 1, unix.F_GETFD)}, eperm},
		{"same nr ORed, first rule", kill, seccompData{nr: unix.SYS_IOCTL, args: args(1, unix.TCGETS)}, allow},
		{"same nr ORed, second rule", kill, seccompData{nr: unix.SYS_IOCTL, args: args(1, unix.TIOCGWINSZ)}, allow},
		{"same nr ORed, neither", eperm, seccompData{nr: unix.SYS_IOCTL, args: args(1, unix.TIOCSTI)}, eperm},
		{"arg 5 masked match", kill, seccompData{nr: unix.SYS_SPLICE, args: args(5, 0xff_0000_0104)}, allow},
		{"arg 5 masked mismatch", eperm, seccompData{nr: unix.SYS_SPLICE, args: args(5, 0x05)}, eperm},
		{"arg 4 is not arg 5", eperm, seccompData{nr: unix.SYS_SPLICE, args: args(4, 0x04)}, eperm},
	}
	progs := map[bpf.Action][]unix.SockFilter{}
	for _, deflt := range []bpf.Action{kill, eperm} {
		p, err := bpf.Compile(testRules, deflt)
		if err != nil {
			t.Fatalf("Compile(default %#x): %v", uint32(deflt), err)
		}
		progs[deflt] = p
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.d.arch == 0 {
				c.d.arch = native
			}
			if got := eval(t, progs[c.deflt], c.d); got != c.want {
				t.Errorf("action = %#x, want %#x\n%s", uint32(got), uint32(c.want), bpftest.Disassemble(progs[c.deflt]))
			}
		})
	}
}

func TestErrnoAction(t *testing.T) {
	if got, want := uint32(bpftest.Errno(unix.EPERM)), uint32(unix.SECCOMP_RET_ERRNO|1); got != want {
		t.Errorf("Errno(EPERM) = %#x, want %#x", got, want)
	}
	for _, e := range []unix.Errno{0, 4096, 0x10001} {
		if got := uint32(bpftest.Errno(e)) & unix.SECCOMP_RET_DATA; got != 0 {
			t.Errorf("Errno(%d) data = %d, want 0 so Compile rejects it", e, got)
		}
	}
}

// headerLen is the number of instructions before the first rule block.
func headerLen(t *testing.T) int {
	t.Helper()
	p, err := bpf.Compile([]bpf.Rule{{Nr: unix.SYS_READ}}, kill)
	if err != nil {
		t.Fatal(err)
	}
	return len(p) - 4 // one bare rule is ld, jeq, ret ALLOW; then ret default
}

func distinctRules(n int) []bpf.Rule {
	rules := make([]bpf.Rule, n)
	for i := range rules {
		rules[i] = bpf.Rule{Nr: uintptr(i)}
	}
	return rules
}

// manyConds builds n conditions that each need the full six-instruction
// check (both halves, each masked), all satisfied when every arg is ~0.
func manyConds(n int) []bpf.Cond {
	conds := make([]bpf.Cond, n)
	for i := range conds {
		bit := uint64(1) << (i / 6)
		m := bit | bit<<32
		conds[i] = bpf.Cond{Arg: uint8(i % 6), Mask: m, Value: m}
	}
	return conds
}

// rulesOfLength returns distinct rules whose blocks total exactly n
// instructions: bare rules take 3, rules with one full-mask low-word
// condition take 5 (ld, jeq, ld, jeq, ret).
func rulesOfLength(n int) []bpf.Rule {
	five := []int{0, 2, 1}[n%3] // 5 ≡ 2 (mod 3)
	rules := distinctRules((n - 5*five) / 3)
	for range five {
		rules = append(rules, bpf.Rule{Nr: uintptr(len(rules)), Conds: []bpf.Cond{{Arg: 0, Mask: 0xffffffff, Value: 0}}})
	}
	return rules
}

// TestCompileLayoutLimits checks that programs much longer than 255
// instructions still work (jumps stay local) and that the exact size and
// jump limits are enforced at their boundaries.
func TestCompileLayoutLimits(t *testing.T) {
	h := headerLen(t)
	room := bpf.MaxInsns - 1 - h // instructions left for rule blocks

	rules := rulesOfLength(room)
	prog, err := bpf.Compile(rules, eperm)
	if err != nil {
		t.Fatalf("Compile(%d rules): %v", len(rules), err)
	}
	if len(prog) != bpf.MaxInsns {
		t.Fatalf("program length %d, want exactly %d", len(prog), bpf.MaxInsns)
	}
	lastNr := uint32(rules[len(rules)-1].Nr)
	if got := eval(t, prog, seccompData{nr: lastNr, arch: bpf.AuditArch}); got != allow {
		t.Errorf("last of %d rules: action %#x, want ALLOW", len(rules), uint32(got))
	}
	if got := eval(t, prog, seccompData{nr: lastNr + 1, arch: bpf.AuditArch}); got != eperm {
		t.Errorf("nr past last rule: action %#x, want EPERM", uint32(got))
	}
	if _, err := bpf.Compile(rulesOfLength(room+1), eperm); err == nil {
		t.Errorf("Compile of a %d-instruction program succeeded, want size error", bpf.MaxInsns+1)
	}

	// 42 six-instruction conditions put the nr check's jump at exactly 255.
	const maxConds = 42
	prog, err = bpf.Compile([]bpf.Rule{{Name: "wide", Nr: unix.SYS_READ, Conds: manyConds(maxConds)}}, eperm)
	if err != nil {
		t.Fatalf("Compile(%d conds): %v", maxConds, err)
	}
	all := seccompData{nr: unix.SYS_READ, arch: bpf.AuditArch}
	for i := range all.args {
		all.args[i] = math.MaxUint64
	}
	if got := eval(t, prog, all); got != allow {
		t.Errorf("%d conds all hold: action %#x, want ALLOW", maxConds, uint32(got))
	}
	one := all
	one.args[5] &^= 1 << (32 + (maxConds-1)/6) // the last cond's high-word bit
	if got := eval(t, prog, one); got != eperm {
		t.Errorf("%d conds, last high word fails: action %#x, want EPERM", maxConds, uint32(got))
	}
	if _, err := bpf.Compile([]bpf.Rule{{Nr: unix.SYS_READ, Conds: manyConds(maxConds + 1)}}, eperm); err == nil ||
		!strings.Contains(err.Error(), "8-bit") {
		t.Errorf("Compile(%d conds) error = %v, want jump-distance error", maxConds+1, err)
	}
}

func TestCompileErrors(t *testing.T) {
	read := bpf.Rule{Name: "read", Nr: unix.SYS_READ}
	cases := []struct {
		name  string
		rules []bpf.Rule
		deflt bpf.Action
		want  string
	}{
		{"empty", nil, kill, "empty rule list"},
		{"arg 6", []bpf.Rule{{Nr: unix.SYS_READ, Conds: []bpf.Cond{{Arg: 6, Mask: 1, Value: 1}}}}, kill, "argument index 6"},
		{"duplicate", []bpf.Rule{read, {Name: "again", Nr: unix.SYS_READ}}, kill, "duplicates"},
		{"duplicate, conds reordered", []bpf.Rule{
			{Nr: unix.SYS_FCNTL, Conds: []bpf.Cond{{Arg: 0, Mask: 1, Value: 1}, {Arg: 1, Mask: 2, Value: 2}}},
			{Nr: unix.SYS_FCNTL, Conds: []bpf.Cond{{Arg: 1, Mask: 2, Value: 2}, {Arg: 0, Mask: 1, Value: 1}}},
		}, kill, "duplicates"},
		{"value outside mask", []bpf.Rule{{Nr: unix.SYS_READ, Conds: []bpf.Cond{{Arg: 0, Mask: 0xff, Value: 0x100}}}}, kill, "outside mask"},
		{"value outside mask, high word", []bpf.Rule{{Nr: unix.SYS_READ, Conds: []bpf.Cond{{Arg: 0, Mask: 0xffffffff, Value: 1 << 32}}}}, kill, "outside mask"},
		{"zero mask", []bpf.Rule{{Nr: unix.SYS_READ, Conds: []bpf.Cond{{Arg: 0}}}}, kill, "zero mask"},
		{"too many instructions", distinctRules(bpf.MaxInsns / 3), kill, "exceeds 4096"},
		{"nr beyond u32", []bpf.Rule{{Nr: uintptr(1) << 32}}, kill, "does not fit"},
		{"default allow", []bpf.Rule{read}, allow, "default ALLOW"},
		{"default errno 0", []bpf.Rule{read}, bpftest.Errno(0), "errno 0"},
		{"default zero action", []bpf.Rule{read}, 0, "KILL_THREAD"},
		{"default user notif", []bpf.Rule{read}, bpf.Action(unix.SECCOMP_RET_USER_NOTIF), "USER_NOTIF"},
	}
	if bpf.X32SyscallBit != 0 {
		cases = append(cases, struct {
			name  string
			rules []bpf.Rule
			deflt bpf.Action
			want  string
		}{"x32 nr", []bpf.Rule{{Nr: unix.SYS_READ | uintptr(bpf.X32SyscallBit)}}, kill, "x32"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prog, err := bpf.Compile(c.rules, c.deflt)
			if err == nil {
				t.Fatalf("Compile succeeded with %d instructions, want error containing %q", len(prog), c.want)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "compile seccomp filter") {
				t.Errorf("error %q, want it to start with the operation and contain %q", err, c.want)
			}
		})
	}
}

func TestDisassemble(t *testing.T) {
	prog, err := bpf.Compile(testRules, kill)
	if err != nil {
		t.Fatal(err)
	}
	out := bpftest.Disassemble(prog)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(prog) {
		t.Fatalf("%d lines for %d instructions:\n%s", len(lines), len(prog), out)
	}
	if !strings.Contains(lines[0], "ld [4]") {
		t.Errorf("first line %q, want the arch load", lines[0])
	}
	if !strings.Contains(lines[len(lines)-1], "ret #2147483648") {
		t.Errorf("last line %q, want ret KILL_PROCESS", lines[len(lines)-1])
	}
}
