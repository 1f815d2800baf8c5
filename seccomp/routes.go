// SPDX-License-Identifier: Apache-2.0

package seccomp

import (
	"fmt"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// RoutesAnnotation, set to "intended" in a bundle's annotations, says
// that its profile's foreign-architecture routes (below) are meant, and
// glove-shim then compiles the profile as written.
const RoutesAnnotation = "org.glove.seccomp.foreign-routes"

// A multiplexer is one system call that reaches many others by a number
// in its first argument, on some architectures only. A seccomp rule sees
// the multiplexer, never the call it reaches, so allowing it allows all
// of them.
type multiplexer struct {
	name    string
	archs   []specs.Arch // where it exists
	reaches []string     // the calls it reaches, by their own names
}

var multiplexers = []multiplexer{
	{"socketcall", []specs.Arch{specs.ArchX86, specs.ArchPPC, specs.ArchPPC64, specs.ArchPPC64LE, specs.ArchS390, specs.ArchS390X,
		specs.ArchMIPS, specs.ArchMIPSEL},
		[]string{"socket", "bind", "connect", "listen", "accept", "accept4", "getsockname", "getpeername", "socketpair",
			"send", "recv", "sendto", "recvfrom", "shutdown", "setsockopt", "getsockopt", "sendmsg", "recvmsg",
			"recvmmsg", "sendmmsg"}},
	{"ipc", []specs.Arch{specs.ArchX86, specs.ArchPPC, specs.ArchPPC64, specs.ArchPPC64LE, specs.ArchS390, specs.ArchS390X,
		specs.ArchMIPS, specs.ArchMIPSEL},
		[]string{"semop", "semget", "semctl", "semtimedop", "msgsnd", "msgrcv", "msgget", "msgctl", "shmat", "shmdt", "shmget", "shmctl"}},
}

// allowing reports whether an action lets a call run.
func allowing(a specs.LinuxSeccompAction) bool {
	return a == specs.ActAllow || a == specs.ActLog
}

// verdict is what a profile does with one call name, on every listed
// architecture alike (rules name calls, not numbers).
type verdict struct{ all, some bool } // runs whatever its arguments; runs for some

func verdictOf(s *specs.LinuxSeccomp, name string) verdict {
	v := verdict{all: allowing(s.DefaultAction), some: allowing(s.DefaultAction)}
	for _, r := range s.Syscalls {
		if !slices.Contains(r.Names, name) {
			continue
		}
		switch {
		case allowing(r.Action):
			v.some = true
			if len(r.Args) == 0 {
				v.all = true
			}
		default:
			if len(r.Args) == 0 {
				v.all, v.some = false, false
			} else {
				v.all = false
			}
		}
	}
	return v
}

// CheckRoutes refuses (ErrRefused) a profile that denies a call, wholly
// or for some arguments, while it lists an architecture on which a
// multiplexer it allows reaches that call: the i386 socketcall of a
// profile that denies socket creates a socket all the same (threat: a
// bundle's filter that looks closed and is not, seen reaching a host
// stream listener and the machine's vsock ports). The line names the
// multiplexer, the architectures and the calls.
func CheckRoutes(s *specs.LinuxSeccomp) error {
	if s == nil {
		return nil
	}
	var faults []string
	for _, m := range multiplexers {
		var on []string
		for _, a := range s.Architectures {
			if slices.Contains(m.archs, a) {
				on = append(on, string(a))
			}
		}
		if len(on) == 0 || !verdictOf(s, m.name).some {
			continue
		}
		var denied []string
		for _, c := range m.reaches {
			if !verdictOf(s, c).all {
				denied = append(denied, c)
			}
		}
		if len(denied) > 0 {
			faults = append(faults, fmt.Sprintf("%s on %s reaches %s, which the profile denies", m.name, strings.Join(on, ", "), strings.Join(denied, ", ")))
		}
	}
	if len(faults) > 0 {
		return fmt.Errorf("%w: %s (deny the multiplexer or drop the architecture; annotation %s=intended if meant)",
			ErrRefused, strings.Join(faults, "; "), RoutesAnnotation)
	}
	return nil
}
