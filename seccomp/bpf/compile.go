// SPDX-License-Identifier: Apache-2.0

// Package bpf compiles a syscall allowlist, kept as data by each Glove
// helper, into a classic BPF seccomp program and installs it on every
// thread of the calling process. The helpers are built with CGO_ENABLED=0
// and cannot use libseccomp. The generated program:
//
//  1. kills the process unless seccomp_data.arch is the native audit arch,
//  2. on amd64 kills the process for any x32 syscall number,
//  3. tries each Rule in order and returns SECCOMP_RET_ALLOW on the first
//     whose syscall number and conditions all match,
//  4. otherwise returns the default action.
//
// Only amd64 and arm64 are supported: on other architectures the package
// deliberately fails to build (no AuditArch), because an allowlist
// compiled against the wrong syscall table is worse than none.
// seccomp/bpf/bpftest runs and prints a compiled program without loading it.
package bpf

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"golang.org/x/sys/unix"
)

// Layout of struct seccomp_data (include/uapi/linux/seccomp.h). Arguments
// are u64 stored in native byte order; amd64 and arm64 are little-endian, so
// the low 32-bit word of argument i is at offArgs+8*i and the high one 4
// bytes later.
const (
	offNr, offArch, offArgs = 0, 4, 16
	maxArg                  = 5    // the highest syscall argument index seccomp_data carries
	maxInsns                = 4096 // the kernel's BPF_MAXINSNS, refused at compile time rather than install
)

// The classic BPF instructions the programs use.
const (
	ld   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	and  = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	ret  = unix.BPF_RET | unix.BPF_K
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

// Action is a SECCOMP_RET_* value, for example unix.SECCOMP_RET_KILL_PROCESS.
type Action uint32

// Compile turns rules into a seccomp program whose unmatched syscalls get
// deflt. It refuses lists that are empty, contain invalid or duplicate
// rules, or would not fit the kernel's limits.
func Compile(rules []Rule, deflt Action) ([]unix.SockFilter, error) {
	prog, err := compile(rules, deflt)
	if err != nil {
		return nil, fmt.Errorf("compile seccomp filter: %w", err)
	}
	return prog, nil
}

func compile(rules []Rule, deflt Action) ([]unix.SockFilter, error) {
	if len(rules) == 0 {
		return nil, errors.New("empty rule list would deny everything including the Go runtime")
	}
	if err := checkDefault(deflt); err != nil {
		return nil, fmt.Errorf("default action: %w", err)
	}
	prog := []unix.SockFilter{{Code: ld, K: offArch}, {Code: jeq, K: AuditArch, Jt: 1}, {Code: ret, K: unix.SECCOMP_RET_KILL_PROCESS}}
	if x32SyscallBit != 0 {
		prog = append(prog, unix.SockFilter{Code: ld, K: offNr}, unix.SockFilter{Code: jset, K: x32SyscallBit, Jf: 1},
			unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_KILL_PROCESS})
	}
	name := func(i int) string {
		return fmt.Sprintf("rule %d (%s)", i, cmp.Or(rules[i].Name, fmt.Sprint("nr ", rules[i].Nr)))
	}
	seen := make(map[string]int, len(rules))
	for i, r := range rules {
		block, key, err := ruleBlock(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name(i), err)
		}
		if prev, dup := seen[key]; dup {
			return nil, fmt.Errorf("%s duplicates %s", name(i), name(prev))
		}
		seen[key] = i
		if prog = append(prog, block...); len(prog) >= maxInsns { // the default ret still has to fit
			return nil, fmt.Errorf("program exceeds %d instructions at %s", maxInsns, name(i))
		}
	}
	prog = append(prog, unix.SockFilter{Code: ret, K: uint32(deflt)})
	// Every jump lands inside the program, checked apart from how it was
	// built (the kernel checks too, but its failure is harder to debug).
	for i, f := range prog {
		if f.Code&0x07 == unix.BPF_JMP && i+1+int(max(f.Jt, f.Jf)) >= len(prog) {
			return nil, fmt.Errorf("internal layout error: instruction %d jumps past the end (%d)", i, len(prog))
		}
	}
	return prog, nil
}

// checkDefault refuses default actions that would silently weaken the
// allowlist or hang the helper.
func checkDefault(a Action) error {
	switch uint32(a) & unix.SECCOMP_RET_ACTION_FULL {
	case unix.SECCOMP_RET_KILL_PROCESS, unix.SECCOMP_RET_TRAP, unix.SECCOMP_RET_TRACE, unix.SECCOMP_RET_LOG:
		return nil
	case unix.SECCOMP_RET_ERRNO:
		if uint32(a)&unix.SECCOMP_RET_DATA == 0 {
			return errors.New("ERRNO action with errno 0 would report denied syscalls as successful")
		}
		return nil
	case unix.SECCOMP_RET_ALLOW:
		return errors.New("default ALLOW turns the allowlist into a no-op")
	case unix.SECCOMP_RET_KILL_THREAD: // also the zero Action: a forgotten default
		return errors.New("KILL_THREAD can leave a Go process hung with a dead runtime thread; use KILL_PROCESS")
	case unix.SECCOMP_RET_USER_NOTIF:
		return errors.New("USER_NOTIF needs a listener, which Install does not create")
	}
	return fmt.Errorf("unknown seccomp action %#x", uint32(a))
}

// ruleBlock checks r, which must be able to match and match no more than
// its author evidently meant (in an allowlist both are bugs), and emits
// one self-contained block: load nr, compare, check each constrained
// 32-bit word of each condition, then its own "ret ALLOW". Every failed
// comparison jumps just past that ret, i.e. to the next block, so jump
// distances are bounded by the block's own size rather than the
// program's. key identifies the rule by what it matches, whatever its
// Name or the order of its conditions, so duplicates are found however
// they are spelled.
func ruleBlock(r Rule) (block []unix.SockFilter, key string, err error) {
	if uint64(r.Nr) > math.MaxUint32 {
		return nil, "", fmt.Errorf("syscall number %#x does not fit seccomp_data.nr (u32)", r.Nr)
	}
	if uint32(r.Nr)&x32SyscallBit != 0 {
		return nil, "", fmt.Errorf("syscall number %#x has the x32 bit set and is always killed", r.Nr)
	}
	block = []unix.SockFilter{{Code: ld, K: offNr}, {Code: jeq, K: uint32(r.Nr)}}
	keys := make([]string, len(r.Conds))
	for i, c := range r.Conds {
		switch {
		case c.Arg > maxArg:
			return nil, "", fmt.Errorf("cond %d: argument index %d out of range 0..%d", i, c.Arg, maxArg)
		case c.Mask == 0:
			return nil, "", fmt.Errorf("cond %d: zero mask matches every value (forgotten Mask?)", i)
		case c.Value&^c.Mask != 0:
			return nil, "", fmt.Errorf("cond %d: value %#x has bits outside mask %#x and can never match", i, c.Value, c.Mask)
		}
		keys[i] = fmt.Sprintf("%d&%x=%x", c.Arg, c.Mask, c.Value)
		for word := uint32(0); word < 2; word++ { // the low word, then the high one
			mask, value := uint32(c.Mask>>(32*word)), uint32(c.Value>>(32*word))
			if mask == 0 {
				continue // this word is unconstrained
			}
			block = append(block, unix.SockFilter{Code: ld, K: offArgs + 8*uint32(c.Arg) + 4*word})
			if mask != math.MaxUint32 {
				block = append(block, unix.SockFilter{Code: and, K: mask})
			}
			block = append(block, unix.SockFilter{Code: jeq, K: value})
		}
	}
	block = append(block, unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW})
	// On a true result fall through to the next check; on false skip to
	// the first instruction after this block's ret ALLOW. The nr check's
	// jump is the farthest.
	if skip := len(block) - 2; skip > math.MaxUint8 {
		return nil, "", fmt.Errorf("jump of %d instructions exceeds the 8-bit limit of %d (too many conditions)", skip, math.MaxUint8)
	}
	for i := range block {
		if block[i].Code == jeq {
			block[i].Jf = uint8(len(block) - i - 1)
		}
	}
	slices.Sort(keys)
	return block, fmt.Sprint(r.Nr, keys), nil
}
