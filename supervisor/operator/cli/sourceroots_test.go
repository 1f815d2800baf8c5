// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"os"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/engine/sourceroots"
	"github.com/glove-sandbox/glove/testenv"
)

// testMounterBounds names the stand-in bounds file of the tests.
const testMounterBounds = "/test/mounter.json"

// The tests' glove-mounter binds from anywhere unless a test says
// otherwise (TestSourceRootsCommands): the host's own bounds file is no
// input of a unit test.
func init() {
	mounterRoots = func() (*sourceroots.Roots, error) {
		return sourceroots.New(testMounterBounds, []string{"/"}), nil
	}
}

// withRoots makes glove-mounter's source roots roots for one test.
func withRoots(t *testing.T, roots ...string) {
	t.Helper()
	saved := mounterRoots
	mounterRoots = func() (*sourceroots.Roots, error) { return sourceroots.New(testMounterBounds, roots), nil }
	t.Cleanup(func() { mounterRoots = saved })
}

// TestSourceRootsCommands: stage, detect, generate and policy validate
// compare the directories a launch binds with glove-mounter's source
// roots and say so in one line, instead of the first launch failing
// with 125 "glove-mounter bind: source is outside every source root"
// (issue 32).
func TestSourceRootsCommands(t *testing.T) {
	base := stageBase(t)
	inside, outside := base+"/sources", base+"/elsewhere"
	for _, d := range []string{inside + "/runtimes", outside + "/runtimes"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	src := base + "/pkg"
	stageWrite(t, src+"/bin/codex", testenv.FakeELF("codex"), 0o755)
	withRoots(t, "/etc", inside)
	roots := "(/etc, " + inside + " in " + testMounterBounds + "): a launch could not bind it"

	// stage: refused before anything is read; nothing written.
	code, out, errs := run("policy", "stage", "--runtime", "codex", "--source", src, "--directory", outside+"/runtimes", "--yes")
	if code != ExitFail || out != "" {
		t.Fatalf("stage outside: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	oneLine(t, errs, "glove: policy stage: --directory "+outside+"/runtimes is outside glove-mounter's source roots "+roots+"; stage into a directory beneath one")
	if got := dirNames(t, outside+"/runtimes"); len(got) != 0 {
		t.Fatalf("staged outside the source roots: %v", got)
	}
	code, out, errs = run("policy", "stage", "--runtime", "codex", "--source", src, "--directory", inside+"/runtimes", "--yes")
	if code != ExitOK || errs != "" || !strings.Contains(out, "\nsource roots: every path a launch binds lies beneath glove-mounter's source root "+inside+" ("+testMounterBounds+")\n") {
		t.Fatalf("stage inside: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	var search string
	for _, l := range strings.Split(out, "\n") {
		if s, ok := strings.CutPrefix(l, "search_path: "); ok {
			search = s
		}
	}

	// detect: a report; the last line says which directory is outside.
	code, out, _ = run("policy", "detect", "--search-path", search, "--search-path", outside+"/runtimes")
	if code != ExitOK || !strings.HasSuffix(out, "\nsource roots: "+outside+"/runtimes is outside glove-mounter's source roots "+roots+"\n") {
		t.Fatalf("detect: exit %d, stdout %q", code, out)
	}

	// generate: a fault of the entry (exit 2), naming the member.
	code, out, errs = run("policy", "generate", "--runtime", "codex", "--template-id", "codex-staged", "--search-path", search, "--read-only-path", outside)
	if code != ExitUsage || out != "" {
		t.Fatalf("generate: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	oneLine(t, errs, "glove: policy generate: /runtime_templates/0/launch/read_only_paths/0: "+outside+" is outside glove-mounter's source roots "+roots)
	code, out, errs = run("policy", "generate", "--runtime", "codex", "--template-id", "codex-staged", "--search-path", search)
	if code != ExitOK || !strings.Contains(out, `"runtime_discovery": "codex"`) || !strings.Contains(errs, "source root "+inside) {
		t.Fatalf("generate inside: exit %d, stdout %q, stderr %q", code, out, errs)
	}

	// validate: every path the example policy's launch binds is beneath
	// /usr, as in both shipped set-ups (docs/policy.md); with /usr/bin
	// alone its read-only closure in /usr/local is not.
	file := writeProtected(t, "policy.json", readFile(t, examplePolicy))
	withRoots(t, "/usr")
	if code, out, errs = run("policy", "validate", "--file", file); code != ExitOK || !strings.HasSuffix(out, "\nsource roots: every path a launch binds lies beneath glove-mounter's source root /usr ("+testMounterBounds+")\n") {
		t.Fatalf("validate: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	withRoots(t, "/usr/bin")
	code, out, errs = run("policy", "validate", "--file", file)
	if code != ExitUsage || out != "" {
		t.Fatalf("validate: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	oneLine(t, errs, "/runtime_templates/0/launch/read_only_paths/0: /usr/local/lib/operator-harness/codex-runtime is outside glove-mounter's source roots (/usr/bin in "+testMounterBounds+")")
	withRoots(t, "/usr/bin", "/usr/local")
	if code, out, errs = run("policy", "validate", "--file", file); code != ExitOK || !strings.HasSuffix(out, "\nsource roots: every path a launch binds lies beneath glove-mounter's source root /usr/bin, /usr/local ("+testMounterBounds+")\n") {
		t.Fatalf("validate: exit %d, stdout %q, stderr %q", code, out, errs)
	}

	// An alias a plan may bind (read_only/bind) is glove-mounter's too;
	// one it may only copy is gloved's and needs no source root.
	p, err := policy.Decode([]byte(readFile(t, examplePolicy)))
	if err != nil {
		t.Fatal(err)
	}
	p.PathAliases[0].Access = append(p.PathAliases[0].Access, policy.AccessTuple{Access: policy.AccessReadOnly,
		Materialization: policy.MaterializationBind, CreatePolicy: policy.CreateMustExist, CleanupPolicy: policy.CleanupNone})
	bound := writeProtected(t, "bound.json", string(policy.Canonical(p)))
	withRoots(t, "/usr")
	code, out, errs = run("policy", "validate", "--file", bound)
	if code != ExitUsage || out != "" {
		t.Fatalf("validate with a bind alias outside: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	oneLine(t, errs, "/path_aliases/0/host_path: "+p.PathAliases[0].HostPath+" is outside glove-mounter's source roots (/usr in "+testMounterBounds+")")
}
