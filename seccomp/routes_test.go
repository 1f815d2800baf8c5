// SPDX-License-Identifier: Apache-2.0

package seccomp

import (
	"errors"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestCheckRoutes: a profile whose foreign architecture reaches, through
// a multiplexer, a call it denies natively is refused, naming both; every
// way of closing the route is accepted.
func TestCheckRoutes(t *testing.T) {
	allow := func(names ...string) specs.LinuxSyscall {
		return specs.LinuxSyscall{Names: names, Action: specs.ActAllow}
	}
	deny := func(names ...string) specs.LinuxSyscall {
		return specs.LinuxSyscall{Names: names, Action: specs.ActErrno}
	}
	x86 := []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32}
	for _, tc := range []struct {
		name  string
		p     specs.LinuxSeccomp
		fault string // "" accepted
	}{
		{"docker-like minus socket", specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Architectures: x86,
			Syscalls: []specs.LinuxSyscall{allow("read", "socketcall", "connect", "bind", "listen", "accept", "accept4", "getsockname",
				"getpeername", "socketpair", "send", "recv", "sendto", "recvfrom", "shutdown", "setsockopt", "getsockopt", "sendmsg", "recvmsg", "recvmmsg", "sendmmsg")}},
			"socketcall on SCMP_ARCH_X86 reaches socket, which the profile denies"},
		{"ipc reaches denied shmat", specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Architectures: x86,
			Syscalls: []specs.LinuxSyscall{allow("ipc", "semop", "semget", "semctl", "semtimedop", "msgsnd", "msgrcv", "msgget", "msgctl", "shmdt", "shmget", "shmctl")}},
			"ipc on SCMP_ARCH_X86 reaches shmat"},
		{"default allow, socket denied", specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Architectures: x86,
			Syscalls: []specs.LinuxSyscall{deny("socket")}}, "socketcall on SCMP_ARCH_X86 reaches socket"},
		{"socket allowed only for some arguments", specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Architectures: []specs.Arch{specs.ArchX86_64, specs.ArchX86},
			Syscalls: []specs.LinuxSyscall{allow("socketcall"), {Names: []string{"socket"}, Action: specs.ActAllow,
				Args: []specs.LinuxSeccompArg{{Index: 0, Value: 1, Op: specs.OpEqualTo}}}}}, "reaches socket,"},
		{"native only", specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Architectures: []specs.Arch{specs.ArchX86_64},
			Syscalls: []specs.LinuxSyscall{allow("read", "socketcall", "ipc")}}, ""},
		{"multiplexer denied", specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Architectures: x86,
			Syscalls: []specs.LinuxSyscall{allow("read", "connect")}}, ""},
		{"x32 has no multiplexer", specs.LinuxSeccomp{DefaultAction: specs.ActErrno, Architectures: []specs.Arch{specs.ArchX86_64, specs.ArchX32},
			Syscalls: []specs.LinuxSyscall{allow("socketcall", "ipc")}}, ""},
		{"everything reached is allowed", specs.LinuxSeccomp{DefaultAction: specs.ActAllow, Architectures: x86,
			Syscalls: []specs.LinuxSyscall{deny("mount")}}, ""},
		{"Glove's default profile", *DefaultProfile(ProfileOptions{InheritedFDs: []uint32{3}}), ""},
	} {
		err := CheckRoutes(&tc.p)
		switch {
		case tc.fault == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.fault != "" && (!errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.fault)):
			t.Errorf("%s: %v, want a refusal saying %q", tc.name, err, tc.fault)
		}
	}
}
