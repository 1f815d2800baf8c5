package integration

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/glove-sandbox/glove/helpers/wire/mountwire"
	"github.com/glove-sandbox/glove/testenv"
	"golang.org/x/sys/unix"
)

// The benchmarks below measure a mount descriptor's round trip through a
// real glove-mounter (started as the service user, restricted, over the
// socketpair) beside its anchor: the same kernel work done directly in
// this root test process, with no helper, no identity check and no
// message. helper/direct is the helper's overhead. Each iteration also
// closes the descriptor, which dissolves the detached mount, in both.
// Root only (testenv skips otherwise); `make bench` runs them.

// BenchmarkMounterBind: Bind of a directory four levels beneath a source
// root (the identity walk climbs four times) versus open_tree +
// mount_setattr of the same descriptor.
func BenchmarkMounterBind(b *testing.B) {
	env := testenv.Get(b)
	testenv.CheckLeaks(b, env.UID)
	dir := sourceDir(b, env, "bench")
	deep := filepath.Join(dir, "a", "b", "c")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		b.Fatal(err)
	}
	src := openFD(b, deep, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW)

	b.Run("helper", func(b *testing.B) {
		m := startMounter(b, env)
		for b.Loop() {
			f, err := m.bind(src, mountwire.BindReadOnly|mountwire.BindNoExec)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
		reportRate(b, "binds/s")
	})
	b.Run("direct", func(b *testing.B) {
		attr := &unix.MountAttr{
			Attr_set:    unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOEXEC | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
			Propagation: unix.MS_PRIVATE,
		}
		for b.Loop() {
			fd, err := unix.OpenTree(src, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
			if err != nil {
				b.Fatal(err)
			}
			if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
				b.Fatal(err)
			}
			unix.Close(fd)
		}
		reportRate(b, "binds/s")
	})
}

// BenchmarkMounterTmpfs: Tmpfs of 1 MiB versus fsopen + the same fsconfig
// strings + fsmount.
func BenchmarkMounterTmpfs(b *testing.B) {
	env := testenv.Get(b)
	testenv.CheckLeaks(b, env.UID)
	b.Run("helper", func(b *testing.B) {
		m := startMounter(b, env)
		for b.Loop() {
			f, err := m.tmpfs(mountwire.TmpfsRequest{SizeBytes: 1 << 20, Inodes: 64, Mode: 0o700})
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
		reportRate(b, "tmpfs/s")
	})
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			fsfd, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
			if err != nil {
				b.Fatal(err)
			}
			for _, kv := range [][2]string{{"size", "1048576"}, {"nr_inodes", "64"}, {"mode", "0700"}, {"uid", "0"}, {"gid", "0"}} {
				if err := unix.FsconfigSetString(fsfd, kv[0], kv[1]); err != nil {
					b.Fatal(err)
				}
			}
			if err := unix.FsconfigCreate(fsfd); err != nil {
				b.Fatal(err)
			}
			mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
			unix.Close(fsfd)
			if err != nil {
				b.Fatal(err)
			}
			unix.Close(mfd)
		}
		reportRate(b, "tmpfs/s")
	})
}

func reportRate(b *testing.B, unit string) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, unit)
	}
}
