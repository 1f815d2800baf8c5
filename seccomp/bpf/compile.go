// Package bpf compiles a syscall allowlist, kept as data by each Glove
// helper, into a classic BPF seccomp program and installs it on every
// thread of the calling process. It also builds the small ioctl deny
// filter glove-shim stacks under a sandbox's profile (DenyIoctls).
//
// It exists because the helpers are built with CGO_ENABLED=0 and cannot use
// libseccomp. The generated program:
//
//  1. kills the process unless seccomp_data.arch is the native audit arch,
//  2. on amd64 kills the process for any x32 syscall number,
//  3. tries each Rule in order and returns SECCOMP_RET_ALLOW on the first
//     whose syscall number and conditions all match,
//  4. otherwise returns the default action.
//
// Only amd64 and arm64 are supported: on other architectures the package
// deliberately fails to build (no nativeAuditArch), because an allowlist
// compiled against the wrong syscall table is worse than none.
package bpf

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Layout of struct seccomp_data (include/uapi/linux/seccomp.h). Arguments
// are u64 stored in native byte order; amd64 and arm64 are little-endian, so
// the low 32-bit word of argument i is at offArgs+8*i and the high one 4
// bytes later.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16

	// maxArg is the highest syscall argument index seccomp_data carries.
	maxArg = 5

	// maxInsns is the kernel's BPF_MAXINSNS; longer programs are refused
	// at install time, so refuse them at compile time instead.
	maxInsns = 4096

	// maxSkip is the farthest a classic BPF conditional jump can reach:
	// jt and jf are 8-bit.
	maxSkip = math.MaxUint8

	// maxErrno is the kernel's MAX_ERRNO; seccomp clamps larger values.
	maxErrno = 4095
)

// Cond restricts a Rule to calls where (arg[Arg] & Mask) == Value. The
// comparison covers all 64 bits: the high and low 32-bit words are checked
// separately, because classic BPF registers are 32 bits wide and checking
// only the low word would let a caller smuggle bits in the high one.
type Cond struct {
	Arg   uint8 // 0..5
	Mask  uint64
	Value uint64
}

// Rule allows syscall Nr when all of its Conds hold (they are ANDed).
// Several Rules with the same Nr are ORed. Name is for humans and error
// messages only.
type Rule struct {
	Name  string
	Nr    uintptr
	Conds []Cond
}

// Action is a SECCOMP_RET_* value, for example unix.SECCOMP_RET_KILL_PROCESS
// or Errno(unix.EPERM).
type Action uint32

// Errno returns the action that fails a syscall with e. An e of 0 or above
// the kernel's MAX_ERRNO yields an ERRNO action with no errno, which Compile
// rejects (threat: errno 0 would make a denied syscall look successful).
func Errno(e unix.Errno) Action {
	if e == 0 || e > maxErrno {
		return Action(unix.SECCOMP_RET_ERRNO)
	}
	return Action(unix.SECCOMP_RET_ERRNO | uint32(e))
}

// validateDefault refuses default actions that would silently weaken the
// allowlist or hang the helper.
func validateDefault(a Action) error {
	switch uint32(a) & unix.SECCOMP_RET_ACTION_FULL {
	case unix.SECCOMP_RET_KILL_PROCESS, unix.SECCOMP_RET_TRAP,
		unix.SECCOMP_RET_TRACE, unix.SECCOMP_RET_LOG:
		return nil
	case unix.SECCOMP_RET_ERRNO:
		if uint32(a)&unix.SECCOMP_RET_DATA == 0 {
			return errors.New("ERRNO action with errno 0 would report denied syscalls as successful")
		}
		return nil
	case unix.SECCOMP_RET_ALLOW:
		return errors.New("default ALLOW turns the allowlist into a no-op")
	case unix.SECCOMP_RET_KILL_THREAD:
		// Also the zero Action, so this catches a forgotten default.
		return errors.New("KILL_THREAD can leave a Go process hung with a dead runtime thread; use KILL_PROCESS")
	case unix.SECCOMP_RET_USER_NOTIF:
		return errors.New("USER_NOTIF needs a listener, which Install does not create")
	default:
		return fmt.Errorf("unknown seccomp action %#x", uint32(a))
	}
}

// validateRule rejects rules that can never match or that match more than
// their author evidently meant; in an allowlist both are bugs.
func validateRule(r Rule) error {
	if uint64(r.Nr) > math.MaxUint32 {
		return fmt.Errorf("syscall number %#x does not fit seccomp_data.nr (u32)", r.Nr)
	}
	if uint32(r.Nr)&x32SyscallBit != 0 {
		return fmt.Errorf("syscall number %#x has the x32 bit set and is always killed", r.Nr)
	}
	for i, c := range r.Conds {
		switch {
		case c.Arg > maxArg:
			return fmt.Errorf("cond %d: argument index %d out of range 0..%d", i, c.Arg, maxArg)
		case c.Mask == 0:
			return fmt.Errorf("cond %d: zero mask matches every value (forgotten Mask?)", i)
		case c.Value&^c.Mask != 0:
			return fmt.Errorf("cond %d: value %#x has bits outside mask %#x and can never match", i, c.Value, c.Mask)
		}
	}
	return nil
}

// ruleKey identifies a rule by what it matches, ignoring Name and the
// order of its conditions, so duplicates are found however they are spelled.
func ruleKey(r Rule) string {
	conds := slices.Clone(r.Conds)
	slices.SortFunc(conds, func(a, b Cond) int {
		if a.Arg != b.Arg {
			return int(a.Arg) - int(b.Arg)
		}
		if c := cmpU64(a.Mask, b.Mask); c != 0 {
			return c
		}
		return cmpU64(a.Value, b.Value)
	})
	var b strings.Builder
	fmt.Fprintf(&b, "%d", r.Nr)
	for _, c := range conds {
		fmt.Fprintf(&b, "|%d&%x=%x", c.Arg, c.Mask, c.Value)
	}
	return b.String()
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func ruleName(i int, r Rule) string {
	if r.Name != "" {
		return fmt.Sprintf("rule %d (%s)", i, r.Name)
	}
	return fmt.Sprintf("rule %d (nr %d)", i, r.Nr)
}

// ruleBlock emits one self-contained block: load nr, compare, check each
// 32-bit half of each condition, then its own "ret ALLOW". Every failed
// comparison jumps just past that ret, i.e. to the next block, so jump
// distances are bounded by the block's own size rather than the program's.
func ruleBlock(r Rule) ([]bpf.Instruction, error) {
	block := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offNr, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(r.Nr)},
	}
	for _, c := range r.Conds {
		base := uint32(offArgs + 8*int(c.Arg))
		halves := []struct {
			off         uint32
			mask, value uint32
		}{
			{base, uint32(c.Mask), uint32(c.Value)},
			{base + 4, uint32(c.Mask >> 32), uint32(c.Value >> 32)},
		}
		for _, h := range halves {
			if h.mask == 0 {
				continue // this word is unconstrained
			}
			block = append(block, bpf.LoadAbsolute{Off: h.off, Size: 4})
			if h.mask != math.MaxUint32 {
				block = append(block, bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: h.mask})
			}
			block = append(block, bpf.JumpIf{Cond: bpf.JumpEqual, Val: h.value})
		}
	}
	block = append(block, bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW})

	// On a true result fall through to the next check; on false skip to
	// the first instruction after this block's ret ALLOW.
	for i, ins := range block {
		j, ok := ins.(bpf.JumpIf)
		if !ok {
			continue
		}
		skip := len(block) - i - 1
		if skip > maxSkip {
			return nil, fmt.Errorf("jump of %d instructions exceeds the 8-bit limit of %d (too many conditions)", skip, maxSkip)
		}
		j.SkipFalse = uint8(skip)
		block[i] = j
	}
	return block, nil
}

// Compile turns rules into a seccomp program whose unmatched syscalls get
// deflt. It refuses lists that are empty, contain invalid or duplicate
// rules, or would not fit the kernel's limits.
func Compile(rules []Rule, deflt Action) ([]unix.SockFilter, error) {
	if len(rules) == 0 {
		return nil, errors.New("compile seccomp filter: empty rule list would deny everything including the Go runtime")
	}
	if err := validateDefault(deflt); err != nil {
		return nil, fmt.Errorf("compile seccomp filter: default action: %w", err)
	}

	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: nativeAuditArch, SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_KILL_PROCESS},
	}
	if x32SyscallBit != 0 {
		prog = append(prog,
			bpf.LoadAbsolute{Off: offNr, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: x32SyscallBit, SkipFalse: 1},
			bpf.RetConstant{Val: unix.SECCOMP_RET_KILL_PROCESS},
		)
	}

	seen := make(map[string]int, len(rules))
	for i, r := range rules {
		if err := validateRule(r); err != nil {
			return nil, fmt.Errorf("compile seccomp filter: %s: %w", ruleName(i, r), err)
		}
		key := ruleKey(r)
		if prev, dup := seen[key]; dup {
			return nil, fmt.Errorf("compile seccomp filter: %s duplicates %s", ruleName(i, r), ruleName(prev, rules[prev]))
		}
		seen[key] = i
		block, err := ruleBlock(r)
		if err != nil {
			return nil, fmt.Errorf("compile seccomp filter: %s: %w", ruleName(i, r), err)
		}
		prog = append(prog, block...)
		if len(prog) >= maxInsns { // the default ret still has to fit
			return nil, fmt.Errorf("compile seccomp filter: program exceeds %d instructions at %s", maxInsns, ruleName(i, r))
		}
	}
	prog = append(prog, bpf.RetConstant{Val: uint32(deflt)})

	if err := checkJumps(prog); err != nil {
		return nil, fmt.Errorf("compile seccomp filter: internal layout error: %w", err)
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("compile seccomp filter: assemble: %w", err)
	}
	out := make([]unix.SockFilter, len(raw))
	for i, ins := range raw {
		out[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	return out, nil
}

// checkJumps re-verifies the layout independently of how it was built: every
// jump must land inside the program and the program must end in a return
// (the kernel also checks, but a failure there is much harder to debug).
func checkJumps(prog []bpf.Instruction) error {
	for i, ins := range prog {
		var targets []int
		switch j := ins.(type) {
		case bpf.JumpIf:
			targets = []int{i + 1 + int(j.SkipTrue), i + 1 + int(j.SkipFalse)}
		case bpf.Jump:
			targets = []int{i + 1 + int(j.Skip)}
		}
		for _, t := range targets {
			if t >= len(prog) {
				return fmt.Errorf("instruction %d jumps to %d, past the end (%d)", i, t, len(prog))
			}
		}
	}
	if _, ok := prog[len(prog)-1].(bpf.RetConstant); !ok {
		return errors.New("program does not end with a return")
	}
	return nil
}

// Disassemble renders prog one instruction per line, prefixed by its index,
// so auditors can review exactly what a helper installs.
func Disassemble(prog []unix.SockFilter) string {
	raw := make([]bpf.RawInstruction, len(prog))
	for i, f := range prog {
		raw[i] = bpf.RawInstruction{Op: f.Code, Jt: f.Jt, Jf: f.Jf, K: f.K}
	}
	insns, _ := bpf.Disassemble(raw)
	var b strings.Builder
	for i, ins := range insns {
		fmt.Fprintf(&b, "%04d: %v\n", i, ins)
	}
	return b.String()
}
