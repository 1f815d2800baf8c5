// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/library"
	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
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
// sourcesFixture is the gloved fixture with two discovery templates
// ("found", whose codex is the probe, and "absent", whose directory is
// empty), the "libraries" destination, and a bundle root holding one
// bundle with the skill "alpha".
type sourcesFixture struct {
	*fixture
	root, digest, exe string
}

func newSourcesFixture(t *testing.T, e *testenv.Env) *sourcesFixture {
	t.Helper()
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
	exe := filepath.Join(bin, "codex")
	if err := os.WriteFile(exe, data, 0o755); err != nil {
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
	return &sourcesFixture{fixture: f, root: root, digest: digest, exe: exe}
}

// foundPlan is a plan for "found" projecting the fixture's bundle.
func (f *sourcesFixture) foundPlan() *plan.Plan {
	pl := f.plan("found", "tiny")
	pl.LibraryProjections = []plan.LibraryProjection{{Digest: f.digest, DestinationAlias: "libraries"}}
	return pl
}

func TestGlovedLaunchSources(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	sf := newSourcesFixture(t, e)
	f, root, digest := sf.fixture, sf.root, sf.digest

	g := startGloved(t, e, append(f.args, "--library-bundle-root", root)...)
	c := dial(t, g.socket)
	var caps struct {
		Adapter int `json:"agent_runtime_adapter_schema_version"`
	}
	c.ok("capabilities", nil, &caps)
	if caps.Adapter != 1 {
		t.Errorf("agent_runtime_adapter_schema_version %d, want 1", caps.Adapter)
	}

	tok := f.create(c, "s-found", sf.foundPlan())
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

// TestGlovedSourcesSwapped: the attacks are a change to a launch source
// after it was verified, made while gloved is between two steps of the
// start (a gloved built with the test-only pause): the pinned executable
// rewritten in place or replaced by rename after its mount exists, and
// the verified bundle rewritten in place before it is copied. Each start
// ends failed before the program runs (no output), with its reason, a
// failed receipt that verifies, and nothing left behind.
func TestGlovedSourcesSwapped(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	sf := newSourcesFixture(t, e)
	f := sf.fixture
	faulty := buildFaultyGloved(t, e)
	original, err := os.ReadFile(sf.exe)
	if err != nil {
		t.Fatal(err)
	}
	bundlePath := filepath.Join(sf.root, sf.digest)
	bundle, err := os.ReadFile(bundlePath)
	if err != nil {
		t.Fatal(err)
	}
	rewrite := func(t *testing.T, path string, data []byte) {
		t.Helper()
		fd, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer fd.Close()
		changed := append([]byte(nil), data...)
		changed[len(changed)-2] ^= 1 // same size, one bit
		if _, err := fd.WriteAt(changed, 0); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		id, point, reason string
		attack, restore   func(t *testing.T)
	}{
		{"x-inplace", "mounts", "runtime_changed",
			func(t *testing.T) { rewrite(t, sf.exe, original) },
			func(t *testing.T) { os.WriteFile(sf.exe, original, 0o755) }},
		{"x-renamed", "mounts", "runtime_changed",
			func(t *testing.T) {
				tmp := sf.exe + ".new"
				if err := os.WriteFile(tmp, original, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tmp, sf.exe); err != nil {
					t.Fatal(err)
				}
			},
			func(t *testing.T) {}},
		{"x-bundle", "prepare", "library_bundle_rejected",
			func(t *testing.T) { rewrite(t, bundlePath, bundle) },
			func(t *testing.T) { os.WriteFile(bundlePath, bundle, 0o600) }},
	}
	// gloved (the service user) creates the .reached files.
	gates := ownedDir(t, e, filepath.Join(f.dir, "gates"))
	for _, c := range cases {
		t.Run(c.id, func(t *testing.T) {
			gate := filepath.Join(gates, c.id)
			g := startGlovedAt(t, e, faulty, []string{"GLOVED_TEST_PAUSE=" + c.point + ":" + gate},
				append(f.args, "--library-bundle-root", sf.root)...)
			cl := dial(t, g.socket)
			tok := f.create(cl, c.id, sf.foundPlan())
			cl.ok("start_session", map[string]any{"session_id": c.id, "start_token": tok}, nil)
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				if _, err := os.Stat(gate + ".reached"); err == nil {
					break
				}
				if time.Now().After(deadline) {
					os.WriteFile(gate, nil, 0o600) // let it go on and end
					t.Fatalf("gloved did not reach %s\nlog: %s", c.point, g.log)
				}
			}
			c.attack(t)
			if err := os.WriteFile(gate, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			end := attach(t, cl, c.id)
			var st struct {
				State  string `json:"state"`
				Reason string `json:"reason"`
			}
			cl.ok("session_status", map[string]any{"session_id": c.id}, &st)
			g.stop(t)
			c.restore(t)
			if end.output != "" || end.Termination != "failed" {
				t.Errorf("the program ran or the end is not failed: %+v output %q", end.End, end.output)
			}
			if st.State != "failed" || st.Reason != c.reason {
				t.Errorf("state %q reason %q, want failed %s\nlog: %s", st.State, st.Reason, c.reason, g.log)
			}
		})
	}
	// Every failed start has its verified receipt.
	g := startGloved(t, e, append(f.args, "--library-bundle-root", sf.root)...)
	var page struct {
		Envelopes []receipt.Envelope `json:"envelopes"`
	}
	dial(t, g.socket).ok("receipts_page", map[string]any{"after": 0, "limit": 10}, &page)
	g.stop(t)
	if err := receipt.Verify(f.key, testAnchor, page.Envelopes); err != nil || len(page.Envelopes) != len(cases) {
		t.Errorf("receipts: %d, %v", len(page.Envelopes), err)
	}
	for _, env := range page.Envelopes {
		if env.Body.Termination != "failed" {
			t.Errorf("receipt of %s: %s", env.Body.SessionID, env.Body.Termination)
		}
	}
}
