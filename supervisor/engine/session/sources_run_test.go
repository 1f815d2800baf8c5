// SPDX-License-Identifier: Apache-2.0

package session_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/library"
	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/testenv"
)

// homeProbeSource reports what a native adapter finds: its managed
// environment, every file of its private home with mode and content,
// the library destination's files, and whether it can write there.
const homeProbeSource = `package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

func main() {
	fmt.Printf("HOME=%s CODEX_HOME=%s\n", os.Getenv("HOME"), os.Getenv("CODEX_HOME"))
	filepath.WalkDir("/home/agent", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			fmt.Println("walk:", err)
			return nil
		}
		info, _ := d.Info()
		if d.Type().IsRegular() {
			data, _ := os.ReadFile(p)
			fmt.Printf("%s %v %q\n", p, info.Mode(), data)
		} else {
			fmt.Printf("%s %v\n", p, info.Mode())
		}
		return nil
	})
	ents, err := os.ReadDir("/opt/glove/libraries")
	fmt.Println("libraries:", len(ents), err)
	for _, e := range ents {
		info, _ := e.Info()
		fmt.Printf("lib %s %v %d\n", e.Name(), info.Mode(), info.Size())
	}
	fmt.Println("lib-write refused:", os.WriteFile("/opt/glove/libraries/x", []byte("x"), 0o644) != nil)
	fmt.Println("home-write:", os.WriteFile("/home/agent/note", []byte("x"), 0o644))
}
`

// sourcesFixture is a policy whose codex template is found by runtime
// discovery in a root-owned directory, allows the "libraries"
// destination, and a bundle root of the service user.
type sourcesFixture struct {
	dir, polFile, bundleRoot, exe string
	pol                           *policy.Policy
	tmpl                          policy.RuntimeTemplate
	prof                          policy.ResourceProfile
}

func newSourcesFixture(t *testing.T, e *testenv.Env, searchPaths func(binDir string) []string) *sourcesFixture {
	t.Helper()
	probe := testenv.BuildStatic(t, e, "homeprobe", homeProbeSource)
	binDir := filepath.Join(e.Base, "sources", "codexbin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(binDir) })
	data, err := os.ReadFile(probe)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(binDir, "codex")
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	f := &sourcesFixture{exe: exe}
	f.prof = policy.ResourceProfile{ProfileID: "tiny", CPUTimeMs: 5000, MemoryBytes: 256 << 20, Pids: 64,
		WallTimeMs: 20000, DiskBytes: 8 << 20, TerminalOutputBytes: 1 << 20}
	f.tmpl = policy.RuntimeTemplate{
		RuntimeTemplateID: "codex-found", RuntimeID: "codex", SandboxBackend: policy.BackendLinuxProduction,
		AllowedProjectionDestinations: []string{"libraries"},
		Launch: policy.Launch{RuntimeDiscovery: "codex", ExecutableSearchPaths: searchPaths(binDir),
			Environment: []string{"TERM=dumb"}},
	}
	f.tmpl.AdapterCommandDigest = policy.AdapterDigest(&f.tmpl)
	f.pol = &policy.Policy{
		SchemaVersion: 1, Revision: 5, MaxPlanTTLMs: 600000,
		RuntimeTemplates:              []policy.RuntimeTemplate{f.tmpl},
		LibraryProjectionDestinations: []policy.LibraryDestination{{Alias: "libraries", TargetPath: "/opt/glove/libraries"}},
		ResourceProfiles:              []policy.ResourceProfile{f.prof},
	}
	if err := policy.Validate(f.pol); err != nil {
		t.Fatalf("test policy: %v", err)
	}
	if f.dir, err = os.MkdirTemp(e.Base, "sources-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(f.dir) })
	if err := os.Chmod(f.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f.polFile = filepath.Join(f.dir, "policy.json")
	writeOwned(t, e, f.polFile, policy.Canonical(f.pol))
	f.bundleRoot = filepath.Join(f.dir, "bundles")
	if err := os.Mkdir(f.bundleRoot, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(f.bundleRoot, e.UID, e.GID); err != nil {
		t.Fatal(err)
	}
	return f
}

// bundle writes a bundle file of the service user and returns its digest.
func (f *sourcesFixture) bundle(t *testing.T, e *testenv.Env, m *library.Manifest) string {
	t.Helper()
	// Written by hand rather than with library.Write, which (as the
	// service user's tool) wants a root of its own uid.
	data, err := library.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	d := hex.EncodeToString(sum[:])
	p := filepath.Join(f.bundleRoot, d)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, e.UID, e.GID); err != nil {
		t.Fatal(err)
	}
	return d
}

// planFile writes a plan for the template requesting the digests.
func (f *sourcesFixture) planFile(t *testing.T, e *testenv.Env, name string, digests ...string) (string, *plan.Plan) {
	t.Helper()
	pl := &plan.Plan{
		SchemaVersion: 1, PolicyRevision: 5, ExpiresAtUnixMs: uint64(time.Now().Add(5 * time.Minute).UnixMilli()),
		RuntimeTemplateID: f.tmpl.RuntimeTemplateID, RuntimeID: "codex", SandboxBackend: policy.BackendLinuxProduction,
		AdapterCommandDigest: f.tmpl.AdapterCommandDigest, ResourceProfile: f.prof,
	}
	for _, d := range digests {
		pl.LibraryProjections = append(pl.LibraryProjections, plan.LibraryProjection{Digest: d, DestinationAlias: "libraries"})
	}
	if err := plan.Validate(pl, f.pol, time.Now()); err != nil {
		t.Fatalf("test plan: %v", err)
	}
	p := filepath.Join(f.dir, name)
	writeOwned(t, e, p, plan.Canonical(pl))
	return p, pl
}

func skillBundle(name, body string, extra ...library.Entry) *library.Manifest {
	m := &library.Manifest{Schema: library.Schema, Entries: []library.Entry{
		{Kind: library.KindPrompt, Name: "greeting", Files: []library.File{{Path: "prompt.md", Content: []byte("say hi")}}},
		{Kind: library.KindSkill, Name: name, Description: "a test skill", Files: []library.File{
			{Path: "SKILL.md", Content: []byte(body)},
			{Path: "scripts/run.sh", Executable: true, Content: []byte("#!/bin/sh\necho run\n")},
		}},
	}}
	m.Entries = append(m.Entries, extra...)
	return m
}

// TestGloveRunDiscoveredRuntimeWithSkills runs a codex template found by
// runtime discovery, with two library bundles: the program gets the
// private home with the managed environment and exactly the bundles'
// skill entries, the bundle files read-only at the destination, and the
// receipt commits the projections and the skill projection digest.
func TestGloveRunDiscoveredRuntimeWithSkills(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	f := newSourcesFixture(t, e, func(bin string) []string { return []string{filepath.Join(bin, "absent"), bin} })
	d1 := f.bundle(t, e, skillBundle("alpha", "# alpha\n"))
	d2 := f.bundle(t, e, &library.Manifest{Schema: library.Schema, Entries: []library.Entry{
		{Kind: library.KindSkill, Name: "beta", Files: []library.File{{Path: "SKILL.md", Content: []byte("# beta\n")}}},
	}})
	digests := []string{d1, d2}
	if d2 < d1 {
		digests = []string{d2, d1}
	}
	planFile, _ := f.planFile(t, e, "plan.json", digests...)
	keyFile, key, rcpt := receiptFiles(t, e, f.dir)
	ws := workspace(t, e, nil)

	stdout, stderr, code := gloveRun(t, e, ws, "", "--policy", f.polFile, "--plan", planFile,
		"--library-bundle-root", f.bundleRoot, "--receipt", rcpt, "--receipt-key", keyFile)
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	for _, want := range []string{
		"HOME=/home/agent CODEX_HOME=/home/agent/.codex\n",
		"/home/agent drwx------\n",
		"/home/agent/.codex/skills/alpha/SKILL.md -rw-r--r-- \"# alpha\\n\"\n",
		"/home/agent/.codex/skills/alpha/scripts/run.sh -rwxr-xr-x \"#!/bin/sh\\necho run\\n\"\n",
		"/home/agent/.codex/skills/beta/SKILL.md -rw-r--r-- \"# beta\\n\"\n",
		"libraries: 2 <nil>\n",
		"lib-write refused: true\n",
		"home-write: <nil>\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q\nstdout: %s", want, stdout)
		}
	}
	// Only skills reach the home: the prompt entry stays in its bundle.
	if strings.Contains(stdout, "greeting") || strings.Contains(stdout, "prompt.md") {
		t.Errorf("a non-skill entry reached the home:\n%s", stdout)
	}
	for _, d := range digests {
		if !strings.Contains(stdout, fmt.Sprintf("lib %s -r--r--r--", d)) {
			t.Errorf("bundle %s is not read-only at the destination:\n%s", d, stdout)
		}
	}

	env := readReceipt(t, rcpt, key)
	b := env.Body
	if len(b.LibraryProjections) != 2 {
		t.Fatalf("receipt projections %+v", b.LibraryProjections)
	}
	for i, d := range digests {
		p := b.LibraryProjections[i]
		if p.Digest != d || p.Destination != "libraries" || p.Target != "/opt/glove/libraries/"+d || p.Identifier != "libraries/"+d {
			t.Errorf("receipt projection %d: %+v", i, p)
		}
	}
	if !policy.ValidSHA256Hex(b.SkillProjectionDigest) || !policy.ValidSHA256Hex(b.LaunchDigest) {
		t.Errorf("receipt skill projection digest %q, launch digest %q", b.SkillProjectionDigest, b.LaunchDigest)
	}
	// Tampering with a committed projection breaks the receipt.
	env.Body.LibraryProjections[0].Target = "/opt/glove/elsewhere/" + digests[0]
	if err := receipt.Verify(key, strings.Repeat("0", 64), []receipt.Envelope{env}); err == nil {
		t.Error("a changed projection target still verifies")
	}
}

// TestGloveRunSourcesRefused: every launch-source fault stops the launch
// before anything runs (exit 125, one line naming the fault).
func TestGloveRunSourcesRefused(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	ws := workspace(t, e, nil)
	f := newSourcesFixture(t, e, func(bin string) []string { return []string{bin} })
	good := f.bundle(t, e, skillBundle("alpha", "# alpha\n"))
	run := func(t *testing.T, planFile string, extra ...string) (string, int) {
		t.Helper()
		args := append([]string{"--policy", f.polFile, "--plan", planFile}, extra...)
		stdout, stderr, code := gloveRun(t, e, ws, "", args...)
		if stdout != "" {
			t.Errorf("the program ran: %q", stdout)
		}
		return stderr, code
	}
	check := func(t *testing.T, stderr string, code int, want string) {
		t.Helper()
		if code != 125 || !strings.Contains(stderr, want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("exit %d, stderr %q; want 125 and one line containing %q", code, stderr, want)
		}
	}

	t.Run("no bundle root", func(t *testing.T) {
		p, _ := f.planFile(t, e, "p-noroot.json", good)
		stderr, code := run(t, p)
		check(t, stderr, code, "no library bundle root")
	})
	t.Run("bundle root not 0700", func(t *testing.T) {
		p, _ := f.planFile(t, e, "p-rootmode.json", good)
		os.Chmod(f.bundleRoot, 0o750)
		defer os.Chmod(f.bundleRoot, 0o700)
		stderr, code := run(t, p, "--library-bundle-root", f.bundleRoot)
		check(t, stderr, code, "--library-bundle-root")
	})
	t.Run("missing bundle", func(t *testing.T) {
		p, _ := f.planFile(t, e, "p-missing.json", strings.Repeat("ab", 32))
		stderr, code := run(t, p, "--library-bundle-root", f.bundleRoot)
		check(t, stderr, code, strings.Repeat("ab", 32))
	})
	t.Run("wrong digest", func(t *testing.T) {
		other := f.bundle(t, e, skillBundle("gamma", "# gamma\n"))
		wrong := strings.Repeat("cd", 32)
		if err := os.Rename(filepath.Join(f.bundleRoot, other), filepath.Join(f.bundleRoot, wrong)); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(filepath.Join(f.bundleRoot, wrong))
		p, _ := f.planFile(t, e, "p-wrong.json", wrong)
		stderr, code := run(t, p, "--library-bundle-root", f.bundleRoot)
		check(t, stderr, code, "digest")
	})
	t.Run("bundle mode 0644", func(t *testing.T) {
		d := f.bundle(t, e, skillBundle("delta", "# delta\n"))
		os.Chmod(filepath.Join(f.bundleRoot, d), 0o644)
		defer os.Remove(filepath.Join(f.bundleRoot, d))
		p, _ := f.planFile(t, e, "p-mode.json", d)
		stderr, code := run(t, p, "--library-bundle-root", f.bundleRoot)
		check(t, stderr, code, "mode")
	})
	t.Run("same skill in two bundles", func(t *testing.T) {
		d := f.bundle(t, e, skillBundle("alpha", "# another alpha\n"))
		defer os.Remove(filepath.Join(f.bundleRoot, d))
		ds := []string{good, d}
		if d < good {
			ds = []string{d, good}
		}
		p, _ := f.planFile(t, e, "p-dup.json", ds...)
		stderr, code := run(t, p, "--library-bundle-root", f.bundleRoot)
		check(t, stderr, code, `skill "alpha"`)
	})
	t.Run("nothing installed", func(t *testing.T) {
		if err := os.Rename(f.exe, f.exe+".away"); err != nil {
			t.Fatal(err)
		}
		defer os.Rename(f.exe+".away", f.exe)
		p, _ := f.planFile(t, e, "p-none.json")
		stderr, code := run(t, p)
		check(t, stderr, code, "not installed")
	})
	t.Run("search directory group-writable", func(t *testing.T) {
		dir := filepath.Dir(f.exe)
		os.Chmod(dir, 0o775)
		defer os.Chmod(dir, 0o755)
		p, _ := f.planFile(t, e, "p-gw.json")
		stderr, code := run(t, p)
		check(t, stderr, code, "not installed")
	})
	// The plan without projections runs: the faults above were the
	// sources', not the fixture's.
	p, _ := f.planFile(t, e, "p-ok.json")
	if stdout, stderr, code := gloveRun(t, e, ws, "", "--policy", f.polFile, "--plan", p); code != 0 || !strings.Contains(stdout, "CODEX_HOME=/home/agent/.codex") {
		t.Errorf("control run: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}
