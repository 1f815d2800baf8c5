package shim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// loadSeccomp installs a classic BPF program (as libseccomp exported it in
// stage 0) with the given SECCOMP_FILTER_FLAG_* flags. no_new_privs must
// already be set.
func loadSeccomp(prog []byte, flags uint) error {
	if len(prog) == 0 || len(prog)%8 != 0 || len(prog)/8 > 0xffff {
		return errors.New("seccomp: malformed program")
	}
	// Copy into a properly typed and aligned slice: the kernel reads
	// struct sock_filter entries, not bytes.
	filter := make([]unix.SockFilter, len(prog)/8)
	for i := range filter {
		b := prog[i*8 : i*8+8]
		filter[i] = unix.SockFilter{
			Code: binary.NativeEndian.Uint16(b[0:2]),
			Jt:   b[2],
			Jf:   b[3],
			K:    binary.NativeEndian.Uint32(b[4:8]),
		}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, uintptr(flags), uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return fmt.Errorf("seccomp(SET_MODE_FILTER): %w", errno)
	}
	return nil
}
