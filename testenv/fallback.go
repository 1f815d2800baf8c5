// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/captable/captext"
)

var (
	fallbackOnce sync.Once
	fallbackPath string
	fallbackErr  error
)

// FallbackMounter installs, once per test process, a glove-mounter built
// with the glove_testfallback tag (ToolFallbackMounter): the only build
// that uses the open_tree + mount_setattr fallback (kernels before 6.15)
// on a kernel that has open_tree_attr, so both ways of cloning a bind
// source run their tests on one machine. It gets the production file
// capabilities and configuration directory.
func (e *Env) FallbackMounter(t testing.TB) string {
	t.Helper()
	out := e.Tool(t, ToolFallbackMounter)
	fallbackOnce.Do(func() { fallbackPath, fallbackErr = out, e.installFallbackMounter(out) })
	if fallbackErr != nil {
		t.Fatalf("%v", fallbackErr)
	}
	return fallbackPath
}

func (e *Env) installFallbackMounter(out string) error {
	row, ok := captable.Lookup("glove-mounter")
	if !ok {
		return fmt.Errorf("fallback mounter: no capability table row")
	}
	// As the installer does: group first (chown clears file
	// capabilities), then mode, then the row's capabilities.
	if err := os.Chown(out, 0, e.GID); err != nil {
		return fmt.Errorf("fallback mounter: %w", err)
	}
	if err := os.Chmod(out, 0o750); err != nil {
		return fmt.Errorf("fallback mounter: %w", err)
	}
	if b, err := exec.Command("/usr/sbin/setcap", captext.SetcapText(row), out).CombinedOutput(); err != nil {
		return fmt.Errorf("fallback mounter: setcap %s: %w\n%s", strconv.Quote(captext.SetcapText(row)), err, b)
	}
	return nil
}
