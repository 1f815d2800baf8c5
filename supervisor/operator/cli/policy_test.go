// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
)

const (
	examplePolicy = "../../authority/policy/testdata/example-policy.json"
	examplePlan   = "../../authority/plan/testdata/example-plan.json"
)

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// writeProtected writes a mode-0600 file the policy rules accept.
func writeProtected(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// freshPlan is the example plan expiring 60 s from now.
func freshPlan(t *testing.T) string {
	t.Helper()
	p, err := plan.Decode([]byte(readFile(t, examplePlan)))
	if err != nil {
		t.Fatal(err)
	}
	p.ExpiresAtUnixMs = uint64(time.Now().UnixMilli() + 60000)
	return string(plan.Canonical(p))
}

func run(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// oneLine requires stderr to be exactly one "glove: " line containing
// each of parts.
func oneLine(t *testing.T, stderr string, parts ...string) {
	t.Helper()
	if !strings.HasPrefix(stderr, "glove: ") || !strings.HasSuffix(stderr, "\n") || strings.Count(stderr, "\n") != 1 {
		t.Fatalf("stderr is not one \"glove: \" line: %q", stderr)
	}
	for _, p := range parts {
		if !strings.Contains(stderr, p) {
			t.Fatalf("stderr %q lacks %q", stderr, p)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	good := writeProtected(t, "policy.json", readFile(t, examplePolicy))
	code, out, errs := run("policy", "validate", "--file", good)
	if code != ExitOK || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if want := "valid: revision 7, 1 runtime template, 1 path alias, 1 library destination, 1 resource profile, 1 egress policy, 1 tool policy, 1 secret handle\n" +
		"source roots: every path a launch binds lies beneath glove-mounter's source root / (" + testMounterBounds + ")\n"; out != want {
		t.Fatalf("stdout %q, want %q", out, want)
	}

	bad := writeProtected(t, "bad.json", strings.Replace(readFile(t, examplePolicy), `"/usr/local/lib/operator-harness/codex-runtime"`, `"/usr/bin"`, 1))
	code, out, errs = run("policy", "validate", "--file", bad)
	if code != ExitUsage || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	oneLine(t, errs, "load policy "+bad+": ", "/runtime_templates/0/launch/read_only_paths/0: ", "contains the pinned executable")

	dup := writeProtected(t, "dup.json", strings.Replace(readFile(t, examplePolicy), `"revision": 7,`, `"revision": 7, "revision": 8,`, 1))
	code, _, errs = run("policy", "validate", "--file", dup)
	if code != ExitUsage {
		t.Fatalf("exit %d", code)
	}
	oneLine(t, errs, "/revision: duplicate member name")

	open := writeProtected(t, "open.json", readFile(t, examplePolicy))
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs = run("policy", "validate", "--file", open)
	if code != ExitUsage {
		t.Fatalf("exit %d", code)
	}
	oneLine(t, errs, "mode 0644, want exactly 0600")

	code, _, errs = run("policy", "validate", "--file", filepath.Join(t.TempDir(), "missing.json"))
	if code != ExitUsage {
		t.Fatalf("exit %d", code)
	}
	oneLine(t, errs, "no such file")
}

func TestPolicyExplain(t *testing.T) {
	good := writeProtected(t, "policy.json", readFile(t, examplePolicy))
	code, out, errs := run("policy", "explain", "--file", good)
	if code != ExitOK || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if !strings.Contains(out, `runtime template "codex-safe"`) || !strings.Contains(out, `path alias "workspace"`) {
		t.Fatalf("explanation:\n%s", out)
	}
	code, out, errs = run("policy", "explain", "--json", "--file", good)
	if code != ExitOK || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	var e policy.Explanation
	if err := json.Unmarshal([]byte(out), &e, json.RejectUnknownMembers(true)); err != nil {
		t.Fatalf("JSON explanation does not decode: %v\n%s", err, out)
	}
	if len(e.RuntimeTemplates) != 1 || len(e.RuntimeTemplates[0].PathGrants) != 1 ||
		e.RuntimeTemplates[0].PathGrants[0].MaxBytes != 2097152 || !e.RuntimeTemplates[0].PathGrants[0].Launchable {
		t.Fatalf("JSON explanation: %+v", e)
	}
	bad := writeProtected(t, "bad.json", strings.Replace(readFile(t, examplePolicy), `"pids": 16`, `"pids": 0`, 1))
	code, out, errs = run("policy", "explain", "--file", bad)
	if code != ExitUsage || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	oneLine(t, errs, "/resource_profiles/0/pids: 0 is outside")
}

func TestPlanValidate(t *testing.T) {
	pol := writeProtected(t, "policy.json", readFile(t, examplePolicy))
	text := freshPlan(t)
	good := writeProtected(t, "plan.json", text)
	code, out, errs := run("plan", "validate", "--policy", pol, "--plan", good)
	if code != ExitOK || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	p, err := plan.Decode([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("valid: plan_content_digest %s\n", plan.ContentDigest(p)); out != want {
		t.Fatalf("stdout %q, want %q", out, want)
	}

	bad := writeProtected(t, "bad.json", strings.Replace(text, `"pids":16`, `"pids":32`, 1))
	code, out, errs = run("plan", "validate", "--policy", pol, "--plan", bad)
	if code != ExitUsage || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	oneLine(t, errs, "validate plan "+bad+": ", `/resource_profile/pids: 32 does not match profile "small" (16)`)

	// The example file's own expiry is long past.
	stale := writeProtected(t, "stale.json", readFile(t, examplePlan))
	code, _, errs = run("plan", "validate", "--policy", pol, "--plan", stale)
	if code != ExitUsage {
		t.Fatalf("exit %d", code)
	}
	oneLine(t, errs, "/expires_at_unix_ms: ", "has expired")

	badPol := writeProtected(t, "badpol.json", strings.Replace(readFile(t, examplePolicy), `"revision": 7`, `"revision": 0`, 1))
	code, _, errs = run("plan", "validate", "--policy", badPol, "--plan", good)
	if code != ExitUsage {
		t.Fatalf("exit %d", code)
	}
	oneLine(t, errs, "load policy "+badPol+": /revision: ")

	if err := os.Chmod(good, 0o640); err != nil {
		t.Fatal(err)
	}
	code, _, errs = run("plan", "validate", "--policy", pol, "--plan", good)
	if code != ExitUsage {
		t.Fatalf("exit %d", code)
	}
	oneLine(t, errs, "load plan: ", "mode 0640")
}

func TestPolicyPlanUsage(t *testing.T) {
	cases := [][]string{
		{"policy"},
		{"policy", "frobnicate"},
		{"policy", "validate"},
		{"policy", "validate", "--file"},
		{"policy", "validate", "--file", "x", "extra"},
		{"policy", "validate", "--nope", "x"},
		{"policy", "explain"},
		{"plan"},
		{"plan", "explain"},
		{"plan", "validate", "--policy", "x"},
		{"plan", "validate", "--plan", "x"},
		{"plan", "validate", "--file", "x"},
	}
	for _, args := range cases {
		code, out, errs := run(args...)
		if code != ExitUsage || out != "" {
			t.Errorf("%q: exit %d, stdout %q", args, code, out)
		}
		if !strings.HasPrefix(errs, "glove: ") || !strings.Contains(errs, "\nusage: glove ") {
			t.Errorf("%q: stderr %q lacks a glove: line and a usage line", args, errs)
		}
	}
}
