// SPDX-License-Identifier: Apache-2.0

package shim

import (
	"encoding/binary"
	"testing"

	"github.com/glove-sandbox/glove/seccomp"
	"golang.org/x/sys/unix"
)

// TestDenyIoctlsProgram: the bytes stage 0 puts in the plan are the
// deniedIoctls filter, instruction by instruction, in the layout of the
// kernel's struct sock_filter that stage 2 hands to seccomp(2) as it is.
func TestDenyIoctlsProgram(t *testing.T) {
	b, err := denyIoctlsProgram()
	if err != nil {
		t.Fatal(err)
	}
	want, err := seccomp.DenyIoctls(deniedIoctls, unix.EPERM)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 8*len(want) {
		t.Fatalf("%d bytes for %d instructions", len(b), len(want))
	}
	for i, w := range want {
		ins := b[8*i : 8*i+8]
		got := unix.SockFilter{Code: binary.NativeEndian.Uint16(ins[0:2]), Jt: ins[2], Jf: ins[3], K: binary.NativeEndian.Uint32(ins[4:8])}
		if got != w {
			t.Errorf("instruction %d: %+v, want %+v", i, got, w)
		}
	}
}
