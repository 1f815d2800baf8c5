package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/glove-sandbox/glove/helpers/captable"
)

var (
	fallbackOnce sync.Once
	fallbackPath string
	fallbackErr  error
)

// FallbackMounter builds and installs, once per test process, a
// glove-mounter with the glove_testfallback tag: the only build that uses
// the open_tree + mount_setattr fallback (kernels before 6.15) on a
// kernel that has open_tree_attr, so both ways of cloning a bind source
// run their tests on one machine. It gets the production file
// capabilities and configuration directory.
func (e *Env) FallbackMounter(t testing.TB) string {
	t.Helper()
	fallbackOnce.Do(func() { fallbackPath, fallbackErr = e.buildFallbackMounter() })
	if fallbackErr != nil {
		t.Fatalf("%v", fallbackErr)
	}
	return fallbackPath
}

func (e *Env) buildFallbackMounter() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	row, ok := captable.Lookup("glove-mounter")
	if !ok {
		return "", fmt.Errorf("fallback mounter: no capability table row")
	}
	dir := filepath.Join(e.Base, "fallback-mounter")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("fallback mounter: %w", err)
	}
	out := filepath.Join(dir, "glove-mounter")
	cmd := exec.Command("go", "build", "-trimpath", "-tags", "glove_testfallback",
		"-ldflags", "-X github.com/glove-sandbox/glove/helpers/helperkit.ConfigDir="+e.ConfDir,
		"-o", out, "./helpers/mounter/cmd/glove-mounter")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build fallback mounter: %w\n%s", err, b)
	}
	// As the installer does: group first (chown clears file
	// capabilities), then mode, then the row's capabilities.
	if err := os.Chown(out, 0, e.GID); err != nil {
		return "", fmt.Errorf("fallback mounter: %w", err)
	}
	if err := os.Chmod(out, 0o750); err != nil {
		return "", fmt.Errorf("fallback mounter: %w", err)
	}
	if b, err := exec.Command("/usr/sbin/setcap", row.SetcapText(), out).CombinedOutput(); err != nil {
		return "", fmt.Errorf("fallback mounter: setcap %s: %w\n%s", strconv.Quote(row.SetcapText()), err, b)
	}
	return out, nil
}
