// SPDX-License-Identifier: Apache-2.0

package localservice

import (
	"os"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/internal/jsonedit"
)

// TestDocument keeps docs/local-services.md true: its example is a valid
// inherited-stream-v1 configuration whose service allows codex and pi
// and advertises no guest channel (it has no binding).
func TestDocument(t *testing.T) {
	b, err := os.ReadFile("../../../docs/local-services.md")
	if err != nil {
		t.Fatal(err)
	}
	bs := jsonedit.FencedBlocks(t, string(b), "json example-local-services")
	if len(bs) != 1 {
		t.Fatalf("%d example blocks, want 1", len(bs))
	}
	c := decodeValid(t, bs[0])
	for _, rt := range []string{"codex", "pi"} {
		if _, ok := ServiceFor(c, rt); !ok {
			t.Errorf("the example does not forward to %s", rt)
		}
	}
	if v := GuestChannelSchemaVersion(c); v != 0 {
		t.Errorf("the example advertises guest channel version %d", v)
	}
}
