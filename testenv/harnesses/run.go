// SPDX-License-Identifier: Apache-2.0

package harnesses

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/glove-sandbox/glove/supervisor/authority/harness"
)

// KeyEnv is the environment variable that carries the model API key to
// codex (its custom provider's env_key). claude-code reads its key from
// ANTHROPIC_API_KEY, a name it fixes.
const KeyEnv = harness.DefaultKeyEnv

// ProviderID is codex's custom model provider for the model server.
const ProviderID = harness.ProviderID

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

// Args returns the arguments after the binary for a one-shot run: the
// interactive session's (supervisor/authority/harness, what `glove
// policy generate` writes into a template) turned into one turn.
//
// codex: `exec` runs one turn and exits; --skip-git-repo-check because the
// work directory is no repository; no retries (sessionArgs).
//
// claude-code: -p (print mode) runs one prompt and exits;
// --allowedTools Bash lets the Bash tool run without a prompt while every
// other tool keeps asking (and so is refused in -p). bypassPermissions
// would also do, but claude-code refuses it as root unless IS_SANDBOX=1.
// The prompt follows "--" because --allowedTools takes several values.
func (h Harness) Args(r Run) []string {
	base := h.sessionArgs(r)
	switch h.Name {
	case Codex.Name:
		return slices.Concat([]string{"exec", "--skip-git-repo-check"}, base, []string{r.Prompt})
	case Claude.Name:
		return slices.Concat([]string{"-p"}, base, []string{"--allowedTools", "Bash", "--", r.Prompt})
	}
	return nil
}

// sessionArgs are the interactive session's arguments, and for codex the
// tests' own: one request per model turn, since a retry would hide a
// wrong answer and make the request count vary.
func (h Harness) sessionArgs(r Run) []string {
	args, err := harness.Arguments(h.Name, h.model(r))
	if err != nil {
		// The tests' settings are fixed values; a fault is a test's bug.
		panic(fmt.Sprintf("harness settings: %v", err))
	}
	if h.Name == Codex.Name {
		p := "model_providers." + ProviderID + "."
		args = append(args, "-c", p+"request_max_retries=0", "-c", p+"stream_max_retries=0")
	}
	return args
}

func (h Harness) model(r Run) harness.Model {
	return harness.Model{BaseURL: r.BaseURL, Name: r.Model}
}

// Env returns the harness's whole environment for a run on the host:
// nothing is inherited, so a developer's own keys, proxies and
// configuration never reach it. It is SandboxEnv with what Glove gives
// a session itself (PATH, HOME, CODEX_HOME) and a private TMPDIR
// (claude-code's task output and its IPC socket, /tmp/claude-UID and
// /tmp/cc-socks otherwise).
func (h Harness) Env(r Run) []string {
	env := []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=" + r.Home,
		"TMPDIR=" + filepath.Join(r.Home, "tmp"),
	}
	if r.Proxy != "" {
		env = append(env, "HTTP_PROXY="+r.Proxy, "HTTPS_PROXY="+r.Proxy)
	}
	if h.Name == Codex.Name {
		env = append(env, "CODEX_HOME="+filepath.Join(r.Home, ".codex"))
	}
	if h.Name == Claude.Name && r.UnixSocket != "" {
		env = append(env, "ANTHROPIC_UNIX_SOCKET="+r.UnixSocket)
	}
	env = append(env, h.KeyVar()+"="+r.Key)
	return append(env, h.SandboxEnv(r)...)
}

// KeyVar is the variable the harness reads its API key from.
func (h Harness) KeyVar() string { return harness.KeyEnv(h.Name, harness.Model{}) }

// TUIArgs are the arguments of the harness's interactive session, as a
// generated template has them (with the tests' no-retry settings).
func (h Harness) TUIArgs(r Run) []string { return h.sessionArgs(r) }

// SandboxEnv is the harness's environment as a Glove runtime template
// gives it: a generated template's (supervisor/authority/harness), and
// for claude-code no retries (a scripted server answers or refuses at
// once; retries only hide a wrong answer behind back-off); sorted by name
// as a policy's environment must be. Not the API key (KeyVar): a
// credential policy delivers it as that variable, so that it is in no
// launch field, digest or explain output.
func (h Harness) SandboxEnv(r Run) []string {
	m := h.model(r)
	env, err := harness.Environment(h.Name, m)
	if err != nil {
		panic(fmt.Sprintf("harness settings: %v", err))
	}
	if h.Name == Claude.Name {
		env = append(env, "CLAUDE_CODE_MAX_RETRIES=0")
	}
	slices.SortFunc(env, func(a, b string) int {
		an, _, _ := strings.Cut(a, "=")
		bn, _, _ := strings.Cut(b, "=")
		return strings.Compare(an, bn)
	})
	return env
}
