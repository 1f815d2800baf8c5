// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/captable/captext"
	"github.com/glove-sandbox/glove/helpers/helperkit"
	mounterpkg "github.com/glove-sandbox/glove/helpers/mounter"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/mountwire"
	"github.com/glove-sandbox/glove/helpers/wire/wirecall"
	"github.com/glove-sandbox/glove/helpers/wire/wiretest"
	"github.com/glove-sandbox/glove/supervisor/engine/helperproc"
	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

// mounter is a running glove-mounter seen from the supervisor's side.
type mounter struct {
	t   testing.TB
	p   *helperproc.Proc
	log *testenv.SyncBuffer
}

// startMounter starts glove-mounter as the service user and says Hello.
// The helper is stopped (and must exit 0) when the test ends, before the
// leak check the caller registered first.
func startMounter(t testing.TB, env *testenv.Env) *mounter {
	t.Helper()
	path := env.HelperPath("glove-mounter")
	if fallbackMounter {
		path = env.FallbackMounter(t)
	}
	p, log := env.StartServingAt(t, path, "glove-mounter")
	return &mounter{t: t, p: p, log: log}
}

// fallbackMounter makes startMounter start the glove_testfallback build
// (open_tree + mount_setattr from private mount namespaces, as on
// kernels before 6.15); set only by withFallback.
var fallbackMounter bool

// withFallback runs test again against the fallback mounter: every bind
// case and every attack must end the same way with either clone.
func withFallback(t *testing.T, test func(*testing.T)) {
	fallbackMounter = true
	defer func() { fallbackMounter = false }()
	test(t)
}

func TestMounterBindFallback(t *testing.T)        { withFallback(t, TestMounterBind) }
func TestMounterAttackTableFallback(t *testing.T) { withFallback(t, TestMounterAttackTable) }

// call sends one request and returns the single descriptor of the reply.
// barrier makes one request that is always refused and carries no
// descriptor. The helper serves one request at a time and closes a
// reply's descriptors only after sending it, so once this answer is in,
// every earlier request is finished: the helper's descriptor table can
// be compared.
func (m *mounter) barrier(t *testing.T) {
	t.Helper()
	if _, err := m.call(&mountwire.TmpfsRequest{}, nil); wireCode(err) != wire.ErrBadRequest {
		t.Fatalf("barrier request: %v", err)
	}
}

func (m *mounter) call(req wire.Message, fds []int) (*os.File, error) {
	reply, files, err := wirecall.CallAny(mountwire.Protocol, m.p.Client, req, fds)
	if err != nil {
		return nil, err
	}
	if len(files) != 1 {
		closeAll(files)
		return nil, fmt.Errorf("reply %T carries %d descriptors", reply, len(files))
	}
	return files[0], nil
}

func (m *mounter) bind(src int, flags uint32) (*os.File, error) {
	return m.call(&mountwire.BindRequest{Flags: flags}, []int{src})
}

func (m *mounter) tmpfs(req mountwire.TmpfsRequest) (*os.File, error) {
	return m.call(&req, nil)
}

// mustMount fails the test unless the call returned a mount descriptor;
// the descriptor is closed when the test ends.
func (m *mounter) mustMount(f *os.File, err error) *os.File {
	m.t.Helper()
	if err != nil {
		m.t.Fatalf("request refused: %v\nhelper log: %s", err, m.log)
	}
	m.t.Cleanup(func() { f.Close() })
	return f
}

// wireCode is the code of a wire.Error, or 0 when err is not one.
func wireCode(err error) wire.ErrorCode {
	var e *wire.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// sourceDir creates a fresh directory beneath the test environment's
// source root (root-owned, mode 0755) and removes it when the test ends.
func sourceDir(t testing.TB, env *testenv.Env, name string) string {
	t.Helper()
	dir := filepath.Join(env.Base, "sources", name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// openFD opens path with flags and closes the descriptor when the test
// ends.
func openFD(t testing.TB, path string, flags int) int {
	t.Helper()
	fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// statfsThrough opens the mount's root (or file) through its descriptor
// and returns the mount flags the kernel reports for it.
func statfsThrough(t testing.TB, mnt *os.File) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/self/fd/%d", mnt.Fd()))
	if err != nil {
		t.Fatalf("open through the mount: %v", err)
	}
	defer f.Close()
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		t.Fatalf("fstatfs: %v", err)
	}
	return st.Flags
}

func mountinfo(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestMounterTmpfs asks for sized tmpfs mounts and checks, through the
// descriptors alone, the byte quota (the supervisor writes until ENOSPC),
// the inode limit, the root's owner and mode, and the mount flags.
func TestMounterTmpfs(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	before := mountinfo(t)
	m := startMounter(t, env)
	page := uint64(os.Getpagesize())

	t.Run("byte quota", func(t *testing.T) {
		const size = 1 << 20
		mnt := m.mustMount(m.tmpfs(mountwire.TmpfsRequest{SizeBytes: size, Inodes: 64, Mode: 0o700}))
		fd, err := unix.Openat(int(mnt.Fd()), "fill", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
		if err != nil {
			t.Fatalf("create through the mount: %v", err)
		}
		defer unix.Close(fd)
		chunk := make([]byte, 64<<10)
		var total uint64
		var werr error
		for total <= 2*size {
			n, err := unix.Write(fd, chunk)
			total += uint64(max(n, 0))
			if err != nil {
				werr = err
				break
			}
		}
		if !errors.Is(werr, unix.ENOSPC) {
			t.Fatalf("wrote %d bytes of a %d-byte tmpfs, then %v; want ENOSPC", total, size, werr)
		}
		if total > size || total+page <= size {
			t.Errorf("ENOSPC after %d bytes; want within one page (%d) below %d", total, page, size)
		}
		t.Logf("tmpfs size=%d: ENOSPC after %d bytes (%d short of the quota)", size, total, size-total)
	})

	t.Run("inode limit", func(t *testing.T) {
		const inodes = 16
		mnt := m.mustMount(m.tmpfs(mountwire.TmpfsRequest{SizeBytes: 1 << 20, Inodes: inodes, Mode: 0o700}))
		created := 0
		var err error
		for created <= 2*inodes {
			var fd int
			fd, err = unix.Openat(int(mnt.Fd()), fmt.Sprintf("f%d", created), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
			if err != nil {
				break
			}
			unix.Close(fd)
			created++
		}
		if !errors.Is(err, unix.ENOSPC) || created >= inodes {
			t.Fatalf("created %d files with nr_inodes=%d, then %v; want ENOSPC before %d", created, inodes, err, inodes)
		}
		t.Logf("tmpfs nr_inodes=%d: ENOSPC after %d files (the root directory holds one inode)", inodes, created)
	})

	t.Run("owner, mode and flags", func(t *testing.T) {
		for _, c := range []struct {
			mode   uint32
			flags  uint32
			noexec bool
		}{{0o1777, 0, false}, {0o750, mountwire.TmpfsNoExec, true}, {0, 0, false}} {
			mnt := m.mustMount(m.tmpfs(mountwire.TmpfsRequest{SizeBytes: 16 * page, Inodes: 8, Mode: c.mode, Flags: c.flags}))
			var st unix.Statx_t
			if err := unix.Statx(int(mnt.Fd()), "", unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS, &st); err != nil {
				t.Fatal(err)
			}
			// The test process created the control socket, so it is the
			// peer: root here (the supervisor's uid in production). The
			// tmpfs default would be the helper's own uid.
			if st.Uid != 0 || st.Gid != 0 {
				t.Errorf("mode %#o: root owned by %d:%d, want the peer 0:0", c.mode, st.Uid, st.Gid)
			}
			if got := uint32(st.Mode) & 0o7777; got != c.mode || st.Mode&unix.S_IFMT != unix.S_IFDIR {
				t.Errorf("root mode %#o, want directory %#o", st.Mode, c.mode)
			}
			flags := statfsThrough(t, mnt)
			if flags&(unix.ST_NOSUID|unix.ST_NODEV) != unix.ST_NOSUID|unix.ST_NODEV {
				t.Errorf("mount flags %#x lack nosuid,nodev", flags)
			}
			if (flags&unix.ST_NOEXEC != 0) != c.noexec {
				t.Errorf("mount flags %#x: noexec %v, want %v", flags, flags&unix.ST_NOEXEC != 0, c.noexec)
			}
		}
	})

	if after := mountinfo(t); after != before {
		t.Errorf("the mount table changed while tmpfs descriptors were open:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// TestMounterBind binds directories and files from the source roots and
// checks what the supervisor gets: read-only and noexec on request,
// nosuid,nodev always, and nothing attached to the mount table.
func TestMounterBind(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	before := mountinfo(t)
	m := startMounter(t, env)
	dir := sourceDir(t, env, "bind")
	trueBin, err := os.ReadFile("/usr/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "true"), trueBin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	srcPath := openFD(t, dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW)
	srcDir := openFD(t, dir, unix.O_RDONLY|unix.O_DIRECTORY)
	// execThrough runs "true" through the mount descriptor.
	execThrough := func(mnt *os.File) error {
		return exec.Command(fmt.Sprintf("/proc/%d/fd/%d/true", os.Getpid(), mnt.Fd())).Run()
	}

	t.Run("read-write", func(t *testing.T) {
		mnt := m.mustMount(m.bind(srcPath, 0))
		fd, err := unix.Openat(int(mnt.Fd()), "written", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			t.Fatalf("create through a read-write bind: %v", err)
		}
		unix.Close(fd)
		if _, err := os.Stat(filepath.Join(dir, "written")); err != nil {
			t.Errorf("the file written through the bind is not in the source: %v", err)
		}
		flags := statfsThrough(t, mnt)
		if flags&(unix.ST_NOSUID|unix.ST_NODEV) != unix.ST_NOSUID|unix.ST_NODEV || flags&(unix.ST_RDONLY|unix.ST_NOEXEC) != 0 {
			t.Errorf("mount flags %#x, want nosuid,nodev and neither ro nor noexec", flags)
		}
		if err := execThrough(mnt); err != nil {
			t.Errorf("exec through a bind without noexec: %v", err)
		}
	})

	t.Run("read-only", func(t *testing.T) {
		mnt := m.mustMount(m.bind(srcDir, mountwire.BindReadOnly))
		_, err := unix.Openat(int(mnt.Fd()), "data", unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if !errors.Is(err, unix.EROFS) {
			t.Errorf("open for writing through a read-only bind: %v, want EROFS", err)
		}
		err = unix.Mkdirat(int(mnt.Fd()), "new", 0o755)
		if !errors.Is(err, unix.EROFS) {
			t.Errorf("mkdir through a read-only bind: %v, want EROFS", err)
		}
		// Recursive: the read-only flag reaches a subdirectory too.
		_, err = unix.Openat(int(mnt.Fd()), "sub/x", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if !errors.Is(err, unix.EROFS) {
			t.Errorf("create in a subdirectory of a read-only bind: %v, want EROFS", err)
		}
		if flags := statfsThrough(t, mnt); flags&(unix.ST_RDONLY|unix.ST_NOSUID|unix.ST_NODEV) != unix.ST_RDONLY|unix.ST_NOSUID|unix.ST_NODEV {
			t.Errorf("mount flags %#x lack ro,nosuid,nodev", flags)
		}
	})

	t.Run("noexec", func(t *testing.T) {
		mnt := m.mustMount(m.bind(srcPath, mountwire.BindNoExec|mountwire.BindReadOnly))
		if flags := statfsThrough(t, mnt); flags&unix.ST_NOEXEC == 0 {
			t.Errorf("mount flags %#x lack noexec", flags)
		}
		if err := execThrough(mnt); !errors.Is(err, unix.EACCES) {
			t.Errorf("exec through a noexec bind: %v, want EACCES", err)
		}
	})

	t.Run("regular file", func(t *testing.T) {
		for _, flags := range []int{unix.O_PATH | unix.O_NOFOLLOW, unix.O_RDONLY} {
			src := openFD(t, filepath.Join(dir, "data"), flags)
			mnt := m.mustMount(m.bind(src, mountwire.BindReadOnly))
			data, err := os.ReadFile(fmt.Sprintf("/proc/self/fd/%d", mnt.Fd()))
			if err != nil || string(data) != "data" {
				t.Errorf("read through the file bind: %q, %v", data, err)
			}
			_, err = os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", mnt.Fd()), os.O_WRONLY, 0)
			if !errors.Is(err, unix.EROFS) {
				t.Errorf("open for writing through a read-only file bind: %v, want EROFS", err)
			}
		}
	})

	t.Run("the root itself and a directory of /usr", func(t *testing.T) {
		for _, p := range []string{"/usr", "/usr/bin", filepath.Join(env.Base, "sources")} {
			src := openFD(t, p, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW)
			m.mustMount(m.bind(src, mountwire.BindReadOnly))
		}
	})

	t.Run("renamed inside the root after opening", func(t *testing.T) {
		// Judged by what the descriptor refers to now: a directory
		// renamed to another place beneath the root is still beneath it.
		from := filepath.Join(dir, "old")
		if err := os.Mkdir(from, 0o755); err != nil {
			t.Fatal(err)
		}
		src := openFD(t, from, unix.O_PATH|unix.O_DIRECTORY)
		if err := os.Rename(from, filepath.Join(dir, "sub", "new")); err != nil {
			t.Fatal(err)
		}
		m.mustMount(m.bind(src, 0))
	})

	if after := mountinfo(t); after != before {
		t.Errorf("the mount table changed while bind descriptors were open:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// Between requests, after binds of every kind and a tmpfs, no thread
	// holds CAP_SYS_ADMIN effective: it is raised for each call only
	// (captable OnDemand, helperkit.Raised), and still permitted.
	m.mustMount(m.tmpfs(mountwire.TmpfsRequest{SizeBytes: 1 << 20, Inodes: 64, Mode: 0o755}))
	row, _ := captable.Lookup("glove-mounter")
	if n := checkThreads(t, m.p.Pid(), map[string]string{"CapEff": captext.MaskString(0), "CapPrm": captext.MaskString(row.Mask())}); n < 2 {
		t.Errorf("saw %d threads of glove-mounter", n)
	}
}

// attack is one request a compromised supervisor could send.
type attack struct {
	name string
	// prepare returns the request and its descriptors (closed by the
	// test's cleanups).
	prepare func(t *testing.T) (wire.Message, []int)
	want    wire.ErrorCode
}

// TestMounterAttackTable sends the requests a compromised supervisor
// would try, to one helper in turn: each must be refused with the right
// code while the helper keeps serving, the mount table stays as it was
// and the helper holds no more descriptors than before.
func TestMounterAttackTable(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	sources := filepath.Join(env.Base, "sources")
	dir := sourceDir(t, env, "attack")
	outside, err := os.MkdirTemp(env.Base, "outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	if err := os.Chmod(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(outside, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	inside := filepath.Join(dir, "inside")
	if err := os.Mkdir(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	// Two real bind mounts beneath the root, made by root in the shared
	// mount namespace and removed before the leak check: one leading
	// outside, one leading to another directory of the root itself.
	bindMount := func(from, to string) {
		var err error
		if st, serr := os.Stat(from); serr == nil && !st.IsDir() {
			err = os.WriteFile(to, nil, 0o644)
		} else {
			err = os.Mkdir(to, 0o755)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount(from, to, "", unix.MS_BIND, ""); err != nil {
			t.Fatalf("bind mount %s on %s: %v", from, to, err)
		}
		t.Cleanup(func() {
			if err := unix.Unmount(to, 0); err != nil {
				t.Errorf("unmount %s: %v", to, err)
			}
		})
	}
	bindMount(outside, filepath.Join(dir, "leads-outside"))
	bindMount(inside, filepath.Join(dir, "leads-inside"))
	bindMount(filepath.Join(outside, "secret"), filepath.Join(dir, "file-over-file"))
	if err := os.Symlink("/etc", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(dir, "null"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	sock, err := net.Listen("unix", filepath.Join(dir, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })

	m := startMounter(t, env)
	// Mount descriptors the helper itself handed out earlier: binding
	// them again would be a way to drop read-only or reach a tmpfs.
	roBind := m.mustMount(m.bind(openFD(t, inside, unix.O_PATH|unix.O_DIRECTORY), mountwire.BindReadOnly))
	tmp := m.mustMount(m.tmpfs(mountwire.TmpfsRequest{SizeBytes: 1 << 20, Inodes: 16, Mode: 0o700}))

	path := func(p string, flags int) func(t *testing.T) (wire.Message, []int) {
		return func(t *testing.T) (wire.Message, []int) {
			return &mountwire.BindRequest{Flags: mountwire.BindReadOnly}, []int{openFD(t, p, flags)}
		}
	}
	fd := func(f func(t *testing.T) int) func(t *testing.T) (wire.Message, []int) {
		return func(t *testing.T) (wire.Message, []int) {
			return &mountwire.BindRequest{Flags: mountwire.BindReadOnly}, []int{f(t)}
		}
	}
	tmpfsReq := func(r mountwire.TmpfsRequest) func(t *testing.T) (wire.Message, []int) {
		return func(*testing.T) (wire.Message, []int) { return &r, nil }
	}
	const dirPath = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW
	page := uint64(os.Getpagesize())
	attacks := []attack{
		{"bind: outside the roots (/etc)", path("/etc", dirPath), wire.ErrRefused},
		{"bind: a file outside the roots (/etc/passwd)", path("/etc/passwd", unix.O_RDONLY), wire.ErrRefused},
		{"bind: the root's parent", path(env.Base, dirPath), wire.ErrRefused},
		{"bind: the file system root", path("/", dirPath), wire.ErrRefused},
		{"bind: a symlink inside the root pointing outside (O_PATH|O_NOFOLLOW)", path(filepath.Join(dir, "link"), unix.O_PATH|unix.O_NOFOLLOW), wire.ErrRefused},
		{"bind: a symlink inside the root, followed at open", path(filepath.Join(dir, "link"), unix.O_PATH|unix.O_DIRECTORY), wire.ErrRefused},
		{"bind: a bind mount inside the root leading outside", path(filepath.Join(dir, "leads-outside"), dirPath), wire.ErrRefused},
		{"bind: a directory beneath that bind mount", path(filepath.Join(dir, "leads-outside", "sub"), dirPath), wire.ErrRefused},
		{"bind: a file beneath that bind mount", path(filepath.Join(dir, "leads-outside", "secret"), unix.O_PATH|unix.O_NOFOLLOW), wire.ErrRefused},
		{"bind: a file bind-mounted from outside over a file of the root", path(filepath.Join(dir, "file-over-file"), unix.O_PATH|unix.O_NOFOLLOW), wire.ErrRefused},
		{"bind: a bind mount inside the root leading inside it", path(filepath.Join(dir, "leads-inside"), dirPath), wire.ErrRefused},
		{"bind: /proc/self/root of the supervisor", path("/proc/self/root", unix.O_PATH|unix.O_DIRECTORY), wire.ErrRefused},
		{"bind: /proc/1/root", fd(func(t *testing.T) int {
			f, err := unix.Open("/proc/1/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
				// Some hosts' PID 1 (a container's manager) refuses
				// even root; the kernel then stops this attack before
				// any helper sees it. The next case covers the same
				// ground with a process of the test's own.
				t.Skipf("open /proc/1/root: %v: refused to root itself on this host", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Close(f) })
			return f
		}), wire.ErrRefused},
		{"bind: /proc/PID/root of a process in another mount namespace", fd(func(t *testing.T) int {
			return openFD(t, fmt.Sprintf("/proc/%d/root", otherNamespace(t)), unix.O_PATH|unix.O_DIRECTORY)
		}), wire.ErrRefused},
		{"bind: a device node (/dev/null)", path("/dev/null", unix.O_RDONLY), wire.ErrRefused},
		{"bind: a device node created under the root", path(filepath.Join(dir, "null"), unix.O_PATH|unix.O_NOFOLLOW), wire.ErrRefused},
		{"bind: a FIFO under the root", path(filepath.Join(dir, "fifo"), unix.O_PATH|unix.O_NOFOLLOW), wire.ErrRefused},
		{"bind: a unix socket under the root", path(filepath.Join(dir, "sock"), unix.O_PATH|unix.O_NOFOLLOW), wire.ErrRefused},
		{"bind: a memfd (a regular file with no name)", fd(func(t *testing.T) int {
			f, err := unix.MemfdCreate("glove-attack", unix.MFD_CLOEXEC)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Close(f) })
			return f
		}), wire.ErrRefused},
		{"bind: a pidfd", fd(func(t *testing.T) int {
			f, err := unix.PidfdOpen(os.Getpid(), 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Close(f) })
			return f
		}), wire.ErrRefused},
		{"bind: a read-only bind it returned (to drop read-only)", fd(func(*testing.T) int { return int(roBind.Fd()) }), wire.ErrRefused},
		{"bind: a tmpfs it returned", fd(func(*testing.T) int { return int(tmp.Fd()) }), wire.ErrRefused},
		{"bind: a directory renamed out of the root after opening", fd(func(t *testing.T) int {
			from := filepath.Join(dir, "moved")
			if err := os.Mkdir(from, 0o755); err != nil {
				t.Fatal(err)
			}
			f := openFD(t, from, dirPath)
			if err := os.Rename(from, filepath.Join(outside, "moved")); err != nil {
				t.Fatal(err)
			}
			return f
		}), wire.ErrRefused},
		{"bind: a file unlinked from the root after opening", fd(func(t *testing.T) int {
			p := filepath.Join(dir, "gone")
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			f := openFD(t, p, unix.O_PATH|unix.O_NOFOLLOW)
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			return f
		}), wire.ErrRefused},
		{"bind: undefined flags", func(t *testing.T) (wire.Message, []int) {
			return &mountwire.BindRequest{Flags: 1 << 2}, []int{openFD(t, sources, dirPath)}
		}, wire.ErrBadRequest},
		{"bind: every flag bit", func(t *testing.T) (wire.Message, []int) {
			return &mountwire.BindRequest{Flags: ^uint32(0)}, []int{openFD(t, sources, dirPath)}
		}, wire.ErrBadRequest},
		{"tmpfs: size over the cap", tmpfsReq(mountwire.TmpfsRequest{SizeBytes: 64<<20 + page, Inodes: 16, Mode: 0o700}), wire.ErrRefused},
		{"tmpfs: size at the hard ceiling", tmpfsReq(mountwire.TmpfsRequest{SizeBytes: 1 << 40, Inodes: 16, Mode: 0o700}), wire.ErrRefused},
		{"tmpfs: inodes over the cap", tmpfsReq(mountwire.TmpfsRequest{SizeBytes: 1 << 20, Inodes: 4097, Mode: 0o700}), wire.ErrRefused},
		{"tmpfs: size 0 (unlimited to tmpfs)", tmpfsReq(mountwire.TmpfsRequest{SizeBytes: 0, Inodes: 16, Mode: 0o700}), wire.ErrBadRequest},
		{"tmpfs: inodes 0 (unlimited to tmpfs)", tmpfsReq(mountwire.TmpfsRequest{SizeBytes: 1 << 20, Inodes: 0, Mode: 0o700}), wire.ErrBadRequest},
		{"tmpfs: size not a multiple of the page size", tmpfsReq(mountwire.TmpfsRequest{SizeBytes: 1<<20 + 1, Inodes: 16, Mode: 0o700}), wire.ErrBadRequest},
		{"tmpfs: mode with the setuid bit", tmpfsReq(mountwire.TmpfsRequest{SizeBytes: 1 << 20, Inodes: 16, Mode: 0o4755}), wire.ErrBadRequest},
		{"tmpfs: mode with the setgid bit", tmpfsReq(mountwire.TmpfsRequest{SizeBytes: 1 << 20, Inodes: 16, Mode: 0o2775}), wire.ErrBadRequest},
		{"tmpfs: mode with file type bits", tmpfsReq(mountwire.TmpfsRequest{SizeBytes: 1 << 20, Inodes: 16, Mode: unix.S_IFDIR | 0o755}), wire.ErrBadRequest},
		{"tmpfs: undefined flags", tmpfsReq(mountwire.TmpfsRequest{SizeBytes: 1 << 20, Inodes: 16, Mode: 0o700, Flags: 1 << 1}), wire.ErrBadRequest},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			req, fds := a.prepare(t)
			mounts := mountinfo(t)
			m.barrier(t)
			held := helperFDs(t, m.p.Pid())
			refusals := strings.Count(m.log.String(), "request refused")
			f, err := m.call(req, fds)
			if err == nil {
				f.Close()
				t.Fatalf("accepted; want %v\nhelper log: %s", a.want, m.log)
			}
			if code := wireCode(err); code != a.want {
				t.Fatalf("answer %v; want a wire.Error with code %v", err, a.want)
			}
			if !m.log.WaitCount("request refused", refusals+1, 5*time.Second) {
				t.Errorf("helper log does not record the refusal: %s", m.log)
			}
			t.Logf("refused: %v", err)
			if after := mountinfo(t); after != mounts {
				t.Errorf("the mount table changed")
			}
			if after := helperFDs(t, m.p.Pid()); !slices.Equal(after, held) {
				t.Errorf("the helper's descriptors changed: %v, before %v", after, held)
			}
			if m.p.Cmd.ProcessState != nil {
				t.Fatalf("the helper exited: %v", m.p.Cmd.ProcessState)
			}
		})
	}
	// Still serving after every refusal.
	m.mustMount(m.tmpfs(mountwire.TmpfsRequest{SizeBytes: 1 << 20, Inodes: 16, Mode: 0o700}))
}

// otherNamespace starts a process in a new mount namespace (a copy of
// this one) and returns its pid; it is killed when the test ends.
func otherNamespace(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("/bin/sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWNS}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start a process in a new mount namespace: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}

// helperFDs lists the helper's open descriptors and what they refer to
// (root may read them although the helper is not dumpable).
func helperFDs(t testing.TB, pid int) []string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("list the helper's descriptors: %v", err)
	}
	var out []string
	for _, e := range ents {
		target, _ := os.Readlink(filepath.Join(dir, e.Name()))
		out = append(out, e.Name()+" "+target)
	}
	return out
}

// TestMounterProtocolFaults sends frames the wire layer itself refuses
// for glove-mounter's messages: the helper must answer ErrProtocol, exit
// with status 2 and leave no mount behind.
func TestMounterProtocolFaults(t *testing.T) {
	env := testenv.Get(t)
	sources := filepath.Join(env.Base, "sources")
	// redeclare puts a valid frame's payload under a header declaring
	// another descriptor count, to forge a mismatching frame.
	redeclare := func(b []byte, err error, declared uint16) []byte {
		if err != nil {
			t.Fatal(err)
		}
		payload := b[wire.HeaderSize:]
		typ, id := binary.LittleEndian.Uint16(b[2:]), binary.LittleEndian.Uint32(b[4:])
		return append(wiretest.EncodeRawHeader(wire.Version, typ, id, uint32(len(payload)), declared, 0), payload...)
	}
	frame := func(id uint32, m wire.Message, declared uint16) []byte {
		b, err := wiretest.FrameOf(mountwire.Protocol, id, m)
		return redeclare(b, err, declared)
	}
	tmpfs := &mountwire.TmpfsRequest{SizeBytes: 1 << 20, Inodes: 16, Mode: 0o700}
	reply, err := wire.Encode(2, mountwire.Bind.Reply(), &mountwire.BindReply{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		before [][]byte
		frame  []byte
		fds    int
	}{
		{name: "bind with no descriptor", frame: frame(2, &mountwire.BindRequest{}, 0)},
		{name: "bind declaring one descriptor, sending none", frame: frame(2, &mountwire.BindRequest{}, 1)},
		{name: "bind with two descriptors", frame: frame(2, &mountwire.BindRequest{}, 2), fds: 2},
		{name: "tmpfs with a descriptor", frame: frame(2, tmpfs, 1), fds: 1},
		{name: "replayed request id", before: [][]byte{frame(2, tmpfs, 0)}, frame: frame(2, tmpfs, 0)},
		{name: "decreasing request id", before: [][]byte{frame(7, tmpfs, 0)}, frame: frame(3, tmpfs, 0)},
		{name: "a reply type (BindReply)", frame: reply, fds: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			testenv.CheckLeaks(t, env.UID)
			mounts := mountinfo(t)
			p, log := env.StartHelper(t, "glove-mounter")
			if _, err := p.Hello(); err != nil {
				t.Fatalf("hello: %v\nhelper log: %s", err, log)
			}
			conn := p.Conn()
			for _, b := range c.before {
				if err := conn.SendRaw(b, nil); err != nil {
					t.Fatal(err)
				}
				fr, err := conn.Recv(wirecall.Replies(mountwire.Tmpfs.Decl))
				if err != nil {
					t.Fatalf("reply before the fault: %v\nhelper log: %s", err, log)
				}
				closeAll(fr.FDs)
			}
			var fds []int
			for i := 0; i < c.fds; i++ {
				fds = append(fds, openFD(t, sources, unix.O_PATH|unix.O_DIRECTORY))
			}
			if err := conn.SendRaw(c.frame, fds); err != nil {
				t.Fatalf("send: %v", err)
			}
			if fr, err := conn.Recv(wiretest.OnlyErrors); err == nil {
				closeAll(fr.FDs)
				if e, ok := fr.Msg.(*wire.Error); !ok || e.Code != wire.ErrProtocol {
					t.Errorf("answer %#v, want an Error with code %d", fr.Msg, wire.ErrProtocol)
				}
			}
			code, sig := testenv.WaitExit(t, p, 10*time.Second)
			if code != helperkit.ExitProtocol {
				t.Errorf("exit status %d (signal %v), want %d\nhelper log: %s", code, sig, helperkit.ExitProtocol, log)
			}
			if after := mountinfo(t); after != mounts {
				t.Errorf("the mount table changed")
			}
		})
	}
}

// TestMounterStartupRoots checks a missing source root is a start-up
// error, not a silently narrower bound.
func TestMounterStartupRoots(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	const file = "mounter.json"
	good := testenv.DefaultConfigs(env.Base)[file]
	t.Cleanup(func() {
		if err := env.WriteConfig(file, good); err != nil {
			t.Fatal(err)
		}
	})
	missing := filepath.Join(env.Base, "no-such-root")
	cfg := fmt.Sprintf(`{"schema_version":1,"source_roots":["/usr",%q],"max_tmpfs_bytes":1048576,"max_tmpfs_inodes":16}`, missing)
	if err := env.WriteConfig(file, []byte(cfg)); err != nil {
		t.Fatal(err)
	}
	p, log := env.StartHelper(t, "glove-mounter")
	code, sig := testenv.WaitExit(t, p, 10*time.Second)
	if code != helperkit.ExitStartup || !strings.Contains(log.String(), "open source root") {
		t.Errorf("exit status %d (signal %v), log %s; want %d and the missing root named", code, sig, log, helperkit.ExitStartup)
	}
}

// TestMounterFallbackNamespace: the fallback mounter serves from private
// copies of the supervisor's mount namespace, every thread of it (the
// layer TestSetattrConfinedToOwnNamespace in helpers/mounter shows
// stopping mount_setattr on the supervisor's mounts), while the
// open_tree_attr mounter stays in the supervisor's.
func TestMounterFallbackNamespace(t *testing.T) {
	env := testenv.Get(t)
	testenv.CheckLeaks(t, env.UID)
	own := nsInode(t, "/proc/self/ns/mnt")
	for _, fallback := range []bool{false, true} {
		fallbackMounter = fallback
		m := startMounter(t, env)
		fallbackMounter = false
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", m.p.Pid()))
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			got := nsInode(t, fmt.Sprintf("/proc/%d/task/%s/ns/mnt", m.p.Pid(), task.Name()))
			if fallback && got == own {
				t.Errorf("fallback mounter thread %s is in the supervisor's mount namespace", task.Name())
			}
			if !fallback && mounterpkg.HasOpenTreeAttr() && got != own {
				t.Errorf("open_tree_attr mounter thread %s left the supervisor's mount namespace", task.Name())
			}
		}
		// Every thread of the fallback has a copy of its own, and
		// open_tree clones only mounts of the calling thread's: many
		// requests, with pauses that let the runtime park the serving
		// goroutine, must all succeed (at random EINVAL, seen on 6.1,
		// while a request could run on another thread than its roots').
		dir := sourceDir(t, env, fmt.Sprintf("threads-%v", fallback))
		src := openFD(t, dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW)
		for i := 0; i < 300; i++ {
			f, err := m.bind(src, mountwire.BindReadOnly)
			if err != nil {
				t.Fatalf("fallback %v: bind %d: %v\nhelper log: %s", fallback, i, err, m.log)
			}
			f.Close()
			if i%20 == 0 {
				// A pause lets the runtime park the serving thread.
				time.Sleep(2 * time.Millisecond)
			}
		}
	}
}

func nsInode(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}
