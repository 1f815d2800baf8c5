// SPDX-License-Identifier: Apache-2.0

package library

import (
	"os"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/internal/jsonedit"
)

const bundleDoc = "../../../docs/library-bundles.md"

// TestBundleDocument keeps docs/library-bundles.md and the code in step:
// its example is the test example, and the digest it shows is the
// SHA-256 of the example's canonical form.
func TestBundleDocument(t *testing.T) {
	b, err := os.ReadFile(bundleDoc)
	if err != nil {
		t.Fatal(err)
	}
	one := func(info string) string {
		bs := jsonedit.FencedBlocks(t, string(b), info)
		if len(bs) != 1 {
			t.Fatalf("%d %q blocks in %s, want 1", len(bs), info, bundleDoc)
		}
		return bs[0]
	}
	example, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	if one("json example-bundle") != strings.TrimSuffix(string(example), "\n") {
		t.Fatalf("the example in %s differs from %s", bundleDoc, examplePath)
	}
	m, err := Decode(example)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sha(enc), one("text example-bundle-digest"); got != want {
		t.Fatalf("digest: code %s, document %s", got, want)
	}
}
