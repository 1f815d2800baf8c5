// SPDX-License-Identifier: Apache-2.0

package seccomp

import (
	"errors"
	"fmt"

	gbpf "github.com/glove-sandbox/glove/seccomp/bpf"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Offsets in struct seccomp_data (include/uapi/linux/seccomp.h); arguments
// are u64 in native, little-endian, byte order.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// maxDenied bounds DenyIoctls' list: each request is one instruction and a
// jump may skip at most 255 of them.
const maxDenied = 64

// DenyIoctls compiles a classic BPF filter (without libseccomp) that fails
// ioctl(2) with errno when the request's low 32 bits equal one of reqs,
// and allows every other call; glove-shim installs it with bpf.Install.
// It is meant to be stacked with a main filter (the kernel applies the
// most restrictive verdict of all filters), for requests that libseccomp
// 2.5 cannot deny exactly: the kernel reads the request as a 32-bit
// unsigned int, but libseccomp compares all 64 bits, so a rule for
// TIOCSTI is bypassed by setting any bit of the high word (threat:
// TIOCSTI pushing keystrokes into a terminal read by someone else).
//
// Calls of another architecture are allowed here and left to the main
// filter, which must kill them.
func DenyIoctls(reqs []uint32, errno unix.Errno) ([]unix.SockFilter, error) {
	if len(reqs) == 0 || len(reqs) > maxDenied {
		return nil, fmt.Errorf("deny ioctls: %d requests, want 1..%d", len(reqs), maxDenied)
	}
	if errno == 0 || errno > maxErrno {
		return nil, errors.New("deny ioctls: errno outside 1..4095")
	}
	n := uint8(len(reqs))
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: gbpf.AuditArch, SkipFalse: n + 3}, // → allow
		bpf.LoadAbsolute{Off: offNr, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_IOCTL, SkipFalse: n + 1}, // → allow
		// The request's low word (little-endian seccomp_data).
		bpf.LoadAbsolute{Off: offArgs + 8*1, Size: 4},
	}
	for i, r := range reqs {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: r, SkipTrue: n - uint8(i)}) // → deny
	}
	prog = append(prog,
		bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(errno)},
	)
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("deny ioctls: assemble: %w", err)
	}
	out := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		out[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return out, nil
}
