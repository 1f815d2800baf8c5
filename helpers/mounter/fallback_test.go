// SPDX-License-Identifier: Apache-2.0

package mounter

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The child half of TestSetattrConfinedToOwnNamespace: clear read-only
// on the mount at descriptor 3, as a subverted fallback mounter would,
// and print the result.
func TestMain(m *testing.M) {
	if os.Getenv("GLOVE_MOUNTER_SETATTR_CHILD") == "1" {
		err := unix.MountSetattr(3, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY})
		var errno unix.Errno
		switch {
		case err == nil:
			fmt.Println("ok")
		case errors.As(err, &errno):
			fmt.Println(unix.ErrnoName(errno))
		default:
			fmt.Println(err)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSetattrConfinedToOwnNamespace is the attack the fallback's private
// mount namespaces stop: mount_setattr, which the fallback allowlist
// allows on any descriptor, used on a read-only mount of the
// supervisor's namespace to make it writable. Checked from outside (the
// mount's flags after the attempt), once with the layer (the attacker in
// a mount namespace of its own: EINVAL, still read-only) and once
// without it (same namespace: the attack works, so the namespace is what
// stops it).
func TestSetattrConfinedToOwnNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root to make a bind mount and to hold CAP_SYS_ADMIN (CI runs as root)")
	}
	if err := unix.MountSetattr(-1, "", unix.AT_EMPTY_PATH, &unix.MountAttr{}); errors.Is(err, unix.ENOSYS) {
		t.Skip("skipped: the kernel has no mount_setattr (before 5.12)")
	}
	dir := t.TempDir()
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	// Private, so the child's copy is not a peer (a remount does not
	// propagate anyway; this keeps the test's own mount out of the
	// host's peer groups).
	if err := unix.Mount("", dir, "", unix.MS_PRIVATE, ""); err != nil {
		t.Fatal(err)
	}
	attack := func(t *testing.T, newNS bool) string {
		t.Helper()
		if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
			t.Fatal(err)
		}
		fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		f := os.NewFile(uintptr(fd), "mount")
		defer f.Close()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = []string{"GLOVE_MOUNTER_SETATTR_CHILD=1"}
		cmd.ExtraFiles = []*os.File{f}
		if newNS {
			cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("child: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
	readOnly := func() bool {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		return st.Flags&unix.ST_RDONLY != 0
	}
	t.Run("in a mount namespace of its own", func(t *testing.T) {
		if got := attack(t, true); got != "EINVAL" {
			t.Errorf("mount_setattr from another mount namespace: %s, want EINVAL", got)
		}
		if !readOnly() {
			t.Error("the mount was made writable from another mount namespace")
		}
	})
	t.Run("without the layer (same namespace)", func(t *testing.T) {
		if got := attack(t, false); got != "ok" {
			t.Errorf("mount_setattr in the same namespace: %s, want ok (the attack works without the layer)", got)
		}
		if readOnly() {
			t.Error("the mount is still read-only: the attack did not work without the layer, so the test shows nothing")
		}
	})
}
