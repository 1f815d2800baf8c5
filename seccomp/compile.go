// SPDX-License-Identifier: Apache-2.0

// Package seccomp turns the OCI runtime-spec seccomp section
// (specs.LinuxSeccomp) into a libseccomp filter for glove-shim, holds
// Glove's default sandbox profile as data (profile.go), and builds the
// ioctl deny filter glove-shim stacks under it (DenyIoctls).
//
// It needs cgo (libseccomp). The helpers never import it: they are built
// with CGO_ENABLED=0 and use seccomp/bpf for their own allowlists.
//
// The translation is exact or it fails. runc and crun turn a rule they
// cannot express (two conditions on one argument, such as "fd >= 3 and
// fd < 4") into several ORed rules, which widened a getsockopt allowance to
// other descriptors and options (see DESIGN.md). Here every rule's
// conditions are ANDed in one libseccomp rule, and anything that cannot be
// expressed that way, or that this package does not know, is refused with
// an error naming the rule.
package seccomp

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// maxErrno is the kernel's MAX_ERRNO: seccomp clamps larger SECCOMP_RET_ERRNO
// data, so a larger errnoRet would not be returned as written.
const maxErrno = 4095

// flagTSYNC is not among the runtime-spec's named flags, but a runc bundle
// may carry it. Compile always sets TSYNC, so accepting it changes nothing.
const flagTSYNC specs.LinuxSeccompFlag = "SECCOMP_FILTER_FLAG_TSYNC"

// ErrRefused is wrapped by every error that rejects the profile itself (as
// opposed to a libseccomp failure), so callers can tell a bad spec from a
// broken host.
var ErrRefused = errors.New("seccomp profile refused")

// archs maps the spec's architecture names to libseccomp's. Only these are
// accepted: an unknown name is refused rather than dropped, because a
// dropped architecture would leave its syscall table to the bad-arch action
// silently, and a misspelt one would hide a mistake in the profile.
var archs = map[specs.Arch]libseccomp.ScmpArch{
	specs.ArchX86:         libseccomp.ArchX86,
	specs.ArchX86_64:      libseccomp.ArchAMD64,
	specs.ArchX32:         libseccomp.ArchX32,
	specs.ArchARM:         libseccomp.ArchARM,
	specs.ArchAARCH64:     libseccomp.ArchARM64,
	specs.ArchMIPS:        libseccomp.ArchMIPS,
	specs.ArchMIPS64:      libseccomp.ArchMIPS64,
	specs.ArchMIPS64N32:   libseccomp.ArchMIPS64N32,
	specs.ArchMIPSEL:      libseccomp.ArchMIPSEL,
	specs.ArchMIPSEL64:    libseccomp.ArchMIPSEL64,
	specs.ArchMIPSEL64N32: libseccomp.ArchMIPSEL64N32,
	specs.ArchPPC:         libseccomp.ArchPPC,
	specs.ArchPPC64:       libseccomp.ArchPPC64,
	specs.ArchPPC64LE:     libseccomp.ArchPPC64LE,
	specs.ArchS390:        libseccomp.ArchS390,
	specs.ArchS390X:       libseccomp.ArchS390X,
	specs.ArchRISCV64:     libseccomp.ArchRISCV64,
}

// ops maps the spec's comparison operators to libseccomp's.
var ops = map[specs.LinuxSeccompOperator]libseccomp.ScmpCompareOp{
	specs.OpNotEqual:     libseccomp.CompareNotEqual,
	specs.OpLessThan:     libseccomp.CompareLess,
	specs.OpLessEqual:    libseccomp.CompareLessOrEqual,
	specs.OpEqualTo:      libseccomp.CompareEqual,
	specs.OpGreaterEqual: libseccomp.CompareGreaterEqual,
	specs.OpGreaterThan:  libseccomp.CompareGreater,
	specs.OpMaskedEqual:  libseccomp.CompareMaskedEqual,
}

// notKnownHere lists syscall names that are real on some current kernel but
// unknown to the libseccomp this is built against (Debian's 2.5.4 resolves
// none of them), or that exist only on an architecture libseccomp 2.5.4 has
// no table for. A name on this list is skipped, but only in a rule whose
// action allows or logs: skipping it then makes the filter stricter (the
// call meets the default action). In any other rule skipping would widen the
// filter, so the name is refused like any unknown name. Any other name that
// libseccomp cannot resolve is refused: a typo in a deny rule must not
// silently allow the call.
var notKnownHere = []string{
	"file_getattr", "file_setattr", // 6.17
	"getxattrat", "listxattrat", "removexattrat", "setxattrat", // 6.13
	"listmount", "statmount", // 6.8
	"lsm_get_self_attr", "lsm_list_modules", "lsm_set_self_attr", // 6.8
	"mseal",          // 6.10
	"open_tree_attr", // 6.15
	"riscv_hwprobe",  // riscv64 only
	"uretprobe",      // 6.11, x86_64
}

// Compile translates s into a libseccomp filter, which the caller loads
// (after no_new_privs) and releases. The filter always has the no_new_privs
// attribute (loading sets it; the shim sets it before anyway), TSYNC (a Go
// program is multi-threaded: a filter on one thread only would leave the
// others unfiltered) and KILL_PROCESS for a foreign architecture's calls
// (threat: the x32 or i386 syscall table reaching calls the native rules
// deny).
func Compile(s *specs.LinuxSeccomp) (*libseccomp.ScmpFilter, error) {
	if s == nil {
		return nil, fmt.Errorf("compile seccomp: %w: no profile", ErrRefused)
	}
	if s.DefaultAction == specs.ActNotify {
		// Every call the rules do not name would wait on the handler,
		// execve and exit included: a profile means something else.
		return nil, fmt.Errorf("compile seccomp: %w: default action %s", ErrRefused, s.DefaultAction)
	}
	if err := checkListener(s); err != nil {
		return nil, fmt.Errorf("compile seccomp: %w", err)
	}
	def, err := action(s.DefaultAction, s.DefaultErrnoRet)
	if err != nil {
		return nil, fmt.Errorf("compile seccomp: default action: %w", err)
	}
	native, err := libseccomp.GetNativeArch()
	if err != nil {
		return nil, fmt.Errorf("compile seccomp: native architecture: %w", err)
	}
	var extra []libseccomp.ScmpArch
	nativeListed := len(s.Architectures) == 0
	for _, a := range s.Architectures {
		sa, ok := archs[a]
		if !ok {
			return nil, fmt.Errorf("compile seccomp: %w: unknown architecture %q", ErrRefused, a)
		}
		if sa == native {
			nativeListed = true
		}
		extra = append(extra, sa)
	}
	// libseccomp always includes the native architecture; a list without it
	// would not mean what it says.
	if !nativeListed {
		return nil, fmt.Errorf("compile seccomp: %w: architectures %v omit the native %s", ErrRefused, s.Architectures, native)
	}

	f, err := libseccomp.NewFilter(def)
	if err != nil {
		return nil, fmt.Errorf("compile seccomp: new filter: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Release()
		}
	}()
	if err := configure(f, s.Flags); err != nil {
		return nil, fmt.Errorf("compile seccomp: %w", err)
	}
	for _, a := range extra {
		if err := f.AddArch(a); err != nil {
			return nil, fmt.Errorf("compile seccomp: add architecture %s: %w", a, err)
		}
	}
	for i, r := range s.Syscalls {
		if err := addRule(f, def, r); err != nil {
			return nil, fmt.Errorf("compile seccomp: syscalls[%d] %v: %w", i, r.Names, err)
		}
	}
	ok = true
	return f, nil
}

// ListenerFD returns N of a listenerPath /proc/self/fd/N, the only form
// accepted (N a decimal without leading zeros): the listener goes to a
// descriptor the runtime was given, never to a path it would open on the
// host (threat: a path the bundle names leading the listener, and with it
// the answers to the program's calls, to whoever can bind there). ok is
// false for any other string; the range of N (a preserved descriptor) is
// the runtime's to check.
func ListenerFD(path string) (n int, ok bool) {
	rest, found := strings.CutPrefix(path, "/proc/self/fd/")
	if !found {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}

// checkListener refuses listenerMetadata, a listenerPath not of the form
// ListenerFD accepts, and a listener without a notify rule or a notify
// rule without a listener: the first is a descriptor nobody needs handed
// out of the sandbox's filter, the second a call that would wait forever
// for an answer nobody gives (the program hangs in connect).
func checkListener(s *specs.LinuxSeccomp) error {
	if s.ListenerMetadata != "" {
		return fmt.Errorf("%w: listenerMetadata is not supported", ErrRefused)
	}
	notify := false
	for _, r := range s.Syscalls {
		notify = notify || r.Action == specs.ActNotify
	}
	switch _, ok := ListenerFD(s.ListenerPath); {
	case s.ListenerPath != "" && !ok:
		return fmt.Errorf("%w: listenerPath %q: only /proc/self/fd/N, a descriptor the runtime was given", ErrRefused, s.ListenerPath)
	case s.ListenerPath != "" && !notify:
		return fmt.Errorf("%w: listenerPath %q without a rule of action %s", ErrRefused, s.ListenerPath, specs.ActNotify)
	case s.ListenerPath == "" && notify:
		return fmt.Errorf("%w: action %s without a listenerPath (nobody would answer the call)", ErrRefused, specs.ActNotify)
	}
	return nil
}

// configure sets the attributes every Glove filter has and the spec's flags.
func configure(f *libseccomp.ScmpFilter, flags []specs.LinuxSeccompFlag) error {
	if err := f.SetNoNewPrivsBit(true); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	if err := f.SetBadArchAction(libseccomp.ActKillProcess); err != nil {
		return fmt.Errorf("set bad-arch action: %w", err)
	}
	for _, fl := range flags {
		var err error
		switch fl {
		case flagTSYNC:
			// Always on (NewFilter sets it).
		case specs.LinuxSeccompFlagLog:
			err = f.SetLogBit(true)
		case specs.LinuxSeccompFlagSpecAllow:
			err = f.SetSSB(true)
		default:
			// WAIT_KILLABLE_RECV (6.0) is newer than the kernels
			// Glove supports need; anything else is unknown.
			return fmt.Errorf("%w: unsupported flag %q", ErrRefused, fl)
		}
		if err != nil {
			return fmt.Errorf("set flag %s: %w", fl, err)
		}
	}
	return nil
}

// action translates a spec action. errnoRet is only meaningful for
// SCMP_ACT_ERRNO, and is refused elsewhere rather than ignored.
func action(a specs.LinuxSeccompAction, errnoRet *uint) (libseccomp.ScmpAction, error) {
	if errnoRet != nil && a != specs.ActErrno {
		return 0, fmt.Errorf("%w: errnoRet given for action %s", ErrRefused, a)
	}
	switch a {
	case specs.ActKill, specs.ActKillThread:
		return libseccomp.ActKillThread, nil
	case specs.ActKillProcess:
		return libseccomp.ActKillProcess, nil
	case specs.ActTrap:
		return libseccomp.ActTrap, nil
	case specs.ActAllow:
		return libseccomp.ActAllow, nil
	case specs.ActLog:
		return libseccomp.ActLog, nil
	case specs.ActErrno:
		errno := uint(unix.EPERM) // the runtime-spec's default
		if errnoRet != nil {
			errno = *errnoRet
		}
		// errno 0 would make a denied call report success without doing
		// anything, which hides the denial from the program and the audit.
		if errno == 0 || errno > maxErrno {
			return 0, fmt.Errorf("%w: errnoRet %d outside 1..%d", ErrRefused, errno, maxErrno)
		}
		return libseccomp.ActErrno.SetReturnCode(int16(errno)), nil
	case specs.ActNotify:
		// The listener is checked by checkListener: present, and a
		// descriptor of the runtime's.
		return libseccomp.ActNotify, nil
	case specs.ActTrace:
		// TRACE without a tracer returns ENOSYS: not part of Glove's
		// sandbox.
		return 0, fmt.Errorf("%w: unsupported action %s", ErrRefused, a)
	default:
		return 0, fmt.Errorf("%w: unknown action %q", ErrRefused, a)
	}
}

// addRule adds one spec rule: one libseccomp rule per name, each with all of
// the rule's conditions ANDed.
func addRule(f *libseccomp.ScmpFilter, def libseccomp.ScmpAction, r specs.LinuxSyscall) error {
	if len(r.Names) == 0 {
		return fmt.Errorf("%w: rule names no syscall", ErrRefused)
	}
	act, err := action(r.Action, r.ErrnoRet)
	if err != nil {
		return err
	}
	// libseccomp refuses a rule whose action is the default one, and runc
	// drops it; either way a conditional rule of that kind would not carve
	// its calls out of another rule for the same syscall as written.
	if act == def {
		return fmt.Errorf("%w: action %s is the default action", ErrRefused, r.Action)
	}
	conds, err := conditions(r.Args)
	if err != nil {
		return err
	}
	narrowing := act == libseccomp.ActAllow || act == libseccomp.ActLog
	for _, name := range r.Names {
		nr, err := libseccomp.GetSyscallFromName(name)
		if err != nil {
			if narrowing && slices.Contains(notKnownHere, name) {
				continue
			}
			return fmt.Errorf("%w: unknown syscall %q", ErrRefused, name)
		}
		if len(conds) == 0 {
			err = f.AddRule(nr, act)
		} else {
			err = f.AddRuleConditional(nr, act, conds)
		}
		if err != nil {
			return fmt.Errorf("add rule for %s: %w", name, err)
		}
	}
	return nil
}

// conditions translates a rule's args. Two conditions on one argument are
// refused: libseccomp cannot AND them within a rule, and splitting them into
// ORed rules (what runc and crun do) allows far more than either.
func conditions(args []specs.LinuxSeccompArg) ([]libseccomp.ScmpCondition, error) {
	var seen [6]bool
	var out []libseccomp.ScmpCondition
	for _, a := range args {
		if a.Index > 5 {
			return nil, fmt.Errorf("%w: argument index %d > 5", ErrRefused, a.Index)
		}
		if seen[a.Index] {
			return nil, fmt.Errorf("%w: two conditions on argument %d cannot be ANDed exactly; write one EQ or MASKED_EQ condition", ErrRefused, a.Index)
		}
		seen[a.Index] = true
		op, ok := ops[a.Op]
		if !ok {
			return nil, fmt.Errorf("%w: unknown operator %q", ErrRefused, a.Op)
		}
		values := []uint64{a.Value}
		if op == libseccomp.CompareMaskedEqual {
			// (arg & Value) == ValueTwo: bits of ValueTwo outside the
			// mask make a rule that can never match, surely a mistake.
			if a.ValueTwo&^a.Value != 0 {
				return nil, fmt.Errorf("%w: argument %d: MASKED_EQ value %#x has bits outside mask %#x", ErrRefused, a.Index, a.ValueTwo, a.Value)
			}
			values = append(values, a.ValueTwo)
		} else if a.ValueTwo != 0 {
			return nil, fmt.Errorf("%w: argument %d: valueTwo is only meaningful for %s", ErrRefused, a.Index, specs.OpMaskedEqual)
		}
		c, err := libseccomp.MakeCondition(a.Index, op, values...)
		if err != nil {
			return nil, fmt.Errorf("argument %d: make condition: %w", a.Index, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// ExportBPF compiles s and returns the classic BPF program libseccomp would
// load, for auditors and for tests that inspect it.
func ExportBPF(s *specs.LinuxSeccomp) ([]byte, error) {
	c, err := CompileForExport(s)
	if err != nil {
		return nil, fmt.Errorf("export seccomp BPF: %w", err)
	}
	return c.BPF()
}

// Compiled is a profile Compile accepted, not yet turned into BPF. Every
// refusal of the profile has happened by the time one exists; what is
// left, BPF, is libseccomp's code generation (about half of the cost of
// ExportBPF), which glove-shim runs while its next stage starts.
type Compiled struct {
	f *libseccomp.ScmpFilter
}

// CompileForExport compiles s, refusing it as Compile does.
func CompileForExport(s *specs.LinuxSeccomp) (*Compiled, error) {
	f, err := Compile(s)
	if err != nil {
		return nil, err
	}
	return &Compiled{f: f}, nil
}

// BPF returns the classic BPF program and releases the filter: it may be
// called once. An empty program is an error, never "no filter".
func (c *Compiled) BPF() ([]byte, error) {
	if c.f == nil {
		return nil, errors.New("export seccomp BPF: filter already exported or released")
	}
	defer c.Release()
	b, err := export(c.f, (*libseccomp.ScmpFilter).ExportBPF)
	if err != nil {
		return nil, fmt.Errorf("export seccomp BPF: %w", err)
	}
	if len(b) == 0 {
		return nil, errors.New("export seccomp BPF: libseccomp wrote an empty program")
	}
	return b, nil
}

// Release frees the filter; it does nothing after BPF or a first Release.
func (c *Compiled) Release() {
	if c.f != nil {
		c.f.Release()
		c.f = nil
	}
}

// ExportPFC compiles s and returns libseccomp's human-readable pseudo-filter.
func ExportPFC(s *specs.LinuxSeccomp) (string, error) {
	f, err := Compile(s)
	if err != nil {
		return "", fmt.Errorf("export seccomp PFC: %w", err)
	}
	defer f.Release()
	b, err := export(f, (*libseccomp.ScmpFilter).ExportPFC)
	if err != nil {
		return "", fmt.Errorf("export seccomp PFC: %w", err)
	}
	return string(b), nil
}

// export writes through a memfd: libseccomp 2.5 exports only to a file
// descriptor (ExportBPFMem needs 2.6), and a memfd leaves nothing on disk.
func export(f *libseccomp.ScmpFilter, write func(*libseccomp.ScmpFilter, *os.File) error) ([]byte, error) {
	fd, err := unix.MemfdCreate("glove-seccomp-export", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	file := os.NewFile(uintptr(fd), "glove-seccomp-export")
	defer file.Close()
	if err := write(f, file); err != nil {
		return nil, fmt.Errorf("write: %w", err)
	}
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("rewind: %w", err)
	}
	b, err := io.ReadAll(file)
	if err != nil {
		return nil, fmt.Errorf("read back: %w", err)
	}
	return b, nil
}

// LibraryVersion is the version of the libseccomp linked in, such as
// "2.5.4": glove-shim's seccomp cache keys entries by it, among others.
func LibraryVersion() string {
	major, minor, micro := libseccomp.GetLibraryVersion()
	return fmt.Sprintf("%d.%d.%d", major, minor, micro)
}
