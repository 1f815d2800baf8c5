// SPDX-License-Identifier: Apache-2.0

package seccomp

import (
	"slices"
	"strings"
	"testing"

	mseccomp "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// dockerDenied is DESIGN.md's list of what Docker's default profile denies
// (io_uring_* and kexec_* expanded).
var dockerDenied = strings.Fields(`keyctl add_key request_key bpf perf_event_open
	userfaultfd unshare setns mount umount2 pivot_root chroot fsopen fsconfig
	fsmount fspick move_mount open_tree mount_setattr io_uring_setup
	io_uring_enter io_uring_register kexec_load kexec_file_load init_module
	finit_module open_by_handle_at pidfd_getfd process_madvise kcmp quotactl
	syslog acct swapon reboot settimeofday clock_settime`)

// allowedBy returns, per syscall name, whether p allows it unconditionally
// (true) or only under conditions (false, present).
func allowedBy(p *specs.LinuxSeccomp) map[string]bool {
	out := map[string]bool{}
	for _, r := range p.Syscalls {
		if r.Action != specs.ActAllow {
			continue
		}
		for _, n := range r.Names {
			out[n] = out[n] || len(r.Args) == 0
		}
	}
	return out
}

func TestDefaultProfileDeniesDockerDenials(t *testing.T) {
	p := DefaultProfile(ProfileOptions{InheritedFDs: []uint32{3, 4, 5}})
	if p.DefaultAction != specs.ActErrno || p.DefaultErrnoRet == nil || *p.DefaultErrnoRet != uint(unix.EPERM) {
		t.Fatalf("default action %s %v, want ERRNO(EPERM)", p.DefaultAction, p.DefaultErrnoRet)
	}
	allow := allowedBy(p)
	// Beyond Docker: the native AIO calls (one machine-wide budget).
	aio := strings.Fields("io_setup io_destroy io_submit io_cancel io_getevents io_pgetevents")
	for _, n := range append(append(dockerDenied, aio...), "socket", "connect", "clone3", "ptrace") {
		if _, ok := allow[n]; ok {
			t.Errorf("%s is allowed", n)
		}
		// The name must be one libseccomp knows, or the default action
		// would not be what meets it (it would be refused, or missing).
		if _, err := libseccomp.GetSyscallFromName(n); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	if allow["clone"] {
		t.Error("clone allowed unconditionally")
	}
	var sawClone, sawClone3 bool
	for _, r := range p.Syscalls {
		switch {
		case slices.Equal(r.Names, []string{"clone"}):
			sawClone = len(r.Args) == 1 && r.Args[0] == specs.LinuxSeccompArg{Index: 0, Value: 0x7E020000, Op: specs.OpMaskedEqual}
		case slices.Equal(r.Names, []string{"clone3"}):
			sawClone3 = r.Action == specs.ActErrno && r.ErrnoRet != nil && *r.ErrnoRet == uint(unix.ENOSYS)
		}
	}
	if !sawClone || !sawClone3 {
		t.Errorf("clone rule %v, clone3 ENOSYS rule %v", sawClone, sawClone3)
	}
	if _, err := ExportBPF(p); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultProfileInheritedFDs(t *testing.T) {
	for _, fds := range [][]uint32{nil, {3}, {3, 4, 5}} {
		p := DefaultProfile(ProfileOptions{InheritedFDs: fds})
		var got []uint64
		for _, r := range p.Syscalls {
			if !slices.Contains(r.Names, "getsockname") && !slices.Contains(r.Names, "getsockopt") {
				continue
			}
			if len(r.Names) != 1 || r.Action != specs.ActAllow || len(r.Args) == 0 || r.Args[0].Index != 0 {
				t.Fatalf("fds %v: unexpected rule %+v", fds, r)
			}
			for _, a := range r.Args {
				if a.Op != specs.OpEqualTo || a.ValueTwo != 0 {
					t.Fatalf("fds %v: non-EQ condition %+v", fds, a)
				}
			}
			want := []specs.LinuxSeccompArg{{Index: 0, Value: r.Args[0].Value, Op: specs.OpEqualTo}}
			if r.Names[0] == "getsockopt" {
				want = append(want,
					specs.LinuxSeccompArg{Index: 1, Value: unix.SOL_SOCKET, Op: specs.OpEqualTo},
					specs.LinuxSeccompArg{Index: 2, Value: unix.SO_TYPE, Op: specs.OpEqualTo})
			}
			if !slices.Equal(r.Args, want) {
				t.Fatalf("fds %v: %s args %+v, want %+v", fds, r.Names[0], r.Args, want)
			}
			got = append(got, r.Args[0].Value)
		}
		var want []uint64
		for _, fd := range fds {
			want = append(want, uint64(fd), uint64(fd))
		}
		if !slices.Equal(got, want) {
			t.Errorf("fds %v: rules on %v, want %v", fds, got, want)
		}
	}
}

// TestDefaultProfileNoWiderThanDocker: whatever Docker's default profile
// (resolved for no capabilities) does not allow, ours does not allow either;
// what it allows only conditionally, ours allows only conditionally.
func TestDefaultProfileNoWiderThanDocker(t *testing.T) {
	d, err := mseccomp.GetDefaultProfile(&specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}})
	if err != nil {
		t.Fatalf("moby default profile: %v", err)
	}
	docker := allowedBy(d)
	ours := allowedBy(DefaultProfile(ProfileOptions{InheritedFDs: []uint32{3}, LocalServiceConnect: true}))
	if len(docker) < 300 {
		t.Fatalf("Docker's profile resolved to only %d allowed names", len(docker))
	}
	for n, unconditional := range ours {
		dUnconditional, ok := docker[n]
		if !ok {
			t.Errorf("%s: allowed by us, not by Docker", n)
		} else if unconditional && !dUnconditional {
			t.Errorf("%s: allowed unconditionally by us, conditionally by Docker", n)
		}
	}
	for _, n := range dockerDenied {
		if _, ok := docker[n]; ok {
			t.Errorf("DESIGN.md says Docker denies %s, moby allows it", n)
		}
	}
}

// TestDefaultProfileLocalServiceConnect: the option adds exactly these
// rules, at the end, and without it the profile is what it was.
func TestDefaultProfileLocalServiceConnect(t *testing.T) {
	base := DefaultProfile(ProfileOptions{InheritedFDs: []uint32{3}})
	with := DefaultProfile(ProfileOptions{InheritedFDs: []uint32{3}, LocalServiceConnect: true})
	for _, r := range base.Syscalls {
		for _, n := range r.Names {
			if n == "socket" || n == "connect" || n == "getpeername" || r.Action == specs.ActNotify {
				t.Errorf("without the option: rule %+v", r)
			}
		}
	}
	if len(with.Syscalls) < len(base.Syscalls) {
		t.Fatalf("%d rules with the option, %d without", len(with.Syscalls), len(base.Syscalls))
	}
	for i := range base.Syscalls {
		if !ruleEqual(base.Syscalls[i], with.Syscalls[i]) {
			t.Errorf("rule %d changed by the option: %+v, was %+v", i, with.Syscalls[i], base.Syscalls[i])
		}
	}
	added := with.Syscalls[len(base.Syscalls):]
	want := []specs.LinuxSyscall{
		{Names: []string{"socket"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{
			{Index: 0, Value: unix.AF_UNIX, Op: specs.OpEqualTo},
			{Index: 1, Value: 0xffffffff &^ uint64(unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC), ValueTwo: unix.SOCK_STREAM, Op: specs.OpMaskedEqual},
		}},
		{Names: []string{"connect"}, Action: specs.ActNotify},
		{Names: []string{"getsockopt"}, Action: specs.ActAllow, Args: []specs.LinuxSeccompArg{
			{Index: 1, Value: unix.SOL_SOCKET, Op: specs.OpEqualTo},
			{Index: 2, Value: unix.SO_ERROR, Op: specs.OpEqualTo},
		}},
		{Names: []string{"getpeername", "getsockname"}, Action: specs.ActAllow},
	}
	if len(added) != len(want) {
		t.Fatalf("the option adds %d rules, want %d: %+v", len(added), len(want), added)
	}
	for i := range want {
		if !ruleEqual(added[i], want[i]) {
			t.Errorf("added rule %d = %+v, want %+v", i, added[i], want[i])
		}
	}
	// Still denied with the option: serving a socket, and changing one.
	allow := allowedBy(with)
	for _, n := range []string{"bind", "listen", "accept", "accept4", "shutdown", "setsockopt", "connect"} {
		if _, ok := allow[n]; ok {
			t.Errorf("%s allowed with the option", n)
		}
	}
	// A listener is the caller's (spec.Launch.SeccompListenerFD): the
	// profile alone names none, and Compile refuses it without one.
	if with.ListenerPath != "" {
		t.Errorf("listenerPath %q set by the profile", with.ListenerPath)
	}
	if _, err := ExportBPF(with); err == nil || !strings.Contains(err.Error(), "listenerPath") {
		t.Errorf("notify profile without a listener compiled: %v", err)
	}
	with.ListenerPath = "/proc/self/fd/3"
	if _, err := ExportBPF(with); err != nil {
		t.Fatal(err)
	}
}

func ruleEqual(a, b specs.LinuxSyscall) bool {
	return slices.Equal(a.Names, b.Names) && a.Action == b.Action && slices.Equal(a.Args, b.Args) &&
		(a.ErrnoRet == nil) == (b.ErrnoRet == nil) && (a.ErrnoRet == nil || *a.ErrnoRet == *b.ErrnoRet)
}
