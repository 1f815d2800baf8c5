// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/authority/stage"
	"github.com/glove-sandbox/glove/supervisor/engine/materialize"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

const usagePolicyStage = "usage: glove policy stage --runtime R --source PATH --directory DIR (--dry-run | --yes) [--json]"

// stageFlags are glove policy stage's flags.
type stageFlags struct {
	runtime, source, dir string
	dryRun, yes, json    bool
}

func (o *stageFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&o.runtime, "runtime", "", "runtime_discovery value")
	fs.StringVar(&o.source, "source", "", "absolute path of the closure (a directory or one file)")
	fs.StringVar(&o.dir, "directory", "", "absolute canonical protected runtime directory")
	fs.BoolVar(&o.dryRun, "dry-run", false, "walk, hash and report; write nothing")
	fs.BoolVar(&o.yes, "yes", false, "copy into DIR/<digest>")
	fs.BoolVar(&o.json, "json", false, "print JSON")
}

// policyStage runs `glove policy stage` (supervisor/authority/stage): it copies a
// package or interpreter closure into DIR/<digest>, a protected runtime
// directory that runtime discovery admits. Usage faults exit 2, a refusal
// or failure 1, each with one "glove: policy stage: " line on stderr.
func policyStage(args []string, stdout, stderr io.Writer) int {
	usageFault := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "glove: policy stage: "+format+"\n", a...)
		return ExitUsage
	}
	var o stageFlags
	fs := newFlags("policy stage")
	o.define(fs)
	runtime, source, dir := &o.runtime, &o.source, &o.dir
	dryRun, yes, asJSON := &o.dryRun, &o.yes, &o.json
	if err := fs.Parse(args); err != nil {
		if helpFlag(err, stdout, usagePolicyStage) {
			return ExitOK
		}
		return usageFault("%v", err)
	}
	switch {
	case fs.NArg() != 0:
		return usageFault("unexpected argument %q", fs.Arg(0))
	case *runtime == "":
		return usageFault("--runtime is required")
	case *source == "":
		return usageFault("--source is required")
	case *dir == "":
		return usageFault("--directory is required")
	case *dryRun == *yes:
		return usageFault("exactly one of --dry-run and --yes is required")
	case !filepath.IsAbs(*source):
		return usageFault("--source %q is not an absolute path", *source)
	case !filepath.IsAbs(*dir) || filepath.Clean(*dir) != *dir:
		return usageFault("--directory %q is not an absolute canonical path", *dir)
	}
	if _, ok := policy.DiscoveryExecutable(*runtime); !ok {
		return usageFault("unknown runtime %q (one of %v)", *runtime, policy.DiscoveryRuntimes())
	}
	// Threat to the operator's time, not to the host: a tree staged where
	// glove-mounter cannot bind it passes every check but the first
	// launch's (issue 32). Checked before anything is read or copied.
	rootsLine, fault := checkSourceRoots([]rootsPath{{path: *dir}})
	if fault != nil {
		fmt.Fprintf(stderr, "glove: policy stage: --directory %v; stage into a directory beneath one\n", fault)
		return ExitFail
	}
	opts := stage.Options{Runtime: *runtime, Source: *source, Directory: *dir, DryRun: *dryRun}
	var bar *progressBar
	if f, ok := stderr.(*os.File); ok && isTerminal(f) {
		bar = &progressBar{w: stderr, last: -1}
		opts.Progress = func(phase string, done, total int64) {
			if phase != "copy" {
				return
			}
			bar.draw(*dir, materialize.Totals{Bytes: done}, materialize.Totals{Bytes: total})
		}
	}
	rep, err := stage.Stage(opts)
	if bar != nil {
		bar.clear()
	}
	if err != nil {
		fmt.Fprintf(stderr, "glove: policy stage: %v\n", err)
		return ExitFail
	}
	rep.SourceRoots = rootsLine
	if *asJSON {
		out, err := json.Marshal(rep, jsontext.WithIndent("  "))
		if err != nil {
			fmt.Fprintf(stderr, "glove: policy stage: encode: %v\n", err)
			return ExitFail
		}
		fmt.Fprintf(stdout, "%s\n", out)
		return ExitOK
	}
	status := "staged"
	switch {
	case rep.AlreadyStaged:
		status = "already staged (identical content; nothing copied)"
	case rep.DryRun:
		status = "dry run (nothing written)"
	}
	fmt.Fprintf(stdout, "runtime: %s (executable %s)\n", rep.Runtime, rep.Executable)
	fmt.Fprintf(stdout, "source: %s\n", rep.Source)
	fmt.Fprintf(stdout, "digest: %s\n", rep.Digest)
	fmt.Fprintf(stdout, "staged_path: %s\n", rep.StagedPath)
	fmt.Fprintf(stdout, "entry_point: %s\n", rep.EntryPoint)
	fmt.Fprintf(stdout, "search_path: %s\n", rep.SearchPath)
	if rep.Interpreter != "" {
		fmt.Fprintf(stdout, "interpreter: %s (the host's: the template's read_only_paths must hold it and the libraries it loads)\n", rep.Interpreter)
	}
	fmt.Fprintf(stdout, "contents: %d files, %d directories, %d symbolic links, %d bytes\n", rep.Files, rep.Directories, rep.Symlinks, rep.Bytes)
	fmt.Fprintf(stdout, "status: %s\n", status)
	fmt.Fprintln(stdout, rootsLine)
	fmt.Fprintln(stdout, rep.PolicyLine())
	return ExitOK
}
