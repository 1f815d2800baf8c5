// SPDX-License-Identifier: Apache-2.0

package seccomp

import (
	"testing"

	"github.com/glove-sandbox/glove/seccomp/bpf"
	"github.com/glove-sandbox/glove/seccomp/bpf/bpftest"
	"golang.org/x/sys/unix"
)

func TestDenyIoctls(t *testing.T) {
	prog, err := DenyIoctls([]uint32{unix.TIOCSTI, unix.TIOCLINUX}, unix.EPERM)
	if err != nil {
		t.Fatal(err)
	}
	deny, allow := bpftest.Errno(unix.EPERM), bpf.Action(unix.SECCOMP_RET_ALLOW)
	cases := []struct {
		name string
		nr   uintptr
		arch uint32
		args [6]uint64
		want bpf.Action
	}{
		{"TIOCSTI", unix.SYS_IOCTL, bpf.AuditArch, [6]uint64{0, unix.TIOCSTI}, deny},
		{"TIOCSTI with high bits", unix.SYS_IOCTL, bpf.AuditArch, [6]uint64{0, 0xdead_0000_0000 | unix.TIOCSTI}, deny},
		{"TIOCLINUX", unix.SYS_IOCTL, bpf.AuditArch, [6]uint64{5, unix.TIOCLINUX}, deny},
		{"TCGETS", unix.SYS_IOCTL, bpf.AuditArch, [6]uint64{0, unix.TCGETS}, allow},
		{"TIOCSTI+1", unix.SYS_IOCTL, bpf.AuditArch, [6]uint64{0, unix.TIOCSTI + 1}, allow},
		{"TIOCSTI value in another argument", unix.SYS_IOCTL, bpf.AuditArch, [6]uint64{unix.TIOCSTI, 0, unix.TIOCSTI}, allow},
		{"write", unix.SYS_WRITE, bpf.AuditArch, [6]uint64{0, unix.TIOCSTI}, allow},
		{"foreign architecture left to the main filter", unix.SYS_IOCTL, 0x40000003, [6]uint64{0, unix.TIOCSTI}, allow},
	}
	for _, c := range cases {
		got, err := bpftest.EvaluateData(prog, bpftest.SeccompData(c.nr, c.arch, c.args))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got != c.want {
			t.Errorf("%s: %#x, want %#x", c.name, got, c.want)
		}
	}
	for _, bad := range []struct {
		reqs  []uint32
		errno unix.Errno
	}{{nil, unix.EPERM}, {make([]uint32, 65), unix.EPERM}, {[]uint32{1}, 0}, {[]uint32{1}, 5000}} {
		if _, err := DenyIoctls(bad.reqs, bad.errno); err == nil {
			t.Errorf("DenyIoctls(%d requests, %d) accepted", len(bad.reqs), bad.errno)
		}
	}
	// The longest list still assembles (every jump within reach).
	long := make([]uint32, maxDenied)
	for i := range long {
		long[i] = uint32(i + 1)
	}
	p, err := DenyIoctls(long, unix.EPERM)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := bpftest.Evaluate(p, unix.SYS_IOCTL, [6]uint64{0, maxDenied}); got != deny {
		t.Errorf("last of %d requests: %#x", maxDenied, got)
	}
	if got, _ := bpftest.Evaluate(p, unix.SYS_IOCTL, [6]uint64{0, 1}); got != deny {
		t.Errorf("first of %d requests: %#x", maxDenied, got)
	}
}
