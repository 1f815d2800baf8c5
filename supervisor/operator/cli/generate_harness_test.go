// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/glove-sandbox/glove/supervisor/authority/harness"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
)

// TestGenerateHarness: --model-endpoint makes a known harness's template
// from supervisor/authority/harness, with the operator's own flags after
// (arguments) or merged in (environment, read-only paths); the entry and
// the egress policy entry printed on stderr validate together in a
// policy; the notes name the key's variable and the harness profile.
func TestGenerateHarness(t *testing.T) {
	base := generateBase(t)
	bin := base + "/bin"
	mkdirMode(t, bin, 0o755)
	exe := bin + "/harness"
	writeScript(t, exe)
	for _, c := range []struct {
		name    string
		runtime string
		flags   []string
		model   harness.Model
		extra   []string // the operator's --arg values
		env     []string // the operator's --env values
		ro      []string // the operator's --read-only-path values
		keyNote string
	}{
		{name: "codex", runtime: "codex", flags: []string{"--model", "gpt-5.1-codex"},
			model: harness.Model{Name: "gpt-5.1-codex"}, keyNote: "codex reads the model API key from MODEL_API_KEY: give it by a credential policy"},
		{name: "codex key variable and the operator's flags", runtime: "codex",
			flags: []string{"--model", "m-1", "--key-env", "GATEWAY_KEY", "--arg", "--no-alt-screen", "--env", "GATEWAY_KEY=placeholder",
				"--env", "A=1", "--read-only-path", "/opt/glove-generate-test/tools"},
			model: harness.Model{Name: "m-1", KeyEnv: "GATEWAY_KEY"}, extra: []string{"--no-alt-screen"},
			env: []string{"A=1", "GATEWAY_KEY=placeholder"}, ro: []string{"/opt/glove-generate-test/tools"},
			keyNote: "GATEWAY_KEY is in the template's environment, so it is in the adapter digest"},
		{name: "claude-code", runtime: "claude-code", keyNote: "\"environment_variable\": \"ANTHROPIC_API_KEY\""},
		{name: "claude-code model", runtime: "claude-code", flags: []string{"--model", "claude-sonnet-4-5"},
			model: harness.Model{Name: "claude-sonnet-4-5"}, keyNote: "ANTHROPIC_API_KEY"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"policy", "generate", "--runtime", c.runtime, "--template-id", c.runtime, "--executable", exe,
				"--model-endpoint", "127.0.0.1:8787", "--alias", "workspace"}, c.flags...)
			code, out, errs := run(args...)
			if code != ExitOK {
				t.Fatalf("exit %d, stderr %q", code, errs)
			}
			tpl := decodeEntry(t, out)
			m := c.model
			m.BaseURL = "http://127.0.0.1:8787"
			wantArgs, err := harness.Arguments(c.runtime, m)
			if err != nil {
				t.Fatal(err)
			}
			wantEnv, err := harness.Environment(c.runtime, m)
			if err != nil {
				t.Fatal(err)
			}
			wantEnv = append(wantEnv, c.env...)
			slices.SortFunc(wantEnv, func(a, b string) int {
				an, _, _ := strings.Cut(a, "=")
				bn, _, _ := strings.Cut(b, "=")
				return strings.Compare(an, bn)
			})
			wantRO := slices.Sorted(slices.Values(append(harness.ReadOnlyPaths(), c.ro...)))
			l := tpl.Launch
			if !slices.Equal(l.Arguments, append(wantArgs, c.extra...)) {
				t.Errorf("arguments %q\nwant %q", l.Arguments, append(wantArgs, c.extra...))
			}
			if !slices.Equal(l.Environment, wantEnv) {
				t.Errorf("environment %q\nwant %q", l.Environment, wantEnv)
			}
			if !slices.Equal(l.ReadOnlyPaths, wantRO) {
				t.Errorf("read_only_paths %q\nwant %q", l.ReadOnlyPaths, wantRO)
			}
			if l.ExecutablePath != exe || tpl.RuntimeID != c.runtime || tpl.AdapterCommandDigest != policy.AdapterDigest(&tpl) {
				t.Errorf("entry %+v", tpl)
			}
			for _, kv := range l.Environment {
				if strings.HasPrefix(kv, "TERM=") || strings.HasPrefix(kv, "ANTHROPIC_API_KEY=") || strings.HasPrefix(kv, "MODEL_API_KEY=") {
					t.Errorf("the template sets %s", kv)
				}
			}

			// stderr: the source roots note, the egress entry, the key,
			// the profile; the entry validates with the egress entry.
			for _, want := range []string{"note: source roots:", "http://127.0.0.1:8787, an egress endpoint", c.keyNote,
				`the shipped resource profile "harness" fits`} {
				if !strings.Contains(errs, want) {
					t.Errorf("stderr lacks %q:\n%s", want, errs)
				}
			}
			i, j := strings.Index(errs, "\n{\n"), strings.Index(errs, "\n}\n")
			if i < 0 || j < i {
				t.Fatalf("stderr holds no egress policy entry:\n%s", errs)
			}
			entry := errs[i+1 : j+2]
			var eg policy.EgressPolicy
			if err := json.Unmarshal([]byte(entry), &eg, json.RejectUnknownMembers(true)); err != nil {
				t.Fatalf("the egress entry: %v\n%s", err, entry)
			}
			if len(eg.Endpoints) != 1 || eg.Endpoints[0].Address != "127.0.0.1:8787" || !eg.Endpoints[0].AllowPrivate {
				t.Errorf("egress entry %+v", eg)
			}
			if !slices.Equal(l.HostFiles, []string{policy.HostFilesCA, policy.HostFilesNameService}) {
				t.Errorf("host_files %v, want the CA certificates and the name service", l.HostFiles)
			}
			// Without the key in the template, the credential entry that
			// delivers it as the harness's variable follows.
			if rest := errs[j+3:]; !strings.Contains(c.keyNote, "in the template's environment") {
				k, m := strings.Index(rest, "{\n"), strings.Index(rest, "\n}\n")
				if k < 0 || m < k {
					t.Fatalf("stderr holds no credential entry:\n%s", errs)
				}
				var cp policy.CredentialPolicy
				if err := json.Unmarshal([]byte(rest[k:m+2]), &cp, json.RejectUnknownMembers(true)); err != nil {
					t.Fatalf("the credential entry: %v\n%s", err, rest[k:m+2])
				}
				if cp.Handle != c.runtime+"-key" || cp.EnvironmentVariable == "" || cp.DestinationPath != "" {
					t.Errorf("credential entry %+v", cp)
				}
			}
			pol := strings.Replace(generatedPolicy(out), `"egress_policy_ids": [],`,
				`"egress_policy_ids": ["model-gateway"], "egress_policies": [`+entry+`],`, 1)
			code, vout, verrs := run("policy", "validate", "--file", writeProtected(t, "policy.json", pol))
			if code != ExitOK || !strings.HasPrefix(vout, "valid: ") {
				t.Fatalf("validate: exit %d, %q %q\n%s", code, vout, verrs, pol)
			}
		})
	}
}

// TestGenerateHarnessUsage: every fault of the harness flags is one
// usage line, exit 2, nothing on stdout.
func TestGenerateHarnessUsage(t *testing.T) {
	base := generateBase(t)
	exe := base + "/harness"
	writeScript(t, exe)
	codex := []string{"--runtime", "codex", "--template-id", "c", "--executable", exe, "--model", "m"}
	claude := []string{"--runtime", "claude-code", "--template-id", "c", "--executable", exe}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(codex, "--model-endpoint", "localhost:8787"), `"localhost:8787" is not 127.0.0.1:PORT`},
		{append(codex, "--model-endpoint", "0.0.0.0:8787"), "is not 127.0.0.1:PORT"},
		{append(codex, "--model-endpoint", "127.0.0.2:8787"), "is not 127.0.0.1:PORT"},
		{append(codex, "--model-endpoint", "[::1]:8787"), "is not 127.0.0.1:PORT"},
		{append(codex, "--model-endpoint", "127.0.0.1:0"), "model endpoint"},
		{append(codex, "--model-endpoint", "127.0.0.1:08787"), "model endpoint"},
		{append(codex, "--model-endpoint", "http://127.0.0.1:8787"), "model endpoint"},
		{append(codex, "--model-endpoint", "127.0.0.1"), "model endpoint"},
		{[]string{"--runtime", "pi", "--template-id", "c", "--executable", exe, "--model-endpoint", "127.0.0.1:8787"}, `--runtime "pi" is not a known harness (one of claude-code, codex)`},
		{[]string{"--runtime", "codex", "--template-id", "c", "--executable", exe, "--model-endpoint", "127.0.0.1:8787"}, "a model name is required"},
		{append(codex, "--model-endpoint", "127.0.0.1:8787", "--key-env", "GLOVE_KEY"), `key variable "GLOVE_KEY" is not a NAME`},
		{append(codex, "--model-endpoint", "127.0.0.1:8787", "--model", `a"b`), `model name "a\"b" is not`},
		{append(claude, "--model-endpoint", "127.0.0.1:8787", "--key-env", "K"), "reads its key from ANTHROPIC_API_KEY"},
		{append(claude, "--model-endpoint", "127.0.0.1:8787", "--env", "ANTHROPIC_BASE_URL=http://elsewhere"), "--env ANTHROPIC_BASE_URL: the claude-code settings set it"},
		{append(codex, "--model-endpoint", "127.0.0.1:8787", "--env", "LANG=C"), "--env LANG: the codex settings set it"},
		{append(codex, "--model-endpoint", "127.0.0.1:8787", "--read-only-path", "/usr/bin"), "--read-only-path /usr/bin: the codex settings have it"},
		{append(codex, "--model-endpoint", "127.0.0.1:8787", "--read-only-path", "/usr"), `"/usr/bin" lies beneath read-only path "/usr"`},
		{append(codex, "--model-endpoint", "127.0.0.1:8787", "--env", "HOME=/x"), "HOME is set by Glove itself"},
		{codex, "--model and --key-env go with --model-endpoint"},
		{append(claude, "--key-env", "K"), "--model and --key-env go with --model-endpoint"},
	} {
		code, out, errs := run(append([]string{"policy", "generate"}, c.args...)...)
		first, _, _ := strings.Cut(errs, "\n")
		if code != ExitUsage || out != "" || !strings.HasPrefix(first, "glove: policy generate: ") || !strings.Contains(first, c.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and a line with %q", c.args, code, out, errs, c.want)
		}
	}
}

// TestGenerateHelp: --help is the manual (every flag named), the usage
// line first; a usage fault and `glove policy --help` show the usage
// alone.
func TestGenerateHelp(t *testing.T) {
	for _, args := range [][]string{{"policy", "generate", "--help"}, {"policy", "generate", "--runtime", "codex", "-h"}} {
		code, out, errs := run(args...)
		if code != ExitOK || errs != "" || !strings.HasPrefix(out, usagePolicyGenerate+"\n\n") {
			t.Fatalf("%q: exit %d, stderr %q, stdout %q", args, code, errs, out)
		}
		for _, f := range []string{"--runtime", "--executable", "--search-path", "--template-id", "--model-endpoint", "--model ",
			"--key-env", "--arg", "--env", "--read-only-path", "--alias", "--destination", "--backend"} {
			if !strings.Contains(out, "\n  "+f) {
				t.Errorf("%q: the manual does not describe %s", args, f)
			}
		}
	}
	_, out, _ := run("policy", "--help")
	if !strings.Contains(out, usagePolicyGenerate) || strings.Contains(out, "--model-endpoint ADDR") {
		t.Errorf("glove policy --help should list generate's usage, not its manual:\n%s", out)
	}
	_, _, errs := run("policy", "generate", "--bogus")
	if strings.Contains(errs, "--model-endpoint ADDR") {
		t.Errorf("a usage fault prints the manual:\n%s", errs)
	}
}
