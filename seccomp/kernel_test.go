// SPDX-License-Identifier: Apache-2.0

package seccomp

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// childEnv makes the re-executed test binary run kernelChild instead of
// the tests.
const childEnv = "GLOVE_SECCOMP_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		kernelChild()
		return
	}
	os.Exit(m.Run())
}

// kernelChild loads the default profile (inherited descriptor 3) and prints,
// as JSON, the errno of each probe (0 for success). It runs with fd 3 and
// fd 4 both socketpair ends, so a denial on 4 is seccomp's, not EBADF or
// ENOTSOCK.
func kernelChild() {
	fail := func(err error) { fmt.Fprintln(os.Stderr, err); os.Exit(2) }
	// A Go program is multi-threaded: the filter must reach every thread
	// (libseccomp's TSYNC), and no_new_privs is set on this locked thread
	// first as the shim does.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fail(fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err))
	}
	f, err := Compile(DefaultProfile(ProfileOptions{InheritedFDs: []uint32{3}}))
	if err != nil {
		fail(err)
	}
	if err := f.Load(); err != nil {
		fail(fmt.Errorf("load: %w", err))
	}
	errno := func(_, _ uintptr, e unix.Errno) int { return int(e) }
	sys := func(nr uintptr, a ...uintptr) int {
		var v [6]uintptr
		copy(v[:], a)
		return errno(unix.Syscall6(nr, v[0], v[1], v[2], v[3], v[4], v[5]))
	}
	var typ, size int32 = 0, 4
	opt := func(fd uintptr, name uintptr) int {
		return sys(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, name, uintptr(unsafe.Pointer(&typ)), uintptr(unsafe.Pointer(&size)))
	}
	var sa [128]byte
	salen := uint32(len(sa))
	name := func(fd uintptr) int {
		return sys(unix.SYS_GETSOCKNAME, fd, uintptr(unsafe.Pointer(&sa[0])), uintptr(unsafe.Pointer(&salen)))
	}
	// An unknown filesystem type: without the filter the kernel answers
	// ENODEV, so a broken filter can never leave a mount behind.
	src, _ := unix.BytePtrFromString("none")
	tgt, _ := unix.BytePtrFromString("/")
	fstype, _ := unix.BytePtrFromString("glove-no-such-fs")
	var sv [2]int32
	pair := func(family, typ uintptr) int {
		return sys(unix.SYS_SOCKETPAIR, family, typ, 0, uintptr(unsafe.Pointer(&sv[0])))
	}
	res := map[string]int{
		"socketpair(UNIX,STREAM|CLOEXEC)": pair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK),
		"socketpair(UNIX,DGRAM)":          pair(unix.AF_UNIX, unix.SOCK_DGRAM),
		"socketpair(UNIX,DGRAM|CLOEXEC)":  pair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC),
		"socketpair(UNIX,SEQPACKET)":      pair(unix.AF_UNIX, unix.SOCK_SEQPACKET),
		"socketpair(UNIX,STREAM+2^32)":    pair(unix.AF_UNIX, 1<<32|unix.SOCK_STREAM),
		"socketpair(UNIX,DGRAM+2^32)":     pair(unix.AF_UNIX, 1<<32|unix.SOCK_DGRAM),
		"getpid":                          sys(unix.SYS_GETPID),
		"unshare(CLONE_NEWUSER)":          sys(unix.SYS_UNSHARE, unix.CLONE_NEWUSER),
		"mount(no-such-fs)":               sys(unix.SYS_MOUNT, uintptr(unsafe.Pointer(src)), uintptr(unsafe.Pointer(tgt)), uintptr(unsafe.Pointer(fstype))),
		"keyctl(GET_KEYRING_ID)":          sys(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, uintptr(0xfffffffd)), // KEY_SPEC_SESSION_KEYRING
		"socket(AF_INET)":                 sys(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM),
		"connect(3)":                      sys(unix.SYS_CONNECT, 3, 0, 0),
		"clone3":                          sys(unix.SYS_CLONE3, 0, 0),
		"clone(NEWUSER|NEWNS|FS)":         sys(unix.SYS_CLONE, unix.CLONE_NEWUSER|unix.CLONE_NEWNS|unix.CLONE_FS),
		"getsockopt(3,SO_TYPE)":           opt(3, unix.SO_TYPE),
		"getsockopt(3,SO_RCVBUF)":         opt(3, unix.SO_RCVBUF),
		"getsockopt(4,SO_TYPE)":           opt(4, unix.SO_TYPE),
		"getsockopt(3+2^32,TYPE)":         opt(1<<32|3, unix.SO_TYPE),
		"getsockname(3)":                  name(3),
		"getsockname(4)":                  name(4),
		"personality(ADDR_NO_RND)":        sys(unix.SYS_PERSONALITY, 0x0040000), // ADDR_NO_RANDOMIZE,
	}
	res["so_type"] = int(typ)
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fail(err)
	}
	os.Exit(0)
}

// TestDefaultProfileOnKernel runs kernelChild and checks each call's fate.
// No privilege is needed: no_new_privs lets anyone load a filter.
func TestDefaultProfileOnKernel(t *testing.T) {
	a, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("socketpair: %v", err)
	}
	b, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("socketpair: %v", err)
	}
	files := []*os.File{os.NewFile(uintptr(a[0]), "fd3"), os.NewFile(uintptr(b[0]), "fd4")}
	for _, fd := range []int{a[1], b[1]} {
		defer unix.Close(fd)
	}
	for _, f := range files {
		defer f.Close()
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = []string{childEnv + "=1"}
	cmd.ExtraFiles = files
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("child: %v (%s)", err, ee.ProcessState)
		}
		t.Fatalf("child: %v", err)
	}
	var res map[string]int
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("child output %q: %v", out, err)
	}
	want := map[string]int{
		"socketpair(UNIX,STREAM|CLOEXEC)": 0,
		"socketpair(UNIX,DGRAM)":          int(unix.EPERM),
		"socketpair(UNIX,DGRAM|CLOEXEC)":  int(unix.EPERM),
		"socketpair(UNIX,SEQPACKET)":      int(unix.EPERM),
		// The kernel reads the type as an int: the upper half changes
		// nothing, for the filter either.
		"socketpair(UNIX,STREAM+2^32)": 0,
		"socketpair(UNIX,DGRAM+2^32)":  int(unix.EPERM),
		"getpid":                       0,
		"unshare(CLONE_NEWUSER)":       int(unix.EPERM),
		"mount(no-such-fs)":            int(unix.EPERM), // the kernel alone says ENODEV
		"keyctl(GET_KEYRING_ID)":       int(unix.EPERM),
		"socket(AF_INET)":              int(unix.EPERM),
		"connect(3)":                   int(unix.EPERM),
		"clone3":                       int(unix.ENOSYS),
		"clone(NEWUSER|NEWNS|FS)":      int(unix.EPERM), // the kernel alone says EINVAL
		"getsockopt(3,SO_TYPE)":        0,
		"so_type":                      unix.SOCK_STREAM,
		"getsockopt(3,SO_RCVBUF)":      int(unix.EPERM),
		"getsockopt(4,SO_TYPE)":        int(unix.EPERM),
		"getsockopt(3+2^32,TYPE)":      int(unix.EPERM), // the kernel truncates fd to int: would be fd 3
		"getsockname(3)":               0,
		"getsockname(4)":               int(unix.EPERM),
		"personality(ADDR_NO_RND)":     int(unix.EPERM),
	}
	for k, w := range want {
		if g, ok := res[k]; !ok || g != w {
			t.Errorf("%s: got %d (%v), want %d (%v)", k, g, unix.Errno(g), w, unix.Errno(w))
		}
	}
}
