// SPDX-License-Identifier: Apache-2.0

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
	"slices"
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
	v, installed, err := installOnce(ctx, cache, h.Prefix(cache), []string{"install", "--prefix", h.Prefix(cache), h.Package + "@" + h.Version},
		func() (string, error) { return h.check(ctx, res.Path) })
	if err != nil {
		return res, fmt.Errorf("%s: %w", h.Name, err)
	}
	res.Installed, res.Version, res.Took = installed, v, time.Since(start)
	return res, nil
}

// InstallCommand runs a document's npm command line (argv, "npm"
// first) once into a prefix of the cache named name: argv's --prefix
// is replaced by that prefix, the cache's npm tarball cache is added,
// and every pinned harness's binary must then answer --version beneath
// it. It returns the prefix.
func InstallCommand(ctx context.Context, cache, name string, argv []string) (prefix string, installed bool, err error) {
	if !Supported() {
		return "", false, fmt.Errorf("no pinned binaries for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	prefix = filepath.Join(cache, name)
	i := slices.Index(argv, "--prefix")
	if len(argv) < 2 || argv[0] != "npm" || argv[1] != "install" || i < 0 || i+1 >= len(argv) {
		return "", false, fmt.Errorf("%q is not an npm install with --prefix DIR", argv)
	}
	args := slices.Clone(argv[1:])
	args[i] = prefix
	_, installed, err = installOnce(ctx, cache, prefix, args, func() (string, error) {
		var vs []string
		for _, h := range All {
			v, err := h.check(ctx, filepath.Join(prefix, "node_modules", h.Binary))
			if err != nil {
				return "", err
			}
			vs = append(vs, v)
		}
		return strings.Join(vs, "\n"), nil
	})
	return prefix, installed, err
}

// installOnce runs npm with args (an install into prefix) under the
// cache's lock unless prefix holds the mark; check judges the install
// and returns what the mark records. Whatever is in prefix without the
// mark is a broken install and is removed first.
func installOnce(ctx context.Context, cache, prefix string, args []string, check func() (string, error)) (string, bool, error) {
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", false, fmt.Errorf("create cache: %w", err)
	}
	unlock, err := lock(filepath.Join(cache, ".lock"))
	if err != nil {
		return "", false, err
	}
	defer unlock()
	if v, err := os.ReadFile(filepath.Join(prefix, markName)); err == nil {
		return strings.TrimSpace(string(v)), false, nil
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", false, ErrNoNPM
	}
	if err := os.RemoveAll(prefix); err != nil {
		return "", false, fmt.Errorf("remove unfinished install: %w", err)
	}
	cmd := exec.CommandContext(ctx, "npm", append(args,
		// npm's tarball cache beside the prefixes: a removed prefix is
		// installed again without the registry.
		"--cache", filepath.Join(cache, ".npm"),
		"--ignore-scripts", "--no-audit", "--no-fund", "--no-update-notifier",
		"--loglevel=error")...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		o := out.String()
		for _, s := range []string{"ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT", "ENETUNREACH", "ECONNRESET"} {
			if strings.Contains(o, s) {
				return "", false, fmt.Errorf("%w: %s", ErrNoNetwork, lastLine(o))
			}
		}
		return "", false, fmt.Errorf("npm %s: %w: %s", strings.Join(args, " "), err, o)
	}
	v, err := check()
	if err != nil {
		return "", false, err
	}
	if err := os.WriteFile(filepath.Join(prefix, markName), []byte(v+"\n"), 0o644); err != nil {
		return "", false, fmt.Errorf("mark installed: %w", err)
	}
	return v, true, nil
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
