// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/glove-sandbox/glove/testenv/programs"
)

// The test-only executables, and the prebuilt mode of the VM lane.
//
// Some tests run executables that are never installed: a glove-shim in
// which layers can be switched off, a glove-mounter that takes the
// pre-6.15 fallback on a kernel that would not need it, a static
// attacker. In a source checkout they are built here with go build, once
// per test process. The VM lane's guests have no Go toolchain, and its
// point is to run the attack tables on the kernels where the fallbacks
// are taken; so `make lane-tests` (cmd/glove-prebuild) builds the
// executables `make build` makes and these tools ahead of time into one
// directory, and a test binary run with PrebuiltEnv naming it uses them
// instead of building anything.

// PrebuiltEnv names the directory of prebuilt executables, when set.
const PrebuiltEnv = "GLOVE_TESTENV_PREBUILT"

// PrebuiltBase is the private tree of a prebuilt run. The helpers'
// configuration directory is compiled into them, so it cannot be a fresh
// random directory as in a source checkout: it is this one, which a run
// creates (and refuses to reuse) and removes at its end.
const PrebuiltBase = baseDir + "/prebuilt"

// Tool is one test-only executable.
type Tool struct {
	// Rel is its path below Env.Base (and below the prebuilt directory);
	// its directory holds nothing else, so a test may hand it to a
	// sandbox.
	Rel string
	// Pkg is the main package, relative to the module root.
	Pkg string
	// Tags are its build tags.
	Tags string
	// Static links it statically with cgo, like the production
	// glove-shim (Makefile STATIC_FLAGS): it runs inside a sandbox's
	// root, where no dynamic loader or libseccomp exists.
	Static bool
	// ConfDir compiles the test configuration directory into it, as
	// `make build CONFDIR=` does for a helper.
	ConfDir bool
}

// The tools.
var (
	ToolLayersShim = Tool{Rel: "layers-shim/glove-shim", Pkg: "./shim/cmd/glove-shim",
		Tags: "glove_testlayers,netgo,osusergo", Static: true}
	ToolFallbackMounter = Tool{Rel: "fallback-mounter/glove-mounter", Pkg: "./helpers/mounter/cmd/glove-mounter",
		Tags: "glove_testfallback", ConfDir: true}
	ToolAttackProbe = Tool{Rel: "attackprobe/attackprobe", Pkg: "./shim/internal/attackprobe"}
	// ToolFaultyGloved is gloved with its test fault points
	// (supervisor/service/daemon/faults_testing.go): never installed.
	ToolFaultyGloved = Tool{Rel: "faulty-gloved/gloved", Pkg: "./supervisor/cmd/gloved", Tags: "glove_testfaults"}
	Tools            = []Tool{ToolLayersShim, ToolFallbackMounter, ToolAttackProbe, ToolFaultyGloved}
)

// Build builds t into dir/t.Rel from the module at root, with confDir as
// the helpers' configuration directory.
func (t Tool) Build(root, dir, confDir string) error {
	out := filepath.Join(dir, t.Rel)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("build %s: %w", t.Rel, err)
	}
	ldflags := []string{}
	if t.ConfDir {
		ldflags = append(ldflags, "-X github.com/glove-sandbox/glove/helpers/helperkit.ConfigDir="+confDir)
	}
	cgo := "CGO_ENABLED=0"
	if t.Static {
		cgo = "CGO_ENABLED=1"
		ldflags = append(ldflags, "-linkmode external -extldflags -static")
	}
	args := []string{"build", "-trimpath", "-o", out}
	if t.Tags != "" {
		args = append(args, "-tags", t.Tags)
	}
	if len(ldflags) > 0 {
		args = append(args, "-ldflags", strings.Join(ldflags, " "))
	}
	cmd := exec.Command("go", append(args, t.Pkg)...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), cgo)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w\n%s", t.Rel, err, b)
	}
	return nil
}

var (
	toolMu   sync.Mutex
	toolDone = map[string]error{}
)

// Tool returns the path of t below e.Base, built (or, in prebuilt mode,
// copied) once per test process.
func (e *Env) Tool(tb testing.TB, t Tool) string {
	tb.Helper()
	toolMu.Lock()
	defer toolMu.Unlock()
	err, done := toolDone[t.Rel]
	if !done {
		err = e.makeTool(t)
		toolDone[t.Rel] = err
	}
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	return filepath.Join(e.Base, t.Rel)
}

func (e *Env) makeTool(t Tool) error {
	if dir := os.Getenv(PrebuiltEnv); dir != "" {
		return copyExecutable(filepath.Join(dir, t.Rel), filepath.Join(e.Base, t.Rel))
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	return t.Build(root, e.Base, e.ConfDir)
}

// CopyTestBinary copies the running test binary where an unprivileged
// user may execute it (go test's build directory is root's alone), for a
// test whose binary doubles as a program run as the service user. The
// copy is removed when the test ends.
func CopyTestBinary(t testing.TB) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("/var/tmp", "glove-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(self))
	if err := copyExecutable(self, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// copyExecutable copies a prebuilt executable to dst, mode 0755, creating
// its directory.
func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("prebuilt: %w", err)
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("prebuilt: %w", err)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return fmt.Errorf("prebuilt: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("prebuilt: copy %s: %w", src, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("prebuilt: copy %s: %w", src, err)
	}
	return nil
}

// Prebuild fills dir with what a prebuilt run needs: dir/build as `make
// build` makes it (CONFDIR and PREFIX below PrebuiltBase) and every Tool.
// dir must not exist yet, so nothing stale is carried into a guest. It
// runs inside the module (cmd/glove-prebuild, `make lane-tests`).
func Prebuild(dir string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("prebuild: %w", err)
	}
	confDir := filepath.Join(PrebuiltBase, "etc")
	if err := makeBuild(root, filepath.Join(dir, "build"), confDir, filepath.Join(PrebuiltBase, "prefix")); err != nil {
		return err
	}
	for _, t := range Tools {
		if err := t.Build(root, dir, confDir); err != nil {
			return err
		}
	}
	// The programs tests build with BuildStatic, each beside the digest
	// of its source.
	if err := os.Mkdir(filepath.Join(dir, "programs"), 0o755); err != nil {
		return fmt.Errorf("prebuild: %w", err)
	}
	for name, source := range programs.All {
		out := filepath.Join(dir, "programs", name)
		if err := buildProgram(out, name, source); err != nil {
			return err
		}
		if err := os.WriteFile(out+".sha256", []byte(sourceSum(source)), 0o644); err != nil {
			return fmt.Errorf("prebuild: %w", err)
		}
	}
	return nil
}
