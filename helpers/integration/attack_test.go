// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"

	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

const attackEnv = "GLOVE_TEST_ATTACK_TARGET"

// attacks a compromised supervisor, running as the same service user,
// would try against a helper to borrow its capabilities or steal its
// descriptors. Each returns the errno (0: the kernel allowed it).
var attacks = []struct {
	name string
	run  func(pid int) syscall.Errno
}{
	{"ptrace attach", func(pid int) syscall.Errno {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := unix.PtraceAttach(pid); err != nil {
			return errno(err)
		}
		// Attached: wait for the attach stop and detach, so the process
		// runs on instead of staying stopped after the attacker exits.
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, unix.WALL, nil)
		_ = unix.PtraceDetach(pid)
		return 0
	}},
	{"open /proc/PID/mem", func(pid int) syscall.Errno {
		f, err := os.OpenFile(fmt.Sprintf("/proc/%d/mem", pid), os.O_RDWR, 0)
		if err == nil {
			f.Close()
		}
		return errno(err)
	}},
	{"process_vm_readv", func(pid int) syscall.Errno {
		buf := make([]byte, 16)
		local := []unix.Iovec{{Base: &buf[0], Len: 16}}
		remote := []unix.RemoteIovec{{Base: 0x400000, Len: 16}}
		_, err := unix.ProcessVMReadv(pid, local, remote, 0)
		if errors.Is(err, unix.EFAULT) {
			return 0 // past the permission check; the address was unmapped
		}
		return errno(err)
	}},
	{"pidfd_getfd (take a descriptor)", func(pid int) syscall.Errno {
		pidfd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			return errno(err)
		}
		defer unix.Close(pidfd)
		fd, err := unix.PidfdGetfd(pidfd, 0, 0)
		if err == nil {
			unix.Close(fd)
		}
		return errno(err)
	}},
}

func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EINVAL
}

// attackChild runs every attack against the target and, as a control,
// against a same-uid dumpable child of its own, and prints both verdicts
// as JSON. The control shows the attacks work where nothing stops them,
// so a refusal against the helper is the helper's doing.
func attackChild(target string) int {
	pid, err := strconv.Atoi(target)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	control := exec.Command("/bin/sleep", "60")
	if err := control.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "control:", err)
		return 1
	}
	defer func() { _ = control.Process.Kill(); _ = control.Wait() }()
	out := map[string]map[string]int{"helper": {}, "control": {}}
	for _, a := range attacks {
		out["helper"][a.name] = int(a.run(pid))
		out["control"][a.name] = int(a.run(control.Process.Pid))
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		return 1
	}
	return 0
}

// TestCompromisedSupervisorCannotBorrowHelper runs, as the service user,
// the attacks a compromised supervisor would use to act with a helper's
// capabilities or take its descriptors, and checks the kernel refuses
// each one against every helper, while the same attacks succeed against a
// dumpable process of the same user.
func TestCompromisedSupervisorCannotBorrowHelper(t *testing.T) {
	env := testenv.Get(t)
	// The test binary lives in a private build directory the service
	// user cannot reach: copy it into the environment's tree.
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	attacker := filepath.Join(env.Base, "attacker.test")
	if err := os.WriteFile(attacker, self, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(attacker) })
	for _, name := range servedHelpers {
		t.Run(name, func(t *testing.T) {
			testenv.CheckLeaks(t, env.UID)
			p, log := env.StartHelper(t, name)
			defer p.Close()
			if _, err := p.Hello(); err != nil {
				t.Fatalf("hello: %v\nhelper log: %s", err, log)
			}
			cmd := exec.Command(attacker)
			cmd.Env = []string{attackEnv + "=" + strconv.Itoa(p.Pid())}
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: env.Credential()}
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("attacker: %v\n%s", err, out)
			}
			var got map[string]map[string]int
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("attacker output %q: %v", out, err)
			}
			for _, a := range attacks {
				h, c := syscall.Errno(got["helper"][a.name]), syscall.Errno(got["control"][a.name])
				if c != 0 {
					t.Errorf("%s: failed against the control too (%v): the test proves nothing", a.name, c)
				}
				if h != syscall.EPERM && h != syscall.EACCES {
					t.Errorf("%s against %s: errno %d (%v), want EPERM or EACCES", a.name, name, int(h), h)
				}
			}
		})
	}
}
