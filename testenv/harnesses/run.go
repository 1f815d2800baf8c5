package harnesses

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// KeyEnv is the environment variable that carries the model API key to
// codex (its custom provider's env_key). claude-code reads its key from
// ANTHROPIC_API_KEY, a name it fixes. Not a GLOVE_ name: those are
// Glove's own in a sandbox, and a launch setting one is refused.
const KeyEnv = "MODEL_API_KEY"

// ProviderID is codex's custom model provider for the model server. The
// built-in providers' base URLs cannot be overridden, so the model server
// is reached through a provider of its own.
const ProviderID = "glove"

// Run describes one non-interactive harness run against a model server.
type Run struct {
	// Home is the harness's HOME. Home/.codex (codex's CODEX_HOME) and
	// Home/tmp (TMPDIR: claude-code's task output and its IPC socket,
	// /tmp/claude-UID and /tmp/cc-socks otherwise) must exist.
	Home string
	// BaseURL is the model server's root, http://HOST:PORT, without /v1.
	BaseURL string
	// Proxy, when set, is an HTTP proxy (http://HOST:PORT) both harnesses
	// send their model requests through: as HTTP_PROXY (codex and
	// claude-code) and HTTPS_PROXY (claude-code uses it for http:// too;
	// codex, rightly, only for https://).
	Proxy string
	// UnixSocket, when set, is a unix socket claude-code sends its model
	// requests over (ANTHROPIC_UNIX_SOCKET; BaseURL must then be
	// http://localhost, without it claude-code speaks TLS over the socket).
	// codex has no such setting: a unix:// base_url fails with "builder
	// error".
	UnixSocket string
	Key        string
	Model      string
	Prompt     string
}

// Args returns the arguments after the binary for a one-shot run.
//
// codex: `exec` runs one turn and exits; --skip-git-repo-check because the
// work directory is no repository; sandbox_mode danger-full-access because
// codex's own tool sandbox (bubblewrap or Landlock with user namespaces)
// cannot nest inside Glove's, and Glove is the sandbox; approval_policy
// never because nobody is there to approve; analytics, feedback and the
// update check and the plugins feature off so the only traffic is to the
// model provider.
//
// claude-code: -p (print mode) runs one prompt and exits;
// --allowedTools Bash lets the Bash tool run without a prompt while every
// other tool keeps asking (and so is refused in -p). bypassPermissions
// would also do, but claude-code refuses it as root unless IS_SANDBOX=1.
// The prompt follows "--" because --allowedTools takes several values.
func (h Harness) Args(r Run) []string {
	switch h.Name {
	case Codex.Name:
		p := "model_providers." + ProviderID + "."
		return []string{
			"exec", "--skip-git-repo-check",
			"-c", "model_provider=" + ProviderID,
			"-c", p + `name="Glove model server"`,
			"-c", p + fmt.Sprintf("base_url=%q", r.BaseURL+"/v1"),
			"-c", p + `wire_api="responses"`,
			"-c", p + fmt.Sprintf("env_key=%q", KeyEnv),
			// One request per model turn: a retry would hide a wrong
			// answer and make the request count vary.
			"-c", p + "request_max_retries=0",
			"-c", p + "stream_max_retries=0",
			"-c", fmt.Sprintf("model=%q", r.Model),
			"-c", `sandbox_mode="danger-full-access"`,
			"-c", `approval_policy="never"`,
			"-c", "analytics.enabled=false",
			"-c", "feedback.enabled=false",
			"-c", "check_for_update_on_startup=false",
			"-c", `otel.exporter="none"`,
			// The plugins feature runs `git ls-remote
			// https://github.com/openai/plugins` and looks up chatgpt.com
			// at start; analytics posts to ab.chatgpt.com. Both are off,
			// so the model provider is the only peer (strace-checked).
			"-c", "features.plugins=false",
			r.Prompt,
		}
	case Claude.Name:
		return []string{"-p", "--model", r.Model, "--allowedTools", "Bash", "--", r.Prompt}
	}
	return nil
}

// Env returns the harness's whole environment: nothing is inherited, so a
// developer's own keys, proxies and configuration never reach it.
func (h Harness) Env(r Run) []string {
	env := []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + r.Home,
		"LANG=C.UTF-8",
		"TMPDIR=" + filepath.Join(r.Home, "tmp"),
	}
	if r.Proxy != "" {
		env = append(env, "HTTP_PROXY="+r.Proxy, "HTTPS_PROXY="+r.Proxy)
	}
	switch h.Name {
	case Codex.Name:
		env = append(env,
			"CODEX_HOME="+filepath.Join(r.Home, ".codex"),
			KeyEnv+"="+r.Key,
		)
	case Claude.Name:
		env = append(env,
			"ANTHROPIC_BASE_URL="+r.BaseURL,
			"ANTHROPIC_API_KEY="+r.Key,
			// No telemetry, error reports, update checks or feature-flag
			// fetches: the model server is the only peer.
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
			"DISABLE_TELEMETRY=1",
			"DISABLE_ERROR_REPORTING=1",
			"DISABLE_AUTOUPDATER=1",
			// A scripted server answers or refuses at once; retries only
			// hide a wrong answer behind back-off.
			"CLAUDE_CODE_MAX_RETRIES=0",
		)
		if r.UnixSocket != "" {
			env = append(env, "ANTHROPIC_UNIX_SOCKET="+r.UnixSocket)
		}
	}
	return env
}

// TUIArgs turns codex's `exec` arguments (Args) into its interactive
// TUI's: no `exec`, no --skip-git-repo-check (the TUI asks nothing about
// it with danger-full-access), no prompt (the last argument).
func TUIArgs(args []string) []string {
	var out []string
	for i, a := range args {
		if a == "exec" || a == "--skip-git-repo-check" || i == len(args)-1 {
			continue
		}
		out = append(out, a)
	}
	return out
}

// KeyVar is the variable the harness reads its API key from.
func (h Harness) KeyVar() string {
	if h.Name == Claude.Name {
		return "ANTHROPIC_API_KEY"
	}
	return KeyEnv
}

// SandboxEnv is the harness's environment as a Glove runtime template
// gives it (Env, for a run whose Home is the private home): without HOME
// and CODEX_HOME, which Glove sets itself, without the API key (KeyVar),
// which a credential policy delivers so that it is in no launch field,
// digest or explain output, TMPDIR the sandbox's /tmp, sorted as a
// policy's environment must be.
func (h Harness) SandboxEnv(r Run) []string {
	var env []string
	for _, kv := range h.Env(r) {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "HOME", "CODEX_HOME", h.KeyVar():
		case "TMPDIR":
			env = append(env, "TMPDIR=/tmp")
		default:
			env = append(env, kv)
		}
	}
	slices.Sort(env)
	return env
}
