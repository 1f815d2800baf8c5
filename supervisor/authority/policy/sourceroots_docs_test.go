// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/internal/strictjson"
)

const (
	packagedBounds = "../../../packaging/etc/glove/mounter.json"
	setupHost      = "../../../scripts/setup-host.sh"
)

// TestDocumentedHostPathsInSourceRoots: every host path a launch of
// docs/policy.md's example policy (and of its runtime-discovery launch)
// or of docs/adapter-digest.md's vectors would bind lies beneath a source
// root of the package's glove-mounter bounds, so an operator who copies
// an example gets a launch, not 125 "glove-mounter bind: source is
// outside every source root" (issue 32). The package's roots are a
// subset of scripts/setup-host.sh's, so the examples work in both shipped
// set-ups. The comparison is by path components, as written: the host
// running the test is not the operator's.
func TestDocumentedHostPathsInSourceRoots(t *testing.T) {
	roots := packagedRoots(t)
	hostRoots := setupHostRoots(t)
	for _, r := range roots {
		if !slices.Contains(hostRoots, r) {
			t.Errorf("the package's source root %s is not one of scripts/setup-host.sh's %v", r, hostRoots)
		}
	}
	check := func(where, p string) {
		t.Helper()
		for _, r := range roots {
			if r == "/" || p == r || strings.HasPrefix(p, r+"/") {
				return
			}
		}
		t.Errorf("%s: %s is outside the shipped source roots %v (%s)", where, p, roots, packagedBounds)
	}

	// The example policy (docs/policy.md's example is this file, byte for
	// byte: TestPolicyDocument).
	pol, err := Decode([]byte(exampleText(t)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tpl := range pol.RuntimeTemplates {
		for _, p := range boundPaths(&tpl.Launch) {
			check(examplePath+" template "+tpl.RuntimeTemplateID, p)
		}
	}
	// A copy is read by gloved, not bound: only a bind grant's host path
	// needs a source root (docs/policy.md, "Which host paths work").
	for _, a := range pol.PathAliases {
		for _, g := range a.Access {
			if g.Materialization == MaterializationBind {
				check(examplePath+" path alias "+a.Alias, a.HostPath)
			}
		}
	}

	// docs/policy.md's runtime-discovery launch: vector 2's, and checked.
	doc, err := os.ReadFile(policyDoc)
	if err != nil {
		t.Fatal(err)
	}
	blocks := fencedBlocks(t, string(doc), "json example-discovery-launch")
	if len(blocks) != 1 {
		t.Fatalf("%d example-discovery-launch blocks in %s, want 1", len(blocks), policyDoc)
	}
	var disc struct {
		Launch Launch `json:"launch"`
	}
	if err := strictjson.Unmarshal([]byte("{"+blocks[0]+"}"), &disc, 1<<16); err != nil {
		t.Fatalf("%s's runtime-discovery launch: %v", policyDoc, err)
	}
	for _, p := range boundPaths(&disc.Launch) {
		check(policyDoc+" runtime-discovery launch", p)
	}

	// docs/adapter-digest.md's vectors.
	b, err := os.ReadFile(digestDoc)
	if err != nil {
		t.Fatal(err)
	}
	var vectors []digestVector
	for i, blk := range fencedBlocks(t, string(b), "json adapter-digest-vector") {
		var v digestVector
		if err := strictjson.Unmarshal([]byte(blk), &v, 1<<16); err != nil {
			t.Fatalf("vector %d: %v", i+1, err)
		}
		for _, p := range boundPaths(&v.Launch) {
			check(fmt.Sprintf("%s vector %d", digestDoc, i+1), p)
		}
		vectors = append(vectors, v)
	}
	if len(vectors) < 2 {
		t.Fatalf("%d vectors in %s", len(vectors), digestDoc)
	}
	if !reflect.DeepEqual(disc.Launch, vectors[1].Launch) {
		t.Errorf("%s's runtime-discovery launch differs from vector 2 of %s", policyDoc, digestDoc)
	}
	if want := "`" + vectors[1].ExpectedDigest + "`,\nvector 2 of `docs/adapter-digest.md`"; !strings.Contains(string(doc), want) {
		t.Errorf("%s does not give vector 2's digest after its runtime-discovery launch (%s)", policyDoc, vectors[1].ExpectedDigest)
	}
}

// boundPaths is what a launch of l asks glove-mounter to bind: the pinned
// executable, each search directory (a staged one's stage tree) and each
// read-only path.
func boundPaths(l *Launch) []string {
	var out []string
	if l.ExecutablePath != "" {
		out = append(out, l.ExecutablePath)
	}
	for _, s := range l.ExecutableSearchPaths {
		if root := StagedRoot(s); root != "" {
			s = root
		}
		out = append(out, s)
	}
	return append(out, l.ReadOnlyPaths...)
}

type mounterBounds struct {
	SourceRoots []string `json:"source_roots"`
}

// packagedRoots are the source roots of the package's mounter.json.
func packagedRoots(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(packagedBounds)
	if err != nil {
		t.Fatal(err)
	}
	var m mounterBounds
	if err := json.Unmarshal(b, &m); err != nil || len(m.SourceRoots) == 0 {
		t.Fatalf("%s: %v, source roots %v", packagedBounds, err, m.SourceRoots)
	}
	return m.SourceRoots
}

// setupHostRoots are the source roots of the mounter.json that
// scripts/setup-host.sh writes (its one single-quoted JSON line naming
// them).
func setupHostRoots(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(setupHost)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, line := range strings.Split(string(b), "\n") {
		_, rest, ok := strings.Cut(line, `'{"schema_version":1,"source_roots":`)
		if !ok {
			continue
		}
		obj, _, _ := strings.Cut(`{"schema_version":1,"source_roots":`+rest, "'")
		var m mounterBounds
		if err := json.Unmarshal([]byte(obj), &m); err != nil {
			t.Fatalf("%s: %q: %v", setupHost, obj, err)
		}
		if found != nil {
			t.Fatalf("%s writes two mounter bounds", setupHost)
		}
		found = m.SourceRoots
	}
	if len(found) == 0 {
		t.Fatalf("%s: no mounter bounds found", setupHost)
	}
	return found
}
