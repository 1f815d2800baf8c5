// SPDX-License-Identifier: Apache-2.0

package notify

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// childEnv selects the child's mode when the test binary runs itself.
const childEnv = "GLOVE_NOTIFY_TEST_CHILD"

func init() {
	// The child's connect must come from its main thread, whose id is
	// the process id the parent checks Notif.Pid against (the kernel
	// reports the calling thread's id).
	if os.Getenv(childEnv) != "" {
		runtime.LockOSThread()
	}
}

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode))
	}
	os.Exit(m.Run())
}

// ioc is the kernel's _IOC(dir, type, nr, size) (asm-generic/ioctl.h).
func ioc(dir, typ, nr, size uint) uint {
	return dir<<30 | size<<16 | typ<<8 | nr
}

// TestIoctlNumbers derives each request from linux/seccomp.h's
// definitions: SECCOMP_IOWR(0, struct seccomp_notif) and so on, with
// magic '!', _IOC_WRITE 1, _IOC_READ 2, and the structures' sizes (80,
// 24, 8, 24 bytes), which this package's types must have too.
func TestIoctlNumbers(t *testing.T) {
	const write, read, magic = 1, 2, '!'
	for _, c := range []struct {
		name      string
		got, want uint
	}{
		{"RECV", ioctlRecv, ioc(read|write, magic, 0, 80)},
		{"SEND", ioctlSend, ioc(read|write, magic, 1, 24)},
		{"ID_VALID", ioctlIDValid, ioc(write, magic, 2, 8)},
		{"ADDFD", ioctlAddFD, ioc(write, magic, 3, 24)},
		{"sizeof(seccomp_notif)", uint(unsafe.Sizeof(Notif{})), 80},
		{"sizeof(seccomp_notif_resp)", uint(unsafe.Sizeof(resp{})), 24},
		{"sizeof(seccomp_notif_addfd)", uint(unsafe.Sizeof(addfd{})), 24},
		{"sizeof(seccomp_notif_sizes)", uint(unsafe.Sizeof(notifSizes{})), 6},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
}

func TestCheckSizes(t *testing.T) {
	if err := CheckSizes(); err != nil {
		t.Fatal(err)
	}
}

// TestRespondErrorRange: an errno of 0 would tell the program a connect
// that never ran succeeded; above MAX_ERRNO it would read as a value.
// Both are refused before any ioctl (the listener -1 would fail it).
func TestRespondErrorRange(t *testing.T) {
	for _, e := range []unix.Errno{0, maxErrno + 1, 1 << 20} {
		err := RespondError(-1, 1, e)
		if err == nil || errors.Is(err, unix.EBADF) {
			t.Errorf("RespondError(errno %d) = %v, want a refusal before the ioctl", e, err)
		}
	}
	if _, err := InstallAt(-1, 1, -1, 3, false); err == nil || errors.Is(err, unix.EBADF) {
		t.Errorf("InstallAt(src -1) = %v, want a refusal before the ioctl", err)
	}
}

// nativeArch is the AUDIT_ARCH_* value of this build's architecture.
func nativeArch() uint32 {
	switch runtime.GOARCH {
	case "amd64":
		return 0xc000003e
	case "arm64":
		return 0xc00000b7
	}
	panic("no AUDIT_ARCH for " + runtime.GOARCH)
}

// child loads a filter that notifies connect (anything else allowed; a
// foreign architecture killed), sends the listener on descriptor 3,
// then connects an AF_UNIX stream socket and says what it saw.
func child(mode string) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "child: "+format+"\n", args...)
		return 2
	}
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 4},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 1, K: nativeArch()},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_KILL_PROCESS},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jf: 1, K: unix.SYS_CONNECT},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_USER_NOTIF},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail("no_new_privs: %v", err)
	}
	// TSYNC with NEW_LISTENER needs TSYNC_ESRCH (seccomp(2)).
	flags := unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_TSYNC | unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH
	l, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, uintptr(flags), uintptr(unsafe.Pointer(&fprog)))
	if e != 0 {
		return fail("seccomp: %v", e)
	}
	if err := unix.Sendmsg(3, []byte{0}, unix.UnixRights(int(l)), nil, 0); err != nil {
		return fail("send the listener: %v", err)
	}
	if err := unix.Close(int(l)); err != nil {
		return fail("close the listener: %v", err)
	}
	s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail("socket: %v", err)
	}
	err = unix.Connect(s, &unix.SockaddrUnix{Name: "/glove-notify-test/" + mode})
	fmt.Printf("fd=%d connect=%v\n", s, err)
	switch mode {
	case "refuse":
		if !errors.Is(err, unix.ECONNREFUSED) {
			return fail("connect = %v, want ECONNREFUSED", err)
		}
	case "install":
		if err != nil {
			return fail("connect = %v, want success", err)
		}
		if _, err := unix.Write(s, []byte("x")); err != nil {
			return fail("write through the installed socket: %v", err)
		}
		var b [1]byte
		if n, err := unix.Read(s, b[:]); err != nil || n != 1 || b[0] != 'y' {
			return fail("read the answer: %d %q %v", n, b[:n], err)
		}
	}
	return 0
}

// started is a child that has loaded its filter, and the listener it
// sent.
type started struct {
	cmd      *exec.Cmd
	listener int
	out      *strings.Builder
}

func start(t *testing.T, mode string) *started {
	t.Helper()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	mine, theirs := os.NewFile(uintptr(pair[0]), "parent"), os.NewFile(uintptr(pair[1]), "child")
	defer mine.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.ExtraFiles = []*os.File{theirs}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := theirs.Close(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			if err := cmd.Process.Kill(); err != nil {
				t.Errorf("kill the child: %v", err)
			}
			if err := cmd.Wait(); err != nil && !strings.Contains(err.Error(), "killed") {
				t.Errorf("wait for the child: %v", err)
			}
		}
	})
	b, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := unix.Recvmsg(pair[0], b, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil || n != 1 {
		t.Fatalf("receive the listener: %d bytes, %v (child: %s)", n, err, out)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("control message: %v", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		t.Fatalf("rights: %v %v", fds, err)
	}
	t.Cleanup(func() {
		if err := unix.Close(fds[0]); err != nil {
			t.Errorf("close the listener: %v", err)
		}
	})
	return &started{cmd: cmd, listener: fds[0], out: out}
}

// recvConnect receives the child's connect and checks it is one.
func (s *started) recvConnect(t *testing.T) Notif {
	t.Helper()
	n, err := Recv(s.listener)
	if err != nil {
		t.Fatalf("Recv: %v (child: %s)", err, s.out)
	}
	if n.Nr != unix.SYS_CONNECT || n.Pid != uint32(s.cmd.Process.Pid) || n.Arch != nativeArch() {
		t.Fatalf("notification nr %d pid %d arch %#x, want connect (%d) from %d, arch %#x",
			n.Nr, n.Pid, n.Arch, unix.SYS_CONNECT, s.cmd.Process.Pid, nativeArch())
	}
	if err := IDValid(s.listener, n.ID); err != nil {
		t.Fatalf("IDValid while the child waits: %v", err)
	}
	return n
}

func (s *started) wait(t *testing.T) {
	t.Helper()
	if err := s.cmd.Wait(); err != nil {
		t.Fatalf("child: %v: %s", err, s.out)
	}
}

func TestRespondErrorRefusesConnect(t *testing.T) {
	s := start(t, "refuse")
	n := s.recvConnect(t)
	if err := RespondError(s.listener, n.ID, unix.ECONNREFUSED); err != nil {
		t.Fatal(err)
	}
	s.wait(t)
	if !strings.Contains(s.out.String(), "connect=connection refused") {
		t.Fatalf("child said %q", s.out)
	}
}

func TestInstallAtConnects(t *testing.T) {
	s := start(t, "install")
	n := s.recvConnect(t)
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pair[1])
	dst := int(n.Args[0])
	got, err := InstallAt(s.listener, n.ID, pair[0], dst, true)
	if cerr := unix.Close(pair[0]); cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got != dst {
		t.Fatalf("InstallAt reports descriptor %d, want %d", got, dst)
	}
	if err := RespondValue(s.listener, n.ID, 0); err != nil {
		t.Fatal(err)
	}
	tv := unix.Timeval{Sec: 10}
	if err := unix.SetsockoptTimeval(pair[1], unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	if m, err := unix.Read(pair[1], b[:]); err != nil || m != 1 || b[0] != 'x' {
		t.Fatalf("read what the child wrote through its descriptor %d: %d %q %v (child: %s)", dst, m, b[:m], err, s.out)
	}
	if _, err := unix.Write(pair[1], []byte("y")); err != nil {
		t.Fatal(err)
	}
	s.wait(t)
	if !strings.Contains(s.out.String(), fmt.Sprintf("fd=%d connect=<nil>", dst)) {
		t.Fatalf("child said %q", s.out)
	}
}

func TestIDValidAfterDeath(t *testing.T) {
	s := start(t, "die")
	n := s.recvConnect(t)
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err := s.cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child: %v, want killed", err)
	}
	// The notification goes when the task does; give the kernel the
	// exit's last steps, which follow the wait.
	deadline := time.Now().Add(5 * time.Second)
	for {
		err = IDValid(s.listener, n.ID)
		if err != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !errors.Is(err, ErrGone) || !errors.Is(err, unix.ENOENT) {
		t.Fatalf("IDValid after the child died = %v, want ErrGone", err)
	}
	if err := RespondValue(s.listener, n.ID, 0); !errors.Is(err, ErrGone) {
		t.Fatalf("RespondValue after the child died = %v, want ErrGone", err)
	}
	if _, err := InstallAt(s.listener, n.ID, 0, 5, true); !errors.Is(err, ErrGone) {
		t.Fatalf("InstallAt after the child died = %v, want ErrGone", err)
	}
}
