// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/engine/discovery"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

const usagePolicyDetect = "usage: glove policy detect --search-path DIR [--search-path DIR]... [--json]"

// searchPaths is a repeatable --search-path flag; order is kept (it is
// the search order).
type searchPaths []string

func (s *searchPaths) String() string { return strings.Join(*s, ":") }

func (s *searchPaths) Set(v string) error {
	if !filepath.IsAbs(v) || filepath.Clean(v) != v {
		return fmt.Errorf("%q is not an absolute canonical directory", v)
	}
	*s = append(*s, v)
	return nil
}

// detectReport is the --json output of `glove policy detect`.
type detectReport struct {
	SearchPaths []string          `json:"search_paths"`
	Runtimes    []detectedRuntime `json:"runtimes"`
	// SourceRoots says whether glove-mounter can bind the search
	// directories (for a staged one, its stage tree): one line.
	SourceRoots string `json:"source_roots"`
}

type detectedRuntime struct {
	discovery.Found `json:",inline"`
	Installed       bool `json:"installed"`
}

// detectFlags are glove policy detect's flags.
type detectFlags struct {
	dirs searchPaths
	json bool
}

func (o *detectFlags) define(fs *flag.FlagSet) {
	fs.Var(&o.dirs, "search-path", "search directory (repeatable, in search order)")
	fs.BoolVar(&o.json, "json", false, "print JSON")
}

// policyDetect runs `glove policy detect`: for every runtime_discovery
// value, what a discovery launch would find in the given search
// directories (never PATH), with the reason for every directory passed
// over. It is a report: exit 0 whatever it finds, 2 for usage faults.
func policyDetect(args []string, stdout, stderr io.Writer) int {
	var o detectFlags
	fs := newFlags("policy detect")
	o.define(fs)
	asJSON := &o.json
	if code, done := parseFlags(fs, args, stdout, stderr, usagePolicyDetect); done {
		return code
	}
	dirs := o.dirs
	if len(dirs) == 0 {
		fmt.Fprintf(stderr, "glove: policy detect: --search-path is required\n%s\n", usagePolicyDetect)
		return ExitUsage
	}
	rep := detectReport{SearchPaths: dirs}
	for _, rt := range policy.DiscoveryRuntimes() {
		f, err := discovery.Find(rt, dirs)
		if err != nil && !errors.Is(err, discovery.ErrNotInstalled) {
			fmt.Fprintf(stderr, "glove: policy detect: %v\n", err)
			return ExitFail
		}
		rep.Runtimes = append(rep.Runtimes, detectedRuntime{Found: f, Installed: err == nil})
	}
	var paths []rootsPath
	for _, d := range dirs {
		if root := policy.StagedRoot(d); root != "" {
			d = root
		}
		paths = append(paths, rootsPath{path: d})
	}
	line, fault := checkSourceRoots(paths)
	if fault != nil {
		line = "source roots: " + fault.Error()
	}
	rep.SourceRoots = line
	if *asJSON {
		out, err := json.Marshal(rep, jsontext.WithIndent("  "))
		if err != nil {
			fmt.Fprintf(stderr, "glove: policy detect: encode: %v\n", err)
			return ExitFail
		}
		fmt.Fprintf(stdout, "%s\n", out)
		return ExitOK
	}
	for _, r := range rep.Runtimes {
		fmt.Fprintln(stdout, r.line())
	}
	fmt.Fprintln(stdout, rep.SourceRoots)
	return ExitOK
}

// line is the text form: one line per runtime.
func (r detectedRuntime) line() string {
	var b strings.Builder
	if r.Installed {
		fmt.Fprintf(&b, "%s: found %s sha256:%s", r.Runtime, r.Path, r.Identity.SHA256)
	} else {
		fmt.Fprintf(&b, "%s: not installed (%s)", r.Runtime, r.Executable)
	}
	if len(r.Rejected) > 0 {
		b.WriteString("; passed over: ")
		for i, x := range r.Rejected {
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "%s: %s", x.Dir, x.Reason)
		}
	}
	return b.String()
}
