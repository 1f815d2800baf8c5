// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/testenv"
)

// fixtureRevision is the revision of every fixture's policy.
const fixtureRevision = 3

// tinyProfile is the resource profile sessions of the fixtures run with
// unless a test needs another.
var tinyProfile = policy.ResourceProfile{ProfileID: "tiny", CPUTimeMs: 5000, MemoryBytes: 256 << 20, Pids: 64,
	WallTimeMs: 20000, DiskBytes: 8 << 20, TerminalOutputBytes: 1 << 20}

// fixtureAccess is the one grant of the workspace every plan asks for.
var fixtureAccess = policy.AccessTuple{Access: policy.AccessEphemeralWrite, Materialization: policy.MaterializationCopy,
	CreatePolicy: policy.CreateMustExist, CleanupPolicy: policy.CleanupRemove, MaxBytes: 4 << 20}

// fixture is what a gloved with the whole session runtime needs: the
// harness (built beneath the mounter's source root), a workspace of the
// service user's holding "in", a policy with one runtime template per
// entry of templates (each running the harness with its arguments) and
// the given resource profiles, a receipt key, gloved's directories
// (mode 0700, the service user's), and its command line.
type fixture struct {
	t testing.TB
	e *testenv.Env

	exe string // the harness
	ws  string // the workspace (host path of the alias "workspace")

	pol       *policy.Policy
	templates map[string]policy.RuntimeTemplate
	profiles  map[string]policy.ResourceProfile

	key                    []byte
	dir                    string // holds policy.json, key, run/, store/, mat/
	run, storeDir, matRoot string
	args                   []string // gloved's command line
}

// newFixture builds the fixture. templates maps a template id to the
// harness's arguments; profiles are the policy's resource profiles
// (tinyProfile when none is given).
func newFixture(t testing.TB, e *testenv.Env, templates map[string][]string, profiles ...policy.ResourceProfile) *fixture {
	t.Helper()
	f := &fixture{t: t, e: e, exe: buildHarness(t, e),
		templates: map[string]policy.RuntimeTemplate{}, profiles: map[string]policy.ResourceProfile{}}

	ws, err := os.MkdirTemp(e.Base, "ws-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(ws) })
	if err := os.WriteFile(filepath.Join(ws, "in"), []byte("granted tree"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{ws, filepath.Join(ws, "in")} {
		if err := os.Chown(p, e.UID, e.GID); err != nil {
			t.Fatal(err)
		}
	}
	f.ws = ws

	if len(profiles) == 0 {
		profiles = []policy.ResourceProfile{tinyProfile}
	}
	ids := make([]string, 0, len(templates))
	for id := range templates {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var tmpls []policy.RuntimeTemplate
	for _, id := range ids {
		r := policy.RuntimeTemplate{
			RuntimeTemplateID: id, RuntimeID: "codex", SandboxBackend: policy.BackendLinuxProduction,
			AllowedPathAliases: []string{"workspace"},
			Launch:             policy.Launch{ExecutablePath: f.exe, Arguments: templates[id], Environment: []string{"TERM=dumb"}},
		}
		r.AdapterCommandDigest = policy.AdapterDigest(&r)
		f.templates[id] = r
		tmpls = append(tmpls, r)
	}
	for _, p := range profiles {
		f.profiles[p.ProfileID] = p
	}
	f.pol = &policy.Policy{
		SchemaVersion: 1, Revision: fixtureRevision, MaxPlanTTLMs: 600000,
		RuntimeTemplates: tmpls,
		PathAliases: []policy.PathAlias{{Alias: "workspace", HostPath: ws, TargetPath: "/workspace", MaxTTLSecs: 600,
			Access: []policy.AccessTuple{fixtureAccess}}},
		ResourceProfiles: profiles,
	}
	if err := policy.Validate(f.pol); err != nil {
		t.Fatalf("test policy: %v", err)
	}

	dir, err := os.MkdirTemp(e.Base, "gloved-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f.dir = dir
	f.run = ownedDir(t, e, filepath.Join(dir, "run"))
	f.storeDir = ownedDir(t, e, filepath.Join(dir, "store"))
	f.matRoot = ownedDir(t, e, filepath.Join(dir, "mat"))
	f.key = []byte(strings.Repeat("k", 32))
	writeProtected(t, filepath.Join(dir, "policy.json"), policy.Canonical(f.pol), e.UID, e.GID)
	writeProtected(t, filepath.Join(dir, "key"), f.key, e.UID, e.GID)
	f.args = []string{"--session-policy", filepath.Join(dir, "policy.json"), "--session-store", f.storeDir,
		"--materialization-root", f.matRoot, "--runtime-dir", f.run, "--receipt-key", filepath.Join(dir, "key"),
		"--receipt-anchor", testAnchor, "--libexec", filepath.Dir(e.HelperPath("glove-shim")),
		"--allow-uid", strconv.Itoa(e.UID), "--allow-uid", "0"}
	return f
}

// plan is a plan for the template and the profile (ids of the fixture's),
// granting the workspace, expiring in five minutes.
func (f *fixture) plan(template, profile string) *plan.Plan {
	f.t.Helper()
	tm, ok := f.templates[template]
	if !ok {
		f.t.Fatalf("no template %q", template)
	}
	prof, ok := f.profiles[profile]
	if !ok {
		f.t.Fatalf("no profile %q", profile)
	}
	return &plan.Plan{
		SchemaVersion: 1, PolicyRevision: fixtureRevision, ExpiresAtUnixMs: uint64(time.Now().Add(5 * time.Minute).UnixMilli()),
		RuntimeTemplateID: tm.RuntimeTemplateID, RuntimeID: "codex", SandboxBackend: policy.BackendLinuxProduction,
		AdapterCommandDigest: tm.AdapterCommandDigest, ResourceProfile: prof,
		PathGrants: []plan.PathGrant{{Alias: "workspace", Access: fixtureAccess.Access, Materialization: fixtureAccess.Materialization,
			CreatePolicy: fixtureAccess.CreatePolicy, CleanupPolicy: fixtureAccess.CleanupPolicy, TTLSecs: 300, MaxBytes: fixtureAccess.MaxBytes}},
	}
}

// planObject is pl's canonical form as a JSON object (create_session's
// and validate_plan's "plan").
func planObject(pl *plan.Plan) (map[string]any, error) {
	var obj map[string]any
	err := json.Unmarshal(plan.Canonical(pl), &obj)
	return obj, err
}

// createParams are create_session's params for the session id and plan.
func createParams(id string, plObj map[string]any) map[string]any {
	return map[string]any{"session_id": id, "idempotency_key": "key-" + id,
		"controller_plan_digest": strings.Repeat("c", 64), "plan": plObj}
}

// create validates pl (checking gloved's digest), creates the session id
// with it, and returns its start token.
func (f *fixture) create(c *client, id string, pl *plan.Plan) (token string) {
	f.t.Helper()
	plObj, err := planObject(pl)
	if err != nil {
		f.t.Fatal(err)
	}
	var v struct {
		Digest string `json:"plan_content_digest"`
	}
	c.ok("validate_plan", map[string]any{"plan": plObj}, &v)
	if v.Digest != plan.ContentDigest(pl) {
		f.t.Errorf("digest %s, want %s", v.Digest, plan.ContentDigest(pl))
	}
	var cr struct {
		State string `json:"state"`
		Token string `json:"start_token"`
	}
	c.ok("create_session", createParams(id, plObj), &cr)
	if cr.State != "created" {
		f.t.Fatalf("created: %+v", cr)
	}
	return cr.Token
}

// start starts the installed gloved with the fixture's command line.
func (f *fixture) start() *gloved {
	f.t.Helper()
	return startGloved(f.t, f.e, f.args...)
}

// writeProtected writes a protected file (mode 0600, owned by uid), as
// writeFile does, for tests and benchmarks.
func writeProtected(t testing.TB, path string, data []byte, uid, gid int) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
}
