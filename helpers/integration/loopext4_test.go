// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/captable/captext"
	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/helpers/wire/loopwire"
	"github.com/glove-sandbox/glove/helpers/wire/wirecall"
	"github.com/glove-sandbox/glove/helpers/wire/wiretest"
	"github.com/glove-sandbox/glove/supervisor/engine/helperproc"
	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

const loopext4Helper = "glove-loopext4"

// l4ImagesDir is glove-loopext4's materialization root in the test
// environment (testenv.DefaultConfigs).
func l4ImagesDir(env *testenv.Env) string { return filepath.Join(env.Base, "images") }

// l4OpenDirPath opens a directory O_PATH, as the supervisor would to carry
// it in a request, and closes it when the test ends.
func l4OpenDirPath(t testing.TB, p string) *os.File {
	t.Helper()
	fd, err := unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open %s: %v", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	t.Cleanup(func() { f.Close() })
	return f
}

// l4Start starts the helper and stops it (exit 0 expected) when
// the test ends, unless the test stopped it already.
func l4Start(t testing.TB, env *testenv.Env) (*helperproc.Proc, *testenv.SyncBuffer) {
	t.Helper()
	p, log := env.StartHelper(t, loopext4Helper)
	t.Cleanup(func() {
		if p.Cmd.ProcessState == nil {
			if err := p.Close(); err != nil {
				t.Errorf("helper exit: %v\nhelper log: %s", err, log)
			}
		}
	})
	return p, log
}

// l4Call sends one request; refusals come back as *wire.Error.
func l4Call(p *helperproc.Proc, m wire.Message, fds ...*os.File) (wire.Message, []*os.File, error) {
	var raw []int
	for _, f := range fds {
		raw = append(raw, int(f.Fd()))
	}
	return wirecall.CallAny(loopwire.Protocol, p.Client, m, raw)
}

// l4WantRefusal checks err is an Error reply with code.
func l4WantRefusal(t testing.TB, err error, code wire.ErrorCode) {
	t.Helper()
	var e *wire.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("got %v, want an Error reply with code %d (%v)", err, code, code)
	}
	t.Logf("refused as expected: %v", e)
}

// l4Create asks the helper for an image and removes it when the test
// ends.
func l4Create(t testing.TB, env *testenv.Env, p *helperproc.Proc, root *os.File, name string, size uint64) {
	t.Helper()
	t.Cleanup(func() { os.Remove(filepath.Join(l4ImagesDir(env), name)) })
	if _, _, err := l4Call(p, &loopwire.CreateRequest{Name: name, SizeBytes: size}, root); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
}

// l4Attach asks the helper for a mount of an image; the descriptor is
// closed when the test ends unless the test closed it first.
func l4Attach(t testing.TB, p *helperproc.Proc, root *os.File, name string, readOnly bool) *os.File {
	t.Helper()
	_, fds, err := l4Call(p, &loopwire.AttachRequest{Name: name, ReadOnly: readOnly}, root)
	if err != nil {
		t.Fatalf("attach %s: %v", name, err)
	}
	if len(fds) != 1 {
		t.Fatalf("attach %s: %d descriptors in the reply", name, len(fds))
	}
	t.Cleanup(func() { fds[0].Close() })
	return fds[0]
}

// l4Loops lists attached loop devices whose backing file lies in dir.
func l4Loops(dir string) []string {
	paths, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []string
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err == nil && strings.HasPrefix(string(data), dir+"/") {
			out = append(out, filepath.Base(filepath.Dir(filepath.Dir(p)))+" "+strings.TrimSpace(string(data)))
		}
	}
	return out
}

// l4WaitLoopsGone waits until no loop device is backed by a file in dir.
// An autoclear loop device unbinds after the last reference to its mount
// is dropped, asynchronously (the superblock goes in task work and the
// device in a work queue), so the check polls, bounded.
func l4WaitLoopsGone(t testing.TB, dir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := l4Loops(dir)
		if len(left) == 0 {
			// The loop device is gone before the image's open file
			// description it held, and with it the attachment's lock:
			// the kernel releases that file later, from a work queue
			// (seen on 6.1 under TCG: the next attach found the image
			// "attached already"). Wait for the locks too.
			left = l4LockedImages(dir)
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("loop devices still attached 10s after their mounts closed: %v", left)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// l4LockedImages lists the images in dir whose attachment lock (flock,
// shared or exclusive) some open file description still holds.
func l4LockedImages(dir string) []string {
	imgs, _ := filepath.Glob(filepath.Join(dir, "*.img"))
	var locked []string
	for _, img := range imgs {
		// Regular files only (the compromised-supervisor tests plant a
		// FIFO named like an image), opened without blocking.
		if st, err := os.Lstat(img); err != nil || !st.Mode().IsRegular() {
			continue
		}
		fd, err := unix.Open(img, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
		if err != nil {
			continue // gone, or not ours to open: not an attachment
		}
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); errors.Is(err, unix.EWOULDBLOCK) {
			locked = append(locked, img+" (locked)")
		}
		// Closing releases the probe's own lock with the descriptor.
		unix.Close(fd)
	}
	return locked
}

// l4CheckLeaks is testenv.CheckLeaks for tests that attach images: it
// first waits for autoclear loop devices to go.
func l4CheckLeaks(t *testing.T, env *testenv.Env) {
	t.Helper()
	testenv.CheckLeaks(t, env.UID)
	t.Cleanup(func() { l4WaitLoopsGone(t, l4ImagesDir(env)) })
}

// l4AsServiceUser runs fn on a thread whose file system uid and gid are
// the service user's: the kernel then checks file access as it would
// for the supervisor, and drops this thread's file capabilities.
func l4AsServiceUser(t testing.TB, env *testenv.Env, fn func() error) error {
	t.Helper()
	runtime.LockOSThread()
	if err := unix.Setfsgid(env.GID); err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("setfsgid: %v", err)
	}
	_ = unix.Setfsuid(env.UID)
	if cur, _ := unix.SetfsuidRetUid(-1); cur != env.UID {
		t.Fatalf("setfsuid: fsuid is %d, want %d", cur, env.UID)
	}
	err := fn()
	_ = unix.Setfsuid(0)
	_ = unix.Setfsgid(0)
	if cur, _ := unix.SetfsuidRetUid(-1); cur != 0 {
		// Leave the thread locked: it dies with this goroutine rather
		// than run other goroutines as the service user.
		t.Fatalf("restore fsuid: still %d", cur)
	}
	runtime.UnlockOSThread()
	return err
}

// l4Fill writes through the mount descriptor until the file system is
// full and returns the bytes written and the error that stopped it.
func l4Fill(mnt *os.File, name string) (int64, error) {
	fd, err := unix.Openat(int(mnt.Fd()), name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return 0, fmt.Errorf("create %s through the mount: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	chunk := bytes.Repeat([]byte{0x5a}, 1<<20)
	var total int64
	for {
		n, err := f.Write(chunk)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
}

// TestLoopext4CreateAttachFill creates a 16 MiB image, attaches it, and
// writes through the mount descriptor as the service user until ENOSPC:
// the image's size is a hard bound. After the descriptor closes, nothing
// remains attached.
func TestLoopext4CreateAttachFill(t *testing.T) {
	env := testenv.Get(t)
	l4CheckLeaks(t, env)
	p, _ := l4Start(t, env)
	root := l4OpenDirPath(t, l4ImagesDir(env))
	const name, size = "fill.img", 16 << 20
	l4Create(t, env, p, root, name, size)

	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(l4ImagesDir(env), name), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != size || st.Blocks*512 < size || st.Mode&0o7777 != 0o600 || st.Uid != uint32(env.UID) || st.Nlink != 1 {
		t.Errorf("image: size %d, allocated %d, mode %04o, uid %d, links %d; want %d allocated, 0600, uid %d, 1 link",
			st.Size, st.Blocks*512, st.Mode&0o7777, st.Uid, st.Nlink, size, env.UID)
	}

	mnt := l4Attach(t, p, root, name, false)
	if err := unix.Fstat(int(mnt.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != uint32(env.UID) || st.Gid != uint32(env.GID) {
		t.Errorf("the image's root directory is owned by %d:%d, want the service user %d:%d", st.Uid, st.Gid, env.UID, env.GID)
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(int(mnt.Fd()), &sfs); err != nil {
		t.Fatal(err)
	}
	if sfs.Type != unix.EXT4_SUPER_MAGIC || sfs.Flags&unix.ST_NOSUID == 0 || sfs.Flags&unix.ST_NODEV == 0 {
		t.Errorf("mount: type %#x flags %#x, want ext4, nosuid, nodev", sfs.Type, sfs.Flags)
	}
	if l := l4Loops(l4ImagesDir(env)); len(l) != 1 {
		t.Errorf("attached loop devices: %v, want exactly one", l)
	}

	var written int64
	err := l4AsServiceUser(t, env, func() error {
		var err error
		written, err = l4Fill(mnt, "data")
		return err
	})
	if !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("writing through the mount stopped after %d bytes with %v, want ENOSPC", written, err)
	}
	t.Logf("ENOSPC after %d bytes: %.1f MiB of a %d MiB image (ext4 overhead %.1f MiB, %.0f%%)",
		written, float64(written)/(1<<20), size>>20, float64(size-written)/(1<<20), 100*float64(size-written)/size)
	if written > size || written < size*3/4 {
		t.Errorf("wrote %d bytes into a %d-byte image: outside the ext4 overhead expected (75%%..100%%)", written, size)
	}
	mnt.Close()
	l4WaitLoopsGone(t, l4ImagesDir(env))
}

// TestLoopext4AttachAfterRestart writes a file into a retained image,
// stops the helper, and reads it back through a new helper.
func TestLoopext4AttachAfterRestart(t *testing.T) {
	env := testenv.Get(t)
	l4CheckLeaks(t, env)
	root := l4OpenDirPath(t, l4ImagesDir(env))
	const name = "retained.img"
	want := []byte("kept across helper restarts\n")

	p, log := l4Start(t, env)
	l4Create(t, env, p, root, name, 8<<20)
	mnt := l4Attach(t, p, root, name, false)
	if err := l4AsServiceUser(t, env, func() error {
		fd, err := unix.Openat(int(mnt.Fd()), "note", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), "note")
		defer f.Close()
		if _, err := f.Write(want); err != nil {
			return err
		}
		return f.Sync()
	}); err != nil {
		t.Fatalf("write through the mount: %v", err)
	}
	mnt.Close()
	if err := p.Close(); err != nil {
		t.Fatalf("first helper: %v\n%s", err, log)
	}
	l4WaitLoopsGone(t, l4ImagesDir(env))

	p2, _ := l4Start(t, env)
	mnt2 := l4Attach(t, p2, root, name, true)
	fd, err := unix.Openat(int(mnt2.Fd()), "note", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open the file after restart: %v", err)
	}
	f := os.NewFile(uintptr(fd), "note")
	got, err := l4ReadAll(f)
	f.Close()
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("read back %q, %v; want %q", got, err, want)
	}
	mnt2.Close()
}

func l4ReadAll(f *os.File) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(f)
	return b.Bytes(), err
}

// TestLoopext4ReadOnlyAndFreeze checks that a read-only attachment and a
// frozen one refuse writes with EROFS, and that the same image cannot be
// attached twice while attached.
func TestLoopext4ReadOnlyAndFreeze(t *testing.T) {
	env := testenv.Get(t)
	l4CheckLeaks(t, env)
	p, _ := l4Start(t, env)
	root := l4OpenDirPath(t, l4ImagesDir(env))
	const name = "freeze.img"
	l4Create(t, env, p, root, name, 8<<20)

	writeFile := func(mnt *os.File, file string) error {
		return l4AsServiceUser(t, env, func() error {
			fd, err := unix.Openat(int(mnt.Fd()), file, unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
			if err == nil {
				unix.Close(fd)
			}
			return err
		})
	}

	ro := l4Attach(t, p, root, name, true)
	if err := writeFile(ro, "a"); !errors.Is(err, unix.EROFS) {
		t.Errorf("write through a read-only attachment: %v, want EROFS", err)
	}
	_, _, err := l4Call(p, &loopwire.AttachRequest{Name: name}, root)
	l4WantRefusal(t, err, wire.ErrRefused)
	ro.Close()
	l4WaitLoopsGone(t, l4ImagesDir(env))

	rw := l4Attach(t, p, root, name, false)
	if err := writeFile(rw, "before"); err != nil {
		t.Fatalf("write before Freeze: %v", err)
	}
	if _, _, err := l4Call(p, &loopwire.FreezeRequest{}, rw); err != nil {
		t.Fatalf("freeze: %v", err)
	}
	if err := writeFile(rw, "after"); !errors.Is(err, unix.EROFS) {
		t.Errorf("write after Freeze: %v, want EROFS", err)
	}
	if fd, err := unix.Openat(int(rw.Fd()), "before", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		t.Errorf("read after Freeze: %v", err)
	} else {
		unix.Close(fd)
	}
	rw.Close()
	// Between requests, after one of each kind, no thread of the helper
	// holds a capability effective: each was raised for its call only
	// (captable OnDemand, helperkit.Raised), none is lost.
	row, _ := captable.Lookup(loopext4Helper)
	if n := checkThreads(t, p.Pid(), map[string]string{"CapEff": captext.MaskString(0), "CapPrm": captext.MaskString(row.Mask())}); n < 2 {
		t.Errorf("saw %d threads of glove-loopext4", n)
	}
}

// TestLoopext4MkfsFailureLeavesNothing asks for an image too small to
// hold an ext4 file system: mkfs.ext4 fails, and the helper removes the
// file it made and keeps serving.
func TestLoopext4MkfsFailureLeavesNothing(t *testing.T) {
	env := testenv.Get(t)
	l4CheckLeaks(t, env)
	p, log := l4Start(t, env)
	root := l4OpenDirPath(t, l4ImagesDir(env))
	before := l4ListDir(t, l4ImagesDir(env))
	_, _, err := l4Call(p, &loopwire.CreateRequest{Name: "tiny.img", SizeBytes: 4096}, root)
	var e *wire.Error
	if !errors.As(err, &e) || !strings.Contains(e.Message, "mkfs.ext4") {
		t.Fatalf("create of a 4 KiB image: %v, want an error naming mkfs.ext4\nhelper log: %s", err, log)
	}
	t.Logf("refused: %v", e)
	if after := l4ListDir(t, l4ImagesDir(env)); !slices.Equal(before, after) {
		t.Errorf("materialization root changed: before %v, after %v", before, after)
	}
	if _, err := p.Hello(); err != nil {
		t.Errorf("helper no longer serving after a failed mkfs: %v", err)
	}
}

// TestLoopext4RefusesUnsafeRoot checks the helper refuses to start when
// its materialization root is not the service user's private directory.
func TestLoopext4RefusesUnsafeRoot(t *testing.T) {
	env := testenv.Get(t)
	good := testenv.DefaultConfigs(env.Base)["loopext4.json"]
	t.Cleanup(func() {
		if err := env.WriteConfig("loopext4.json", good); err != nil {
			t.Fatal(err)
		}
	})
	for _, c := range []struct {
		name    string
		prepare func(dir string) error
		wantLog string
	}{
		{"mode 0755", func(dir string) error {
			if err := os.Mkdir(dir, 0o755); err != nil {
				return err
			}
			return os.Chown(dir, env.UID, env.GID)
		}, "not 0700"},
		{"owned by root", func(dir string) error { return os.Mkdir(dir, 0o700) }, "owned by uid 0"},
		{"a symbolic link", func(dir string) error { return os.Symlink(l4ImagesDir(env), dir) }, "not a directory"},
		{"missing", func(string) error { return nil }, "no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			testenv.CheckLeaks(t, env.UID)
			dir := filepath.Join(env.Base, "badroot")
			t.Cleanup(func() { os.Remove(dir) })
			if err := c.prepare(dir); err != nil {
				t.Fatal(err)
			}
			if err := env.WriteConfig("loopext4.json", map[string]any{
				"schema_version": 1, "materialization_root": dir, "max_image_bytes": 256 << 20,
			}); err != nil {
				t.Fatal(err)
			}
			p, log := env.StartHelper(t, loopext4Helper)
			code, sig := testenv.WaitExit(t, p, 10*time.Second)
			if code != helperkit.ExitStartup || !strings.Contains(log.String(), c.wantLog) {
				t.Errorf("exit status %d (signal %v), log %s; want %d and %q", code, sig, log, helperkit.ExitStartup, c.wantLog)
			}
		})
	}
}

// l4ListDir describes every entry of dir (name, type and mode, owner,
// links, size, inode), so a test can tell that nothing changed.
func l4ListDir(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("list %s: %v", dir, err)
	}
	var out []string
	for _, e := range ents {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dir, e.Name()), &st); err != nil {
			t.Fatalf("stat %s: %v", e.Name(), err)
		}
		out = append(out, fmt.Sprintf("%s %06o %d:%d links=%d size=%d ino=%d", e.Name(), st.Mode, st.Uid, st.Gid, st.Nlink, st.Size, st.Ino))
	}
	sort.Strings(out)
	return out
}

// l4MkfsAsRoot formats a file the test made, outside the helper.
func l4MkfsAsRoot(t testing.TB, p string) {
	t.Helper()
	out, err := exec.Command("/usr/sbin/mkfs.ext4", "-q", "-F", p).CombinedOutput()
	if err != nil {
		t.Fatalf("mkfs.ext4 %s: %v\n%s", p, err, out)
	}
}

// l4ForeignExt4Mount attaches an ext4 image kept outside the
// materialization root the way the helper would (autoclear loop device,
// detached mount) and returns the mount: what a compromised supervisor
// could get from elsewhere and pass to Freeze.
func l4ForeignExt4Mount(t testing.TB, dir string) *os.File {
	t.Helper()
	img := filepath.Join(dir, "outside.img")
	f, err := os.OpenFile(img, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	t.Cleanup(func() { os.Remove(img) })
	if err := unix.Fallocate(int(f.Fd()), 0, 0, 8<<20); err != nil {
		t.Fatal(err)
	}
	l4MkfsAsRoot(t, img)
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	var dev *os.File
	for range 8 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			t.Fatal(err)
		}
		if dev, err = os.OpenFile(fmt.Sprintf("/dev/loop%d", n), os.O_RDWR, 0); err != nil {
			t.Fatal(err)
		}
		err = unix.IoctlLoopConfigure(int(dev.Fd()), &unix.LoopConfig{Fd: uint32(f.Fd()), Info: unix.LoopInfo64{Flags: unix.LO_FLAGS_AUTOCLEAR}})
		if err == nil {
			break
		}
		dev.Close()
		dev = nil
		if !errors.Is(err, unix.EBUSY) {
			t.Fatalf("LOOP_CONFIGURE: %v", err)
		}
	}
	if dev == nil {
		t.Fatal("no free loop device")
	}
	defer dev.Close()
	fs, err := unix.Fsopen("ext4", unix.FSOPEN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetString(fs, "source", dev.Name()); err != nil {
		t.Fatal(err)
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		t.Fatal(err)
	}
	mfd, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	m := os.NewFile(uintptr(mfd), "outside-mount")
	t.Cleanup(func() {
		m.Close()
		l4WaitLoopsGone(t, dir)
	})
	return m
}

// l4TmpfsMount is a detached tmpfs the test process makes.
func l4TmpfsMount(t testing.TB) *os.File {
	t.Helper()
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fs)
	if err := unix.FsconfigCreate(fs); err != nil {
		t.Fatal(err)
	}
	mfd, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	m := os.NewFile(uintptr(mfd), "tmpfs-mount")
	t.Cleanup(func() { m.Close() })
	return m
}

// l4RootWritable reports whether "/" is mounted read-write in the test's
// mount table.
func l4RootWritable(t testing.TB) bool {
	t.Helper()
	var sfs unix.Statfs_t
	if err := unix.Statfs("/", &sfs); err != nil {
		t.Fatal(err)
	}
	return sfs.Flags&unix.ST_RDONLY == 0
}

// l4RawRequest encodes a request frame by hand, for payloads the wire
// encoder refuses to produce (a NUL in a name, an over-long name).
func l4RawRequest(typ wire.MsgType, reqID uint32, nfds uint16, fields ...[]byte) []byte {
	var payload []byte
	for _, f := range fields {
		payload = append(payload, f...)
	}
	return append(wiretest.EncodeRawHeader(wire.Version, uint16(typ), reqID, uint32(len(payload)), nfds, 0), payload...)
}

func l4RawString(s string) []byte {
	return append([]byte{byte(len(s)), byte(len(s) >> 8)}, s...)
}

func l4RawU64(v uint64) []byte {
	b := make([]byte, 8)
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
	return b
}

// l4AttackCtx is what each case of the attack table may use.
type l4AttackCtx struct {
	env    *testenv.Env
	p      *helperproc.Proc
	root   *os.File // the materialization root, O_PATH
	images string
}

// TestLoopext4CompromisedSupervisor plays a compromised supervisor: each
// request must be refused (an Error reply, the helper serving on) or end
// the helper with the protocol-error status, and must change nothing: no
// file in or beside the materialization root, no loop device, no mount.
func TestLoopext4CompromisedSupervisor(t *testing.T) {
	env := testenv.Get(t)
	images := l4ImagesDir(env)

	// Fixtures: a real image, and files a compromised supervisor (the
	// service user) or another party could leave in the root.
	setup, _ := l4Start(t, env)
	root := l4OpenDirPath(t, images)
	l4Create(t, env, setup, root, "good.img", 8<<20)
	if err := setup.Close(); err != nil {
		t.Fatal(err)
	}
	plain := func(name string, size int64, mode os.FileMode, uid int) {
		p := filepath.Join(images, name)
		t.Cleanup(func() { os.Remove(p) })
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, env.GID); err != nil {
			t.Fatal(err)
		}
	}
	plain("exists.img", 1<<20, 0o600, env.UID)
	plain("rootowned.img", 1<<20, 0o600, 0)
	plain("wide.img", 1<<20, 0o644, env.UID)
	plain("odd.img", 1<<20+1, 0o600, env.UID)
	plain("huge.img", 512<<20, 0o600, env.UID) // sparse, over the 256 MiB bound
	plain("zeros.img", 4<<20, 0o600, env.UID)  // not a file system
	plain("hard.img", 1<<20, 0o600, env.UID)
	if err := os.Link(filepath.Join(images, "hard.img"), filepath.Join(images, "hard2.img")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(filepath.Join(images, "hard2.img")) })
	for link, target := range map[string]string{"link.img": "good.img", "escape.img": "../escaped.img"} {
		p := filepath.Join(images, link)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(p) })
	}
	if err := unix.Mkfifo(filepath.Join(images, "fifo.img"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(filepath.Join(images, "fifo.img")) })
	if err := os.Chown(filepath.Join(images, "fifo.img"), env.UID, env.GID); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(images, "dir.img"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(filepath.Join(images, "dir.img")) })
	if err := os.Chown(filepath.Join(images, "dir.img"), env.UID, env.GID); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(env.Base, "outside")
	if err := os.Mkdir(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })

	// serving checks the helper still answers after a refusal (its
	// first and only Hello).
	serving := func(t *testing.T, c *l4AttackCtx) {
		t.Helper()
		if _, err := c.p.Hello(); err != nil {
			t.Errorf("the helper stopped serving after the refusal: %v", err)
		}
	}
	type sender func(t *testing.T, c *l4AttackCtx) error
	type descriptor func(t *testing.T, c *l4AttackCtx) *os.File
	refused := func(code wire.ErrorCode, send sender) func(t *testing.T, c *l4AttackCtx) {
		return func(t *testing.T, c *l4AttackCtx) {
			l4WantRefusal(t, send(t, c), code)
			serving(t, c)
		}
	}
	create := func(name string, size uint64, root descriptor) sender {
		return func(t *testing.T, c *l4AttackCtx) error {
			_, _, err := l4Call(c.p, &loopwire.CreateRequest{Name: name, SizeBytes: size}, root(t, c))
			return err
		}
	}
	attach := func(name string, ro bool, root descriptor) sender {
		return func(t *testing.T, c *l4AttackCtx) error {
			_, fds, err := l4Call(c.p, &loopwire.AttachRequest{Name: name, ReadOnly: ro}, root(t, c))
			closeAll(fds)
			return err
		}
	}
	freeze := func(fd descriptor) func(t *testing.T, c *l4AttackCtx) {
		return func(t *testing.T, c *l4AttackCtx) {
			_, _, err := l4Call(c.p, &loopwire.FreezeRequest{}, fd(t, c))
			l4WantRefusal(t, err, wire.ErrRefused)
			if !l4RootWritable(t) {
				t.Fatalf("/ is read-only after the refused Freeze")
			}
			serving(t, c)
		}
	}
	protocol := func(frame func(c *l4AttackCtx) ([]byte, []int)) func(t *testing.T, c *l4AttackCtx) {
		return func(t *testing.T, c *l4AttackCtx) {
			b, fds := frame(c)
			if err := c.p.Conn().SendRaw(b, fds); err != nil {
				t.Fatalf("send: %v", err)
			}
			if fr, err := c.p.Conn().Recv(wiretest.OnlyErrors); err == nil {
				closeAll(fr.FDs)
				if e, ok := fr.Msg.(*wire.Error); !ok || e.Code != wire.ErrProtocol {
					t.Errorf("answer: %#v, want an Error with code %d", fr.Msg, wire.ErrProtocol)
				}
			}
			if code, sig := testenv.WaitExit(t, c.p, 10*time.Second); code != helperkit.ExitProtocol {
				t.Errorf("exit status %d (signal %v), want %d", code, sig, helperkit.ExitProtocol)
			}
		}
	}
	theRoot := func(_ *testing.T, c *l4AttackCtx) *os.File { return c.root }
	dirOf := func(p string) descriptor {
		return func(t *testing.T, _ *l4AttackCtx) *os.File { return l4OpenDirPath(t, p) }
	}
	pathFD := func(p string) descriptor {
		return func(t *testing.T, _ *l4AttackCtx) *os.File {
			fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			f := os.NewFile(uintptr(fd), p)
			t.Cleanup(func() { f.Close() })
			return f
		}
	}
	const mib = 1 << 20
	cases := []struct {
		name string
		run  func(t *testing.T, c *l4AttackCtx)
	}{
		{"create: root descriptor is /tmp", refused(wire.ErrRefused, create("a.img", mib, dirOf("/tmp")))},
		{"create: root descriptor is the root's parent", refused(wire.ErrRefused, create("a.img", mib, dirOf(env.Base)))},
		{"create: root descriptor is a directory inside the root", refused(wire.ErrRefused, create("a.img", mib, dirOf(filepath.Join(images, "dir.img"))))},
		{"create: name with a slash", refused(wire.ErrBadRequest, create("dir.img/a.img", mib, theRoot))},
		{"create: name climbing out with ..", refused(wire.ErrBadRequest, create("../a.img", mib, theRoot))},
		{"create: name ..", refused(wire.ErrBadRequest, create("..", mib, theRoot))},
		{"create: uppercase name", refused(wire.ErrBadRequest, create("A.img", mib, theRoot))},
		{"create: name without .img", refused(wire.ErrBadRequest, create("data", mib, theRoot))},
		{"create: name .img alone", refused(wire.ErrBadRequest, create(".img", mib, theRoot))},
		{"create: name starting with -", refused(wire.ErrBadRequest, create("-F.img", mib, theRoot))},
		{"create: size 0", refused(wire.ErrBadRequest, create("a.img", 0, theRoot))},
		{"create: size not a multiple of 4096", refused(wire.ErrBadRequest, create("a.img", mib+512, theRoot))},
		{"create: size over the bound", refused(wire.ErrRefused, create("a.img", 256*mib+4096, theRoot))},
		{"create: size near 2^64", refused(wire.ErrRefused, create("a.img", ^uint64(0)&^4095, theRoot))},
		{"create: name exists", refused(wire.ErrRefused, create("exists.img", mib, theRoot))},
		{"create: name is a symlink out of the root", refused(wire.ErrRefused, create("escape.img", mib, theRoot))},
		{"create: name with NUL (wire rejects)", protocol(func(c *l4AttackCtx) ([]byte, []int) {
			return l4RawRequest(loopwire.Create.Type(), 1, 1, l4RawString("a\x00.img"), l4RawU64(mib)), []int{int(c.root.Fd())}
		})},
		{"create: name of 65 bytes (wire rejects)", protocol(func(c *l4AttackCtx) ([]byte, []int) {
			return l4RawRequest(loopwire.Create.Type(), 1, 1, l4RawString(strings.Repeat("a", 61)+".img"), l4RawU64(mib)), []int{int(c.root.Fd())}
		})},
		{"create: no descriptor", protocol(func(c *l4AttackCtx) ([]byte, []int) {
			return l4RawRequest(loopwire.Create.Type(), 1, 0, l4RawString("a.img"), l4RawU64(mib)), nil
		})},
		{"attach: two descriptors", protocol(func(c *l4AttackCtx) ([]byte, []int) {
			return l4RawRequest(loopwire.Attach.Type(), 1, 2, l4RawString("good.img"), []byte{0}), []int{int(c.root.Fd()), int(c.root.Fd())}
		})},
		{"attach: root descriptor is /tmp", refused(wire.ErrRefused, attach("good.img", false, dirOf("/tmp")))},
		{"attach: root descriptor is the root's parent", refused(wire.ErrRefused, attach("good.img", false, dirOf(env.Base)))},
		{"attach: name climbing out with ..", refused(wire.ErrBadRequest, attach("../images/good.img", false, theRoot))},
		{"attach: symlink to an image", refused(wire.ErrRefused, attach("link.img", false, theRoot))},
		{"attach: hard-linked image", refused(wire.ErrRefused, attach("hard.img", false, theRoot))},
		{"attach: image owned by root", refused(wire.ErrRefused, attach("rootowned.img", false, theRoot))},
		{"attach: image mode 0644", refused(wire.ErrRefused, attach("wide.img", false, theRoot))},
		{"attach: FIFO named x.img (read-only, must not block)", refused(wire.ErrRefused, attach("fifo.img", true, theRoot))},
		{"attach: directory named x.img", refused(wire.ErrRefused, attach("dir.img", false, theRoot))},
		{"attach: size not a multiple of 4096", refused(wire.ErrRefused, attach("odd.img", false, theRoot))},
		{"attach: size over the bound", refused(wire.ErrRefused, attach("huge.img", false, theRoot))},
		{"attach: not an ext4 file system", refused(wire.ErrRefused, attach("zeros.img", false, theRoot))},
		{"attach: no such image", refused(wire.ErrRefused, attach("missing.img", false, theRoot))},
		{"freeze: O_PATH of /", freeze(pathFD("/"))},
		{"freeze: O_PATH of /usr", freeze(pathFD("/usr"))},
		{"freeze: O_PATH of the materialization root", freeze(pathFD(images))},
		{"freeze: a regular file", freeze(pathFD("/etc/hostname"))},
		{"freeze: a detached tmpfs", freeze(func(t *testing.T, _ *l4AttackCtx) *os.File { return l4TmpfsMount(t) })},
		{"freeze: ext4 of an image outside the root", freeze(func(t *testing.T, _ *l4AttackCtx) *os.File { return l4ForeignExt4Mount(t, outside) })},
		{"freeze: a directory inside an image mount", freeze(func(t *testing.T, c *l4AttackCtx) *os.File {
			mnt := l4Attach(t, c.p, c.root, "good.img", false)
			if err := unix.Mkdirat(int(mnt.Fd()), "sub", 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
				t.Fatal(err)
			}
			fd, err := unix.Openat(int(mnt.Fd()), "sub", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			f := os.NewFile(uintptr(fd), "sub")
			t.Cleanup(func() { f.Close() })
			return f
		})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l4CheckLeaks(t, env)
			beforeImages := l4ListDir(t, images)
			beforeBase := l4ListDir(t, env.Base)
			p, log := env.StartHelper(t, loopext4Helper)
			t.Cleanup(func() {
				if p.Cmd.ProcessState == nil {
					if err := p.Close(); err != nil {
						t.Errorf("helper exit: %v\nhelper log: %s", err, log)
					}
				}
			})
			c.run(t, &l4AttackCtx{env: env, p: p, root: root, images: images})
			if after := l4ListDir(t, images); !slices.Equal(beforeImages, after) {
				t.Errorf("materialization root changed:\nbefore %v\nafter  %v", beforeImages, after)
			}
			if after := l4ListDir(t, env.Base); !slices.Equal(beforeBase, after) {
				t.Errorf("the root's parent changed:\nbefore %v\nafter  %v", beforeBase, after)
			}
			if t.Failed() {
				t.Logf("helper log: %s", log)
			}
		})
	}
}

// BenchmarkLoopext4CreateAttach measures a 64 MiB retained image from
// nothing to a mount descriptor through the real helper (Create, Attach,
// and closing the descriptor, which unmounts), beside its anchor in the
// same run: the shell's `fallocate -l 64M f; mkfs.ext4 -q -F f; mount -o
// loop f dir; umount dir` as root, on the same file system. ns/op is the
// helper's; the metrics report both and their ratio (goal: within 1.1).
func BenchmarkLoopext4CreateAttach(b *testing.B) {
	env := testenv.Get(b)
	p, _ := l4Start(b, env)
	root := l4OpenDirPath(b, l4ImagesDir(env))
	shellDir := filepath.Join(env.Base, "bench-shell")
	if err := os.MkdirAll(filepath.Join(shellDir, "mnt"), 0o700); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(shellDir) })
	const size = 64 << 20
	shell := `fallocate -l 64M f && mkfs.ext4 -q -F f && mount -o loop f mnt && umount mnt`
	var helperTime, shellTime time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("bench%d.img", i)
		start := time.Now()
		if _, _, err := l4Call(p, &loopwire.CreateRequest{Name: name, SizeBytes: size}, root); err != nil {
			b.Fatalf("create: %v", err)
		}
		_, fds, err := l4Call(p, &loopwire.AttachRequest{Name: name}, root)
		if err != nil {
			b.Fatalf("attach: %v", err)
		}
		closeAll(fds)
		helperTime += time.Since(start)

		b.StopTimer()
		os.Remove(filepath.Join(l4ImagesDir(env), name))
		cmd := exec.Command("sh", "-c", shell)
		cmd.Dir = shellDir
		start = time.Now()
		out, err := cmd.CombinedOutput()
		shellTime += time.Since(start)
		if err != nil {
			b.Fatalf("shell baseline: %v\n%s", err, out)
		}
		os.Remove(filepath.Join(shellDir, "f"))
		b.StartTimer()
	}
	b.StopTimer()
	l4WaitLoopsGone(b, l4ImagesDir(env))
	l4WaitLoopsGone(b, shellDir)
	b.ReportMetric(float64(helperTime.Nanoseconds())/float64(b.N), "helper-ns/op")
	b.ReportMetric(float64(shellTime.Nanoseconds())/float64(b.N), "shell-ns/op")
	b.ReportMetric(float64(helperTime)/float64(shellTime), "helper/shell")
}
