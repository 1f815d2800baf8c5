// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestEndpointURL(t *testing.T) {
	for _, c := range []struct {
		addr, want string
		ok         bool
	}{
		{"127.0.0.1:8787", "http://127.0.0.1:8787", true},
		{"127.0.0.1:1", "http://127.0.0.1:1", true},
		{"127.0.0.1:65535", "http://127.0.0.1:65535", true},
		{"localhost:8787", "", false},
		{"0.0.0.0:8787", "", false},
		{"127.0.0.2:8787", "", false},
		{"[::1]:8787", "", false},
		{"127.0.0.1:08787", "", false},
		{"127.0.0.1:0", "", false},
		{"127.0.0.1:65536", "", false},
		{"127.0.0.1", "", false},
		{"http://127.0.0.1:8787", "", false},
		{"127.0.0.1:8787,127.0.0.1:8788", "", false},
	} {
		got, err := EndpointURL(c.addr)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("EndpointURL(%q) = %q, %v; want %q, ok %v", c.addr, got, err, c.want, c.ok)
		}
	}
}

func TestSettings(t *testing.T) {
	base := "http://127.0.0.1:8787"
	for _, c := range []struct {
		name   string
		rt     string
		m      Model
		args   []string // nil: only checked for a fault
		env    []string
		keyEnv string
		fault  string
	}{
		{name: "codex", rt: Codex, m: Model{BaseURL: base, Name: "gpt-5.1-codex"}, keyEnv: "MODEL_API_KEY",
			args: []string{"-c", "model_provider=glove", "-c", `model_providers.glove.name="Glove model endpoint"`,
				"-c", `model_providers.glove.base_url="http://127.0.0.1:8787/v1"`, "-c", `model_providers.glove.wire_api="responses"`,
				"-c", `model_providers.glove.env_key="MODEL_API_KEY"`, "-c", `model="gpt-5.1-codex"`,
				"-c", `sandbox_mode="danger-full-access"`, "-c", `approval_policy="never"`, "-c", "analytics.enabled=false",
				"-c", "feedback.enabled=false", "-c", "check_for_update_on_startup=false", "-c", `otel.exporter="none"`,
				"-c", "features.plugins=false"},
			env: []string{"LANG=C.UTF-8"}},
		{name: "codex key variable", rt: Codex, m: Model{BaseURL: base, Name: "m", KeyEnv: "OPENAI_API_KEY"}, keyEnv: "OPENAI_API_KEY"},
		{name: "claude default model", rt: Claude, m: Model{BaseURL: base}, keyEnv: "ANTHROPIC_API_KEY", args: []string{},
			env: []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:8787", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
				"DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1", "DISABLE_TELEMETRY=1", "LANG=C.UTF-8"}},
		{name: "claude model", rt: Claude, m: Model{BaseURL: base, Name: "claude-sonnet-4-5"}, keyEnv: "ANTHROPIC_API_KEY",
			args: []string{"--model", "claude-sonnet-4-5"}},
		{name: "unknown runtime", rt: "pi", m: Model{BaseURL: base, Name: "m"}, fault: "not a known harness"},
		{name: "codex without model", rt: Codex, m: Model{BaseURL: base}, fault: "model name is required"},
		{name: "no base URL", rt: Claude, m: Model{}, fault: "no model base URL"},
		{name: "model needing quotes", rt: Codex, m: Model{BaseURL: base, Name: `a"b`}, fault: "is not"},
		{name: "model with space", rt: Claude, m: Model{BaseURL: base, Name: "a b"}, fault: "is not"},
		{name: "claude key variable", rt: Claude, m: Model{BaseURL: base, KeyEnv: "K"}, fault: "cannot be named"},
		{name: "GLOVE_ key", rt: Codex, m: Model{BaseURL: base, Name: "m", KeyEnv: "GLOVE_KEY"}, fault: "not a NAME"},
		{name: "HOME key", rt: Codex, m: Model{BaseURL: base, Name: "m", KeyEnv: "HOME"}, fault: "not a NAME"},
		{name: "bad key name", rt: Codex, m: Model{BaseURL: base, Name: "m", KeyEnv: "1KEY"}, fault: "not a NAME"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args, aerr := Arguments(c.rt, c.m)
			env, eerr := Environment(c.rt, c.m)
			if c.fault != "" {
				if aerr == nil || eerr == nil || !strings.Contains(aerr.Error(), c.fault) {
					t.Fatalf("Arguments: %v, Environment: %v; want a fault with %q", aerr, eerr, c.fault)
				}
				return
			}
			if aerr != nil || eerr != nil {
				t.Fatalf("Arguments: %v, Environment: %v", aerr, eerr)
			}
			if c.args != nil && !slices.Equal(args, c.args) {
				t.Errorf("arguments\n%q\nwant\n%q", args, c.args)
			}
			if c.env != nil && !slices.Equal(env, c.env) {
				t.Errorf("environment\n%q\nwant\n%q", env, c.env)
			}
			if k := KeyEnv(c.rt, c.m); k != c.keyEnv {
				t.Errorf("KeyEnv %q, want %q", k, c.keyEnv)
			}
			if c.rt == Codex && !slices.Contains(args, `model_providers.glove.env_key="`+c.keyEnv+`"`) {
				t.Errorf("codex's env_key is not %s: %q", c.keyEnv, args)
			}
			for _, kv := range env {
				if strings.HasPrefix(kv, c.keyEnv+"=") || strings.HasPrefix(kv, "TERM=") || strings.HasPrefix(kv, "HOME=") {
					t.Errorf("the environment sets %s: the key and TERM are not the template's", kv)
				}
			}
		})
	}
}

// TestReadOnlyPaths: sorted, unique, none nested, all beneath /usr and
// none containing the documented runtime directory.
func TestReadOnlyPaths(t *testing.T) {
	ro := ReadOnlyPaths()
	if !slices.IsSorted(ro) {
		t.Errorf("%q is not sorted", ro)
	}
	for i, p := range ro {
		if !strings.HasPrefix(p, "/usr/") || strings.Count(p, "/") != 2 {
			t.Errorf("%s is not a directory of /usr", p)
		}
		if i > 0 && ro[i-1] == p {
			t.Errorf("%s twice", p)
		}
		if strings.HasPrefix("/usr/local/lib/glove-runtimes/", p+"/") {
			t.Errorf("%s contains the runtime directory", p)
		}
	}
}

// TestStateFile: only claude-code needs a settings file from the start,
// in the private home, and its seed is the JSON that ends its first run.
func TestStateFile(t *testing.T) {
	for _, rt := range Runtimes() {
		path, seed, ok := StateFile(rt)
		if ok != (rt == Claude) {
			t.Errorf("%s: state file %v", rt, ok)
		}
		if !ok {
			continue
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(seed), &v); err != nil || v["hasCompletedOnboarding"] != true {
			t.Errorf("%s: seed %q: %v", rt, seed, err)
		}
		if !strings.HasPrefix(path, "/home/agent/") {
			t.Errorf("%s: %s is not in the private home", rt, path)
		}
	}
}
