// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// This file is what the tests of whole sessions (`glove run`, gloved)
// share: the helpers' bounds they need, the delegated cgroup a supervisor
// starts in, and the static programs they run as harnesses.

// ConfigureForSessions gives glove-mounter and glove-cgroup the bounds a
// session needs: /etc and /usr (and sources/, where BuildStatic puts
// programs) as source roots, as scripts/setup-host.sh writes them, tmpfs
// bounds above the small and medium profiles', and memory and pids
// bounds above any shipped profile's.
func (e *Env) ConfigureForSessions(t testing.TB) {
	t.Helper()
	e.ConfigureForSessionsBounds(t, map[string]uint64{"max_tmpfs_bytes": 1 << 30, "max_tmpfs_inodes": 1 << 20},
		map[string]uint64{"max_memory_bytes": 4 << 30, "max_pids": 4096})
}

// ConfigureForSessionsBounds is ConfigureForSessions with the size bounds
// given (glove-mounter's max_tmpfs_bytes and max_tmpfs_inodes,
// glove-cgroup's max_memory_bytes and max_pids): a test of the bounds
// Glove ships passes packaging's. Any other member is refused.
func (e *Env) ConfigureForSessionsBounds(t testing.TB, mounter, cgroup map[string]uint64) {
	t.Helper()
	cfg := DefaultConfigs(e.Base)["mounter.json"].(map[string]any)
	cfg["source_roots"] = []string{"/etc", "/usr", filepath.Join(e.Base, "sources")}
	cg := DefaultConfigs(e.Base)["cgroup.json"].(map[string]any)
	for _, c := range []struct {
		into   map[string]any
		from   map[string]uint64
		fields []string
	}{{cfg, mounter, []string{"max_tmpfs_bytes", "max_tmpfs_inodes"}}, {cg, cgroup, []string{"max_memory_bytes", "max_pids"}}} {
		if len(c.from) != len(c.fields) {
			t.Fatalf("bounds %v: want exactly %v", c.from, c.fields)
		}
		for _, f := range c.fields {
			v, ok := c.from[f]
			if !ok {
				t.Fatalf("bounds %v: no %s", c.from, f)
			}
			c.into[f] = v
		}
	}
	if err := e.WriteConfig("mounter.json", cfg); err != nil {
		t.Fatal(err)
	}
	if err := e.WriteConfig("cgroup.json", cg); err != nil {
		t.Fatal(err)
	}
}

// V2Root is the mount point of the cgroup v2 hierarchy (on a hybrid host,
// the unified one beside the v1 controllers). It skips the test when the
// host has none: glove-cgroup needs one.
func V2Root(t testing.TB) string {
	t.Helper()
	mounts, err := CgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		if _, err := os.Stat(filepath.Join(m, "cgroup.controllers")); err == nil {
			return m
		}
	}
	t.Skip("skipped: no cgroup v2 hierarchy on this host (glove-cgroup needs one)")
	return ""
}

// InDelegatedCgroup is how to start a supervisor (glove run, gloved): as
// the service user, placed by clone3 in the leaf "supervisor" of the
// delegated cgroup v2 parent (CgroupParent), as a service manager would
// place it, so that glove-cgroup may create the sessions' cgroups beside
// its own. The
// parent's descriptor stays open until the test ends; callers may add
// to the attributes (a terminal, a session).
func (e *Env) InDelegatedCgroup(t testing.TB) *syscall.SysProcAttr {
	t.Helper()
	parent := filepath.Join(V2Root(t), CgroupParent(e.Base))
	// Into its leaf "supervisor", as systemd's DelegateSubgroup= starts a
	// unit: once a supervisor has enabled controllers in the delegated
	// cgroup's subtree_control (glove-cgroup does, on a v2 host whose
	// controllers are v2's), the kernel refuses to place any process in
	// the delegated cgroup itself (no internal processes: clone3 fails
	// with EBUSY), so a second supervisor of the same test could not start.
	if _, err := os.Stat(filepath.Join(parent, "supervisor", "cgroup.procs")); err == nil {
		parent = filepath.Join(parent, "supervisor")
	}
	cg, err := unix.Open(parent, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Close(cg) })
	return &syscall.SysProcAttr{Credential: e.Credential(), UseCgroupFD: true, CgroupFD: cg}
}

// BuildStatic builds source, a Go main package, into a static executable
// (CGO_ENABLED=0: it runs inside a sandbox's root, which holds no C
// library of the host's own) at sources/<name>/<name> beneath e.Base, a
// root-owned directory beneath the mounter's source root, so that a
// policy may pin it as a runtime template's executable. It returns the
// executable's path.
func BuildStatic(t testing.TB, e *Env, name, source string) string {
	t.Helper()
	dir := filepath.Join(e.Base, "sources", name)
	out := filepath.Join(dir, name)
	if pre := os.Getenv(PrebuiltEnv); pre != "" {
		// No Go toolchain: the program prebuilt from the same source
		// (testenv/programs), or the test cannot run here.
		built := filepath.Join(pre, "programs", name)
		sum, err := os.ReadFile(built + ".sha256")
		if err != nil || string(sum) != sourceSum(source) {
			t.Fatalf("build %s: a prebuilt run (%s) has no Go toolchain and no prebuilt %s of this source (%v): add it to testenv/programs.All", name, PrebuiltEnv, name, err)
		}
		// Copied once per test process (the prebuilt tree is the same
		// for every test of it), as Tool does.
		toolMu.Lock()
		defer toolMu.Unlock()
		key := "programs/" + name
		err, done := toolDone[key]
		if !done {
			err = copyExecutable(built, out)
			toolDone[key] = err
		}
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := buildProgram(out, name, source); err != nil {
		t.Fatal(err)
	}
	return out
}

// sourceSum names a program's source: a prebuilt program is used only
// for the very source it was built from.
func sourceSum(source string) string {
	sum := sha256.Sum256([]byte(source))
	return hex.EncodeToString(sum[:])
}

// buildProgram builds source, a Go main package, into out, statically.
func buildProgram(out, name, source string) error {
	// go build runs in the source's directory: out must not be relative.
	out, err := filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("build %s: %w", name, err)
	}
	src, err := os.MkdirTemp("", "glove-program-")
	if err != nil {
		return fmt.Errorf("build %s: %w", name, err)
	}
	defer os.RemoveAll(src)
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(source), 0o644); err != nil {
		return fmt.Errorf("build %s: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module "+name+"\n\ngo 1.26\n"), 0o644); err != nil {
		return fmt.Errorf("build %s: %w", name, err)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w\n%s", name, err, b)
	}
	return nil
}
