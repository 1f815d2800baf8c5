// SPDX-License-Identifier: Apache-2.0

// Package cli is the `glove` command line for operators.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/captable/captext"
	"github.com/glove-sandbox/glove/supervisor/engine/helperproc"
)

// LibexecDir is where the helpers are installed; the Makefile sets it
// from PREFIX at build time.
var LibexecDir = "/usr/local/libexec/glove"

// Version is the release; the Makefile may set it.
var Version = "dev"

// Exit statuses.
const (
	ExitOK    = 0
	ExitFail  = 1
	ExitUsage = 2
)

const usage = `usage:
  glove COMMAND --help          print a command's (or group's) usage; also -h, glove GROUP help
  glove help                    print this
  glove version                 print the version
  glove captable [--fields]     print the capability table (helper -> file capabilities);
                                --fields: one line a row, for scripts
  glove helpers [--libexec DIR] start each installed helper, ask Hello, print its
                                name, protocol and live capability sets
                                (run as a member of the glove service group)
  glove status [--json] [--libexec DIR] [--session-store DIR] [--socket PATH]
                                probe what this host can enforce (user namespaces, Landlock,
                                seccomp, cgroups, loop devices, mkfs.ext4, installed helpers)
                                and gloved's store (journal use, free space);
                                exit 1 unless a sandboxed session has all it needs
  glove setup service [--runtime R (--executable PATH | --search-path DIR...) [--template-id ID]
        [--arg A]... [--env N=V]... [--read-only-path P]...] [--config-dir DIR] [--user NAME]
        [--session-store DIR]
                                as root: write what gloved's unit needs, each file only if it is
                                missing (never over one): the receipt key, gloved.env with a
                                fresh anchor (printed once, for the controller), and a starter
                                session policy for runtime R (ten-minute plans; profiles small,
                                2 min, and interactive, 5 min)
  glove store compact [--session-store DIR] [--receipt-key K --receipt-anchor HEX]
                                compact a stopped gloved's journals (as the service user;
                                a running gloved compacts them on its own)
  glove policy validate --file F
                                check a session policy (docs/policy.md); print a summary,
                                or exit 2 with the first fault and its JSON path
  glove policy explain --file F [--json]
                                what a valid policy authorizes, in words or as JSON
  glove policy detect --search-path DIR [--search-path DIR]... [--json]
                                for each runtime_discovery adapter, the executable those
                                directories (in order, never PATH) would yield and its
                                identity, or why each directory was passed over
  glove policy stage --runtime R --source PATH --directory DIR (--dry-run | --yes) [--json]
                                content-address a package closure and copy it into DIR/<digest>,
                                a protected runtime directory discovery admits; never overwrites
  glove policy generate --runtime R (--executable PATH | --search-path DIR...) --template-id ID
        [--model-endpoint 127.0.0.1:PORT [--model NAME] [--key-env NAME]]
        [--arg A]... [--env N=V]... [--read-only-path P]... [--alias A]... [--destination D]...
                                print one runtime_templates[] entry with its adapter digest;
                                --model-endpoint: codex or claude-code set up to run inside
                                Glove, reaching its model through that egress endpoint
  glove plan validate --policy F --plan P
                                check a plan (docs/plan.md) against a policy now; print its
                                plan_content_digest, or exit 2 with the first mismatch
                                (policy and plan files: mode 0600, owned by you, one link)
  glove run [--workspace DIR] [--profile small|medium|harness] [--limit NAME=VALUE]... -- CMD [ARGS...]
                                run CMD in a sandbox: host /usr and /etc read-only, a copy of
                                the workspace (default: the current directory) at /workspace,
                                no network, the profile's six limits; exits with CMD's status
                                (128+N for signal N), 125 when Glove fails before CMD starts
  glove run --policy F --plan P [--materialization-root DIR] [--library-bundle-root DIR]
        [--receipt FILE --receipt-key K [--receipt-anchor HEX]]
                                run the session a plan selects from a policy, as gloved would;
                                --receipt writes its HMAC-authenticated terminal receipt
  glove receipt verify --key K [--anchor HEX] FILE
                                check the MACs and chain of a receipt (or a JSON list of them)
                                and print what each says
  glove seccomp dump [--pfc | --raw] [--inherited-fd N]...
                                the sandbox's default seccomp filter as libseccomp compiles
                                it: BPF one instruction per line, raw bytes, or pseudo-filter
                                code; --inherited-fd (0..1023, repeatable) binds the profile
                                to a committed inherited descriptor range
  glove call [--socket PATH] METHOD [PARAMS-JSON]
                                send one request to gloved (docs/protocol.md) and print the
                                result; attach prints the session's output until it ends and
                                exits with its status (default socket /run/glove/gloved.sock)
  glove attach [--socket PATH] SESSION_ID
                                attach to a running session interactively: its output on
                                stdout; on a terminal, raw mode, keys sent with write_stdin,
                                the size sent with resize (at once and on SIGWINCH); Ctrl-] d
                                detaches (the session keeps running), Ctrl-] Ctrl-] sends
                                Ctrl-]; exits with the session's status, 0 when detached
`

// Run runs the command line and returns the exit status.
func Run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return ExitUsage
	}
	if u, ok := helpAsked(args); ok {
		fmt.Fprintln(stdout, u)
		return ExitOK
	}
	switch args[0] {
	case "--version":
		args = []string{"version"}
	case "-h", "--help":
		args = []string{"help"}
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "glove: unknown command %q\n%s", args[0], usage)
		return ExitUsage
	}
	name, rest := args[0], args[1:]
	for c.subs != nil {
		sub, ok := c.subs[firstOf(rest)]
		if !ok {
			fault := "missing subcommand"
			if len(rest) > 0 {
				fault = fmt.Sprintf("unknown subcommand %q", rest[0])
			}
			fmt.Fprintf(stderr, "glove: %s: %s\n%s\n", name, fault, subUsages(c))
			return ExitUsage
		}
		name, c, rest = name+" "+rest[0], sub, rest[1:]
	}
	return c.run(rest, stdout, stderr)
}

func firstOf(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

// Usages of the commands that have no file of their own.
const (
	usageHelp     = "usage: glove help"
	usageVersion  = "usage: glove version"
	usageCaptable = "usage: glove captable [--fields]"
	usageHelpers  = "usage: glove helpers [--libexec DIR]"
	usageStatus   = "usage: glove status [--json] [--libexec DIR] [--session-store DIR] [--socket PATH]"
	usageStore    = "usage: glove store compact [--session-store DIR] [--receipt-key FILE --receipt-anchor HEX]"
)

// command is one of glove's commands, or a group of subcommands.
type command struct {
	// usage is what -h, -help or --help prints (for some, the usage and
	// a manual after a blank line).
	usage string
	// flags defines the command's flags on a flag set: the very
	// function the command parses its arguments with, so the man page's
	// and the completion's tests (man_test.go) see exactly the flags
	// glove accepts. Nil: the command takes no flag.
	flags func(*flag.FlagSet)
	// run runs the command with the arguments after its name; nil for
	// a group, whose subcommand Run finds in subs.
	run func(args []string, stdout, stderr io.Writer) int
	// subs are a group's subcommands.
	subs map[string]*command
}

// commands are glove's commands: Run runs only what is here, so help,
// the man page and the completion see every command there is. docs/man/glove.1 and packaging/completion/glove are
// checked against this table.
var commands = map[string]*command{
	"help":     {usage: usageHelp, run: helpCommand},
	"version":  {usage: usageVersion, run: versionCommand},
	"captable": {usage: usageCaptable, flags: flagsOf[captableFlags](), run: captableCommand},
	"helpers":  {usage: usageHelpers, flags: flagsOf[helpersFlags](), run: helpers},
	"status":   {usage: usageStatus, flags: flagsOf[statusFlags](), run: statusCommand},
	"store": {subs: map[string]*command{
		"compact": {usage: usageStore, flags: flagsOf[storeFlags](), run: storeCompact},
	}},
	"setup": {subs: map[string]*command{
		"service": {usage: helpSetupService, flags: flagsOf[setupFlags](), run: setupServiceCommand},
	}},
	"policy": {subs: map[string]*command{
		"validate": {usage: usagePolicyValidate, flags: flagsOf[policyValidateFlags](), run: policyValidate},
		"explain":  {usage: usagePolicyExplain, flags: flagsOf[policyExplainFlags](), run: policyExplain},
		"detect":   {usage: usagePolicyDetect, flags: flagsOf[detectFlags](), run: policyDetect},
		"stage":    {usage: usagePolicyStage, flags: flagsOf[stageFlags](), run: policyStage},
		"generate": {usage: helpPolicyGenerate, flags: flagsOf[generateFlags](), run: policyGenerate},
	}},
	"plan": {subs: map[string]*command{
		"validate": {usage: usagePlanValidate, flags: flagsOf[planValidateFlags](), run: planValidate},
	}},
	"receipt": {subs: map[string]*command{
		"verify": {usage: usageReceipt, flags: flagsOf[receiptFlags](), run: receiptVerify},
	}},
	"seccomp": {subs: map[string]*command{
		"dump": {usage: usageSeccompDump, flags: flagsOf[seccompFlags](), run: seccompDump},
	}},
	"run": {usage: usageRun, flags: flagsOf[runFlags](), run: func(args []string, stdout, stderr io.Writer) int {
		return runCommand(args, os.Stdin, stdout, stderr)
	}},
	"call": {usage: usageCall, flags: flagsOf[callFlags](), run: callCommand},
	"attach": {usage: usageAttach, flags: flagsOf[callFlags](), run: func(args []string, stdout, stderr io.Writer) int {
		return attachCommand(args, os.Stdin, stdout, stderr)
	}},
}

// flagsOf is the flags function of a command whose options are a T:
// *T's define binds each flag to a field.
func flagsOf[T any, P interface {
	*T
	define(*flag.FlagSet)
}]() func(*flag.FlagSet) {
	return func(fs *flag.FlagSet) { P(new(T)).define(fs) }
}

// captableFlags are glove captable's flags.
type captableFlags struct{ fields bool }

func (o *captableFlags) define(fs *flag.FlagSet) {
	fs.BoolVar(&o.fields, "fields", false, "one line a row, for scripts")
}

func helpCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) != 0 {
		fmt.Fprintf(stderr, "glove: help: unexpected argument %q\n%s\n", args[0], usageHelp)
		return ExitUsage
	}
	fmt.Fprint(stdout, usage)
	return ExitOK
}

func versionCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) != 0 {
		fmt.Fprintf(stderr, "glove: version: unexpected argument %q\n%s\n", args[0], usageVersion)
		return ExitUsage
	}
	fmt.Fprintln(stdout, "glove", Version)
	return ExitOK
}

func captableCommand(args []string, stdout, stderr io.Writer) int {
	var o captableFlags
	fs := newFlags("captable")
	o.define(fs)
	if code, done := parseFlags(fs, args, stdout, stderr, usageCaptable); done {
		return code
	}
	if o.fields {
		fmt.Fprint(stdout, captext.Fields())
	} else {
		fmt.Fprint(stdout, captext.Markdown())
	}
	return ExitOK
}

// helpersFlags are glove helpers' flags.
type helpersFlags struct{ libexec string }

func (o *helpersFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&o.libexec, "libexec", LibexecDir, "directory of the installed helpers")
}

func isHelpFlag(a string) bool { return a == "-h" || a == "-help" || a == "--help" }

// helpAsked is the usage to print when args ask for help right after a
// command (`glove run --help`), a group (`glove policy --help`, or
// `glove policy help`) or a group's subcommand (`glove policy validate
// -h`): help asked for is an answer on stdout and exit 0, never "unknown
// subcommand". Further along the flags, each command's flag parsing
// answers the same way (helpFlag); after a command's own arguments
// (`glove run -- sh --help`) it is the program's.
func helpAsked(args []string) (string, bool) {
	c, ok := commands[args[0]]
	if !ok || len(args) < 2 {
		return "", false
	}
	if c.subs == nil {
		return c.usage, isHelpFlag(args[1])
	}
	if isHelpFlag(args[1]) || args[1] == "help" {
		return subUsages(c), true
	}
	if sub, ok := c.subs[args[1]]; ok && len(args) >= 3 && isHelpFlag(args[2]) {
		return sub.usage, true
	}
	return "", false
}

// subUsages is a group's subcommands' usages, one a line: each usage,
// not its manual (its first paragraph; the rest is its own --help's).
func subUsages(c *command) string {
	var all []string
	for _, name := range slices.Sorted(maps.Keys(c.subs)) {
		u, _, _ := strings.Cut(c.subs[name].usage, "\n\n")
		all = append(all, u)
	}
	return strings.Join(all, "\n")
}

// helpFlag answers a flag.ErrHelp from a command's flag set (-h, -help
// or --help among its flags) as helpAsked does: the usage on stdout.
func helpFlag(err error, stdout io.Writer, usage string) bool {
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(stdout, usage)
		return true
	}
	return false
}

func helpers(args []string, stdout, stderr io.Writer) int {
	var o helpersFlags
	fs := newFlags("glove helpers")
	o.define(fs)
	if err := fs.Parse(args); err != nil {
		if helpFlag(err, stdout, usageHelpers) {
			return ExitOK
		}
		fmt.Fprintf(stderr, "glove helpers: %v\n%s\n", err, usageHelpers)
		return ExitUsage
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "glove helpers: unexpected argument %q\n", fs.Arg(0))
		return ExitUsage
	}
	status := ExitOK
	for _, e := range captable.Table {
		if !e.Helper || e.Binary == "glove-shim" || e.StartedBy != "" {
			continue
		}
		line, err := hello(filepath.Join(o.libexec, e.Binary), e)
		if err != nil {
			fmt.Fprintf(stderr, "glove helpers: %s: %v\n", e.Binary, err)
			status = ExitFail
			continue
		}
		fmt.Fprintln(stdout, line)
	}
	return status
}

// hello starts one helper, checks its answer against its table row and
// stops it.
func hello(path string, e captable.Entry) (string, error) {
	var log strings.Builder
	p, err := helperproc.Start(helperproc.Options{Path: path, Name: e.Binary, Stderr: &log})
	if err != nil {
		return "", err
	}
	r, herr := p.Hello()
	cerr := p.Close()
	if herr != nil {
		return "", fmt.Errorf("%w (helper log: %s)", herr, strings.TrimSpace(log.String()))
	}
	if cerr != nil {
		return "", fmt.Errorf("exit after EOF: %w", cerr)
	}
	if r.Name != e.Binary {
		return "", fmt.Errorf("answered as %q", r.Name)
	}
	// Between requests a helper's effective set is the row without its
	// OnDemand capabilities, which it raises per call.
	if r.CapEffective != e.Effective() || r.CapPermitted != e.Mask() {
		return "", errors.New("capability sets differ from the table: " +
			"effective " + captext.MaskString(r.CapEffective) + ", permitted " + captext.MaskString(r.CapPermitted) +
			", table " + captext.MaskString(e.Effective()) + " effective, " + captext.MaskString(e.Mask()) + " permitted")
	}
	return fmt.Sprintf("%-18s protocol %d  CapEff %s  CapPrm %s  ok",
		r.Name, r.Protocol, captext.MaskString(r.CapEffective), captext.MaskString(r.CapPermitted)), nil
}
