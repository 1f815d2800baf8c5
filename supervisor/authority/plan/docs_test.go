// SPDX-License-Identifier: Apache-2.0

package plan

import (
	"github.com/glove-sandbox/glove/supervisor/internal/jsonedit"
	"os"
	"strings"
	"testing"
)

const planDoc = "../../../docs/plan.md"

// TestPlanDocument keeps docs/plan.md and the code in step: the example
// is the test example, and its canonical form and content digest are
// what Canonical and ContentDigest produce.
func TestPlanDocument(t *testing.T) {
	b, err := os.ReadFile(planDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	one := func(info string) string {
		bs := fencedBlocks(t, doc, info)
		if len(bs) != 1 {
			t.Fatalf("%d %q blocks in %s, want 1", len(bs), info, planDoc)
		}
		return bs[0]
	}
	text := readText(t, examplePlanPath)
	if one("json example-plan") != strings.TrimSuffix(text, "\n") {
		t.Fatalf("the example in %s differs from %s", planDoc, examplePlanPath)
	}
	p := mustPlan(t, text)
	if got, want := string(Canonical(p)), one("text example-plan-canonical"); got != want {
		t.Fatalf("canonical form:\ncode     %s\ndocument %s", got, want)
	}
	if got, want := ContentDigest(p), one("text example-plan-content-digest"); got != want {
		t.Fatalf("content digest: code %s, document %s", got, want)
	}
}

func fencedBlocks(t *testing.T, doc, info string) []string {
	return jsonedit.FencedBlocks(t, doc, info)
}
