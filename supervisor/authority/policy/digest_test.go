// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"bytes"
	"encoding/hex"
	"github.com/glove-sandbox/glove/supervisor/internal/jsonedit"
	"os"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/internal/strictjson"
)

const digestDoc = "../../../docs/adapter-digest.md"

type digestVector struct {
	RuntimeID      string `json:"runtime_id"`
	SandboxBackend string `json:"sandbox_backend"`
	Launch         Launch `json:"launch"`
	ExpectedDigest string `json:"expected_digest"`
}

// TestAdapterDigestDocument recomputes every vector of
// docs/adapter-digest.md and its annotated preimage: the document is the
// specification another implementation (the controller) follows, so it
// must say exactly what the code does.
func TestAdapterDigestDocument(t *testing.T) {
	b, err := os.ReadFile(digestDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	blocks := fencedBlocks(t, doc, "json adapter-digest-vector")
	if len(blocks) < 3 {
		t.Fatalf("%d vectors in %s, want at least 3", len(blocks), digestDoc)
	}
	var vectors []digestVector
	seen := map[string]bool{}
	for i, blk := range blocks {
		var v digestVector
		if err := strictjson.Unmarshal([]byte(blk), &v, 1<<16); err != nil {
			t.Fatalf("vector %d: %v", i+1, err)
		}
		tpl := RuntimeTemplate{RuntimeTemplateID: "vector", RuntimeID: v.RuntimeID, SandboxBackend: v.SandboxBackend, Launch: v.Launch}
		// A vector must be a launch a policy could hold.
		if err := validateLaunch("/launch", &tpl); err != nil {
			t.Fatalf("vector %d is not a valid launch: %v", i+1, err)
		}
		if got := AdapterDigest(&tpl); got != v.ExpectedDigest {
			t.Errorf("vector %d: computed %s, document says %s", i+1, got, v.ExpectedDigest)
		}
		if seen[v.ExpectedDigest] {
			t.Errorf("vector %d repeats a digest", i+1)
		}
		seen[v.ExpectedDigest] = true
		vectors = append(vectors, v)
	}
	pre := fencedBlocks(t, doc, "text adapter-digest-preimage")
	if len(pre) != 1 {
		t.Fatalf("%d annotated preimages, want 1", len(pre))
	}
	var hexDigits strings.Builder
	for _, line := range strings.Split(pre[0], "\n") {
		line, _, _ = strings.Cut(line, "#")
		hexDigits.WriteString(strings.ReplaceAll(line, " ", ""))
	}
	got, err := hex.DecodeString(hexDigits.String())
	if err != nil {
		t.Fatalf("annotated preimage: %v", err)
	}
	v := vectors[1]
	want := adapterPreimage(&RuntimeTemplate{RuntimeID: v.RuntimeID, SandboxBackend: v.SandboxBackend, Launch: v.Launch})
	if !bytes.Equal(got, want) {
		t.Fatalf("annotated preimage of vector 2 differs:\ndocument %x\ncode     %x", got, want)
	}
}

// TestAdapterDigestCoversEveryField changes each launch field in turn
// and requires a different digest.
func TestAdapterDigestCoversEveryField(t *testing.T) {
	base := RuntimeTemplate{RuntimeID: "codex", SandboxBackend: BackendLinuxProduction, Launch: Launch{
		ExecutablePath: "/usr/bin/true", Arguments: []string{"a"}, Environment: []string{"A=1"}, ReadOnlyPaths: []string{"/opt/x"},
	}}
	disc := base
	disc.Launch = Launch{RuntimeDiscovery: "codex", ExecutableSearchPaths: []string{"/usr/bin"}, Arguments: []string{"a"}, Environment: []string{"A=1"}, ReadOnlyPaths: []string{"/opt/x"}}
	variants := map[string]func(t *RuntimeTemplate){
		"runtime_id":              func(t *RuntimeTemplate) { t.RuntimeID = "codex2" },
		"sandbox_backend":         func(t *RuntimeTemplate) { t.SandboxBackend = "other" },
		"executable_path":         func(t *RuntimeTemplate) { t.Launch.ExecutablePath = "/usr/bin/false" },
		"arguments":               func(t *RuntimeTemplate) { t.Launch.Arguments = []string{"a", ""} },
		"argument split":          func(t *RuntimeTemplate) { t.Launch.Arguments = []string{"", "a"} },
		"environment":             func(t *RuntimeTemplate) { t.Launch.Environment = []string{"A=2"} },
		"read_only_paths":         func(t *RuntimeTemplate) { t.Launch.ReadOnlyPaths = nil },
		"fields moved across":     func(t *RuntimeTemplate) { t.Launch.Arguments, t.Launch.Environment = []string{"A=1"}, []string{"a"} },
		"discovery":               func(t *RuntimeTemplate) { *t = disc },
		"discovery search path":   func(t *RuntimeTemplate) { *t = disc; t.Launch.ExecutableSearchPaths = []string{"/usr/local/bin"} },
		"discovery as executable": func(t *RuntimeTemplate) { t.Launch.ExecutablePath = "codex" },
	}
	seen := map[string]string{AdapterDigest(&base): "base"}
	for name, change := range variants {
		v := base
		v.Launch.Arguments = append([]string(nil), base.Launch.Arguments...)
		change(&v)
		d := AdapterDigest(&v)
		if prev, ok := seen[d]; ok {
			t.Errorf("%s hashes like %s", name, prev)
		}
		seen[d] = name
	}
}

func fencedBlocks(t *testing.T, doc, info string) []string {
	return jsonedit.FencedBlocks(t, doc, info)
}
