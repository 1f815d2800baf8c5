// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/glove-sandbox/glove/spec"
	"github.com/glove-sandbox/glove/supervisor/authority/harness"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/engine/discovery"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

const usagePolicyGenerate = "usage: glove policy generate --runtime R (--executable PATH | --search-path DIR...) --template-id ID" +
	" [--model-endpoint 127.0.0.1:PORT [--model NAME] [--key-env NAME]]" +
	" [--arg A]... [--env NAME=VALUE]... [--read-only-path P]... [--alias A]... [--destination D]... [--backend linux_production]"

// helpPolicyGenerate is what `glove policy generate --help` prints: the
// usage, then the manual (docs/policy.md, "Generating a template", says
// the same at length).
const helpPolicyGenerate = usagePolicyGenerate + `

Print one runtime_templates[] entry of a session policy, with its
adapter_command_digest, on stdout; notes go to stderr. The entry is
checked by the policy validator and against glove-mounter's source roots
before it is printed.

  --runtime R             the template's runtime_id; with --search-path a
                          runtime_discovery value (claude-code, codex,
                          copilot, opencode, pi); with --model-endpoint
                          codex or claude-code
  --executable PATH       a pinned executable (absolute; links resolved)
  --search-path DIR       a discovery directory, absolute and canonical
                          (repeatable, in search order); the adapter must
                          be found there now; for a staged runtime, the
                          search_path glove policy stage printed
  --template-id ID        the runtime_template_id
  --model-endpoint ADDR   a known harness (codex, claude-code) made to run
                          inside Glove: its interactive session's
                          arguments and environment reaching its model at
                          http://ADDR, the session's egress endpoint,
                          which must be exactly 127.0.0.1:PORT; its own
                          tool sandbox off (Glove is the sandbox: nested
                          user namespaces are refused); no telemetry or
                          update checks; /usr/bin, /usr/lib, /usr/sbin,
                          /usr/share (and /usr/lib64 on x86-64)
                          read-only for its tools. TERM, HOME and PATH are
                          left to Glove; the API key is not in the entry.
                          stderr says which egress policy entry to add
                          and which variable the key goes in
  --model NAME            the model to ask for (required for codex)
  --key-env NAME          codex only: the variable codex reads the key
                          from (default MODEL_API_KEY; claude-code reads
                          ANTHROPIC_API_KEY)
  --arg A                 an argument (repeatable, order kept; after a
                          harness's own)
  --env NAME=VALUE        an environment entry (repeatable; a NAME the
                          harness settings set is refused)
  --read-only-path P      a read-only dependency (repeatable; absolute,
                          clean, not resolved)
  --alias A               an allowed path alias (repeatable)
  --destination D         an allowed library projection destination
                          (repeatable)
  --backend B             the sandbox_backend (linux_production)

Exit 0 with the entry; 1 when discovery finds nothing; 2 for a usage
fault or any fault of the entry, with one "glove: policy generate:" line
on stderr.

Example (docs/harnesses.md):

  glove policy generate --runtime codex --template-id codex \
      --search-path /usr/local/lib/glove-runtimes/DIGEST/vendor/x86_64-unknown-linux-musl/bin \
      --model-endpoint 127.0.0.1:8787 --model gpt-5.1-codex --alias workspace`

// listFlag is a repeatable string flag; order is kept.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// generateFault is a fault of the generate command's input: a usage
// fault (exit 2) reported as one line.
type generateFault struct{ msg string }

func (f *generateFault) Error() string { return f.msg }

func faultGen(format string, a ...any) error {
	return &generateFault{fmt.Sprintf(format, a...)}
}

// generateFlags are glove policy generate's flags.
type generateFlags struct {
	runtime, executable, templateID, backend                    string
	endpoint, model, keyEnv                                     string
	searchDirs, arguments, env, readOnly, aliases, destinations listFlag
}

func (o *generateFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&o.runtime, "runtime", "", "runtime_id (with --search-path: a runtime_discovery value)")
	fs.StringVar(&o.executable, "executable", "", "pinned executable (absolute; symbolic links are resolved)")
	fs.StringVar(&o.templateID, "template-id", "", "runtime_template_id")
	fs.StringVar(&o.backend, "backend", policy.BackendLinuxProduction, "sandbox_backend")
	fs.StringVar(&o.endpoint, "model-endpoint", "", "a known harness's egress endpoint for its model, 127.0.0.1:PORT")
	fs.StringVar(&o.model, "model", "", "the model name (with --model-endpoint)")
	fs.StringVar(&o.keyEnv, "key-env", "", "codex's API key variable (with --model-endpoint)")
	fs.Var(&o.searchDirs, "search-path", "discovery search directory (repeatable, in search order)")
	fs.Var(&o.arguments, "arg", "argument (repeatable, order kept)")
	fs.Var(&o.env, "env", "NAME=VALUE (repeatable)")
	fs.Var(&o.readOnly, "read-only-path", "read-only dependency path (repeatable)")
	fs.Var(&o.aliases, "alias", "allowed path alias (repeatable)")
	fs.Var(&o.destinations, "destination", "allowed projection destination (repeatable)")
}

// policyGenerate runs `glove policy generate`: it prints one
// runtime_templates[] entry, with its adapter_command_digest computed,
// that the policy validator accepts. The executable (pinned) is
// canonicalized; search directories (discovery) are required canonical
// and never rewritten, since choosing a discovery root is a trust
// decision the operator must state literally; discovery must find the
// adapter in them now. Exit 0 with the entry on stdout; 1 when discovery
// finds nothing acceptable; 2 for usage faults and any fault of the
// entry.
func policyGenerate(args []string, stdout, stderr io.Writer) int {
	var o generateFlags
	fs := newFlags("policy generate")
	o.define(fs)
	runtime, executable, templateID, backend := &o.runtime, &o.executable, &o.templateID, &o.backend
	endpoint, model, keyEnv := &o.endpoint, &o.model, &o.keyEnv
	if code, done := parseFlagsHelp(fs, args, stdout, stderr, usagePolicyGenerate, helpPolicyGenerate); done {
		return code
	}
	searchDirs, arguments, env, readOnly, aliases, destinations := o.searchDirs, o.arguments, o.env, o.readOnly, o.aliases, o.destinations
	usageFault := func(msg string) int {
		fmt.Fprintf(stderr, "glove: policy generate: %s\n%s\n", msg, usagePolicyGenerate)
		return ExitUsage
	}
	switch {
	case *runtime == "":
		return usageFault("--runtime is required")
	case *templateID == "":
		return usageFault("--template-id is required")
	case *executable != "" && len(searchDirs) > 0:
		return usageFault("--executable and --search-path are exclusive: give exactly one")
	case *executable == "" && len(searchDirs) == 0:
		return usageFault("one of --executable or --search-path is required")
	case *endpoint == "" && (*model != "" || *keyEnv != ""):
		return usageFault("--model and --key-env go with --model-endpoint")
	}

	t, note, err := buildTemplate(generateInput{
		runtime: *runtime, executable: *executable, templateID: *templateID, backend: *backend,
		searchDirs: searchDirs, arguments: arguments, env: env, readOnly: readOnly,
		aliases: aliases, destinations: destinations,
		endpoint: *endpoint, model: *model, keyEnv: *keyEnv,
	})
	if err != nil {
		fmt.Fprintf(stderr, "glove: policy generate: %v\n", err)
		var gf *generateFault
		if errors.As(err, &gf) {
			return ExitUsage
		}
		return ExitFail
	}
	rootsLine, fault := checkSourceRoots(launchPaths("/runtime_templates/0", t))
	if fault != nil {
		fmt.Fprintf(stderr, "glove: policy generate: %v\n", fault)
		return ExitUsage
	}
	out, err := json.Marshal(t, jsontext.WithIndent("  "))
	if err != nil {
		fmt.Fprintf(stderr, "glove: policy generate: encode: %v\n", err)
		return ExitFail
	}
	if note != "" {
		note += "; "
	}
	fmt.Fprintf(stderr, "glove: policy generate: note: %s%s\n", note, rootsLine)
	if *endpoint != "" {
		if err := harnessNotes(stderr, t, *endpoint, *keyEnv); err != nil {
			fmt.Fprintf(stderr, "glove: policy generate: %v\n", err)
			return ExitFail
		}
	}
	fmt.Fprintf(stdout, "%s\n", out)
	return ExitOK
}

// egressPlaceholder is the upstream the printed egress policy entry
// names: a path the operator replaces with the model gateway's socket.
const egressPlaceholder = "/run/glove-gateway/model.sock"

// harnessNotes tells the operator, on stderr, what the rest of the
// policy needs for a harness template to reach its model: the egress
// policy entry (its upstream a placeholder), where the API key goes, and
// the profile that fits.
func harnessNotes(w io.Writer, t *policy.RuntimeTemplate, endpoint, keyEnv string) error {
	entry := policy.EgressPolicy{
		EgressPolicyID: "model-gateway",
		Endpoints: []policy.EgressEndpoint{{
			Address: endpoint, AllowPrivate: true,
			Upstream: policy.EgressUpstream{UnixSocket: egressPlaceholder},
		}},
	}
	b, err := json.Marshal(entry, jsontext.WithIndent("  "))
	if err != nil {
		return fmt.Errorf("encode the egress policy entry: %w", err)
	}
	fmt.Fprintf(w, "glove: policy generate: note: the template reaches its model at http://%s, an egress endpoint: add this entry to the policy's egress_policies"+
		" (and its id to egress_policy_ids), with the upstream your model gateway's unix socket instead of %s, and name it in the plan's egress_policy_ids:\n%s\n",
		endpoint, egressPlaceholder, b)
	key := harness.KeyEnv(t.RuntimeID, harness.Model{KeyEnv: keyEnv})
	if slices.ContainsFunc(t.Launch.Environment, func(kv string) bool { return strings.HasPrefix(kv, key+"=") }) {
		fmt.Fprintf(w, "glove: policy generate: note: %s is in the template's environment, so it is in the adapter digest and glove policy explain's output: let it be a placeholder and the gateway hold the real key, or give the key by a credential policy instead\n", key)
	} else {
		cred := policy.CredentialPolicy{Handle: t.RuntimeID + "-key", SourcePath: "/etc/glove/keys/" + t.RuntimeID + ".key", EnvironmentVariable: key, MaxBytes: 4096}
		b, err := json.Marshal(cred, jsontext.WithIndent("  "))
		if err != nil {
			return fmt.Errorf("encode the credential policy entry: %w", err)
		}
		fmt.Fprintf(w, "glove: policy generate: note: %s reads the model API key from %s: give it by a credential policy (its handle in secret_handles and in the plan's secret_handles; the source a file of the service user, mode 0600), so that the key is in no launch field, digest or explain output:\n%s\n", t.RuntimeID, key, b)
	}
	if path, seed, ok := harness.StateFile(t.RuntimeID); ok {
		cred := policy.CredentialPolicy{Handle: t.RuntimeID + "-state", SourcePath: "/etc/glove/keys/" + t.RuntimeID + "-state.json", DestinationPath: path, MaxBytes: 1 << 20}
		b, err := json.Marshal(cred, jsontext.WithIndent("  "))
		if err != nil {
			return fmt.Errorf("encode the state credential entry: %w", err)
		}
		fmt.Fprintf(w, "glove: policy generate: note: %s's interactive session needs its settings file %s from the start (its first run otherwise waits for ever on a server only the gateway could reach): give it by a file credential whose source first holds %s (the lease keeps what %s records there for the next session, one session at a time):\n%s\n", t.RuntimeID, path, seed, t.RuntimeID, b)
	}
	fmt.Fprintf(w, "glove: policy generate: note: the shipped resource profile %q fits a harness session (docs/policy.md, \"Shipped profiles\")\n", policy.ProfileHarness.ProfileID)
	return nil
}

type generateInput struct {
	runtime, executable, templateID, backend string
	searchDirs, arguments, env, readOnly     []string
	aliases, destinations                    []string
	// endpoint, model, keyEnv: a known harness's settings
	// (supervisor/authority/harness), when endpoint is set.
	endpoint, model, keyEnv string
}

// buildTemplate assembles and validates the entry. A *generateFault is a
// usage fault; any other error is discovery failing (nothing acceptable
// installed). note is what the operator should know on stderr.
func buildTemplate(in generateInput) (*policy.RuntimeTemplate, string, error) {
	t := &policy.RuntimeTemplate{
		RuntimeTemplateID: in.templateID,
		RuntimeID:         in.runtime,
		SandboxBackend:    in.backend,
	}
	if !policy.ValidIdentifier(in.templateID) {
		return nil, "", faultGen("--template-id %q is not an identifier (%s)", in.templateID, policy.IdentifierPattern)
	}
	if !policy.ValidIdentifier(in.runtime) {
		return nil, "", faultGen("--runtime %q is not an identifier (%s)", in.runtime, policy.IdentifierPattern)
	}
	var err error
	if t.AllowedPathAliases, err = sortedUnique("--alias", in.aliases, identifierCheck); err != nil {
		return nil, "", err
	}
	if t.AllowedProjectionDestinations, err = sortedUnique("--destination", in.destinations, identifierCheck); err != nil {
		return nil, "", err
	}
	l := &t.Launch
	args, env, readOnly, err := harnessSettings(in)
	if err != nil {
		return nil, "", err
	}
	l.Arguments = append(args, in.arguments...)
	if l.Environment, err = sortedEnvironment(append(env, in.env...)); err != nil {
		return nil, "", err
	}
	if l.ReadOnlyPaths, err = sortedUnique("--read-only-path", append(readOnly, in.readOnly...), cleanAbsolute); err != nil {
		return nil, "", err
	}
	if in.endpoint != "" {
		// What a harness reads of /etc, and no more (docs/policy.md,
		// "Host files"): the CA certificates (claude-code loads the
		// system store at start, and either harness needs it behind a
		// gateway that speaks TLS), and a name service naming the
		// sandbox user (codex looks its user up in /etc/passwd).
		l.HostFiles = []string{policy.HostFilesCA, policy.HostFilesNameService}
	}

	var note string
	if in.executable != "" {
		p, err := pinnedExecutable(in.executable)
		if err != nil {
			return nil, "", err
		}
		l.ExecutablePath = p
		if p != in.executable {
			note = fmt.Sprintf("--executable %s resolves to %s; the template pins %s", in.executable, p, p)
		}
	} else {
		if _, ok := policy.DiscoveryExecutable(in.runtime); !ok {
			return nil, "", faultGen("--runtime %q is not a runtime_discovery runtime (one of %s), required with --search-path",
				in.runtime, strings.Join(policy.DiscoveryRuntimes(), ", "))
		}
		for i, d := range in.searchDirs {
			if err := canonicalSearchDir(d); err != nil {
				return nil, "", err
			}
			if j := slices.Index(in.searchDirs[:i], d); j >= 0 {
				return nil, "", faultGen("--search-path %q is given twice", d)
			}
		}
		l.RuntimeDiscovery = in.runtime
		l.ExecutableSearchPaths = append([]string{}, in.searchDirs...)
	}
	t.AdapterCommandDigest = policy.AdapterDigest(t)
	if err := validateTemplate(t); err != nil {
		return nil, "", &generateFault{err.Error()}
	}
	if l.RuntimeDiscovery != "" {
		// Last, so a template fault is reported without touching the
		// filesystem; discovery failing is the command failing (exit 1).
		f, err := discovery.Find(l.RuntimeDiscovery, l.ExecutableSearchPaths)
		if err != nil {
			return nil, "", fmt.Errorf("%v%s", err, rejections(f.Rejected))
		}
		note = fmt.Sprintf("%s found %s (%s)%s", f.Runtime, f.Path, f.Identity, rejections(f.Rejected))
	}
	return t, note, nil
}

// harnessSettings are a known harness's arguments, environment and
// read-only paths for --model-endpoint (none without it). An operator's
// --env or --read-only-path that repeats one of them is refused, naming
// the harness's, rather than reported as given twice.
func harnessSettings(in generateInput) (args, env, readOnly []string, err error) {
	if in.endpoint == "" {
		return nil, nil, nil, nil
	}
	if !harness.Known(in.runtime) {
		return nil, nil, nil, faultGen("--model-endpoint: --runtime %q is not a known harness (one of %s)", in.runtime, strings.Join(harness.Runtimes(), ", "))
	}
	base, err := harness.EndpointURL(in.endpoint)
	if err != nil {
		return nil, nil, nil, faultGen("%v", err)
	}
	m := harness.Model{BaseURL: base, Name: in.model, KeyEnv: in.keyEnv}
	if args, err = harness.Arguments(in.runtime, m); err != nil {
		return nil, nil, nil, faultGen("%v", err)
	}
	if env, err = harness.Environment(in.runtime, m); err != nil {
		return nil, nil, nil, faultGen("%v", err)
	}
	for _, e := range in.env {
		name, _, _ := strings.Cut(e, "=")
		if slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") }) {
			return nil, nil, nil, faultGen("--env %s: the %s settings set it", name, in.runtime)
		}
	}
	readOnly = harness.ReadOnlyPaths()
	for _, p := range in.readOnly {
		if slices.Contains(readOnly, p) {
			return nil, nil, nil, faultGen("--read-only-path %s: the %s settings have it", p, in.runtime)
		}
	}
	return args, env, readOnly, nil
}

// rejections renders the directories discovery passed over, on one line.
func rejections(rs []discovery.Rejected) string {
	if len(rs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("; passed over: ")
	for i, r := range rs {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", r.Dir, r.Reason)
	}
	return b.String()
}

func identifierCheck(flag, s string) error {
	if !policy.ValidIdentifier(s) {
		return faultGen("%s %q is not an identifier (%s)", flag, s, policy.IdentifierPattern)
	}
	return nil
}

// cleanAbsolute requires an absolute path in clean form; it does not
// touch the filesystem (a read-only dependency is the operator's choice,
// stated literally, like a search directory).
func cleanAbsolute(flag, p string) error {
	if !filepath.IsAbs(p) {
		return faultGen("%s %q is not absolute", flag, p)
	}
	if c := filepath.Clean(p); c != p {
		return faultGen("%s %q is not canonical (it cleans to %q)", flag, p, c)
	}
	return nil
}

// sortedUnique checks every value, refuses a repeat (rather than
// dropping it: a repeat usually means a typo elsewhere) and returns the
// values in byte order, the canonical order the policy requires.
func sortedUnique(flag string, vs []string, check func(flag, v string) error) ([]string, error) {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		if err := check(flag, v); err != nil {
			return nil, err
		}
		if slices.Contains(out, v) {
			return nil, faultGen("%s %q is given twice", flag, v)
		}
		out = append(out, v)
	}
	slices.Sort(out)
	return out, nil
}

// sortedEnvironment checks NAME=VALUE entries and sorts them by NAME;
// a NAME given twice is refused.
func sortedEnvironment(env []string) ([]string, error) {
	out := make([]string, 0, len(env))
	seen := map[string]bool{}
	for _, e := range env {
		name, _, ok := strings.Cut(e, "=")
		if !ok || !spec.EnvVar(name) {
			return nil, faultGen("--env %q is not NAME=VALUE with NAME matching [A-Za-z_][A-Za-z0-9_]*", e)
		}
		if seen[name] {
			return nil, faultGen("--env %s is given twice", name)
		}
		seen[name] = true
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b string) int {
		an, _, _ := strings.Cut(a, "=")
		bn, _, _ := strings.Cut(b, "=")
		return strings.Compare(an, bn)
	})
	return out, nil
}

// pinnedExecutable resolves an absolute --executable to its canonical
// path (every symbolic link followed) and requires a regular, executable
// file there.
func pinnedExecutable(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", faultGen("--executable %q is not absolute", p)
	}
	c, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", faultGen("--executable %s: %v", p, err)
	}
	st, err := os.Stat(c)
	if err != nil {
		return "", faultGen("--executable %s: %v", p, err)
	}
	if !st.Mode().IsRegular() {
		return "", faultGen("--executable %s (%s) is not a regular file", p, c)
	}
	if st.Mode().Perm()&0o111 == 0 {
		return "", faultGen("--executable %s (%s) is not executable (mode %04o)", p, c, st.Mode().Perm())
	}
	return c, nil
}

// canonicalSearchDir requires d absolute and canonical: clean, and (when
// it exists) naming itself rather than a symbolic link's target. It is
// refused, never rewritten: a discovery root is a trust decision.
func canonicalSearchDir(d string) error {
	if !filepath.IsAbs(d) {
		return faultGen("--search-path %q is not absolute", d)
	}
	if c := filepath.Clean(d); c != d {
		return faultGen("--search-path %q is not canonical (its canonical form is %q); give it as written there", d, c)
	}
	// A directory that does not resolve is left to discovery, which
	// names why it passes it over.
	if c, err := filepath.EvalSymlinks(d); err == nil && c != d {
		return faultGen("--search-path %q is not canonical (its canonical form is %q); give it as written there", d, c)
	}
	return nil
}

// validateTemplate runs the policy validator on t: a minimal policy is
// built around it in memory. The allowed alias and destination lists
// are checked as identifier lists here and left out of the copy given to
// policy.Validate, since they name definitions of the policy the entry
// will be placed in (no host path is invented for them); they are not
// part of the adapter digest. The scaffold's own members (revision, one
// resource profile) are fixed values that pass, so the first fault is
// the template's.
func validateTemplate(t *policy.RuntimeTemplate) error {
	const at = "/runtime_templates/0"
	if err := policy.CheckIdentifierList(at+"/allowed_path_aliases", t.AllowedPathAliases); err != nil {
		return err
	}
	if err := policy.CheckIdentifierList(at+"/allowed_projection_destinations", t.AllowedProjectionDestinations); err != nil {
		return err
	}
	c := *t
	c.AllowedPathAliases, c.AllowedProjectionDestinations = nil, nil
	p := &policy.Policy{
		SchemaVersion:    policy.SchemaVersion,
		Revision:         1,
		MaxPlanTTLMs:     1 + policy.LaunchHeadroomMs,
		RuntimeTemplates: []policy.RuntimeTemplate{c},
		ResourceProfiles: []policy.ResourceProfile{{
			ProfileID: "generate", CPUTimeMs: 1, MemoryBytes: 1, Pids: 1,
			WallTimeMs: 1, DiskBytes: 1, TerminalOutputBytes: 1,
		}},
	}
	return policy.Validate(p)
}
