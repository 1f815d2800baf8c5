package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"

	xbpf "golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Evaluate runs prog, as the kernel would, on one system call nr with
// arguments args for the native architecture, and returns the action it
// yields. Auditors and tests use it to ask what a compiled allowlist does
// with a given call and flags, without loading it.
//
// golang.org/x/net/bpf's VM does the interpreting. It loads words
// big-endian, as from a packet, while the kernel reads seccomp_data in
// native (little-endian) order, so every 32-bit word is byte-swapped
// before the run.
func Evaluate(prog []unix.SockFilter, nr uintptr, args [6]uint64) (Action, error) {
	return EvaluateData(prog, SeccompData(nr, nativeAuditArch, args))
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
func EvaluateData(prog []unix.SockFilter, data []byte) (Action, error) {
	if len(data)%4 != 0 {
		return 0, errors.New("evaluate: seccomp_data length is not a multiple of 4")
	}
	raw := make([]xbpf.RawInstruction, len(prog))
	for i, f := range prog {
		raw[i] = xbpf.RawInstruction{Op: f.Code, Jt: f.Jt, Jf: f.Jf, K: f.K}
	}
	insns, ok := xbpf.Disassemble(raw)
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
	return Action(uint32(n)), nil
}
