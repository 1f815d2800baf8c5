package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The real harnesses' versions the tests run, pinned: a test of a real
// harness must not change because the registry published a new one.
const (
	CodexVersion      = "0.171.0"
	ClaudeCodeVersion = "2.1.332"
)

// NPMCacheDir holds one npm prefix per pinned package, kept between test
// runs (hundreds of megabytes each): NPMCacheDir/<pkg with / as +>@<version>.
const NPMCacheDir = "/var/cache/glove-test/npm"

// NPMPackage returns the npm prefix in which pkg@version is installed
// (its files under PREFIX/node_modules/pkg), installing it on first use
// with `npm install --prefix` (no install scripts: what a test stages is
// the packages' files as published). The install goes into a temporary
// prefix renamed into place, under a lock, so a cache entry is complete
// or absent, and concurrent test processes install it once. It skips the
// test, with the reason, when not root (the cache is root's, and staging
// from it wants root-owned ancestors) or when npm is missing or the
// install fails (no registry here).
func NPMPackage(t testing.TB, pkg, version string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the npm cache " + NPMCacheDir + " is root's")
	}
	dir, err := npmInstall(pkg, version)
	if err != nil {
		t.Skipf("%s@%s is not cached and cannot be installed here: %v", pkg, version, err)
	}
	return dir
}

func npmInstall(pkg, version string) (string, error) {
	if err := os.MkdirAll(NPMCacheDir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", NPMCacheDir, err)
	}
	dir := filepath.Join(NPMCacheDir, strings.ReplaceAll(pkg, "/", "+")+"@"+version)
	done := func() bool {
		fi, err := os.Stat(filepath.Join(dir, "node_modules", filepath.FromSlash(pkg), "package.json"))
		return err == nil && fi.Mode().IsRegular()
	}
	if done() {
		return dir, nil
	}
	lock, err := os.OpenFile(filepath.Join(NPMCacheDir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return "", fmt.Errorf("open the cache lock: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock the cache: %w", err)
	}
	if done() {
		return dir, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("npm: %w", err)
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random name: %w", err)
	}
	tmp := dir + ".tmp-" + hex.EncodeToString(b[:])
	defer os.RemoveAll(tmp)
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", tmp, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", tmp, "--ignore-scripts", "--no-audit", "--no-fund",
		"--no-save", "--loglevel=error", pkg+"@"+version)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm install %s@%s: %w: %s", pkg, version, err, strings.TrimSpace(string(out)))
	}
	os.RemoveAll(dir) // a partial entry of an older helper
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("rename %s to %s: %w", tmp, dir, err)
	}
	return dir, nil
}
