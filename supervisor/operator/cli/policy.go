// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
)

const (
	usagePolicyValidate = "usage: glove policy validate --file FILE"
	usagePolicyExplain  = "usage: glove policy explain --file FILE [--json]"
	usagePlanValidate   = "usage: glove plan validate --policy FILE --plan FILE"
)

// policyValidateFlags are glove policy validate's flags.
type policyValidateFlags struct{ file string }

func (o *policyValidateFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&o.file, "file", "", "policy file")
}

// policyExplainFlags are glove policy explain's flags.
type policyExplainFlags struct {
	file string
	json bool
}

func (o *policyExplainFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&o.file, "file", "", "policy file")
	fs.BoolVar(&o.json, "json", false, "print JSON")
}

// planValidateFlags are glove plan validate's flags.
type planValidateFlags struct{ policy, plan string }

func (o *planValidateFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&o.policy, "policy", "", "policy file")
	fs.StringVar(&o.plan, "plan", "", "plan file")
}

// policyValidate runs `glove policy validate`. Bad usage and every
// fault of the input (an unprotected file, a decoding or validation
// fault) exit ExitUsage (2) with one "glove: " line on stderr; ExitFail
// (1) is left for the command itself failing.
func policyValidate(args []string, stdout, stderr io.Writer) int {
	var o policyValidateFlags
	fs := newFlags("policy validate")
	o.define(fs)
	file := &o.file
	if code, done := parseFlags(fs, args, stdout, stderr, usagePolicyValidate); done {
		return code
	}
	if *file == "" {
		fmt.Fprintf(stderr, "glove: policy validate: --file is required\n%s\n", usagePolicyValidate)
		return ExitUsage
	}
	p, err := policy.Load(*file)
	if err != nil {
		fmt.Fprintf(stderr, "glove: %v\n", err)
		return ExitUsage
	}
	var paths []rootsPath
	for i := range p.RuntimeTemplates {
		paths = append(paths, launchPaths(fmt.Sprintf("/runtime_templates/%d", i), &p.RuntimeTemplates[i])...)
	}
	paths = append(paths, bindAliasPaths(p)...)
	rootsLine, fault := checkSourceRoots(paths)
	if fault != nil {
		fmt.Fprintf(stderr, "glove: policy validate %s: %v\n", *file, fault)
		return ExitUsage
	}
	fmt.Fprintln(stdout, policy.Summary(p))
	fmt.Fprintln(stdout, rootsLine)
	return ExitOK
}

// policyExplain runs `glove policy explain`, with policyValidate's exit
// statuses.
func policyExplain(args []string, stdout, stderr io.Writer) int {
	var o policyExplainFlags
	fs := newFlags("policy explain")
	o.define(fs)
	file, asJSON := &o.file, &o.json
	if code, done := parseFlags(fs, args, stdout, stderr, usagePolicyExplain); done {
		return code
	}
	if *file == "" {
		fmt.Fprintf(stderr, "glove: policy explain: --file is required\n%s\n", usagePolicyExplain)
		return ExitUsage
	}
	p, err := policy.Load(*file)
	if err != nil {
		fmt.Fprintf(stderr, "glove: %v\n", err)
		return ExitUsage
	}
	e := policy.Explain(p)
	if !*asJSON {
		fmt.Fprint(stdout, e.Text())
		return ExitOK
	}
	out, err := json.Marshal(e, jsontext.WithIndent("  "))
	if err != nil {
		fmt.Fprintf(stderr, "glove: policy explain: encode: %v\n", err)
		return ExitFail
	}
	fmt.Fprintf(stdout, "%s\n", out)
	return ExitOK
}

// planValidate runs `glove plan validate`: the check gloved makes before
// accepting a plan, at the current time, for an operator to try a plan
// locally.
func planValidate(args []string, stdout, stderr io.Writer) int {
	var o planValidateFlags
	fs := newFlags("plan validate")
	o.define(fs)
	polFlag, planFile := &o.policy, &o.plan
	if code, done := parseFlags(fs, args, stdout, stderr, usagePlanValidate); done {
		return code
	}
	if *polFlag == "" || *planFile == "" {
		fmt.Fprintf(stderr, "glove: plan validate: --policy and --plan are required\n%s\n", usagePlanValidate)
		return ExitUsage
	}
	pol, err := policy.Load(*polFlag)
	if err != nil {
		fmt.Fprintf(stderr, "glove: %v\n", err)
		return ExitUsage
	}
	p, err := loadPlan(*planFile, pol, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "glove: %v\n", err)
		return ExitUsage
	}
	fmt.Fprintf(stdout, "valid: plan_content_digest %s\n", plan.ContentDigest(p))
	return ExitOK
}

// loadPlan reads a plan under the same protected-file rules as the
// policy (the plan names secrets and grants; it should not be someone
// else's edit), then decodes and validates it.
func loadPlan(path string, pol *policy.Policy, now time.Time) (*plan.Plan, error) {
	data, err := policy.ReadProtected(path, plan.MaxPlanBytes)
	if err != nil {
		return nil, fmt.Errorf("load plan: %w", err)
	}
	p, err := plan.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("load plan %s: %w", path, err)
	}
	if err := plan.Validate(p, pol, now); err != nil {
		return nil, fmt.Errorf("validate plan %s: %w", path, err)
	}
	return p, nil
}

// newFlags returns a flag set whose own error output is discarded: a
// usage fault is reported as one "glove: ..." line plus the usage line.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlagsHelp is parseFlags for a command whose help is longer than
// its usage: help asked for prints help, a usage fault the usage.
func parseFlagsHelp(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, usage, help string) (exit int, done bool) {
	if err := fs.Parse(args); err != nil {
		if helpFlag(err, stdout, help) {
			return ExitOK, true
		}
		fmt.Fprintf(stderr, "glove: %s: %v\n%s\n", fs.Name(), err, usage)
		return ExitUsage, true
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "glove: %s: unexpected argument %q\n%s\n", fs.Name(), fs.Arg(0), usage)
		return ExitUsage, true
	}
	return 0, false
}

// parseFlags parses args with fs, which takes no positional argument. It
// returns done and the exit status when the command is over: help asked
// for (the usage on stdout, exit 0) or a usage fault (exit 2).
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, usage string) (exit int, done bool) {
	return parseFlagsHelp(fs, args, stdout, stderr, usage, usage)
}
