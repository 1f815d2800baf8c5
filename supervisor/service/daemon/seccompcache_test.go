// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestOpenSeccompCache: the cache directory is made 0700 in the store,
// opened O_PATH, found again on the next start, and refused as unsafe
// when its mode or owner would let anyone else write it; a symbolic link
// in its place is not followed.
func TestOpenSeccompCache(t *testing.T) {
	store := t.TempDir()
	for i := range 2 { // made, then found
		f, err := openSeccompCache(store)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		fl, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
		if err != nil || fl&unix.O_PATH == 0 {
			t.Errorf("open %d: flags %#x, %v: want O_PATH", i, fl, err)
		}
		if fd, err := unix.FcntlInt(f.Fd(), unix.F_GETFD, 0); err != nil || fd&unix.FD_CLOEXEC == 0 {
			t.Errorf("open %d: not close-on-exec: %#x, %v", i, fd, err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(store, SeccompCacheDir)
	st, err := os.Lstat(dir)
	if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Fatalf("cache directory: %v %v, want a 0700 directory", st.Mode(), err)
	}
	if err := os.Chmod(dir, 0o770); err != nil {
		t.Fatal(err)
	}
	if _, err := openSeccompCache(store); !errors.Is(err, errUnsafeCache) || !strings.Contains(err.Error(), "mode 0770, want 0700") {
		t.Errorf("group-writable: %v, want a refusal naming the mode", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := openSeccompCache(store); !errors.Is(err, errUnsafeCache) || !strings.Contains(err.Error(), "owned by uid 65534") {
			t.Errorf("another owner: %v, want a refusal naming the owner", err)
		}
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), dir); err != nil {
		t.Fatal(err)
	}
	if _, err := openSeccompCache(store); err == nil || errors.Is(err, errUnsafeCache) {
		t.Errorf("a symbolic link in the cache's place: %v, want a refusal to open it", err)
	}
}
