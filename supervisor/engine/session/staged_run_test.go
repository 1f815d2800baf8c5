// SPDX-License-Identifier: Apache-2.0

package session_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/authority/stage"
	"github.com/glove-sandbox/glove/testenv"
	"github.com/glove-sandbox/glove/testenv/harnesses"
)

// codexTarget is the directory of codex's platform package that holds
// the native program and its siblings.
const codexTarget = "vendor/x86_64-unknown-linux-musl"

// codexSiblings are what codex's native program runs or reads beside
// itself (relative to codexTarget).
var codexSiblings = []string{"bin/codex-code-mode-host", "codex-path/rg", "codex-resources/bwrap", "codex-package.json"}

// stageProbeSource stands in for codex's native program inside a copy
// of codex's real platform package: it reports, for each sibling, what
// the program sees (type and mode) and whether it can write it or
// create a file beside it, and the sandbox's mounts of the stage tree.
const stageProbeSource = `package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	self, _ := os.Executable()
	target := filepath.Dir(filepath.Dir(self))           // …/vendor/<target>
	root := filepath.Dir(filepath.Dir(target))           // …/<digest>
	for _, rel := range os.Args[1:] {
		p := filepath.Join(target, rel)
		fi, err := os.Stat(p)
		if err != nil {
			fmt.Printf("sibling %s: %v\n", rel, err)
			continue
		}
		_, werr := os.OpenFile(p, os.O_WRONLY, 0)
		fmt.Printf("sibling %s: %v write refused: %v\n", rel, fi.Mode(), werr != nil)
	}
	_, err := os.Create(filepath.Join(target, "planted"))
	fmt.Printf("create refused: %v\n", err != nil && strings.Contains(err.Error(), "read-only file system"))
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, l := range strings.Split(string(mi), "\n") {
		f := strings.Fields(l)
		if len(f) > 5 && strings.HasPrefix(f[4], filepath.Dir(root)) {
			fmt.Printf("mount %s %s\n", f[4], strings.Split(f[5], ",")[0])
		}
	}
}
`

// linkTree makes dst a copy of src made of hard links (copies where
// links cannot be made), leaving out the paths in skip.
func linkTree(t *testing.T, src, dst string, skip ...string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		for _, s := range skip {
			if rel == s {
				return nil
			}
		}
		out := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(out, 0o755)
		case d.Type().IsRegular():
			if os.Link(p, out) == nil {
				return nil
			}
			in, err := os.Open(p)
			if err != nil {
				return err
			}
			defer in.Close()
			fi, _ := in.Stat()
			o, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
			if err != nil {
				return err
			}
			if _, err := io.Copy(o, in); err != nil {
				o.Close()
				return err
			}
			return o.Close()
		}
		return errors.New(p + ": not a directory or regular file")
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGloveRunStagedCodex stages the real codex platform package (pinned
// version, installed from npm into the test cache) and launches it: the
// real program answers --version from the staged tree, and a probe put
// in the place of the native program in a copy of the same package sees
// every sibling executable read-only, with the whole tree one read-only
// mount; the receipts carry the trees' digests (issue 32: a launch bound
// the executable alone, so the siblings were missing).
func TestGloveRunStagedCodex(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the test stages codex's linux-x64 platform package")
	}
	prefix := harnesses.EnsurePrefix(t, harnesses.Codex)
	plat := filepath.Join(prefix, "node_modules", "@openai", "codex-linux-x64")
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)

	// The stage directory beneath the mounter's source root; the probe's
	// package beside it, made of links to the real one.
	work, runtimes := stagedWork(t, e)
	real, err := stage.Stage(stage.Options{Runtime: "codex", Source: plat, Directory: runtimes})
	if err != nil {
		t.Fatal(err)
	}
	if want := real.StagedPath + "/" + codexTarget + "/bin/codex"; real.EntryPoint != want {
		t.Fatalf("entry point %s, want %s", real.EntryPoint, want)
	}
	probeSrc := filepath.Join(work, "probe-pkg")
	linkTree(t, plat, probeSrc, codexTarget+"/bin/codex")
	data, err := os.ReadFile(testenv.BuildStatic(t, e, "stageprobe", stageProbeSource))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(probeSrc, codexTarget, "bin", "codex"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	probe, err := stage.Stage(stage.Options{Runtime: "codex", Source: probeSrc, Directory: runtimes})
	if err != nil {
		t.Fatal(err)
	}

	prof := policy.ResourceProfile{ProfileID: "codex", CPUTimeMs: 20000, MemoryBytes: 512 << 20, Pids: 64,
		WallTimeMs: 30000, DiskBytes: 8 << 20, TerminalOutputBytes: 1 << 20}
	tmpl := func(id, search string, args ...string) policy.RuntimeTemplate {
		t := policy.RuntimeTemplate{RuntimeTemplateID: id, RuntimeID: "codex", SandboxBackend: policy.BackendLinuxProduction,
			Launch: policy.Launch{RuntimeDiscovery: "codex", ExecutableSearchPaths: []string{search}, Arguments: args,
				Environment: []string{"TERM=dumb"}}}
		t.AdapterCommandDigest = policy.AdapterDigest(&t)
		return t
	}
	pol := &policy.Policy{SchemaVersion: 1, Revision: 3, MaxPlanTTLMs: 600000,
		RuntimeTemplates: []policy.RuntimeTemplate{
			tmpl("codex-probe", probe.SearchPath, codexSiblings...),
			tmpl("codex-real", real.SearchPath, "--version"),
		},
		ResourceProfiles: []policy.ResourceProfile{prof}}
	if err := policy.Validate(pol); err != nil {
		t.Fatal(err)
	}
	polFile := filepath.Join(work, "policy.json")
	writeOwned(t, e, polFile, policy.Canonical(pol))
	ws := workspace(t, e, nil)

	t.Run("real codex --version", func(t *testing.T) {
		out := launchStaged(t, e, work, polFile, ws, pol, 1, real)
		if !strings.Contains(out, "codex-cli "+harnesses.Codex.Version) {
			t.Errorf("stdout %q lacks codex-cli %s", out, harnesses.Codex.Version)
		}
	})
	t.Run("siblings, read-only", func(t *testing.T) {
		out := launchStaged(t, e, work, polFile, ws, pol, 0, probe)
		for _, rel := range codexSiblings {
			fi, err := os.Stat(filepath.Join(plat, codexTarget, rel))
			if err != nil {
				t.Fatal(err)
			}
			mode := "-r--r--r--"
			if fi.Mode()&0o111 != 0 {
				mode = "-r-xr-xr-x"
			}
			if want := "sibling " + rel + ": " + mode + " write refused: true\n"; !strings.Contains(out, want) {
				t.Errorf("stdout lacks %q (the sibling visible, read-only)\nstdout: %s", want, out)
			}
		}
		// One read-only mount, of the whole tree, at its own path: not
		// of the executable alone.
		if want := "mount " + probe.StagedPath + " ro\n"; !strings.Contains(out, "create refused: true\n") || !strings.Contains(out, want) ||
			strings.Count(out, "\nmount ") != 1 {
			t.Errorf("stdout lacks %q alone (and a refused create)\nstdout: %s", want, out)
		}
	})
}

// launchStaged runs template i of pol (in polFile) with glove run and
// checks its receipt commits the stage tree rep; it returns stdout.
func launchStaged(t *testing.T, e *testenv.Env, work, polFile, ws string, pol *policy.Policy, i int, rep *stage.Report) string {
	t.Helper()
	prof := pol.ResourceProfiles[0]
	tm := pol.RuntimeTemplates[i]
	pl := &plan.Plan{SchemaVersion: 1, PolicyRevision: pol.Revision, ExpiresAtUnixMs: uint64(time.Now().Add(5 * time.Minute).UnixMilli()),
		RuntimeTemplateID: tm.RuntimeTemplateID, RuntimeID: tm.RuntimeID, SandboxBackend: policy.BackendLinuxProduction,
		AdapterCommandDigest: tm.AdapterCommandDigest, ResourceProfile: prof}
	dir, err := os.MkdirTemp(work, "run-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	planFile := filepath.Join(dir, "plan.json")
	writeOwned(t, e, planFile, plan.Canonical(pl))
	keyFile, key, rcpt := receiptFiles(t, e, dir)
	stdout, stderr, code := gloveRun(t, e, ws, "", "--policy", polFile, "--plan", planFile, "--receipt", rcpt, "--receipt-key", keyFile)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	b := readReceipt(t, rcpt, key).Body
	if b.StageTreeDigest != rep.Digest || !policy.ValidSHA256Hex(b.LaunchDigest) {
		t.Errorf("receipt stage_tree_digest %q, launch digest %q; want the tree %s", b.StageTreeDigest, b.LaunchDigest, rep.Digest)
	}
	return stdout
}

// stagedWork makes a root-owned directory beneath the mounter's source
// root (e.Base/sources) with an empty runtime directory in it, removed
// in cleanup (staged trees are read-only).
func stagedWork(t *testing.T, e *testenv.Env) (work, runtimes string) {
	t.Helper()
	work, err := os.MkdirTemp(filepath.Join(e.Base, "sources"), "staged-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		filepath.WalkDir(work, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o755)
			}
			return nil
		})
		os.RemoveAll(work)
	})
	if err := os.Chmod(work, 0o755); err != nil {
		t.Fatal(err)
	}
	runtimes = filepath.Join(work, "runtimes")
	if err := os.Mkdir(runtimes, 0o755); err != nil {
		t.Fatal(err)
	}
	return work, runtimes
}

// TestGloveRunStagedClaudeCode stages the real claude-code platform
// package (pinned version, from the npm cache) and launches it with
// --version. Its program is glibc's: the template grants the host's
// /usr/lib and /usr/lib64 (the interpreter the stage reports, and the C
// library), which the sandbox's /lib64 link reaches.
func TestGloveRunStagedClaudeCode(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the test stages claude-code's linux-x64 platform package")
	}
	prefix := harnesses.EnsurePrefix(t, harnesses.Claude)
	plat := filepath.Join(prefix, "node_modules", "@anthropic-ai", "claude-code-linux-x64")
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	work, runtimes := stagedWork(t, e)
	rep, err := stage.Stage(stage.Options{Runtime: "claude-code", Source: plat, Directory: runtimes})
	if err != nil {
		t.Fatal(err)
	}
	if rep.EntryPoint != rep.StagedPath+"/claude" || !strings.Contains(rep.Interpreter, "ld-linux") {
		t.Fatalf("entry point %s, interpreter %q", rep.EntryPoint, rep.Interpreter)
	}
	prof := policy.ResourceProfile{ProfileID: "claude", CPUTimeMs: 20000, MemoryBytes: 1 << 30, Pids: 64,
		WallTimeMs: 30000, DiskBytes: 8 << 20, TerminalOutputBytes: 1 << 20}
	tm := policy.RuntimeTemplate{RuntimeTemplateID: "claude-real", RuntimeID: "claude-code", SandboxBackend: policy.BackendLinuxProduction,
		Launch: policy.Launch{RuntimeDiscovery: "claude-code", ExecutableSearchPaths: []string{rep.SearchPath}, Arguments: []string{"--version"},
			Environment: []string{"TERM=dumb"}, ReadOnlyPaths: []string{"/usr/lib", "/usr/lib64"}}}
	tm.AdapterCommandDigest = policy.AdapterDigest(&tm)
	pol := &policy.Policy{SchemaVersion: 1, Revision: 4, MaxPlanTTLMs: 600000,
		RuntimeTemplates: []policy.RuntimeTemplate{tm}, ResourceProfiles: []policy.ResourceProfile{prof}}
	if err := policy.Validate(pol); err != nil {
		t.Fatal(err)
	}
	polFile := filepath.Join(work, "policy.json")
	writeOwned(t, e, polFile, policy.Canonical(pol))
	out := launchStaged(t, e, work, polFile, workspace(t, e, nil), pol, 0, rep)
	if !strings.Contains(out, harnesses.Claude.Version) {
		t.Errorf("stdout %q lacks %s", out, harnesses.Claude.Version)
	}
}
