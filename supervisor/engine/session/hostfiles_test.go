// SPDX-License-Identifier: Apache-2.0

package session

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckCADir: a host whose CA directory is missing, a link or a file
// gets a sentence saying so at launch, not glove-mounter's bare refusal.
func TestCheckCADir(t *testing.T) {
	d := t.TempDir()
	certs := filepath.Join(d, "certs")
	if err := os.Mkdir(certs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(certs, filepath.Join(d, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, phrase string }{
		{"certs", ""},
		{"missing", "install its CA certificates"},
		{"link", "is a symbolic link"},
		{"file", "is not a directory"},
	} {
		err := checkCADir(filepath.Join(d, tc.name))
		if tc.phrase == "" && err != nil || tc.phrase != "" && (err == nil || !strings.Contains(err.Error(), tc.phrase)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.phrase)
		}
	}
}
