// SPDX-License-Identifier: Apache-2.0

package docscript

import (
	"slices"
	"testing"
)

func TestBlocksAndLines(t *testing.T) {
	doc := "text\n```sh\na \\\n  b\n# note\n\nc 'x\ny'\n```\n```json x\n{}\n```\n```sh\nd\n```\n"
	bs := Blocks(doc, "sh")
	if len(bs) != 2 || bs[1] != "d" {
		t.Fatalf("blocks %q", bs)
	}
	if got, want := ShellLines(bs[0]), []string{"a   b", "c 'x\ny'"}; !slices.Equal(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
	if got := Blocks(doc, "json x"); len(got) != 1 || got[0] != "{}" {
		t.Errorf("json blocks %q", got)
	}
	if got := Blocks("```sh\nunterminated", "sh"); len(got) != 1 || got[0] != "unterminated" {
		t.Errorf("unterminated %q", got)
	}
}
