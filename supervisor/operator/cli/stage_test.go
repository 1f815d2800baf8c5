// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"github.com/glove-sandbox/glove/supervisor/authority/stage"
	"github.com/glove-sandbox/glove/testenv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"golang.org/x/sys/unix"

	"github.com/glove-sandbox/glove/supervisor/engine/discovery"
)

func stageBase(t *testing.T) string { return testenv.ProtectedDir(t, "stage") }

func stageWrite(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// stageJSON is what --json prints: the package's report.
type stageJSON = stage.Report

func TestPolicyStage(t *testing.T) {
	base := stageBase(t)
	script := testenv.FakeELF("codex\n")
	// A package-manager layout: a group-writable bin directory and a
	// link into the package, which discovery itself would refuse.
	pkg := base + "/npm/lib/node_modules/@openai/codex"
	stageWrite(t, pkg+"/bin/codex", script, 0o775)
	stageWrite(t, pkg+"/lib/a.js", "a\n", 0o664)
	stageWrite(t, pkg+"/lib/sub/b.js", "b\n", 0o664)
	if err := os.Symlink("../lib/a.js", pkg+"/bin/a.js"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(base+"/npm/bin", 0o775); err != nil {
		t.Fatal(err)
	}
	os.Chmod(base+"/npm/bin", 0o775)
	if err := os.Symlink("../lib/node_modules/@openai/codex", base+"/npm/bin/codex-pkg"); err != nil {
		t.Fatal(err)
	}
	dir := base + "/runtimes"
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	// Dry run: a report, nothing written.
	code, out, errs := run("policy", "stage", "--runtime", "codex", "--source", base+"/npm/bin/codex-pkg", "--directory", dir, "--dry-run", "--json")
	if code != ExitOK || errs != "" {
		t.Fatalf("dry run: exit %d, stderr %q", code, errs)
	}
	var dry stageJSON
	if err := json.Unmarshal([]byte(out), &dry); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if !dry.DryRun || dry.AlreadyStaged || dry.Source != pkg || dry.Files != 3 || dry.Directories != 3 || dry.Symlinks != 1 || len(dry.Digest) != 64 {
		t.Fatalf("dry run report %+v", dry)
	}
	if got := dirNames(t, dir); len(got) != 0 {
		t.Fatalf("dry run wrote %v", got)
	}

	// --yes: staged where discovery admits it.
	code, out, errs = run("policy", "stage", "--runtime", "codex", "--source", base+"/npm/bin/codex-pkg", "--directory", dir, "--yes")
	if code != ExitOK || errs != "" {
		t.Fatalf("stage: exit %d, stderr %q", code, errs)
	}
	staged := dir + "/" + dry.Digest
	for _, want := range []string{"digest: " + dry.Digest, "staged_path: " + staged, "search_path: " + staged + "/bin", "status: staged"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasSuffix(out, "executable_search_paths: [\""+staged+"/bin\"]\n") {
		t.Errorf("output does not end with the policy line:\n%s", out)
	}
	f, err := discovery.Find("codex", []string{staged + "/bin"})
	sum := sha256.Sum256([]byte(script))
	if err != nil || f.Path != staged+"/bin/codex" || f.Identity.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("discovery: %+v %v", f, err)
	}

	// Again: already staged, nothing changed.
	var before, after unix.Stat_t
	unix.Stat(staged, &before)
	code, out, errs = run("policy", "stage", "--runtime", "codex", "--source", pkg, "--directory", dir, "--yes", "--json")
	if code != ExitOK || errs != "" {
		t.Fatalf("restage: exit %d, stderr %q", code, errs)
	}
	var again stageJSON
	if err := json.Unmarshal([]byte(out), &again); err != nil {
		t.Fatal(err)
	}
	unix.Stat(staged, &after)
	if !again.AlreadyStaged || again.Digest != dry.Digest || again.SearchPath != staged+"/bin" || before.Ino != after.Ino || before.Ctim != after.Ctim {
		t.Fatalf("restage report %+v", again)
	}
	if got := dirNames(t, dir); !slices.Equal(got, []string{dry.Digest}) {
		t.Fatalf("directory holds %v", got)
	}

	// A fifo late in the tree: refused, exit 1, nothing left behind.
	if err := os.Mkdir(pkg+"/zz", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(pkg+"/zz/fifo", 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs = run("policy", "stage", "--runtime", "codex", "--source", pkg, "--directory", dir, "--yes")
	if code != ExitFail || out != "" {
		t.Fatalf("fifo: exit %d, stdout %q", code, out)
	}
	oneLine(t, errs, "glove: policy stage: ", pkg+"/zz/fifo: is a named pipe (fifo)")
	if got := dirNames(t, dir); !slices.Equal(got, []string{dry.Digest}) {
		t.Fatalf("directory holds %v", got)
	}
}

func TestPolicyStageRefusals(t *testing.T) {
	base := stageBase(t)
	dir := base + "/runtimes"
	os.Mkdir(dir, 0o755)
	gw := base + "/gw"
	os.Mkdir(gw, 0o755)
	os.Chmod(gw, 0o775)
	src := base + "/src"
	stageWrite(t, src+"/bin/codex", testenv.FakeELF(""), 0o755)
	home := base + "/home/u/.claude/local"
	stageWrite(t, home+"/bin/codex", testenv.FakeELF(""), 0o755)
	for _, c := range []struct {
		name       string
		source     string
		directory  string
		want       string
		setupExtra func()
	}{
		{"group-writable directory", src, gw, "writable by group or others (mode 0775)", nil},
		{"harness home", home, dir, "harness home (.claude)", nil},
		{"directory inside source", src, src + "/rt", "is inside the source", func() { os.Mkdir(src+"/rt", 0o755) }},
		{"absolute symlink", src, dir, "symbolic link to an absolute path", func() { os.Symlink("/etc", src+"/etc") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.setupExtra != nil {
				c.setupExtra()
			}
			code, out, errs := run("policy", "stage", "--runtime", "codex", "--source", c.source, "--directory", c.directory, "--yes")
			if code != ExitFail || out != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
			}
			oneLine(t, errs, "glove: policy stage: ", c.want)
			if got := dirNames(t, dir); len(got) != 0 {
				t.Fatalf("directory holds %v", got)
			}
		})
	}
}

func TestPolicyStageUsage(t *testing.T) {
	ok := []string{"--runtime", "codex", "--source", "/opt/codex", "--directory", "/usr/local/lib/glove-runtimes"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--runtime is required"},
		{[]string{"--source", "/a", "--directory", "/b", "--yes"}, "--runtime is required"},
		{[]string{"--runtime", "codex", "--directory", "/b", "--yes"}, "--source is required"},
		{[]string{"--runtime", "codex", "--source", "/a", "--yes"}, "--directory is required"},
		{ok, "exactly one of --dry-run and --yes"},
		{append(slices.Clone(ok), "--dry-run", "--yes"), "exactly one of --dry-run and --yes"},
		{[]string{"--runtime", "codex", "--source", "rel/codex", "--directory", "/b", "--yes"}, `--source "rel/codex" is not an absolute path`},
		{[]string{"--runtime", "codex", "--source", "/a", "--directory", "rel", "--yes"}, `--directory "rel" is not an absolute canonical path`},
		{[]string{"--runtime", "codex", "--source", "/a", "--directory", "/b/", "--yes"}, `--directory "/b/" is not an absolute canonical path`},
		{[]string{"--runtime", "vim", "--source", "/a", "--directory", "/b", "--yes"}, `unknown runtime "vim"`},
		{append(slices.Clone(ok), "--yes", "extra"), `unexpected argument "extra"`},
		{[]string{"--bogus"}, "flag provided but not defined"},
	} {
		code, out, errs := run(append([]string{"policy", "stage"}, c.args...)...)
		if code != ExitUsage || out != "" {
			t.Errorf("%q: exit %d, stdout %q", c.args, code, out)
			continue
		}
		if !strings.HasPrefix(errs, "glove: policy stage: ") || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%q: stderr %q, want one \"glove: policy stage: \" line with %q", c.args, errs, c.want)
		}
	}
}
