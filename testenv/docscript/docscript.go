// SPDX-License-Identifier: Apache-2.0

// Package docscript reads the commands of a Markdown document, for the
// tests that run a document's commands as written (docs/harnesses.md):
// its fenced blocks by info string, and a shell block's logical lines.
package docscript

import "strings"

// Blocks returns the fenced blocks of doc whose info string is info, in
// order, without their fences.
func Blocks(doc, info string) []string {
	var out []string
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		if lines[i] != "```"+info {
			continue
		}
		var b []string
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			b = append(b, lines[i])
		}
		out = append(out, strings.Join(b, "\n"))
	}
	return out
}

// ShellLines joins a shell block's continued lines: a line ending in a
// backslash, or within a single-quoted string (a document's quotes hold
// no escaped quote). Empty lines and comments are left out.
func ShellLines(block string) []string {
	var out []string
	cur := ""
	for _, l := range strings.Split(block, "\n") {
		if s, ok := strings.CutSuffix(l, "\\"); ok {
			cur += s
			continue
		}
		cur += l
		if strings.Count(cur, "'")%2 == 1 {
			cur += "\n"
			continue
		}
		if s := strings.TrimSpace(cur); s != "" && !strings.HasPrefix(s, "#") {
			out = append(out, s)
		}
		cur = ""
	}
	return out
}
