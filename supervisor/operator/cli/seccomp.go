// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/glove-sandbox/glove/seccomp"
)

const usageSeccompDump = "usage: glove seccomp dump [--pfc | --raw] [--inherited-fd N]..."

// maxInheritedFD bounds --inherited-fd: a committed inherited descriptor
// range lies below 1024.
const maxInheritedFD = 1023

// sockFilterSize is the size of one classic BPF instruction, the kernel's
// struct sock_filter: code u16, jt u8, jf u8, k u32.
const sockFilterSize = 8

// fdList is the repeatable --inherited-fd flag.
type fdList []uint32

func (l *fdList) String() string {
	if l == nil {
		return ""
	}
	s := make([]string, len(*l))
	for i, fd := range *l {
		s[i] = strconv.FormatUint(uint64(fd), 10)
	}
	return strings.Join(s, ",")
}

func (l *fdList) Set(v string) error {
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || n > maxInheritedFD {
		return fmt.Errorf("not a descriptor number in 0..%d", maxInheritedFD)
	}
	if slices.Contains(*l, uint32(n)) {
		return fmt.Errorf("descriptor %d given twice", n)
	}
	*l = append(*l, uint32(n))
	return nil
}

// seccompFlags are glove seccomp dump's flags.
type seccompFlags struct {
	pfc, raw bool
	fds      fdList
}

func (o *seccompFlags) define(fs *flag.FlagSet) {
	fs.BoolVar(&o.pfc, "pfc", false, "print libseccomp's pseudo-filter code")
	fs.BoolVar(&o.raw, "raw", false, "write the BPF program's bytes unchanged")
	fs.Var(&o.fds, "inherited-fd", "a descriptor of the committed inherited range (repeatable)")
}

// seccompDump runs `glove seccomp dump`: Glove's default sandbox
// seccomp profile, compiled by libseccomp, for auditors. Without a flag it
// prints the classic BPF program one instruction per line; --raw writes
// the program's bytes unchanged (an array of struct sock_filter, as the
// kernel loads it, for external disassemblers); --pfc prints libseccomp's
// pseudo-filter code. Each --inherited-fd adds one descriptor of the
// committed inherited range, in the order given (ProfileOptions). Bad
// usage exits ExitUsage (2); a failure to compile or export, ExitFail (1).
func seccompDump(args []string, stdout, stderr io.Writer) int {
	var o seccompFlags
	fs := newFlags("seccomp dump")
	o.define(fs)
	pfc, raw := &o.pfc, &o.raw
	if code, done := parseFlags(fs, args, stdout, stderr, usageSeccompDump); done {
		return code
	}
	fds := o.fds
	if *pfc && *raw {
		fmt.Fprintf(stderr, "glove: seccomp dump: --pfc and --raw exclude each other\n%s\n", usageSeccompDump)
		return ExitUsage
	}
	profile := seccomp.DefaultProfile(seccomp.ProfileOptions{InheritedFDs: fds})
	if *pfc {
		text, err := seccomp.ExportPFC(profile)
		if err != nil {
			fmt.Fprintf(stderr, "glove: seccomp dump: %v\n", err)
			return ExitFail
		}
		fmt.Fprint(stdout, text)
		return ExitOK
	}
	prog, err := seccomp.ExportBPF(profile)
	if err != nil {
		fmt.Fprintf(stderr, "glove: seccomp dump: %v\n", err)
		return ExitFail
	}
	if *raw {
		if _, err := stdout.Write(prog); err != nil {
			fmt.Fprintf(stderr, "glove: seccomp dump: write: %v\n", err)
			return ExitFail
		}
		return ExitOK
	}
	text, err := formatBPF(prog, fds)
	if err != nil {
		fmt.Fprintf(stderr, "glove: seccomp dump: %v\n", err)
		return ExitFail
	}
	fmt.Fprint(stdout, text)
	return ExitOK
}

// formatBPF renders a classic BPF program as a header line and one line
// per instruction: "index: code jt jf k", index in decimal, code and k in
// hexadecimal, jt and jf (relative jumps) in decimal. The program is
// decoded little endian: the byte order of struct sock_filter on the
// architectures Glove supports (amd64, arm64).
func formatBPF(prog []byte, fds fdList) (string, error) {
	if len(prog)%sockFilterSize != 0 {
		return "", fmt.Errorf("BPF program of %d bytes is not a whole number of %d-byte instructions", len(prog), sockFilterSize)
	}
	n := len(prog) / sockFilterSize
	inherited := "none"
	if len(fds) > 0 {
		inherited = fds.String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# glove default seccomp profile, inherited fds %s: %d BPF instructions (index: code jt jf k)\n", inherited, n)
	for i := range n {
		ins := prog[i*sockFilterSize : (i+1)*sockFilterSize]
		fmt.Fprintf(&b, "%04d: 0x%02x %d %d 0x%08x\n", i,
			binary.LittleEndian.Uint16(ins[0:2]), ins[2], ins[3], binary.LittleEndian.Uint32(ins[4:8]))
	}
	return b.String(), nil
}
