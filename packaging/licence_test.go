// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// apache20SHA256 is the SHA-256 of the Apache License 2.0 text as the
// Apache Software Foundation publishes it (and Debian ships it in
// /usr/share/common-licenses/Apache-2.0): LICENSE must be that text,
// byte for byte, or a packager cannot say which licence it is.
const apache20SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"

const spdxLine = "SPDX-License-Identifier: Apache-2.0"

func TestLicenceText(t *testing.T) {
	data, err := os.ReadFile("../LICENSE")
	if err != nil {
		t.Fatalf("read LICENSE: %v", err)
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != apache20SHA256 {
		t.Errorf("LICENSE: SHA-256 %s, not the Apache License 2.0 text (%s)", got, apache20SHA256)
	}
}

// isSource says whether a file of the repository is source code that
// must carry the SPDX line: Go, C, shell (by extension or #! line),
// Python, and the Makefile.
func isSource(path string, head []byte) bool {
	switch filepath.Ext(path) {
	case ".go", ".c", ".h", ".sh", ".py":
		return true
	}
	return filepath.Base(path) == "Makefile" || bytes.HasPrefix(head, []byte("#!"))
}

// TestSPDXLines holds every source file of the tree to its licence line
// within its first three lines (after a #! line, or before a Go
// package's doc comment). The tree is walked, not git's index, so a new
// file fails here before it is committed; what the build and the tests
// make (bin/, .tools/) and git's own directory are left out.
func TestSPDXLines(t *testing.T) {
	skip := map[string]bool{".git": true, "bin": true, ".tools": true, ".demo": true, "node_modules": true}
	var checked int
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != ".." && skip[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !isSource(path, data[:min(len(data), 2)]) {
			return nil
		}
		checked++
		lines := strings.SplitN(string(data), "\n", 4)
		for _, l := range lines[:min(len(lines), 3)] {
			if strings.Contains(l, spdxLine) {
				return nil
			}
		}
		t.Errorf("%s: no %q line among its first three", strings.TrimPrefix(path, "../"), spdxLine)
		return nil
	})
	if err != nil {
		t.Fatalf("walk the tree: %v", err)
	}
	if checked < 400 {
		t.Errorf("checked %d source files: fewer than the tree holds, the walk is wrong", checked)
	}
}
