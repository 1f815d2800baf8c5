package helperkit_test

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/helpers/captable"
	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/mounter"
	"github.com/glove-sandbox/glove/helpers/wire"
	"github.com/glove-sandbox/glove/seccomp/bpf"
)

var update = flag.Bool("update", false, "rewrite SECURITY.md's generated tables from the code")

const securityDoc = "../../SECURITY.md"

// TestSecurityDoc fails when SECURITY.md's generated tables differ from
// the capability table, the dispatch table, the seccomp allowlists and
// the helpers' audit units as measured from the code:
// the document auditors read must be the code's own statement.
func TestSecurityDoc(t *testing.T) {
	data, err := os.ReadFile(securityDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	blocks := map[string]string{
		"captable":   captable.Markdown(),
		"helpers":    helpersMarkdown(),
		"auditunits": auditUnitsMarkdown(t),
	}
	for name, body := range blocks {
		begin := "<!-- generated:" + name + ":begin -->\n"
		end := "<!-- generated:" + name + ":end -->"
		i := strings.Index(doc, begin)
		j := strings.Index(doc, end)
		if i < 0 || j < i {
			t.Fatalf("SECURITY.md lacks the %q markers", name)
		}
		cur := doc[i+len(begin) : j]
		if cur == body {
			continue
		}
		if !*update {
			t.Errorf("SECURITY.md's %q table is out of date; run go test ./helpers/helperkit -run TestSecurityDoc -update\nwant:\n%s", name, body)
			continue
		}
		doc = doc[:i+len(begin)] + body + doc[j:]
	}
	if *update {
		if err := os.WriteFile(securityDoc, []byte(doc), 0o644); err != nil {
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
		var acc []string
		for _, a := range wire.Accepts[s.Name] {
			x := a.Type.String()
			if a.Once {
				x += " (once)"
			}
			acc = append(acc, x)
		}
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
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s.Name, strings.Join(acc, ", "), own)
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
