// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// ProtectedDir returns a fresh root-owned 0755 directory under /var/lib
// for tests of runtime discovery, staging and template generation: their
// rules accept only directories whose every ancestor is owned by root or
// the service account and writable by nobody else, so t.TempDir() (under
// world-writable /tmp) would be refused by design. It skips, with that
// reason, when not root. The tree is removed in cleanup, including
// directories a test left read-only (staged trees are mode 0555).
func ProtectedDir(t testing.TB, name string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: discovery accepts only root- or service-owned, non-writable ancestors, and /tmp is world-writable")
	}
	base, err := os.MkdirTemp("/var/lib", "glove-"+name+"-test-")
	if err != nil {
		t.Fatalf("create a protected test directory under /var/lib: %v", err)
	}
	t.Cleanup(func() {
		filepath.Walk(base, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.IsDir() {
				os.Chmod(p, 0o755)
			}
			return nil
		})
		os.RemoveAll(base)
	})
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	return base
}
