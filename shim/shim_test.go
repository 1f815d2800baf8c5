// SPDX-License-Identifier: Apache-2.0

package shim_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/mountwire"
	"github.com/glove-sandbox/glove/helpers/wire/wirecall"
	"github.com/glove-sandbox/glove/seccomp"
	"github.com/glove-sandbox/glove/spec"
	"github.com/glove-sandbox/glove/testenv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	// The test binary doubles as the wrapper of TestShimRefusesWithoutLandlock.
	if mode, ok := os.LookupEnv(wrapEnv); ok {
		os.Exit(wrapExec(mode, os.Args[1:]))
	}
	testenv.Main(m)
}

// wrapEnv makes the test binary a wrapper that executes its arguments,
// after a seccomp filter that answers ENOSYS to landlock_create_ruleset
// when the value is "no-landlock" (a kernel without Landlock, as every
// stage and the program see it), with no filter when it is "none", with
// a filter that makes the Landlock ABI version query answer N when it is
// "landlock-abi=N" (an older kernel's ABI, as every stage sees it; the
// other Landlock calls reach this kernel, which accepts what an older
// one would), with one that refuses new user namespaces when it is
// wrapNoUserns (a host that refuses them, hardened_test.go), and with one
// that refuses every mount when it is wrapNoMount (probe_test.go).
const wrapEnv = "GLOVE_SHIM_TEST_WRAP"

func wrapExec(mode string, argv []string) int {
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "wrap: no command")
		return 2
	}
	// The filter is this thread's (no TSYNC), and execve must run on it.
	runtime.LockOSThread()
	if abi, ok := strings.CutPrefix(mode, "landlock-abi="); ok {
		return wrapLandlockABI(abi, argv)
	}
	switch mode {
	case "no-landlock":
		f, err := libseccomp.NewFilter(libseccomp.ActAllow)
		if err == nil {
			err = f.AddRule(libseccomp.ScmpSyscall(unix.SYS_LANDLOCK_CREATE_RULESET), libseccomp.ActErrno.SetReturnCode(int16(unix.ENOSYS)))
		}
		if err == nil {
			err = f.Load() // sets no_new_privs first, as the shim does anyway
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "wrap: seccomp:", err)
			return 2
		}
	case wrapNoUserns:
		if err := loadNoUserns(); err != nil {
			fmt.Fprintln(os.Stderr, "wrap: seccomp:", err)
			return 2
		}
	case wrapNoMount:
		if err := loadNoMount(); err != nil {
			fmt.Fprintln(os.Stderr, "wrap: seccomp:", err)
			return 2
		}
	case "none":
	default:
		fmt.Fprintln(os.Stderr, "wrap: unknown mode", mode)
		return 2
	}
	err := syscall.Exec(argv[0], argv, []string{})
	fmt.Fprintln(os.Stderr, "wrap: exec:", err)
	return 2
}

// loadNoUserns loads, on this thread, the filter of wrapNoUserns: clone
// and unshare with CLONE_NEWUSER in their flags fail with EPERM, as on a
// kernel with Debian's kernel.unprivileged_userns_clone=0, and clone3
// with ENOSYS, since a filter cannot read the flags it points to (glibc,
// Go and util-linux then use clone).
func loadNoUserns() error {
	f, err := libseccomp.NewFilter(libseccomp.ActAllow)
	if err != nil {
		return err
	}
	newuser := []libseccomp.ScmpCondition{{Argument: 0, Op: libseccomp.CompareMaskedEqual, Operand1: unix.CLONE_NEWUSER, Operand2: unix.CLONE_NEWUSER}}
	for _, sc := range []int{unix.SYS_CLONE, unix.SYS_UNSHARE} {
		if err := f.AddRuleConditional(libseccomp.ScmpSyscall(sc), libseccomp.ActErrno.SetReturnCode(int16(unix.EPERM)), newuser); err != nil {
			return err
		}
	}
	if err := f.AddRule(libseccomp.ScmpSyscall(unix.SYS_CLONE3), libseccomp.ActErrno.SetReturnCode(int16(unix.ENOSYS))); err != nil {
		return err
	}
	return f.Load() // sets no_new_privs first, as the shim does anyway
}

// wrapNoMount is the wrapper mode that refuses every way of making or
// changing a mount with EPERM, as an AppArmor profile without mount
// rules does (probe_test.go).
const wrapNoMount = "no-mount"

// loadNoMount loads, on this thread, the filter of wrapNoMount.
func loadNoMount() error {
	f, err := libseccomp.NewFilter(libseccomp.ActAllow)
	if err != nil {
		return err
	}
	for _, sc := range []int{unix.SYS_MOUNT, unix.SYS_FSOPEN, unix.SYS_FSMOUNT, unix.SYS_MOVE_MOUNT, unix.SYS_OPEN_TREE, unix.SYS_MOUNT_SETATTR} {
		if err := f.AddRule(libseccomp.ScmpSyscall(sc), libseccomp.ActErrno.SetReturnCode(int16(unix.EPERM))); err != nil {
			return err
		}
	}
	return f.Load() // sets no_new_privs first
}

// inheritedFiles is the descriptor table a child of this wrapper gets:
// standard input, output and error, and every descriptor this process
// inherited (not close-on-exec: what its caller passed, such as a
// --userns-fd), each at its own number; the runtime's own descriptors
// are close-on-exec and stay here.
func inheritedFiles() ([]uintptr, error) {
	files := []uintptr{0, 1, 2}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	for _, ent := range ents {
		fd, err := strconv.Atoi(ent.Name())
		if err != nil || fd < 3 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue // the directory's own descriptor, gone; or the runtime's
		}
		for len(files) <= fd {
			files = append(files, ^uintptr(0)) // closed in the child
		}
		files[fd] = uintptr(fd)
	}
	return files, nil
}

// wrapLandlockABI runs argv in a child whose Landlock ABI version query
// (landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION))
// this process answers with abi, through a seccomp user notification,
// and exits with the child's status.
func wrapLandlockABI(abi string, argv []string) int {
	n, err := strconv.ParseUint(abi, 10, 8)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wrap: landlock-abi:", err)
		return 2
	}
	f, err := libseccomp.NewFilter(libseccomp.ActAllow)
	if err == nil {
		err = f.AddRuleConditional(libseccomp.ScmpSyscall(unix.SYS_LANDLOCK_CREATE_RULESET), libseccomp.ActNotify,
			[]libseccomp.ScmpCondition{{Argument: 2, Op: libseccomp.CompareEqual, Operand1: unix.LANDLOCK_CREATE_RULESET_VERSION}})
	}
	if err == nil {
		err = f.Load() // on this thread, which forks the child below
	}
	var fd libseccomp.ScmpFd
	if err == nil {
		fd, err = f.GetNotifFd()
	}
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "wrap: seccomp:", err)
		return 2
	}
	files, err := inheritedFiles()
	if err != nil {
		fmt.Fprintln(os.Stderr, "wrap: descriptors:", err)
		return 2
	}
	pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{Env: []string{}, Files: files})
	if err != nil {
		fmt.Fprintln(os.Stderr, "wrap: exec:", err)
		return 2
	}
	go func() {
		for {
			req, err := libseccomp.NotifReceive(fd)
			if err != nil {
				if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINTR) {
					continue // the caller was gone before the answer
				}
				return
			}
			// An error here is a caller that has gone: nothing to answer.
			_ = libseccomp.NotifRespond(fd, &libseccomp.ScmpNotifResp{ID: req.ID, Val: n})
		}
	}()
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		fmt.Fprintln(os.Stderr, "wrap: wait:", err)
		return 2
	}
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// TestShimLandlockABIs: stage 2 builds its ruleset for the Landlock ABI
// the kernel reports (Debian 12's 6.1 has 2, Debian 13's 6.12 has 6):
// the sandbox runs, and the program writes beneath a writable mount, at
// ABI 1, 2, 3 (handled_access_fs only), 4 (with the network member) and
// 6 (with the scopes). The scopes are set from ABI 6 and not before:
// from 6 the program cannot signal PID 1, which is outside its Landlock
// domain (and the same user, so nothing else refuses it); before, it can.
// This kernel accepts every attribute size; only an older kernel (the VM
// lane) shows that it would refuse a member it does not know.
func TestShimLandlockABIs(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	if abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION); errno != 0 || abi < 6 {
		t.Skipf("skipped: this kernel's Landlock ABI is %d (%v); the test emulates older ABIs on a kernel with 6 or more", abi, errno)
	}
	wrapper := testenv.CopyTestBinary(t)
	for _, abi := range []int{1, 2, 3, 4, 6} {
		t.Run(fmt.Sprint("abi", abi), func(t *testing.T) {
			b := e.NewBundle(t)
			b.Spec.Process.Args = []string{"/bin/sh", "-c", `echo ok > /workspace/w && echo wrote; if kill -0 1 2>/dev/null; then echo signal-pid1; else echo no-signal-pid1; fi`}
			b.Write(t)
			r := runShim(t, e, testenv.ShimRun{
				Shim: wrapper,
				Args: []string{e.HelperPath("glove-shim"), "run", "--bundle", b.Dir, "t"},
				Env:  []string{wrapEnv + "=landlock-abi=" + strconv.Itoa(abi)},
			})
			want := "wrote\nsignal-pid1\n"
			if abi >= 6 {
				want = "wrote\nno-signal-pid1\n"
			}
			if r.Code != 0 || r.Stdout != want {
				t.Errorf("exit %d, stdout %q, want 0 and %q\nstderr: %s", r.Code, r.Stdout, want, r.Stderr)
			}
		})
	}
}

// TestShimRefusesWithoutLandlock: on a kernel without Landlock the shim
// fails with one line before the program runs, never building a sandbox
// that lacks the layer. The control runs the same wrapper without its
// filter, and the program runs.
func TestShimRefusesWithoutLandlock(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	// A copy of this binary the service user may execute.
	wrapper := testenv.CopyTestBinary(t)
	for _, mode := range []string{"none", "no-landlock"} {
		t.Run(mode, func(t *testing.T) {
			b := e.NewBundle(t)
			b.Spec.Process.Args = []string{"/bin/sh", "-c", "echo ran > /workspace/ran"}
			b.Write(t)
			r := runShim(t, e, testenv.ShimRun{
				Shim: wrapper,
				Args: []string{e.HelperPath("glove-shim"), "run", "--bundle", b.Dir, "t"},
				Env:  []string{wrapEnv + "=" + mode},
			})
			_, statErr := os.Stat(filepath.Join(b.Workspace, "ran"))
			if mode == "none" {
				if r.Code != 0 || statErr != nil {
					t.Fatalf("control: exit %d, program ran: %v\nstderr: %s", r.Code, statErr == nil, r.Stderr)
				}
				return
			}
			lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
			if r.Code != 125 || len(lines) != 1 || !strings.Contains(lines[0], "landlock: not available") {
				t.Errorf("exit %d, stderr %q: want 125 and one line naming Landlock", r.Code, r.Stderr)
			}
			if statErr == nil {
				t.Error("the program ran without Landlock")
			}
		})
	}
}

// run runs the installed glove-shim on b as the service user.
func run(t *testing.T, e *testenv.Env, b *testenv.Bundle, args ...string) testenv.ShimResult {
	t.Helper()
	b.Spec.Process.Args = args
	b.Write(t)
	return runShim(t, e, testenv.ShimRun{
		Shim: e.HelperPath("glove-shim"),
		Args: []string{"run", "--bundle", b.Dir, "t"},
	})
}

func TestShimRunsStandardBundle(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	b := e.NewBundle(t)
	r := run(t, e, b, "/bin/sh", "-c", `id -u; id -g; hostname; pwd; echo made > /workspace/out; grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; exit 7`)
	if r.Code != 7 {
		t.Fatalf("exit %d, want 7\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	want := []string{"1000", "1000", "glove-test", "/workspace",
		"CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"}
	got := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("inside the sandbox:\n got %q\nwant %q\nstderr: %s", got, want, r.Stderr)
	}
	// Judged from outside: the file exists on the host, owned by the
	// service user (the sandbox user maps to it and nothing else).
	st, err := os.Stat(filepath.Join(b.Workspace, "out"))
	if err != nil {
		t.Fatalf("workspace write not visible on the host: %v", err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid != uint32(e.UID) {
		t.Errorf("workspace file owned by uid %d on the host, want the service user %d", uid, e.UID)
	}
}

// TestShimLoopbackUp: the sandbox's network namespace has lo, up (stage
// 1 raises it), and no other interface.
func TestShimLoopbackUp(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	b := e.NewBundle(t)
	r := run(t, e, b, "/bin/sh", "-c", `ls /sys/class/net; cat /sys/class/net/lo/flags`)
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	got := strings.Fields(r.Stdout)
	if len(got) != 2 || got[0] != "lo" {
		t.Fatalf("interfaces and lo's flags: got %q, want [lo FLAGS]", got)
	}
	flags, err := strconv.ParseUint(strings.TrimPrefix(got[1], "0x"), 16, 32)
	if err != nil || flags&unix.IFF_UP == 0 {
		t.Errorf("lo's flags %q: not up (%v)", got[1], err)
	}
}

// TestShimRunsSpecBuildWithMounterFDs is the product's path: gloved asks
// glove-mounter for detached mounts, writes config.json with package spec,
// and hands the mounts to glove-shim as preserved descriptors.
func TestShimRunsSpecBuildWithMounterFDs(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	b := e.NewBundle(t)
	data := filepath.Join(e.Base, "sources", "shim-data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(data) })
	if err := os.WriteFile(filepath.Join(data, "in"), []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, log := e.StartServing(t, "glove-mounter")
	call := func(req wire.Message, fds []int) *os.File {
		t.Helper()
		_, files, err := wirecall.CallAny(mountwire.Protocol, p.Client, req, fds)
		if err != nil || len(files) != 1 {
			t.Fatalf("mounter %T: %v (%d descriptors)\nlog: %s", req, err, len(files), log)
		}
		t.Cleanup(func() { files[0].Close() })
		return files[0]
	}
	open := func(path string) int {
		fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		return fd
	}
	usr := call(&mountwire.BindRequest{Flags: mountwire.BindReadOnly}, []int{open("/usr")})
	ro := call(&mountwire.BindRequest{Flags: mountwire.BindReadOnly | mountwire.BindNoExec}, []int{open(data)})
	work := call(&mountwire.TmpfsRequest{SizeBytes: 1 << 20, Inodes: 64, Mode: 0o755}, nil)
	// glove-mounter gives the tmpfs to its peer, which is this (root)
	// test process here and the service user under gloved.
	if err := unix.Fchownat(int(work.Fd()), "", e.UID, e.GID, unix.AT_EMPTY_PATH); err != nil {
		t.Fatal(err)
	}

	s, err := spec.Build(spec.Launch{
		Executable: "/bin/sh",
		Args: []string{"-c", `cat /data/in; echo written > /workspace/out;` +
			`echo x > /data/x 2>/dev/null && echo DATA-WRITABLE; ls /proc/self/fd | tr '\n' ' '`},
		Env: []string{"PATH=/usr/bin:/bin"}, Cwd: "/workspace",
		UID: testenv.SandboxUID, GID: testenv.SandboxGID, HostUID: uint32(e.UID), HostGID: uint32(e.GID),
		Hostname: "glove",
		Mounts: []spec.Mount{
			{Target: "/proc", Kind: spec.KindProc, SourceFD: spec.NoFD},
			{Target: "/usr", Kind: spec.KindBind, SourceFD: 3, ReadOnly: true},
			{Target: "/dev", Kind: spec.KindDev, SourceFD: spec.NoFD, TmpfsBytes: 1 << 20, Mode: 0o755},
			{Target: "/dev/null", Kind: spec.KindBind, SourceFD: spec.NoFD, Source: "/dev/null"},
			{Target: "/data", Kind: spec.KindBind, SourceFD: 4, ReadOnly: true, NoExec: true},
			{Target: "/workspace", Kind: spec.KindBind, SourceFD: 5},
		},
		NoNewPrivileges: true,
		PreserveFDs:     3,
		Seccomp:         seccomp.DefaultProfile(seccomp.ProfileOptions{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	b.Spec = s
	cfg, err := spec.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.Dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	r := runShim(t, e, testenv.ShimRun{
		Shim:       e.HelperPath("glove-shim"),
		Args:       []string{"run", "--bundle", b.Dir, "--preserve-fds", "3", "t"},
		ExtraFiles: []*os.File{usr, ro, work},
	})
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	if !strings.HasPrefix(r.Stdout, "from the host\n") || strings.Contains(r.Stdout, "DATA-WRITABLE") {
		t.Errorf("stdout %q: want the read-only data read and not written", r.Stdout)
	}
	// The mount descriptors were consumed by the shim: the program sees
	// stdio and ls's own directory descriptor only.
	if fds := strings.TrimSpace(r.Stdout[strings.LastIndex(r.Stdout, "\n")+1:]); fds != "0 1 2 3" {
		t.Errorf("descriptors inside: %q, want \"0 1 2 3\" (3 is ls's own)", fds)
	}
	// Judged from outside, through the tmpfs descriptor gloved kept.
	fd, err := unix.Openat(int(work.Fd()), "out", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("the program's write is not in the tmpfs: %v\nstderr: %s", err, r.Stderr)
	}
	got := make([]byte, 64)
	n, _ := unix.Read(fd, got)
	unix.Close(fd)
	if string(got[:n]) != "written\n" {
		t.Errorf("tmpfs holds %q", got[:n])
	}
	if _, err := os.Stat(filepath.Join(data, "x")); err == nil {
		t.Error("the read-only source was written on the host")
	}
}

// TestShimStatusAndStdio checks what a caller of glove-shim relies on: the
// program's exit status (128+N for signal N), standard input and output
// relayed, and 125 with one line for a bundle that is refused.
func TestShimStatusAndStdio(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	b := e.NewBundle(t)
	shim := e.HelperPath("glove-shim")
	runIn := func(stdin string, args ...string) testenv.ShimResult {
		b.Spec.Process.Args = args
		b.Write(t)
		return runShim(t, e, testenv.ShimRun{Shim: shim, Args: []string{"run", "--bundle", b.Dir, "t"}, Stdin: []byte(stdin)})
	}
	if r := runIn("", "/bin/sh", "-c", "kill -TERM $$"); r.Code != 128+15 {
		t.Errorf("killed by TERM: exit %d, want 143 (stderr %s)", r.Code, r.Stderr)
	}
	if r := runIn("", "/bin/sh", "-c", "kill -KILL $$"); r.Code != 128+9 {
		t.Errorf("killed by KILL: exit %d, want 137 (stderr %s)", r.Code, r.Stderr)
	}
	if r := runIn("piped in\n", "/bin/cat"); r.Code != 0 || r.Stdout != "piped in\n" {
		t.Errorf("cat: exit %d stdout %q stderr %s", r.Code, r.Stdout, r.Stderr)
	}
	if r := runIn("", "/no/such/program"); r.Code != 125 || !strings.Contains(r.Stderr, "execve /no/such/program") {
		t.Errorf("missing program: exit %d stderr %q, want 125 naming it", r.Code, r.Stderr)
	}
	// Background processes left by the program end with it (PID 1 exits
	// and the kernel kills the namespace); the leak check sees to that.
	if r := runIn("", "/bin/sh", "-c", "sleep 1000 & exit 3"); r.Code != 3 {
		t.Errorf("background sleep: exit %d, want 3", r.Code)
	}

	before, _ := os.ReadDir(filepath.Join(b.Dir, "rootfs"))
	b.Spec.Linux.Resources = &specs.LinuxResources{}
	r := runIn("", "/bin/true")
	b.Spec.Linux.Resources = nil
	if r.Code != 125 || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 || !strings.Contains(r.Stderr, "linux.resources") {
		t.Errorf("linux.resources: exit %d stderr %q, want 125 and one line naming it", r.Code, r.Stderr)
	}
	after, _ := os.ReadDir(filepath.Join(b.Dir, "rootfs"))
	if len(after) != len(before) {
		t.Errorf("a refused bundle changed its rootfs: %d entries before, %d after", len(before), len(after))
	}
}

// TestShimDescriptors checks the preserved range: a pipe passed with
// --preserve-fds reaches the program at its number; a directory is refused
// (it would be a way out of the root); a descriptor above the range never
// reaches the program.
func TestShimDescriptors(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	b := e.NewBundle(t)
	shim := e.HelperPath("glove-shim")
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	dir, err := os.Open(b.Outside)
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	b.Spec.Process.Args = []string{"/bin/sh", "-c", "echo via-fd3 >&3; cat <&4; readlink /proc/self/fd/3 /proc/self/fd/4 /proc/self/fd/5"}
	b.Write(t)
	r := runShim(t, e, testenv.ShimRun{Shim: shim, Args: []string{"run", "--bundle", b.Dir, "--preserve-fds", "1", "t"},
		ExtraFiles: []*os.File{wr, dir}})
	wr.Close()
	got := make([]byte, 64)
	n, _ := rd.Read(got)
	if string(got[:n]) != "via-fd3\n" {
		t.Errorf("fd 3 carried %q\nstdout %q stderr %q", got[:n], r.Stdout, r.Stderr)
	}
	// readlink names fd 3 (the pipe) and nothing else; cat found no fd 4.
	if !strings.HasPrefix(r.Stdout, "pipe:[") || strings.Count(r.Stdout, "\n") != 1 || !strings.Contains(r.Stderr, "4: Bad file descriptor") {
		t.Errorf("the undeclared descriptor reached the program:\nstdout %q\nstderr %q", r.Stdout, r.Stderr)
	}
	r = runShim(t, e, testenv.ShimRun{Shim: shim, Args: []string{"run", "--bundle", b.Dir, "--preserve-fds", "1", "t"},
		ExtraFiles: []*os.File{dir}})
	if r.Code != 125 || !strings.Contains(r.Stderr, "descriptor 3: a directory") {
		t.Errorf("directory at fd 3: exit %d stderr %q, want 125 naming it", r.Code, r.Stderr)
	}
}

// openPty returns a new pseudo-terminal's master and slave.
func openPty(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(m, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	s, err := unix.Open(fmt.Sprintf("/dev/pts/%d", n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open slave: %v", err)
	}
	master, slave = os.NewFile(uintptr(m), "ptmx"), os.NewFile(uintptr(s), "pts")
	t.Cleanup(func() { master.Close(); slave.Close() })
	return master, slave
}

// TestShimTerminal checks process.terminal: the program's standard input
// becomes its controlling terminal (it can open /dev/tty), and without
// terminal it has none (setsid: it cannot reach the caller's terminal).
func TestShimTerminal(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	b := e.NewBundle(t)
	b.Spec.Mounts = append(b.Spec.Mounts, specs.Mount{Destination: "/dev/tty", Type: "bind", Source: "/dev/tty", Options: []string{"bind", "nosuid", "noexec"}})
	b.Spec.Process.Args = []string{"/bin/sh", "-c", "if (exec 3</dev/tty) 2>/dev/null; then echo HAS-CTTY; else echo NO-CTTY; fi"}
	for _, terminal := range []bool{true, false} {
		master, slave := openPty(t)
		b.Spec.Process.Terminal = terminal
		b.Write(t)
		r := runShim(t, e, testenv.ShimRun{Shim: e.HelperPath("glove-shim"), Args: []string{"run", "--bundle", b.Dir, "t"}, Terminal: slave})
		slave.Close()
		out, _ := io.ReadAll(master) // EIO once the last slave holder is gone
		want := "NO-CTTY"
		if terminal {
			want = "HAS-CTTY"
		}
		if r.Code != 0 || !strings.Contains(string(out), want) {
			t.Errorf("terminal=%v: exit %d, terminal output %q, want %s", terminal, r.Code, out, want)
		}
	}
	// terminal without a terminal on standard input is refused.
	b.Spec.Process.Terminal = true
	b.Write(t)
	if r := runShim(t, e, testenv.ShimRun{Shim: e.HelperPath("glove-shim"), Args: []string{"run", "--bundle", b.Dir, "t"}}); r.Code != 125 || !strings.Contains(r.Stderr, "process.terminal") {
		t.Errorf("terminal without a tty: exit %d stderr %q", r.Code, r.Stderr)
	}
}

// TestShimRuncRootlessSpec runs the bundle `runc spec --rootless` writes,
// changed only where glove-shim refuses on purpose: the network and cgroup
// namespaces added (glove-shim always creates all seven), the cgroup mount
// removed (not implemented: limits are glove-cgroup's), the root and the
// id mapping pointed at this test's, and the shell given a command.
func TestShimRuncRootlessSpec(t *testing.T) {
	e := testenv.Get(t)
	if _, err := os.Stat(runcPath); err != nil {
		t.Skipf("skipped: %s is missing (%v); scripts/install-deps.sh installs it, and CI has it", runcPath, err)
	}
	testenv.CheckLeaks(t, e.UID)
	b := e.NewBundle(t)
	gen := t.TempDir()
	cmd := exec.Command(runcPath, "spec", "--rootless", "--bundle", gen)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("runc spec: %v\n%s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(gen, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s specs.Spec
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	s.Root.Path = "rootfs"
	s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.NetworkNamespace}, specs.LinuxNamespace{Type: specs.CgroupNamespace})
	var mounts []specs.Mount
	for _, m := range s.Mounts {
		if m.Type != "cgroup" {
			mounts = append(mounts, m)
		}
	}
	s.Mounts = append(mounts, specs.Mount{Destination: "/usr", Type: "bind", Source: "/usr", Options: []string{"bind", "ro"}})
	s.Linux.UIDMappings[0].HostID, s.Linux.GIDMappings[0].HostID = uint32(e.UID), uint32(e.GID)
	s.Process.Args = []string{"/bin/sh", "-c", "id -u; grep -E '^Cap(Eff|Bnd|Amb):' /proc/self/status"}
	b.Spec = &s
	b.Write(t)
	master, slave := openPty(t) // runc's spec asks for a terminal
	r := runShim(t, e, testenv.ShimRun{Shim: e.HelperPath("glove-shim"), Args: []string{"run", "--bundle", b.Dir, "t"}, Terminal: slave})
	slave.Close()
	got, _ := io.ReadAll(master)
	// uid 0 in its namespace, with exactly the three capabilities the
	// spec lists (CAP_AUDIT_WRITE, CAP_KILL, CAP_NET_BIND_SERVICE), as
	// under runc; they are user namespace 2's (user namespace 1's with
	// --userns-fd, on a host that refuses unprivileged user namespaces)
	// and reach nothing else.
	want := "0\r\nCapEff:\t0000000020000420\r\nCapBnd:\t0000000020000420\r\nCapAmb:\t0000000020000420\r\n"
	if r.Code != 0 || string(got) != want {
		t.Errorf("exit %d, terminal output %q, want %q", r.Code, got, want)
	}
}

// TestShimSyncFD checks Glove's --sync-fd: nothing runs before the
// supervisor's byte arrives, and a closed descriptor runs nothing at all.
func TestShimSyncFD(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	b := e.NewBundle(t)
	b.Spec.Process.Args = []string{"/bin/sh", "-c", "echo ran > /workspace/marker"}
	b.Write(t)
	marker := filepath.Join(b.Workspace, "marker")
	args := []string{"run", "--bundle", b.Dir, "--sync-fd", "3", "t"}

	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan testenv.ShimResult, 1)
	go func() {
		done <- runShim(t, e, testenv.ShimRun{Shim: e.HelperPath("glove-shim"), Args: args, ExtraFiles: []*os.File{rd}})
	}()
	time.Sleep(500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the program ran before the sync byte")
	}
	if _, err := wr.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	wr.Close()
	if r := <-done; r.Code != 0 {
		t.Fatalf("exit %d: %s", r.Code, r.Stderr)
	}
	rd.Close()
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the program did not run after the sync byte: %v", err)
	}
	os.Remove(marker)

	rd, wr, err = os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	wr.Close()
	r := runShim(t, e, testenv.ShimRun{Shim: e.HelperPath("glove-shim"), Args: args, ExtraFiles: []*os.File{rd}})
	rd.Close()
	if r.Code != 125 || !strings.Contains(r.Stderr, "before placement") {
		t.Errorf("closed sync descriptor: exit %d stderr %q, want 125", r.Code, r.Stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the program ran although the supervisor closed the sync descriptor")
	}
}

// TestShimRootWithoutLibraries runs a static program in a root that has no
// /usr, no /lib and no dynamic loader: the shim's own stage 2, executed
// inside the new root, must not depend on the sandbox's files.
func TestShimRootWithoutLibraries(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	probe := buildProbe(t, e)
	b := e.NewBundle(t)
	for _, link := range []string{"bin", "sbin", "lib", "lib64"} {
		os.Remove(filepath.Join(b.Dir, "rootfs", link))
	}
	var mounts []specs.Mount
	for _, m := range b.Spec.Mounts {
		if m.Destination != "/usr" && m.Destination != "/etc" {
			mounts = append(mounts, m)
		}
	}
	b.Spec.Mounts = append(mounts, specs.Mount{Destination: "/probe", Type: "bind", Source: probe, Options: []string{"bind", "ro"}})
	b.Spec.Process.Args = []string{"/probe/attackprobe", "no-such-case"}
	b.Write(t)
	r := runShim(t, e, testenv.ShimRun{Shim: e.HelperPath("glove-shim"), Args: []string{"run", "--bundle", b.Dir, "t"}})
	if r.Code == 125 || !strings.Contains(r.Stdout+r.Stderr, "no-such-case") {
		t.Errorf("exit %d, stdout %q, stderr %q: the static program did not run", r.Code, r.Stdout, r.Stderr)
	}
}

// TestShimSeccompForeignRoutes: a bundle whose profile denies socket yet
// lists i386, whose socketcall reaches socket, is refused with one line
// naming the route; the same bundle saying it means it runs.
func TestShimSeccompForeignRoutes(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	b := e.NewBundle(t)
	b.Spec.Process.Args = []string{"/bin/true"}
	b.Spec.Linux.Seccomp = &specs.LinuxSeccomp{DefaultAction: specs.ActAllow,
		Architectures: []specs.Arch{specs.ArchX86_64, specs.ArchX86},
		Syscalls:      []specs.LinuxSyscall{{Names: []string{"socket"}, Action: specs.ActErrno}}}
	b.Write(t)
	run := func() testenv.ShimResult {
		return runShim(t, e, testenv.ShimRun{Shim: e.HelperPath("glove-shim"), Args: []string{"run", "--bundle", b.Dir, "t"}})
	}
	if r := run(); r.Code != 125 || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 ||
		!strings.Contains(r.Stderr, "socketcall on SCMP_ARCH_X86 reaches socket") {
		t.Errorf("foreign route: exit %d stderr %q, want 125 and one line naming socketcall and socket", r.Code, r.Stderr)
	}
	b.Spec.Annotations = map[string]string{"org.glove.seccomp.foreign-routes": "intended"}
	b.Write(t)
	if r := run(); r.Code != 0 {
		t.Errorf("the route declared intended: exit %d stderr %q, want 0", r.Code, r.Stderr)
	}
}

// TestShimTmpfsRoot: with spec.RootAnnotation the root is a tmpfs holding
// root.path's links and empty directories again (bin -> usr/bin works, the
// empty /probe is there), and a root.path holding a file is refused with
// one line naming it, not silently left out.
func TestShimTmpfsRoot(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	b := e.NewBundle(t)
	b.Spec.Annotations = map[string]string{spec.RootAnnotation: spec.RootTmpfs}
	if err := os.Mkdir(filepath.Join(b.Dir, "rootfs", "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := run(t, e, b, "/bin/sh", "-c", `readlink /bin; test -d /empty && echo EMPTY-DIR; awk '$5 == "/" {for (i = 7; i <= NF; i++) if ($i == "-") {print $4, $(i+1); break}}' /proc/self/mountinfo`)
	if r.Code != 0 || r.Stdout != "usr/bin\nEMPTY-DIR\n/ tmpfs\n" {
		t.Errorf("exit %d stdout %q stderr %q; want the link, the directory and a tmpfs root whose source is /", r.Code, r.Stdout, r.Stderr)
	}
	if err := os.WriteFile(filepath.Join(b.Dir, "rootfs", "planted"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = run(t, e, b, "/bin/true")
	if r.Code != 125 || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 || !strings.Contains(r.Stderr, `planted: neither a symbolic link nor an empty directory`) {
		t.Errorf("a file in a tmpfs root's root.path: exit %d stderr %q, want 125 and one line naming it", r.Code, r.Stderr)
	}
}

// TestShimSharesBudgets reads, from outside, the limits a sandbox runs
// under: each per-user count of /proc/sys/user in user namespace 1 (as
// nsenter into it sees them) is the host's divided by the shares, and the
// program's pending-signal and locked-memory rlimits are a share of the
// service user's (issue 17, item 2). The inotify and message-queue attack
// cases show the effect from outside; this shows every count is set.
func TestShimSharesBudgets(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Fatalf("nsenter (util-linux) is needed to read user namespace 1's limits: %v", err)
	}
	b := e.NewBundle(t)
	b.Spec.Process.Args = []string{"/bin/sh", "-c", `grep -E '^Max (pending signals|locked memory)' /proc/self/limits; echo ready; read x; exit 0`}
	b.Write(t)
	cmd := exec.Command(e.HelperPath("glove-shim"), "run", "--bundle", b.Dir, "t")
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.Credential(), Setpgid: true}
	usernsCmd(t, e, cmd)
	h := startHeld(t, cmd)
	limits := h.lines
	checkSharedBudgets(t, stage1Of(t, cmd.Process.Pid, h.stderr))
	for _, c := range []struct {
		res  int
		name string
	}{{unix.RLIMIT_SIGPENDING, "Max pending signals"}, {unix.RLIMIT_MEMLOCK, "Max locked memory"}} {
		var own unix.Rlimit
		if err := unix.Getrlimit(c.res, &own); err != nil {
			t.Fatal(err)
		}
		want := strconv.FormatUint(max(own.Cur/33, 1), 10)
		if own.Cur == unix.RLIM_INFINITY {
			want = "unlimited"
		}
		t.Logf("%s: the test's own soft limit %d, the program's %s", c.name, own.Cur, want)
		found := false
		for _, l := range limits {
			if f := strings.Fields(strings.TrimPrefix(l, c.name)); strings.HasPrefix(l, c.name) && len(f) >= 2 {
				found = true
				if f[0] != want || f[1] != want {
					t.Errorf("%s inside: soft %s hard %s, want %s for both (the test's own soft limit %d / 33)", c.name, f[0], f[1], want, own.Cur)
				}
			}
		}
		if !found {
			t.Errorf("%s not in the program's limits %q", c.name, limits)
		}
	}
	if err := h.release(t); err != nil {
		t.Errorf("the shim: %v; stderr %s", err, h.stderr.String())
	}
}

// heldShim is a started glove-shim whose program printed its lines, then
// "ready", and waits on its standard input while the test looks at the
// sandbox from outside.
type heldShim struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *strings.Builder
	lines  []string // the program's lines before "ready"
	ready  bool     // it printed "ready" (not end of file)
	done   bool
}

// startHeld starts cmd (glove-shim in a process group of its own) and
// reads the program's lines up to "ready". A test that stops before
// release kills the group.
func startHeld(t *testing.T, cmd *exec.Cmd) *heldShim {
	t.Helper()
	h := &heldShim{cmd: cmd, stderr: &strings.Builder{}}
	var err error
	if h.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = h.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !h.done {
			if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Errorf("kill the shim: %v", err)
			}
			t.Logf("the shim, killed: %v", cmd.Wait())
		}
	})
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if h.ready = sc.Text() == "ready"; h.ready {
			break
		}
		h.lines = append(h.lines, sc.Text())
	}
	return h
}

// release ends the program's input and waits for the shim.
func (h *heldShim) release(t *testing.T) error {
	t.Helper()
	if err := h.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	h.done = true
	return h.cmd.Wait()
}

// checkSharedBudgets reads, from outside, every per-user count of
// /proc/sys/user in the user namespace of stage1 (user namespace 1):
// each must be the host's divided by 33, at least 1.
func checkSharedBudgets(t *testing.T, stage1 int) {
	t.Helper()
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Fatalf("nsenter (util-linux) is needed to read user namespace 1's limits: %v", err)
	}
	checked := 0
	for _, name := range []string{"max_user_namespaces", "max_mnt_namespaces", "max_pid_namespaces", "max_net_namespaces",
		"max_ipc_namespaces", "max_uts_namespaces", "max_cgroup_namespaces", "max_time_namespaces",
		"max_inotify_instances", "max_inotify_watches", "max_fanotify_groups", "max_fanotify_marks"} {
		host, err := os.ReadFile("/proc/sys/user/" + name)
		if errors.Is(err, os.ErrNotExist) {
			t.Logf("%s: not in this kernel", name)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(host)))
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("nsenter", "--preserve-credentials", "--user=/proc/"+strconv.Itoa(stage1)+"/ns/user",
			"cat", "/proc/sys/user/"+name).CombinedOutput()
		if err != nil {
			t.Fatalf("read %s in user namespace 1: %v: %s", name, err, out)
		}
		want := strconv.Itoa(max(n/33, 1))
		got := strings.TrimSpace(string(out))
		if got != want {
			t.Errorf("%s in user namespace 1 is %s, want %s (host %d / 33)", name, got, want, n)
		}
		t.Logf("%s: host %d, user namespace 1 %s", name, n, got)
		checked++
	}
	if checked < 10 {
		t.Errorf("only %d counts checked", checked)
	}
}

// stage1Of returns the pid of stage 1, stage 0's (stage0's) only child,
// forked by any of its threads; stderr is the shim's, for the failure.
func stage1Of(t *testing.T, stage0 int, stderr *strings.Builder) int {
	t.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", stage0))
	if err != nil {
		t.Fatal(err)
	}
	var children []string
	for _, task := range tasks {
		data, err := os.ReadFile(task)
		if err != nil {
			t.Fatal(err)
		}
		children = append(children, strings.Fields(string(data))...)
	}
	stage1, err := strconv.Atoi(strings.Join(children, " "))
	if err != nil {
		t.Fatalf("stage 1 not found as the only child of stage 0 (%q, %v); stderr %s", children, err, stderr.String())
	}
	return stage1
}

// TestShimStage1OneThread: PID 1 of the sandbox (stage 1, C code that
// runs before any Go runtime) and stage 0's waiter each hold one thread
// while the program runs,
// and its only child is stage 2, now the program. A PID 1 that asks the
// kernel for no task once the program exists cannot be made to fail by a
// program holding the session's whole pids limit (a fork bomb); a Go
// PID 1 always runs more than one thread (sysmon at least) and needed
// idle ones made in advance.
func TestShimStage1OneThread(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	b := e.NewBundle(t)
	b.Spec.Process.Args = []string{"/bin/sh", "-c", `echo ready; read x; exit 0`}
	b.Write(t)
	cmd := exec.Command(e.HelperPath("glove-shim"), "run", "--bundle", b.Dir, "t")
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.Credential(), Setpgid: true}
	usernsCmd(t, e, cmd)
	h := startHeld(t, cmd)
	if !h.ready || len(h.lines) != 0 {
		t.Fatalf("the program did not start: %q; stderr %s", h.lines, h.stderr.String())
	}
	stage1 := stage1Of(t, cmd.Process.Pid, h.stderr)
	// Stage 0 is its waiter by now, C too: one thread as well.
	for _, pid := range []int{stage1, cmd.Process.Pid} {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			t.Fatal(err)
		}
		threads := ""
		for _, l := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(l, "Threads:"); ok {
				threads = strings.TrimSpace(v)
			}
		}
		if threads != "1" {
			t.Errorf("stage 0 or 1 (pid %d) runs %q threads while the program runs, want 1", pid, threads)
		}
	}
	children, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", stage1, stage1))
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(string(children)); len(f) != 1 {
		t.Errorf("stage 1's children %q, want the program alone", f)
	} else if comm, err := os.ReadFile("/proc/" + f[0] + "/comm"); err != nil || strings.TrimSpace(string(comm)) != "sh" {
		t.Errorf("stage 1's child is %q (%v), want the program, sh", comm, err)
	}
	if err := h.release(t); err != nil {
		t.Errorf("the shim: %v; stderr %s", err, h.stderr.String())
	}
}

// TestShimSignalAtFirstOutput: a SIGTERM sent as soon as the program's
// first output byte arrives reaches the program, sent to stage 0 (as the
// supervisor does) or to PID 1 from outside: the program traps it and
// exits 42. The first byte can come before stage 1 has told stage 0 that
// the program runs, and before PID 1 is in its reaping loop; a stage
// that met the signal with its default action there ended the run with
// 143 (stage 0 or PID 1 killed) or 2 (a Go PID 1's runtime) instead.
// Each target is tried 20 times: the window is narrow.
func TestShimSignalAtFirstOutput(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	b := e.NewBundle(t)
	b.Spec.Process.Args = []string{"/bin/sh", "-c", "trap 'exit 42' TERM; echo ready; sleep 30 & wait"}
	b.Write(t)
	for _, target := range []string{"stage 0", "PID 1"} {
		got := map[int]int{}
		for range 20 {
			cmd := exec.Command(e.HelperPath("glove-shim"), "run", "--bundle", b.Dir, "t")
			cmd.Env = []string{}
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.Credential(), Setpgid: true}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			usernsCmd(t, e, cmd)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var first [1]byte
			if _, err := io.ReadFull(stdout, first[:]); err != nil {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				t.Fatalf("no output: %v (shim: %v; stderr %s)", err, cmd.Wait(), stderr.String())
			}
			pid := cmd.Process.Pid
			if target == "PID 1" {
				pid = stage1Of(t, pid, &stderr)
			}
			if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
				t.Fatalf("TERM to %s: %v", target, err)
			}
			code, err := testenv.ExitStatus(cmd.Wait())
			if err != nil {
				t.Fatal(err)
			}
			got[code]++
			if code != 42 {
				t.Errorf("TERM to %s at the first output: exit %d, want 42 (the program's trap); stderr %q", target, code, stderr.String())
			}
		}
		t.Logf("TERM to %s at the first output byte: exit statuses %v", target, got)
	}
}

// TestShimSourceSwapped: a bind source replaced on the host between stage
// 0's check and stage 1's open (a rename and a new directory at the same
// path) is refused by stage 1, which finds another device and inode than
// stage 0 recorded: nothing runs, and the one line names the source. The
// window is held open with --sync-fd: stage 0 checks every source before
// it waits for the byte. The control swaps nothing, and the program reads
// the file stage 0 checked.
func TestShimSourceSwapped(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	for _, swap := range []bool{false, true} {
		t.Run(map[bool]string{false: "control", true: "swapped"}[swap], func(t *testing.T) {
			b := e.NewBundle(t)
			src := filepath.Join(b.Dir, "src")
			mustMkdir(t, e, src)
			mustWrite(t, e, filepath.Join(src, "f"), "checked\n")
			mustMkdir(t, e, filepath.Join(b.Dir, "rootfs", "data"))
			b.Spec.Mounts = append(b.Spec.Mounts, specs.Mount{Destination: "/data", Type: "bind", Source: src, Options: []string{"bind", "ro"}})
			b.Spec.Process.Args = []string{"/bin/cat", "/data/f"}
			b.Write(t)
			rd, wr, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer wr.Close()
			cmd := exec.Command(e.HelperPath("glove-shim"), "run", "--bundle", b.Dir, "--sync-fd", "3", "t")
			cmd.Env = []string{}
			cmd.ExtraFiles = []*os.File{rd}
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.Credential(), Setpgid: true}
			usernsCmd(t, e, cmd)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			rd.Close()
			waited := false
			t.Cleanup(func() {
				if !waited {
					if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
						t.Errorf("kill the shim: %v", err)
					}
					t.Logf("the shim, killed: %v", cmd.Wait())
				}
			})
			awaitSyncRead(t, cmd.Process.Pid, 3)
			if swap {
				if err := os.Rename(src, src+".checked"); err != nil {
					t.Fatal(err)
				}
				mustMkdir(t, e, src)
				mustWrite(t, e, filepath.Join(src, "f"), "swapped\n")
			}
			if _, err := wr.Write([]byte{1}); err != nil {
				t.Fatal(err)
			}
			code, err := testenv.ExitStatus(cmd.Wait())
			waited = true
			if err != nil {
				t.Fatal(err)
			}
			if !swap {
				if code != 0 || stdout.String() != "checked\n" {
					t.Errorf("exit %d, stdout %q, want 0 and the checked file\nstderr: %s", code, stdout.String(), stderr.String())
				}
				return
			}
			line := strings.TrimSpace(stderr.String())
			if code != 125 || strings.Contains(line, "\n") || !strings.Contains(line, "stage 1: ") ||
				!strings.Contains(line, "/data: source "+src+": changed since glove-shim checked it") {
				t.Errorf("exit %d, stderr %q: want 125 and one line from stage 1 naming the changed source", code, line)
			}
			if stdout.String() != "" {
				t.Errorf("the program ran: %q", stdout.String())
			}
		})
	}
}

// awaitSyncRead waits until a thread of pid is blocked reading descriptor
// fd (stage 0 waiting for --sync-fd's byte), reading each thread's
// current system call from /proc.
func awaitSyncRead(t *testing.T, pid, fd int) {
	t.Helper()
	want := fmt.Sprintf("%d 0x%x ", unix.SYS_READ, fd)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/syscall", pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			if b, err := os.ReadFile(task); err == nil && strings.HasPrefix(string(b), want) {
				return
			}
		}
	}
	t.Fatalf("stage 0 (pid %d) never blocked reading descriptor %d", pid, fd)
}

// TestShimSharedDescriptor: one detached tmpfs from glove-mounter is the
// source of two mounts, each a directory beneath it (a session's scratch:
// /tmp, the home and the copies share one quota). The program reads and
// writes each, sees neither the rest of the tmpfs nor the staging
// directory, and the mount table names only the sub-paths; a sub-path
// through a symbolic link is refused with one line.
func TestShimSharedDescriptor(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	b := e.NewBundle(t)
	p, log := e.StartServing(t, "glove-mounter")
	call := func(req wire.Message, fds []int) *os.File {
		t.Helper()
		_, files, err := wirecall.CallAny(mountwire.Protocol, p.Client, req, fds)
		if err != nil || len(files) != 1 {
			t.Fatalf("mounter %T: %v (%d descriptors)\nlog: %s", req, err, len(files), log)
		}
		t.Cleanup(func() { files[0].Close() })
		return files[0]
	}
	usrFD, err := unix.Open("/usr", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	usr := call(&mountwire.BindRequest{Flags: mountwire.BindReadOnly}, []int{usrFD})
	unix.Close(usrFD)
	scratch := call(&mountwire.TmpfsRequest{SizeBytes: 1 << 20, Inodes: 64, Mode: 0o755}, nil)
	sfd := int(scratch.Fd())
	for _, d := range []string{"a", "b", "hidden"} {
		if err := unix.Mkdirat(sfd, d, 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := unix.Openat(sfd, d+"/f", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := unix.Write(f, []byte("in "+d+"\n")); err != nil {
			t.Fatal(err)
		}
		unix.Close(f)
		if err := unix.Fchownat(sfd, d, e.UID, e.GID, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Symlinkat("a", sfd, "link"); err != nil {
		t.Fatal(err)
	}
	runWith := func(sub2 string) testenv.ShimResult {
		s, err := spec.Build(spec.Launch{
			Executable: "/bin/sh",
			Args: []string{"-c", `cat /x/f /y/f; echo w > /y/new && echo WROTE; (echo w > /x/new) 2>/dev/null || echo X-READ-ONLY;` +
				`cat /y/../hidden/f /x/../hidden/f 2>/dev/null || echo NO-SIBLING; ls -a / | tr '\n' ' '; echo;` +
				`grep -E '^[^ ]+ [^ ]+ [^ ]+ [^ ]+ /(x|y) ' /proc/self/mountinfo | cut -d' ' -f4,5`},
			Env: []string{"PATH=/usr/bin:/bin"}, Cwd: "/",
			UID: testenv.SandboxUID, GID: testenv.SandboxGID, HostUID: uint32(e.UID), HostGID: uint32(e.GID),
			Hostname: "glove",
			Mounts: []spec.Mount{
				{Target: "/proc", Kind: spec.KindProc, SourceFD: spec.NoFD},
				{Target: "/usr", Kind: spec.KindBind, SourceFD: 3, ReadOnly: true},
				{Target: "/x", Kind: spec.KindBind, SourceFD: 4, SourceSub: "a", ReadOnly: true},
				{Target: "/y", Kind: spec.KindBind, SourceFD: 4, SourceSub: sub2},
			},
			NoNewPrivileges: true,
			PreserveFDs:     2,
		})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := spec.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(b.Dir, "config.json"), cfg, 0o644); err != nil {
			t.Fatal(err)
		}
		return runShim(t, e, testenv.ShimRun{
			Shim:       e.HelperPath("glove-shim"),
			Args:       []string{"run", "--bundle", b.Dir, "--preserve-fds", "2", "t"},
			ExtraFiles: []*os.File{usr, scratch},
		})
	}
	r := runWith("b")
	want := "in a\nin b\nWROTE\nX-READ-ONLY\nNO-SIBLING\n. .. bin lib lib64 proc sbin usr x y \n/a /x\n/b /y\n"
	if r.Code != 0 || r.Stdout != want {
		t.Errorf("exit %d\nstdout %q\nwant   %q\nstderr %s", r.Code, r.Stdout, want, r.Stderr)
	}
	// Judged from outside, through the descriptor: the write is in b.
	if fd, err := unix.Openat(sfd, "b/new", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		t.Errorf("the program's write is not in the shared tmpfs: %v", err)
	} else {
		unix.Close(fd)
	}
	if r := runWith("link"); r.Code != 125 || strings.Count(strings.TrimSpace(r.Stderr), "\n") != 0 || !strings.Contains(r.Stderr, "descriptor 4: link: ") {
		t.Errorf("a sub-path through a link: exit %d stderr %q, want 125 and one line naming it", r.Code, r.Stderr)
	}
}

// TestShimJoinRefuses: glove-shim's constructor (cstage/join.c) ends the
// shim with 125 and one line, before anything runs, for a --cgroup-join
// value it cannot parse and for a descriptor that is not a cgroup v1
// file open for writing only; such a file is left as it was. With a real
// v1 tasks file (the test's own memory cgroup, so the join moves the shim
// nowhere new), it writes 'j' on the sync socket, Main checks that S is
// the --sync-fd, and the program runs after the release byte.
func TestShimJoinRefuses(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	b := e.NewBundle(t)
	b.Spec.Process.Args = []string{"/bin/echo", "ran"}
	b.Write(t)
	plain := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(plain, []byte("kept\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	open := func(path string, flags int) *os.File {
		f, err := os.OpenFile(path, flags, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	run := func(spec string, files ...*os.File) (int, string, string) {
		t.Helper()
		cmd := exec.Command(e.HelperPath("glove-shim"), "--cgroup-join", spec, "run", "--bundle", b.Dir, "--sync-fd", "3", "t")
		cmd.Env, cmd.ExtraFiles = []string{}, files
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: e.Credential()}
		usernsCmd(t, e, cmd)
		code, err := testenv.ExitStatus(cmd.Run())
		if err != nil {
			t.Fatal(err)
		}
		return code, stdout.String(), strings.TrimSpace(stderr.String())
	}
	sock := func() (*os.File, *os.File) {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		a, b := os.NewFile(uintptr(fds[0]), "shim"), os.NewFile(uintptr(fds[1]), "sup")
		t.Cleanup(func() { a.Close(); b.Close() })
		return a, b
	}
	s, _ := sock()
	for _, c := range []struct {
		name, spec string
		files      []*os.File
		want       string
	}{
		{"bad value", "3:3", []*os.File{s}, "want S:T1"},
		{"not a cgroup file", "3:4", []*os.File{s, open(plain, os.O_WRONLY)}, "descriptor 4 is not a cgroup v1 file open for writing only"},
		{"no such descriptor", "3:9", []*os.File{s}, "descriptor 9: fstatfs: bad file descriptor"},
	} {
		code, out, line := run(c.spec, c.files...)
		if code != 125 || out != "" || strings.Contains(line, "\n") || !strings.HasPrefix(line, "glove-shim: --cgroup-join: ") || !strings.Contains(line, c.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q: want 125, nothing run, one line with %q", c.name, code, out, line, c.want)
		}
	}
	if got, err := os.ReadFile(plain); err != nil || string(got) != "kept\n" {
		t.Errorf("the plain file after the refusal: %q, %v", got, err)
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var mem string
	for _, l := range strings.Split(string(own), "\n") {
		if f := strings.SplitN(l, ":", 3); len(f) == 3 && f[1] == "memory" {
			mem = filepath.Join("/sys/fs/cgroup/memory", f[2], "tasks")
		}
	}
	if _, err := os.Stat(mem); mem == "" || err != nil {
		t.Skipf("no v1 memory hierarchy here (a pure v2 host): the join of a real tasks file is not tried (%v)", err)
	}
	code, out, line := run("3:4", s, open(mem, os.O_RDONLY))
	if code != 125 || out != "" || !strings.Contains(line, "descriptor 4 is not a cgroup v1 file open for writing only") {
		t.Errorf("a tasks file open for reading: exit %d, stdout %q, stderr %q", code, out, line)
	}
	// S other than --sync-fd: the constructor joins and says so on S,
	// then Main refuses the command line.
	s2, sup2 := sock()
	code, out, line = run("5:4", s, open(mem, os.O_WRONLY), s2)
	var jb [1]byte
	if n, err := sup2.Read(jb[:]); n != 1 || jb[0] != 'j' {
		t.Errorf("no 'j' on S: %d %q %v", n, jb, err)
	}
	if code != 2 /* ExitUsage */ || out != "" || !strings.Contains(line, "S 5 is not the --sync-fd") {
		t.Errorf("S other than --sync-fd: exit %d, stdout %q, stderr %q: want %d and the reason", code, out, line, 2)
	}
	// The whole way: 'j', then the release byte, then the program.
	s3, sup3 := sock()
	if _, err := sup3.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	code, out, line = run("3:4", s3, open(mem, os.O_WRONLY))
	if n, err := sup3.Read(jb[:]); n != 1 || jb[0] != 'j' {
		t.Errorf("no 'j' on the sync socket: %d %q %v", n, jb, err)
	}
	if code != 0 || out != "ran\n" {
		t.Errorf("joined: exit %d, stdout %q, stderr %q: want 0 and the program's output", code, out, line)
	}
}
