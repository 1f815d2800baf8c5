// SPDX-License-Identifier: Apache-2.0

// Command glove-benchtable is `make bench`: it runs each benchmark of
// benchtable.Table once (`go test -bench`, as root, as the integration
// tests need), keeps each run's output in -out, and prints one Markdown
// table of Glove's figures, their anchors from the same run, the ratios
// and the goals. With -from it only reads outputs kept earlier.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"

	"github.com/glove-sandbox/glove/testenv/benchtable"
)

func main() {
	out := flag.String("out", "bin/bench", "directory for each run's output")
	from := flag.Bool("from", false, "read the outputs kept in -out instead of running")
	only := flag.String("only", "", "run only the rows whose benchmark matches this regular expression")
	flag.Parse()
	if err := run(*out, *from, *only); err != nil {
		fmt.Fprintf(os.Stderr, "glove-benchtable: %v\n", err)
		os.Exit(1)
	}
}

func run(dir string, from bool, only string) error {
	re, err := regexp.Compile(only)
	if err != nil {
		return fmt.Errorf("-only: %w", err)
	}
	var rows []benchtable.Row
	for _, r := range benchtable.Table {
		if re.MatchString(r.Value.Bench) {
			rows = append(rows, r)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("make output directory: %w", err)
	}
	all := benchtable.Results{}
	failed := 0
	for _, r := range benchtable.Runs(rows) {
		file := filepath.Join(dir, fileName(r))
		if !from {
			fmt.Fprintf(os.Stderr, "== go %v\n", r.Args())
			var buf bytes.Buffer
			cmd := exec.Command("go", r.Args()...)
			cmd.Stdout, cmd.Stderr = io.MultiWriter(&buf, os.Stderr), os.Stderr
			err := cmd.Run()
			if werr := os.WriteFile(file, buf.Bytes(), 0o644); werr != nil {
				return fmt.Errorf("keep output of %s: %w", r.Bench, werr)
			}
			if err != nil {
				// The table still shows the other rows; this one's
				// figures are missing and say so.
				fmt.Fprintf(os.Stderr, "glove-benchtable: %s in %s failed: %v\n", r.Bench, r.Pkg, err)
				failed++
				continue
			}
		}
		f, err := os.Open(file)
		if err != nil {
			return fmt.Errorf("read output of %s: %w", r.Bench, err)
		}
		res, err := benchtable.Parse(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		for k, v := range res {
			all[k] = v
		}
	}
	var outs []benchtable.Outcome
	for _, r := range rows {
		outs = append(outs, benchtable.Evaluate(r, all))
	}
	fmt.Print(benchtable.Markdown(outs))
	if failed > 0 {
		return fmt.Errorf("%d benchmark runs failed (above)", failed)
	}
	return nil
}

// fileName is where a run's output is kept: its package and benchmark.
func fileName(r benchtable.Run) string {
	return regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(r.Pkg+r.Bench, "_") + ".txt"
}
