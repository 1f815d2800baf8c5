// SPDX-License-Identifier: Apache-2.0

// Package harness says how each agent harness Glove knows runs inside a
// Glove sandbox: the arguments and environment of an interactive session
// (its terminal UI; a managed session's plan carries no prompt) that
// reach the model through a session's egress endpoint, and the host
// trees its tools need. `glove policy generate --model-endpoint` writes
// templates from it, and the tests that run the real harnesses take
// their settings from it, so the two cannot drift apart.
//
// What is known was read off the pinned versions (codex 0.171.0,
// claude-code 2.1.332; testenv/harnesses) with strace: with these
// settings the model endpoint is each harness's only peer.
package harness

import (
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strings"

	"github.com/glove-sandbox/glove/spec"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
)

// Runtime identifiers, as in a template's runtime_id and the discovery
// table.
const (
	Codex  = "codex"
	Claude = "claude-code"
)

// Runtimes lists the known harnesses.
func Runtimes() []string { return []string{Claude, Codex} }

// Known says whether runtime is a harness this package knows.
func Known(runtime string) bool { return slices.Contains(Runtimes(), runtime) }

// DefaultKeyEnv is the variable codex reads the model API key from when
// the operator names none (its custom provider's env_key). Not a GLOVE_
// name: those are Glove's own in a sandbox, and a launch setting one is
// refused.
const DefaultKeyEnv = "MODEL_API_KEY"

// ClaudeKeyEnv is where claude-code reads its API key; the name is
// claude-code's, not configurable.
const ClaudeKeyEnv = "ANTHROPIC_API_KEY"

// ProviderID is codex's custom model provider for the endpoint. codex's
// built-in providers' base URLs cannot be overridden, so the endpoint is
// reached through a provider of its own.
const ProviderID = "glove"

// Model is where a harness finds its model.
type Model struct {
	// BaseURL is the model server's root, http://HOST:PORT, without
	// /v1. Inside Glove it is EndpointURL of the session's egress
	// endpoint.
	BaseURL string
	// Name is the model to ask for. Required for codex (its default
	// model is one of its built-in provider's); empty leaves
	// claude-code's default.
	Name string
	// KeyEnv is the variable codex reads the API key from; empty is
	// DefaultKeyEnv. claude-code's is ClaudeKeyEnv, always.
	KeyEnv string
}

// EndpointURL is the base URL of an egress endpoint address, which must
// be exactly 127.0.0.1:PORT as in an egress policy.
func EndpointURL(addr string) (string, error) {
	if _, err := policy.EgressPort(addr); err != nil {
		return "", fmt.Errorf("model endpoint: %w", err)
	}
	return "http://" + addr, nil
}

// modelName is what a model name may be: it is written into a TOML
// string of codex's configuration and an argument of claude-code's, so
// nothing that needs quoting.
var modelName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}$`)

// reserved are environment names a template may not set
// (docs/policy.md, "Launch"): a key variable of that name would be
// refused by validation later, or collide with Glove's own.
var reserved = []string{"CODEX_HOME", "COPILOT_HOME", "HOME", "XDG_CONFIG_HOME"}

// check validates m for runtime rt.
func check(rt string, m Model) error {
	if !Known(rt) {
		return fmt.Errorf("runtime %q is not a known harness (one of %s)", rt, strings.Join(Runtimes(), ", "))
	}
	if m.BaseURL == "" {
		return fmt.Errorf("%s: no model base URL", rt)
	}
	if m.Name == "" && rt == Codex {
		return fmt.Errorf("codex: a model name is required (its default is its built-in provider's)")
	}
	if m.Name != "" && !modelName.MatchString(m.Name) {
		return fmt.Errorf("model name %q is not %s", m.Name, modelName)
	}
	if m.KeyEnv != "" {
		if rt != Codex {
			return fmt.Errorf("%s reads its key from %s; another variable cannot be named", rt, ClaudeKeyEnv)
		}
		if !spec.EnvVar(m.KeyEnv) || strings.HasPrefix(m.KeyEnv, "GLOVE_") || slices.Contains(reserved, m.KeyEnv) {
			return fmt.Errorf("key variable %q is not a NAME a template may set ([A-Za-z_][A-Za-z0-9_]*, not GLOVE_*, not %s)",
				m.KeyEnv, strings.Join(reserved, ", "))
		}
	}
	return nil
}

// KeyEnv is the variable runtime rt reads the model API key from.
func KeyEnv(rt string, m Model) string {
	if rt == Claude {
		return ClaudeKeyEnv
	}
	if m.KeyEnv != "" {
		return m.KeyEnv
	}
	return DefaultKeyEnv
}

// StateFile is a harness's own settings file that its interactive
// session needs from the start, in the private home, and what it must
// hold at first: claude-code's ~/.claude.json, saying its first run is
// done. That first run checks it can reach api.anthropic.com itself,
// whatever ANTHROPIC_BASE_URL says, and waits there for ever in a sandbox
// whose only peer is the gateway. ok is false for a harness that needs
// none. The operator gives it as a file credential: its lease carries
// what the harness records there (a trusted folder, an approved key's
// last characters) to the next session.
func StateFile(rt string) (path, seed string, ok bool) {
	if rt == Claude {
		return "/home/agent/.claude.json", `{"hasCompletedOnboarding": true}`, true
	}
	return "", "", false
}

// Arguments returns the arguments of runtime rt's interactive session.
//
// codex: every setting as `-c key=value`. A custom model provider at
// the base URL, Responses API, the key from KeyEnv. sandbox_mode
// danger-full-access: codex's own tool sandbox (bubblewrap, or Landlock
// with user namespaces) cannot run inside Glove, whose seccomp profile
// refuses new user namespaces (nested ones stay refused, deliberately),
// so in its other modes every shell tool call fails; Glove is the
// sandbox. approval_policy never, as the sandbox, not a prompt, is the
// boundary. Analytics, feedback, the update check, OpenTelemetry export
// and the plugins feature (which runs `git ls-remote` against GitHub and
// looks up chatgpt.com at start) are off, so the model endpoint is its
// only peer.
//
// claude-code: `--model NAME` when a name is given; its settings are
// environment (Environment). Its tool permission prompts stay: they are
// its operator's tool policy, answered by the person attached.
func Arguments(rt string, m Model) ([]string, error) {
	if err := check(rt, m); err != nil {
		return nil, err
	}
	if rt == Claude {
		if m.Name == "" {
			return []string{}, nil
		}
		return []string{"--model", m.Name}, nil
	}
	p := "model_providers." + ProviderID + "."
	return []string{
		"-c", "model_provider=" + ProviderID,
		"-c", p + `name="Glove model endpoint"`,
		"-c", p + fmt.Sprintf("base_url=%q", m.BaseURL+"/v1"),
		"-c", p + `wire_api="responses"`,
		"-c", p + fmt.Sprintf("env_key=%q", KeyEnv(rt, m)),
		"-c", fmt.Sprintf("model=%q", m.Name),
		"-c", `sandbox_mode="danger-full-access"`,
		"-c", `approval_policy="never"`,
		"-c", "analytics.enabled=false",
		"-c", "feedback.enabled=false",
		"-c", "check_for_update_on_startup=false",
		"-c", `otel.exporter="none"`,
		"-c", "features.plugins=false",
	}, nil
}

// Environment returns runtime rt's environment entries, sorted by name
// as a policy's must be. It holds no key: the key's variable (KeyEnv)
// is the operator's to deliver. HOME and CODEX_HOME are Glove's (the
// private home), TERM is Glove's for a session on a terminal, PATH is
// Glove's default.
//
// claude-code: ANTHROPIC_BASE_URL, and no telemetry, error reports,
// update checks or feature-flag fetches, so the model endpoint is its
// only peer.
func Environment(rt string, m Model) ([]string, error) {
	if err := check(rt, m); err != nil {
		return nil, err
	}
	env := []string{"LANG=C.UTF-8"}
	if rt == Claude {
		env = append(env,
			"ANTHROPIC_BASE_URL="+m.BaseURL,
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
			"DISABLE_AUTOUPDATER=1",
			"DISABLE_ERROR_REPORTING=1",
			"DISABLE_TELEMETRY=1",
		)
	}
	slices.SortFunc(env, func(a, b string) int {
		an, _, _ := strings.Cut(a, "=")
		bn, _, _ := strings.Cut(b, "=")
		return strings.Compare(an, bn)
	})
	return env, nil
}

// ReadOnlyPaths are the host trees a harness's tools need, read-only:
// the parts of a merged /usr a shell and its commands use (the sandbox
// links /bin, /sbin, /lib and /lib64 to the parts mounted), and
// /usr/lib64 for the x86-64 dynamic loader (claude-code's executable and
// bash are linked against glibc). Not /usr itself: a staged runtime in
// /usr/local/lib/glove-runtimes lies beneath it, and a read-only path
// may not contain a stage tree (docs/policy.md, "Launch"). Not
// /usr/local, the administrator's hierarchy.
func ReadOnlyPaths() []string {
	if runtime.GOARCH == "amd64" {
		return []string{"/usr/bin", "/usr/lib", "/usr/lib64", "/usr/sbin", "/usr/share"}
	}
	return []string{"/usr/bin", "/usr/lib", "/usr/sbin", "/usr/share"}
}
