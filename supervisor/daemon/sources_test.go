package daemon_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/library"
	"github.com/glove-sandbox/glove/supervisor/plan"
	"github.com/glove-sandbox/glove/supervisor/policy"
	"github.com/glove-sandbox/glove/supervisor/receipt"
	"github.com/glove-sandbox/glove/testenv"
)

// skillProbeSource prints what a native adapter sees of its sources.
const skillProbeSource = `package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Printf("home=%s codex_home=%s\n", os.Getenv("HOME"), os.Getenv("CODEX_HOME"))
	data, err := os.ReadFile("/home/agent/.codex/skills/alpha/SKILL.md")
	fmt.Printf("skill=%q %v\n", data, err)
	ents, err := os.ReadDir("/opt/glove/libraries")
	fmt.Println("libraries:", len(ents), err)
	for _, e := range ents {
		fmt.Println("lib", e.Name())
	}
}
`

// TestGlovedLaunchSources runs, through gloved's protocol, a codex
// template found by runtime discovery with a library bundle from
// --library-bundle-root: the program sees its private home with the
// bundle's skill and the bundle file; session_status's launch digest is
// the receipt's, and the receipt commits the projection and the skill
// projection digest. A template whose runtime is not installed fails to
// start with the reason runtime_not_installed, and no host path.
func TestGlovedLaunchSources(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	f := newFixture(t, e, map[string][]string{"plain": {"x"}})

	probe := testenv.BuildStatic(t, e, "skillprobe", skillProbeSource)
	bin := filepath.Join(e.Base, "sources", "codexd")
	empty := filepath.Join(e.Base, "sources", "codexd-empty")
	for _, d := range []string{bin, empty} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
	}
	data, err := os.ReadFile(probe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "codex"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	for id, dir := range map[string]string{"found": bin, "absent": empty} {
		tm := policy.RuntimeTemplate{
			RuntimeTemplateID: id, RuntimeID: "codex", SandboxBackend: policy.BackendLinuxProduction,
			AllowedPathAliases: []string{"workspace"}, AllowedProjectionDestinations: []string{"libraries"},
			Launch: policy.Launch{RuntimeDiscovery: "codex", ExecutableSearchPaths: []string{dir}, Environment: []string{"TERM=dumb"}},
		}
		tm.AdapterCommandDigest = policy.AdapterDigest(&tm)
		f.templates[id] = tm
	}
	f.pol.RuntimeTemplates = []policy.RuntimeTemplate{f.templates["absent"], f.templates["found"], f.templates["plain"]}
	f.pol.LibraryProjectionDestinations = []policy.LibraryDestination{{Alias: "libraries", TargetPath: "/opt/glove/libraries"}}
	if err := policy.Validate(f.pol); err != nil {
		t.Fatalf("test policy: %v", err)
	}
	polFile := filepath.Join(f.dir, "policy.json")
	os.Remove(polFile)
	writeProtected(t, polFile, policy.Canonical(f.pol), e.UID, e.GID)

	root := ownedDir(t, e, filepath.Join(f.dir, "bundles"))
	bundle, err := library.Encode(&library.Manifest{Schema: library.Schema, Entries: []library.Entry{
		{Kind: library.KindSkill, Name: "alpha", Files: []library.File{{Path: "SKILL.md", Content: []byte("# alpha\n")}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(bundle)
	digest := hex.EncodeToString(sum[:])
	writeProtected(t, filepath.Join(root, digest), bundle, e.UID, e.GID)

	g := startGloved(t, e, append(f.args, "--library-bundle-root", root)...)
	c := dial(t, g.socket)
	var caps struct {
		Adapter int `json:"agent_runtime_adapter_schema_version"`
	}
	c.ok("capabilities", nil, &caps)
	if caps.Adapter != 1 {
		t.Errorf("agent_runtime_adapter_schema_version %d, want 1", caps.Adapter)
	}

	pl := f.plan("found", "tiny")
	pl.LibraryProjections = []plan.LibraryProjection{{Digest: digest, DestinationAlias: "libraries"}}
	tok := f.create(c, "s-found", pl)
	c.ok("start_session", map[string]any{"session_id": "s-found", "start_token": tok}, nil)
	end := attach(t, c, "s-found")
	var st struct {
		LaunchDigest string `json:"launch_digest"`
	}
	c.ok("session_status", map[string]any{"session_id": "s-found"}, &st)
	out := strings.ReplaceAll(end.output, "\r\n", "\n")
	for _, want := range []string{"home=/home/agent codex_home=/home/agent/.codex\n", "skill=\"# alpha\\n\" <nil>\n",
		"libraries: 1 <nil>\n", "lib " + digest + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("sandbox output lacks %q:\n%s", want, out)
		}
	}

	// Nothing installed where the template looks: refused at start, the
	// session failed with a class of reason, no host path in either.
	tok = f.create(c, "s-absent", f.plan("absent", "tiny"))
	_, rpcErr := c.call("start_session", map[string]any{"session_id": "s-absent", "start_token": tok})
	if rpcErr == nil || !strings.Contains(rpcErr.Message, "runtime_not_installed") || strings.Contains(rpcErr.Message, e.Base) {
		t.Errorf("start of an absent runtime: %+v", rpcErr)
	}
	var ab struct {
		State  string `json:"state"`
		Reason string `json:"reason"`
	}
	c.ok("session_status", map[string]any{"session_id": "s-absent"}, &ab)
	if ab.State != "failed" || ab.Reason != "runtime_not_installed" {
		t.Errorf("absent runtime: state %q reason %q", ab.State, ab.Reason)
	}
	g.stop(t)

	g2 := startGloved(t, e, append(f.args, "--library-bundle-root", root)...)
	var page struct {
		Envelopes []receipt.Envelope `json:"envelopes"`
	}
	dial(t, g2.socket).ok("receipts_page", map[string]any{"after": 0, "limit": 10}, &page)
	g2.stop(t)
	if err := receipt.Verify(f.key, testAnchor, page.Envelopes); err != nil {
		t.Errorf("receipts: %v", err)
	}
	var found *receipt.Body
	for i := range page.Envelopes {
		if page.Envelopes[i].Body.SessionID == "s-found" {
			found = &page.Envelopes[i].Body
		}
	}
	if found == nil {
		t.Fatalf("no receipt for s-found: %+v", page.Envelopes)
	}
	if found.LaunchDigest != st.LaunchDigest || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(found.SkillProjectionDigest) {
		t.Errorf("receipt launch digest %q (status %q), skill projection digest %q", found.LaunchDigest, st.LaunchDigest, found.SkillProjectionDigest)
	}
	want := receipt.Projection{Identifier: "libraries/" + digest, Destination: "libraries", Target: "/opt/glove/libraries/" + digest, Digest: digest}
	if len(found.LibraryProjections) != 1 || found.LibraryProjections[0] != want {
		t.Errorf("receipt projections %+v, want [%+v]", found.LibraryProjections, want)
	}
}
