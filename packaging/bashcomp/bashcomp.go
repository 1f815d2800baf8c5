// SPDX-License-Identifier: Apache-2.0

// Package bashcomp runs the bash completion scripts of packaging/completion
// as bash would on a Tab, for the tests that hold them to glove's command
// table and gloved's flags.
package bashcomp

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Script is packaging/completion/name in the source tree, found from
// this file's directory.
func Script(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "completion", name)
}

// Complete sources script in one bash and, for each case (the command
// line's words, the last being the one completed), sets COMP_WORDS and
// COMP_CWORD, calls function and collects COMPREPLY: one answer a case.
func Complete(script, function string, cases [][]string) ([][]string, error) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		return nil, fmt.Errorf("complete: %w", err)
	}
	const mark = "@@bashcomp-case@@"
	var prog strings.Builder
	fmt.Fprintf(&prog, "set -u\nsource %s || exit 1\n", quote(script))
	for _, words := range cases {
		q := make([]string, len(words))
		for i, w := range words {
			q[i] = quote(w)
		}
		fmt.Fprintf(&prog, "COMP_WORDS=(%s); COMP_CWORD=%d; COMPREPLY=(); %s; echo %s; printf '%%s\\n' \"${COMPREPLY[@]}\"\n",
			strings.Join(q, " "), len(words)-1, function, mark)
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(bash, "--norc", "--noprofile", "-c", prog.String())
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil || errb.Len() != 0 {
		return nil, fmt.Errorf("complete with %s: %v: %s", script, err, errb.String())
	}
	parts := strings.Split(out.String(), mark+"\n")
	if len(parts) != len(cases)+1 || parts[0] != "" {
		return nil, fmt.Errorf("complete with %s: %d answers for %d cases: %q", script, len(parts)-1, len(cases), out.String())
	}
	answers := make([][]string, len(cases))
	for i, p := range parts[1:] {
		for _, l := range strings.Split(strings.TrimSuffix(p, "\n"), "\n") {
			if l != "" {
				answers[i] = append(answers[i], l)
			}
		}
	}
	return answers, nil
}

// quote is s as one bash word.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Kinds maps each flag to the kind of value its completion offers
// ("file", "dir" or "own": a value of the flag's own, nothing offered),
// from the flags of each kind; each command's completion test lists
// its value flags this way, so a new one is a decision about its
// completion.
func Kinds(byKind map[string][]string) map[string]string {
	out := map[string]string{}
	for kind, flags := range byKind {
		for _, f := range flags {
			out[f] = kind
		}
	}
	return out
}

// PathFixture makes, in the (temporary) directory tmp, a directory adir
// and a file afile, and returns the directory and what completion
// should offer after a flag of each kind: both names for a file flag,
// the directory alone for a directory flag, nothing for a value of the
// flag's own.
func PathFixture(tmp string) (map[string][]string, error) {
	if err := os.Mkdir(filepath.Join(tmp, "adir"), 0o700); err != nil {
		return nil, fmt.Errorf("completion fixture: %w", err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "afile"), nil, 0o600); err != nil {
		return nil, fmt.Errorf("completion fixture: %w", err)
	}
	return map[string][]string{
		"file": {tmp + "/adir", tmp + "/afile"},
		"dir":  {tmp + "/adir"},
		"own":  nil,
	}, nil
}
