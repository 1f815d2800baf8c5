// SPDX-License-Identifier: Apache-2.0

// Package bpftest runs and prints programs of seccomp/bpf without loading
// them, for tests and for auditors asking what a compiled allowlist does
// with a given call and flags. The helpers do not link it.
package bpftest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/glove-sandbox/glove/seccomp/bpf"
	xbpf "golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// maxErrno is the kernel's MAX_ERRNO; seccomp clamps larger values.
const maxErrno = 4095

// Errno returns the action that fails a syscall with e. An e of 0 or above
// the kernel's MAX_ERRNO yields an ERRNO action with no errno, which
// bpf.Compile rejects (threat: errno 0 would make a denied syscall look
// successful).
func Errno(e unix.Errno) bpf.Action {
	if e == 0 || e > maxErrno {
		return bpf.Action(unix.SECCOMP_RET_ERRNO)
	}
	return bpf.Action(unix.SECCOMP_RET_ERRNO | uint32(e))
}

// Evaluate runs prog, as the kernel would, on one system call nr with
// arguments args for the native architecture, and returns the action it
// yields.
//
// golang.org/x/net/bpf's VM does the interpreting. It loads words
// big-endian, as from a packet, while the kernel reads seccomp_data in
// native (little-endian) order, so every 32-bit word is byte-swapped
// before the run.
func Evaluate(prog []unix.SockFilter, nr uintptr, args [6]uint64) (bpf.Action, error) {
	return EvaluateData(prog, SeccompData(nr, bpf.AuditArch, args))
}

// SeccompData lays out a seccomp_data (nr, arch, instruction pointer 0,
// six 64-bit arguments) in native little-endian order.
func SeccompData(nr uintptr, arch uint32, args [6]uint64) []byte {
	data := make([]byte, 64)
	binary.LittleEndian.PutUint32(data[0:], uint32(nr))
	binary.LittleEndian.PutUint32(data[4:], arch)
	for i, a := range args {
		binary.LittleEndian.PutUint64(data[16+8*i:], a)
	}
	return data
}

// EvaluateData runs prog on a raw little-endian seccomp_data.
func EvaluateData(prog []unix.SockFilter, data []byte) (bpf.Action, error) {
	if len(data)%4 != 0 {
		return 0, errors.New("evaluate: seccomp_data length is not a multiple of 4")
	}
	insns, ok := xbpf.Disassemble(raw(prog))
	if !ok {
		return 0, errors.New("evaluate: an instruction is not classic BPF")
	}
	vm, err := xbpf.NewVM(insns)
	if err != nil {
		return 0, fmt.Errorf("evaluate: %w", err)
	}
	swapped := make([]byte, len(data))
	for i := 0; i < len(data); i += 4 {
		binary.BigEndian.PutUint32(swapped[i:], binary.LittleEndian.Uint32(data[i:]))
	}
	n, err := vm.Run(swapped)
	if err != nil {
		return 0, fmt.Errorf("evaluate: %w", err)
	}
	return bpf.Action(uint32(n)), nil
}

// Disassemble renders prog one instruction per line, prefixed by its index,
// so auditors can review exactly what a helper installs.
func Disassemble(prog []unix.SockFilter) string {
	insns, _ := xbpf.Disassemble(raw(prog))
	var b strings.Builder
	for i, ins := range insns {
		fmt.Fprintf(&b, "%04d: %v\n", i, ins)
	}
	return b.String()
}

func raw(prog []unix.SockFilter) []xbpf.RawInstruction {
	raw := make([]xbpf.RawInstruction, len(prog))
	for i, f := range prog {
		raw[i] = xbpf.RawInstruction{Op: f.Code, Jt: f.Jt, Jf: f.Jf, K: f.K}
	}
	return raw
}
