package policy

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

const policyDoc = "../../../docs/policy.md"

// TestPolicyDocument keeps docs/policy.md and the code in step: the
// example in the document is the test example, byte for byte, and the
// table of valid access tuples lists exactly the code's rules.
func TestPolicyDocument(t *testing.T) {
	b, err := os.ReadFile(policyDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	ex := fencedBlocks(t, doc, "json example-policy")
	if len(ex) != 1 {
		t.Fatalf("%d example-policy blocks, want 1", len(ex))
	}
	if want := strings.TrimSuffix(exampleText(t), "\n"); ex[0] != want {
		t.Fatalf("the example in %s differs from %s", policyDoc, examplePath)
	}
	for _, r := range tupleRules {
		creates := make([]string, len(r.creates))
		for i, c := range r.creates {
			creates[i] = "`" + c + "`"
		}
		quota := "0"
		if r.quota {
			quota = "1..2^40"
		}
		row := fmt.Sprintf("| `%s` | `%s` | %s | `%s` | %s |", r.access, r.materialization, strings.Join(creates, " or "), r.cleanup, quota)
		if !strings.Contains(doc, row+"\n") {
			t.Errorf("%s lacks the access tuple row\n%s", policyDoc, row)
		}
	}
	if MaxAliasBytes != 1<<40 {
		t.Errorf("the document says 2^40 for max_bytes; the code says %d", uint64(MaxAliasBytes))
	}
	for _, rt := range DiscoveryRuntimes() {
		exe, _ := DiscoveryExecutable(rt)
		if row := fmt.Sprintf("| `%s` | `%s` |", rt, exe); !strings.Contains(doc, row+"\n") {
			t.Errorf("%s lacks the discovery row %s", policyDoc, row)
		}
	}
}
