// Package harnesses installs the real agent harnesses Glove's end-to-end
// tests run — codex and claude-code, at pinned versions, from npm — into a
// cache, and says how to run them against testenv/modelserver.
//
// Each pinned package is installed once into its own prefix,
// <cache>/<name>@<version>, with `npm install --ignore-scripts`, checked
// by running its native binary with --version, and marked installed by a
// file written last. A later call finds the mark and installs nothing; a
// prefix without the mark (an install that died half way) is removed and
// installed again. An exclusive lock on <cache>/.lock keeps concurrent
// test binaries from installing the same prefix twice.
//
// Install scripts are never run. Both npm packages are wrappers: the
// binary is in a per-platform package that npm installs as an optional
// dependency (@openai/codex-linux-x64, @anthropic-ai/claude-code-linux-x64),
// and the tests exec that binary directly. claude-code's postinstall only
// hard-links that same binary over a stub (bin/claude.exe, a shell script
// that prints "claude native binary not installed"); running it would
// execute registry code as the (root) test user for nothing, npm 11 warns
// about it unless the package is allow-listed, and its engines field asks
// for node >= 22. codex has no install script; its bin/codex.js is a node
// wrapper that only finds and execs the same native binary.
package harnesses

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Harness is one pinned npm package with a native binary.
type Harness struct {
	// Name is the harness's short name, as in `glove policy generate
	// --runtime`.
	Name    string
	Package string
	Version string
	// Binary is the native executable's path beneath the prefix's
	// node_modules, for this machine's architecture.
	Binary string
	// VersionOut is what `Binary --version` prints, checked on install.
	VersionOut string
}

// Codex is @openai/codex pinned. Its native binary is static (musl) and
// needs its siblings: bin/codex-code-mode-host, codex-resources/,
// codex-path/rg and codex-package.json.
var Codex = Harness{
	Name:       "codex",
	Package:    "@openai/codex",
	Version:    "0.171.0",
	Binary:     "@openai/codex-linux-" + npmArch() + "/vendor/" + muslTriple() + "/bin/codex",
	VersionOut: "codex-cli 0.171.0",
}

// Claude is @anthropic-ai/claude-code pinned. Its native binary is one Bun
// executable linked against glibc.
var Claude = Harness{
	Name:       "claude-code",
	Package:    "@anthropic-ai/claude-code",
	Version:    "2.1.332",
	Binary:     "@anthropic-ai/claude-code-linux-" + npmArch() + "/claude",
	VersionOut: "2.1.332 (Claude Code)",
}

// All is every pinned harness.
var All = []Harness{Codex, Claude}

func npmArch() string {
	if runtime.GOARCH == "amd64" {
		return "x64"
	}
	return runtime.GOARCH
}

func muslTriple() string {
	if runtime.GOARCH == "arm64" {
		return "aarch64-unknown-linux-musl"
	}
	return "x86_64-unknown-linux-musl"
}

// Supported says whether the pinned packages ship a binary for this
// machine: Linux on x86-64 or arm64 (glibc for claude-code).
func Supported() bool {
	return runtime.GOOS == "linux" && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64")
}

// DefaultCache is the cache directory: $GLOVE_HARNESS_CACHE when set,
// otherwise /var/cache/glove-test/npm for root (root-owned, so a test
// user cannot replace a binary root will run) and the user's cache
// directory for anyone else.
func DefaultCache() (string, error) {
	if d := os.Getenv("GLOVE_HARNESS_CACHE"); d != "" {
		return d, nil
	}
	if os.Geteuid() == 0 {
		return "/var/cache/glove-test/npm", nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: %w", err)
	}
	return filepath.Join(d, "glove-test", "npm"), nil
}

// Prefix is the npm prefix the harness is installed into.
func (h Harness) Prefix(cache string) string {
	return filepath.Join(cache, strings.ReplaceAll(h.Package, "/", "+")+"@"+h.Version)
}

// Path is the installed native binary.
func (h Harness) Path(cache string) string {
	return filepath.Join(h.Prefix(cache), "node_modules", h.Binary)
}

// markName is written into a prefix last, holding the --version output.
const markName = ".glove-installed"

// ErrNoNetwork is wrapped by Install's error when npm could not reach the
// registry, so a test can skip instead of fail.
var ErrNoNetwork = errors.New("npm registry unreachable")

// ErrNoNPM is returned when npm is not on PATH.
var ErrNoNPM = errors.New("npm not found on PATH")

// Result says what Install did.
type Result struct {
	Path      string
	Installed bool // false: found in the cache
	Took      time.Duration
	Version   string
}

// Install makes sure h is in cache and returns its binary's path.
func (h Harness) Install(ctx context.Context, cache string) (Result, error) {
	start := time.Now()
	res := Result{Path: h.Path(cache)}
	if !Supported() {
		return res, fmt.Errorf("%s: no pinned binary for %s/%s", h.Name, runtime.GOOS, runtime.GOARCH)
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return res, fmt.Errorf("create cache: %w", err)
	}
	unlock, err := lock(filepath.Join(cache, ".lock"))
	if err != nil {
		return res, err
	}
	defer unlock()

	prefix := h.Prefix(cache)
	if v, err := os.ReadFile(filepath.Join(prefix, markName)); err == nil {
		res.Version, res.Took = strings.TrimSpace(string(v)), time.Since(start)
		return res, nil
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return res, ErrNoNPM
	}
	// Whatever is there without the mark is a broken install.
	if err := os.RemoveAll(prefix); err != nil {
		return res, fmt.Errorf("remove unfinished install: %w", err)
	}
	cmd := exec.CommandContext(ctx, "npm", "install",
		"--prefix", prefix,
		// npm's tarball cache beside the prefixes: a removed prefix is
		// installed again without the registry.
		"--cache", filepath.Join(cache, ".npm"),
		"--ignore-scripts", "--no-audit", "--no-fund", "--no-update-notifier",
		"--loglevel=error",
		h.Package+"@"+h.Version)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		o := out.String()
		for _, s := range []string{"ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ENETUNREACH", "ECONNRESET"} {
			if strings.Contains(o, s) {
				return res, fmt.Errorf("%s: %w: %s", h.Name, ErrNoNetwork, lastLine(o))
			}
		}
		return res, fmt.Errorf("npm install %s@%s: %w: %s", h.Package, h.Version, err, o)
	}
	v, err := h.check(ctx, res.Path)
	if err != nil {
		return res, err
	}
	if err := os.WriteFile(filepath.Join(prefix, markName), []byte(v+"\n"), 0o644); err != nil {
		return res, fmt.Errorf("mark installed: %w", err)
	}
	res.Installed, res.Version, res.Took = true, v, time.Since(start)
	return res, nil
}

// check runs the binary's --version with an empty environment but PATH,
// HOME in a scratch directory, so that the check reaches nothing.
func (h Harness) check(ctx context.Context, bin string) (string, error) {
	home, err := os.MkdirTemp("", "glove-harness-check-")
	if err != nil {
		return "", fmt.Errorf("check home: %w", err)
	}
	defer os.RemoveAll(home)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "CODEX_HOME=" + home}
	cmd.Dir = home
	out, err := cmd.Output()
	v := strings.TrimSpace(string(out))
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", bin, err)
	}
	if v != h.VersionOut {
		return "", fmt.Errorf("%s --version printed %q, want %q", bin, v, h.VersionOut)
	}
	return v, nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// lock takes an exclusive flock on path and returns its release.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open cache lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock cache: %w", err)
	}
	return func() { f.Close() }, nil
}
