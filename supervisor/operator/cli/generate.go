package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/glove-sandbox/glove/spec"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/engine/discovery"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

const usagePolicyGenerate = "usage: glove policy generate --runtime R (--executable PATH | --search-path DIR...) --template-id ID" +
	" [--arg A]... [--env NAME=VALUE]... [--read-only-path P]... [--alias A]... [--destination D]... [--backend linux_production]"

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
	fs := newFlags("policy generate")
	runtime := fs.String("runtime", "", "runtime_id (with --search-path: a runtime_discovery value)")
	executable := fs.String("executable", "", "pinned executable (absolute; symbolic links are resolved)")
	templateID := fs.String("template-id", "", "runtime_template_id")
	backend := fs.String("backend", policy.BackendLinuxProduction, "sandbox_backend")
	var searchDirs, arguments, env, readOnly, aliases, destinations listFlag
	fs.Var(&searchDirs, "search-path", "discovery search directory (repeatable, in search order)")
	fs.Var(&arguments, "arg", "argument (repeatable, order kept)")
	fs.Var(&env, "env", "NAME=VALUE (repeatable)")
	fs.Var(&readOnly, "read-only-path", "read-only dependency path (repeatable)")
	fs.Var(&aliases, "alias", "allowed path alias (repeatable)")
	fs.Var(&destinations, "destination", "allowed projection destination (repeatable)")
	if code, done := parseFlags(fs, args, stdout, stderr, usagePolicyGenerate); done {
		return code
	}
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
	}

	t, note, err := buildTemplate(generateInput{
		runtime: *runtime, executable: *executable, templateID: *templateID, backend: *backend,
		searchDirs: searchDirs, arguments: arguments, env: env, readOnly: readOnly,
		aliases: aliases, destinations: destinations,
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
	fmt.Fprintf(stdout, "%s\n", out)
	return ExitOK
}

type generateInput struct {
	runtime, executable, templateID, backend string
	searchDirs, arguments, env, readOnly     []string
	aliases, destinations                    []string
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
	l.Arguments = append([]string{}, in.arguments...)
	if l.Environment, err = sortedEnvironment(in.env); err != nil {
		return nil, "", err
	}
	if l.ReadOnlyPaths, err = sortedUnique("--read-only-path", in.readOnly, cleanAbsolute); err != nil {
		return nil, "", err
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
