// SPDX-License-Identifier: Apache-2.0

package harnesses

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/glove-sandbox/glove/testenv"
)

// The harnesses in testenv's prebuilt mode (the VM lane).
//
// The lane's guests have neither npm nor the registry, and a test must
// not skip there (vmlane/tests). So the host installs the pinned packages
// into its cache (Install) while `make lane-tests` runs and copies only
// the native binaries the tests run, 717 MB, into
// <prebuilt>/harnesses/<name>@<version>/<binary>, for the cells whose
// tests use them; in a prebuilt run (testenv.PrebuiltEnv set) Ensure
// takes the binary from there and never runs npm. The version is in the
// path, and Install checked `--version` before the copy, so a binary of
// another pin is never found.

// prebuiltDir is where a prebuilt directory holds the harnesses.
const prebuiltDir = "harnesses"

// PrebuiltPath is h's native binary beneath the prebuilt directory dir.
func (h Harness) PrebuiltPath(dir string) string {
	return filepath.Join(dir, prebuiltDir, h.Name+"@"+h.Version, filepath.Base(h.Binary))
}

// Prebuild installs every pinned harness into cache (from npm, unless the
// cache has it) and copies each native binary to its PrebuiltPath beneath
// dir, hard-linked when cache and dir share a file system. dir/harnesses
// must not exist yet, so nothing stale is carried into a guest.
func Prebuild(ctx context.Context, cache, dir string) ([]Result, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("prebuild harnesses: %w", err)
	}
	if err := os.Mkdir(filepath.Join(dir, prebuiltDir), 0o755); err != nil {
		return nil, fmt.Errorf("prebuild harnesses: %w", err)
	}
	var res []Result
	for _, h := range All {
		r, err := h.Install(ctx, cache)
		if err != nil {
			return res, fmt.Errorf("prebuild harnesses: install %s: %w", h.Name, err)
		}
		dst := h.PrebuiltPath(dir)
		if err := os.Mkdir(filepath.Dir(dst), 0o755); err != nil {
			return res, fmt.Errorf("prebuild harnesses: %w", err)
		}
		if err := linkOrCopy(r.Path, dst); err != nil {
			return res, fmt.Errorf("prebuild harnesses: %s: %w", h.Name, err)
		}
		res = append(res, r)
	}
	return res, nil
}

// linkOrCopy makes dst the file src: a hard link when they share a file
// system, else a copy, mode 0755.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return fmt.Errorf("copy: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return nil
}

// prebuilt returns h's binary in a prebuilt run: ok is false outside
// one; err says why a prebuilt run has no usable binary.
func (h Harness) prebuilt() (path string, ok bool, err error) {
	dir := os.Getenv(testenv.PrebuiltEnv)
	if dir == "" {
		return "", false, nil
	}
	path = h.PrebuiltPath(dir)
	fi, err := os.Stat(path)
	if err != nil {
		return path, true, fmt.Errorf("prebuilt %s: %w", h.Name, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return path, true, fmt.Errorf("prebuilt %s: %s is not an executable file (%v)", h.Name, path, fi.Mode())
	}
	return path, true, nil
}
