// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/glove-sandbox/glove/supervisor/authority/harness"
	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/authority/stage"
	"github.com/glove-sandbox/glove/testenv/docscript"
	"github.com/glove-sandbox/glove/testenv/harnesses"
)

const harnessesDoc = "../../../docs/harnesses.md"

var redirect = regexp.MustCompile(`\s+>[A-Za-z0-9._-]+$`)

// TestHarnessesDocument follows docs/harnesses.md: every `glove` command
// line of its shell blocks is expanded by bash as written (its `$(…)`
// run in a directory holding the document's files) and its arguments
// checked by glove's own flag parsing (`--help` appended: a flag that
// does not exist fails); each `glove policy generate` is run against a
// stand-in of the staged runtime and must print the document's template
// (digest included, for the document's search path); the document's
// policy, with those templates, validates; its jq plan, made by running
// its jq line, validates against it; create_session's and
// start_session's parameters, made by the document's jq, are what the
// protocol takes. npm, install, systemctl are the host's and not run.
func TestHarnessesDocument(t *testing.T) {
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("jq is not installed: the document's plan is made with it")
	}
	b, err := os.ReadFile(harnessesDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	templates := map[string]string{}
	for _, rt := range []string{"codex", "claude-code"} {
		bs := docscript.Blocks(doc, "json harness-template-"+rt)
		if len(bs) != 1 {
			t.Fatalf("%d %s template blocks, want 1", len(bs), rt)
		}
		templates[rt] = bs[0]
	}
	pols := docscript.Blocks(doc, "json harness-policy")
	if len(pols) != 1 {
		t.Fatalf("%d policy blocks, want 1", len(pols))
	}
	polText := strings.Replace(pols[0], "[CLAUDE, CODEX]", "["+templates["claude-code"]+","+templates["codex"]+"]", 1)
	pol, err := policy.Decode([]byte(polText))
	if err != nil {
		t.Fatalf("the document's policy: %v", err)
	}
	if err := policy.Validate(pol); err != nil {
		t.Fatalf("the document's policy: %v", err)
	}

	// The state file generate's notes ask for is in the document's
	// policy, seeded as they say.
	for _, rt := range harness.Runtimes() {
		path, seed, ok := harness.StateFile(rt)
		if !ok {
			continue
		}
		if !slices.ContainsFunc(pol.CredentialPolicies, func(c policy.CredentialPolicy) bool {
			return c.Handle == rt+"-state" && c.DestinationPath == path
		}) || !strings.Contains(doc, "printf '"+seed) {
			t.Errorf("the document's policy gives %s no state file %s seeded with %s", rt, path, seed)
		}
	}

	dir := t.TempDir()
	files := map[string]string{"codex.json": templates["codex"] + "\n", "claude-code.json": templates["claude-code"] + "\n",
		"created.json":        `{"existing":false,"session_id":"codex-1","start_token":"glove-start-v1.1.x","start_token_expires_at_ms":1,"state":"created"}`,
		"claude-created.json": `{"existing":false,"session_id":"claude-1","start_token":"glove-start-v1.1.x","start_token_expires_at_ms":1,"state":"created"}`}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	methods := map[string]bool{}
	proto, err := os.ReadFile("../../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile("(?m)^### ([a-z_]+)").FindAllStringSubmatch(string(proto), -1) {
		methods[m[1]] = true
	}

	var ran []string
	for _, block := range docscript.Blocks(doc, "sh") {
		for _, line := range docscript.ShellLines(block) {
			switch {
			case strings.HasPrefix(line, "jq "):
				// The plan: run as written.
				bashIn(t, dir, line)
				ran = append(ran, "jq")
				continue
			case !strings.HasPrefix(line, "glove ") && !strings.HasPrefix(line, "runuser -u glove -- glove "):
				continue
			}
			argv := gloveArgv(t, dir, redirect.ReplaceAllString(line, ""))
			ran = append(ran, strings.Join(argv[:2], " "))
			checkDocCommand(t, argv, methods, pol, templates, dir)
		}
	}
	checkDocStage(t, doc)
	for _, want := range []string{"policy stage", "policy generate", "policy validate", "jq", "call create_session",
		"call start_session", "attach codex-1", "attach claude-1", "call stop_session"} {
		if !slices.ContainsFunc(ran, func(r string) bool { return strings.HasPrefix(r, want) }) {
			t.Errorf("the document runs no %s (it ran %q)", want, ran)
		}
	}
}

// bashIn runs a shell line in dir.
func bashIn(t *testing.T, dir, line string) string {
	t.Helper()
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", line)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "TERM=xterm", "HOME=" + dir}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v: %s", line, err, errb.String())
	}
	return out.String()
}

// gloveArgv is glove's argv for a document line, as bash expands it.
func gloveArgv(t *testing.T, dir, line string) []string {
	t.Helper()
	out := bashIn(t, dir, `glove() { printf '%s\0' "$@"; }; runuser() { shift 3; "$@"; }; `+line)
	return strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
}

func checkDocCommand(t *testing.T, argv []string, methods map[string]bool, pol *policy.Policy, templates map[string]string, dir string) {
	t.Helper()
	switch argv[0] {
	case "policy", "plan":
		if code, _, errs := run(append(slices.Clone(argv), "--help")...); code != ExitOK {
			t.Errorf("glove %q: its flags do not parse: %s", argv, errs)
		}
		if argv[1] == "generate" {
			checkDocGenerate(t, argv, templates)
		}
	case "attach":
		if len(argv) != 2 || !regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`).MatchString(argv[1]) {
			t.Errorf("glove %q is not glove attach SESSION_ID", argv)
		}
	case "call":
		if len(argv) != 3 || !methods[argv[1]] {
			t.Fatalf("glove %q is not glove call METHOD PARAMS of docs/protocol.md", argv)
		}
		var params map[string]any
		if err := json.Unmarshal([]byte(argv[2]), &params); err != nil {
			t.Fatalf("glove call %s: params %q: %v", argv[1], argv[2], err)
		}
		if params["session_id"] != "codex-1" && params["session_id"] != "claude-1" {
			t.Errorf("glove call %s: session_id %v", argv[1], params["session_id"])
		}
		switch argv[1] {
		case "create_session":
			var p struct {
				Plan                 jsontext.Value `json:"plan"`
				ControllerPlanDigest string         `json:"controller_plan_digest"`
				IdempotencyKey       string         `json:"idempotency_key"`
			}
			if err := json.Unmarshal([]byte(argv[2]), &p); err != nil {
				t.Fatal(err)
			}
			if err := plan.CheckControllerDigest(p.ControllerPlanDigest); err != nil || p.IdempotencyKey == "" {
				t.Errorf("create_session: controller_plan_digest %q (%v), idempotency_key %q", p.ControllerPlanDigest, err, p.IdempotencyKey)
			}
			pl, err := plan.Decode(p.Plan)
			if err != nil {
				t.Fatalf("create_session's plan: %v", err)
			}
			if err := plan.Validate(pl, pol, time.Now()); err != nil {
				t.Errorf("create_session's plan against the document's policy: %v", err)
			}
		case "start_session":
			rows, _ := params["rows"].(float64)
			cols, _ := params["cols"].(float64)
			if params["start_token"] != "glove-start-v1.1.x" || rows < 1 || cols < 1 {
				t.Errorf("start_session params %v", params)
			}
		}
	default:
		t.Errorf("glove %q: a command the test does not check", argv)
	}
}

// checkDocGenerate runs a document's generate line with its search path
// replaced by a stand-in (a protected directory holding a script of the
// adapter's name) and requires the document's template: the same entry,
// for the document's search path, its digest recomputed for it.
func checkDocGenerate(t *testing.T, argv []string, templates map[string]string) {
	t.Helper()
	i := slices.Index(argv, "--search-path")
	rt := argv[slices.Index(argv, "--runtime")+1]
	exe, ok := policy.DiscoveryExecutable(rt)
	if i < 0 || !ok {
		t.Fatalf("glove %q: no --search-path or no discovery runtime", argv)
	}
	docPath := argv[i+1]
	stand := generateBase(t) + "/stage"
	mkdirMode(t, stand, 0o755)
	writeScript(t, stand+"/"+exe)
	args := slices.Clone(argv)
	args[i+1] = stand
	code, out, errs := run(args...)
	if code != ExitOK {
		t.Fatalf("glove %q: exit %d: %s", args, code, errs)
	}
	got := decodeEntry(t, out)
	got.Launch.ExecutableSearchPaths = []string{docPath}
	got.AdapterCommandDigest = policy.AdapterDigest(&got)
	var want policy.RuntimeTemplate
	if err := json.Unmarshal([]byte(templates[rt]), &want, json.RejectUnknownMembers(true)); err != nil {
		t.Fatalf("the document's %s template: %v", rt, err)
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if !bytes.Equal(gb, wb) {
		t.Errorf("the document's %s template is not what glove policy generate prints:\n%s\nwant\n%s", rt, wb, gb)
	}
	if !strings.Contains(errs, `"unix_socket": "`+egressPlaceholder+`"`) {
		t.Errorf("generate's notes lack the egress entry:\n%s", errs)
	}
	// The state credential generate asks for is the document's.
	if path, seed, ok := harness.StateFile(rt); ok {
		for _, want := range []string{`"destination_path": "` + path + `"`, `"handle": "` + rt + `-state"`, seed} {
			if !strings.Contains(errs, want) {
				t.Errorf("generate's notes for %s lack %s:\n%s", rt, want, errs)
			}
		}
	}
}

// checkDocStage: the document installs the versions the real-harness
// tests pin, and its staged search paths are those versions' stage
// digests, computed (a dry run) from the tests' npm cache when it holds
// them; nothing is installed for this.
func checkDocStage(t *testing.T, doc string) {
	t.Helper()
	cache, err := harnesses.DefaultCache()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range harnesses.All {
		if !strings.Contains(doc, h.Package+"@"+h.Version) {
			t.Errorf("the document does not install %s@%s", h.Package, h.Version)
		}
		// The platform package: @scope/name, the binary's first two
		// components.
		parts := strings.SplitN(h.Binary, "/", 3)
		plat := filepath.Join(h.Prefix(cache), "node_modules", parts[0], parts[1])
		if _, err := os.Stat(filepath.Join(h.Prefix(cache), ".glove-installed")); err != nil {
			t.Logf("%s is not in the npm cache %s: its stage digest is not checked", h.Name, cache)
			continue
		}
		dir := generateBase(t)
		r, err := stage.Stage(stage.Options{Runtime: h.Name, Source: plat, Directory: dir, DryRun: true})
		if err != nil {
			t.Fatalf("stage %s: %v", plat, err)
		}
		search := "/usr/local/lib/glove-runtimes" + strings.TrimPrefix(r.SearchPath, dir)
		if !strings.Contains(doc, "--search-path "+search+" ") {
			t.Errorf("the document generates no %s template from the search path %s", h.Name, search)
		}
	}
}
