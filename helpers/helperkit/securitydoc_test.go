// SPDX-License-Identifier: Apache-2.0

package helperkit_test

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/helpers/captable/captext"
	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/loopext4"
	"github.com/glove-sandbox/glove/helpers/loopext4format"
	"github.com/glove-sandbox/glove/helpers/mounter"
	"github.com/glove-sandbox/glove/helpers/wire/formatwire"
	"github.com/glove-sandbox/glove/helpers/wire/wiredoc"
	"github.com/glove-sandbox/glove/seccomp/bpf"
)

var update = flag.Bool("update", false, "rewrite SECURITY.md's generated tables from the code")

const (
	securityDoc = "../../SECURITY.md"
	helpersDoc  = "../../docs/helpers.md"
)

// TestSecurityDoc fails when SECURITY.md's generated tables differ from
// the capability table, the dispatch table, the seccomp allowlists and
// the helpers' audit units as measured from the code:
// the document auditors read must be the code's own statement.
func TestSecurityDoc(t *testing.T) {
	checkGenerated(t, securityDoc, map[string]string{
		"captable":   captext.Markdown(),
		"helpers":    helpersMarkdown(),
		"auditunits": auditUnitsMarkdown(t),
	})
	checkGenerated(t, helpersDoc, map[string]string{"protocols": protocolsMarkdown()})
}

// protocolsMarkdown is each helper's protocol table.
func protocolsMarkdown() string {
	var b strings.Builder
	for _, f := range specs {
		s := f()
		fmt.Fprintf(&b, "\n`%s`:\n\n%s", s.Name, wiredoc.Markdown(s.Protocol))
		if s.Name == loopext4.Name {
			fmt.Fprintf(&b, "\n`%s` (spoken by glove-loopext4 only):\n\n%s", formatwire.Protocol.Name, wiredoc.Markdown(formatwire.Protocol))
		}
	}
	return b.String()
}

// checkGenerated compares (or with -update rewrites) the generated blocks
// of the document at path.
func checkGenerated(t *testing.T, path string, blocks map[string]string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	for name, body := range blocks {
		begin := "<!-- generated:" + name + ":begin -->\n"
		end := "<!-- generated:" + name + ":end -->"
		i := strings.Index(doc, begin)
		j := strings.Index(doc, end)
		if i < 0 || j < i {
			t.Fatalf("%s lacks the %q markers", path, name)
		}
		cur := doc[i+len(begin) : j]
		if cur == body {
			continue
		}
		if !*update {
			t.Errorf("%s's %q table is out of date; run go test ./helpers/helperkit -run TestSecurityDoc -update\nwant:\n%s", path, name, body)
			continue
		}
		doc = doc[:i+len(begin)] + body + doc[j:]
	}
	if *update {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func helpersMarkdown() string {
	var b strings.Builder
	b.WriteString("| helper | accepts | seccomp allowlist (`*`: only with the argument conditions in the source) |\n")
	b.WriteString("| --- | --- | --- |\n")
	fmt.Fprintf(&b, "| every helper | — | base, `helpers/helperkit/seccomp_base.go`: %s |\n", ruleNames(helperkit.BaseSyscalls))
	for _, f := range specs {
		s := f()
		own := "base only"
		if len(s.Syscalls) > 0 {
			own = "base and " + ruleNames(s.Syscalls)
		}
		// The mounter's list depends on the kernel it starts on: the
		// document states both, whatever kernel runs this test.
		if s.Name == mounter.Name {
			own = "base and " + ruleNames(append(append([]bpf.Rule{}, mounter.Syscalls...), mounter.AttrSyscalls...)) +
				"; before Linux 6.15, instead of `open_tree_attr*`: " + ruleNames(mounter.FallbackSyscalls)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s.Name, wiredoc.Accepts(s.Protocol), own)
		if s.Name == loopext4.Name {
			fmt.Fprintf(&b, "| its formatter `%s` (no capability) | %s | base and %s, and mkfs.ext4's |\n",
				loopext4format.Name, wiredoc.Accepts(formatwire.Protocol), ruleNames(loopext4format.Syscalls))
			fmt.Fprintf(&b, "| mkfs.ext4, executed by the formatter's child | — | base and %s |\n", ruleNames(loopext4format.MkfsSyscalls))
		}
	}
	return b.String()
}

// ruleNames lists each system call once, in order, marking conditioned ones.
func ruleNames(rules []bpf.Rule) string {
	var out []string
	seen := map[string]bool{}
	for _, r := range rules {
		n := r.Name
		if len(r.Conds) > 0 {
			n += "*"
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, "`"+n+"`")
		}
	}
	return strings.Join(out, ", ")
}
