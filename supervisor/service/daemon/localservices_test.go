// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/testenv"
)

// sageBinding is the one supported guest-channel binding, for pi alone.
const sageBinding = `,"binding":{"adapter":"sage-guest","schema":"sage.guest-observation-v1"}`

// putTemplate gives r its adapter command digest and puts it in the
// fixture's policy, in order; the caller writes the policy.
func (f *fixture) putTemplate(r policy.RuntimeTemplate) {
	r.AdapterCommandDigest = policy.AdapterDigest(&r)
	f.templates[r.RuntimeTemplateID] = r
	f.pol.RuntimeTemplates = append(f.pol.RuntimeTemplates, r)
	slices.SortFunc(f.pol.RuntimeTemplates, func(a, b policy.RuntimeTemplate) int {
		return strings.Compare(a.RuntimeTemplateID, b.RuntimeTemplateID)
	})
}

// addRuntime adds to the fixture's policy a template id of runtime
// runtimeID running the harness with args, and rewrites policy.json. A
// plan for it is f.plan(id, …) with RuntimeID set to runtimeID.
func (f *fixture) addRuntime(t *testing.T, id, runtimeID string, args []string) {
	t.Helper()
	r := policy.RuntimeTemplate{
		RuntimeTemplateID: id, RuntimeID: runtimeID, SandboxBackend: policy.BackendLinuxProduction,
		AllowedPathAliases: []string{"workspace"},
		Launch:             policy.Launch{ExecutablePath: f.exe, Arguments: args, Environment: []string{"TERM=dumb"}},
	}
	f.putTemplate(r)
	if err := policy.Validate(f.pol); err != nil {
		t.Fatalf("test policy: %v", err)
	}
	writeProtected(t, filepath.Join(f.dir, "policy.json"), policy.Canonical(f.pol), f.e.UID, f.e.GID)
}

// TestGlovedStreamAllowlist: with a stream configured for pi alone (the
// Sage guest binding, whose runtime set is exactly pi), a codex session
// runs with no stream: no GLOVE_LOCAL_SERVICE_* variable, descriptor 3
// closed, and, judged from outside, the upstream accepted no connection
// for it. A pi session then gets the variables, descriptor 3 and an
// exchange with the upstream, which accepted exactly one connection.
// capabilities advertises the stream and the guest channel (1 and 1).
func TestGlovedStreamAllowlist(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	f := newFixture(t, e, map[string][]string{"codex-services": {"services"}})
	f.addRuntime(t, "pi-services", "pi", []string{"services"})
	sock := startUpstream(t, e, f)
	g := startGloved(t, e, append(f.args, localServices(t, e, f, streamConfig(sock, `["pi"]`, sageBinding))...)...)
	logOnFailure(t, g)
	c := dial(t, g.socket)
	var caps struct {
		Stream  int `json:"inherited_stream_version"`
		Channel int `json:"guest_channel_schema_version"`
	}
	c.ok("capabilities", nil, &caps)
	if caps.Stream != 1 || caps.Channel != 1 {
		t.Errorf("inherited_stream_version %d, guest_channel_schema_version %d; want 1 and 1", caps.Stream, caps.Channel)
	}

	tok := f.create(c, "s-codex", f.plan("codex-services", "tiny"))
	c.ok("start_session", map[string]any{"session_id": "s-codex", "start_token": tok}, nil)
	end := attach(t, c, "s-codex")
	out := strings.ReplaceAll(end.output, "\r\n", "\n")
	if !strings.Contains(out, "service vars []\n") || !strings.Contains(out, "fd3 bad file descriptor\n") || strings.Contains(out, "reply") {
		t.Errorf("a codex session saw a local service:\n%s", out)
	}
	if n := accepts(t, sock); n != 0 {
		t.Errorf("the upstream accepted %d connections for a codex session, want 0", n)
	}

	pl := f.plan("pi-services", "tiny")
	pl.RuntimeID = "pi"
	tok = f.create(c, "s-pi", pl)
	c.ok("start_session", map[string]any{"session_id": "s-pi", "start_token": tok}, nil)
	end = attach(t, c, "s-pi")
	out = strings.ReplaceAll(end.output, "\r\n", "\n")
	for _, want := range []string{`GLOVE_LOCAL_SERVICE_FDS_V1={"sage":3}`, "GLOVE_LOCAL_SERVICE_ALIAS=sage", "fd3 errno 0\n", "reply pong:ping <nil>\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the pi session's output lacks %q:\n%s", want, out)
		}
	}
	if n := accepts(t, sock); n != 1 {
		t.Errorf("the upstream accepted %d connections after the pi session, want 1", n)
	}
	g.stop(t)
}

// TestGlovedLocalServicesRefused: a --local-services file gloved cannot
// honour keeps it from starting, with one line naming the flag and the
// fault, the file's path redacted.
func TestGlovedLocalServicesRefused(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	f := newFixture(t, e, map[string][]string{"harness": {"line"}})
	sock := filepath.Join(ownedDir(t, e, filepath.Join(f.dir, "svc")), "up.sock")
	loose := filepath.Join(f.dir, "loose")
	if err := os.Mkdir(loose, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(loose, e.UID, e.GID); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(f.dir, "local-services.json")
	for _, tc := range []struct {
		name, doc string
		mode      os.FileMode
		want      string
	}{
		{"pathname transport, a loose second directory", `{"schema_version":1,"services":[{"alias":"a","socket":"` + sock +
			`","runtime_ids":["codex"]},{"alias":"b","socket":"` + filepath.Join(loose, "up.sock") + `","runtime_ids":["codex"]}]}`, 0o600,
			"--local-services: /services/1/socket: its directory"},
		{"unsupported binding", streamConfig(sock, `["codex"]`, sageBinding), 0o600,
			`--local-services: load local services LOCAL-SERVICES: /services/0/binding: unsupported binding`},
		{"unknown binding", streamConfig(sock, `["pi"]`, `,"binding":{"adapter":"other","schema":"x"}`), 0o600,
			`/services/0/binding: unsupported binding: adapter \"other\"`},
		{"a uid", streamConfig(sock, `["codex"],"uid":1000`, ""), 0o600,
			`LOCAL-SERVICES: /services/0/uid: unknown member`},
		{"mode 0644", streamConfig(sock, `["codex"]`, ""), 0o644,
			"--local-services: load local services: read protected file LOCAL-SERVICES: mode 0644, want exactly 0600"},
		{"a loose socket directory", streamConfig(filepath.Join(loose, "up.sock"), `["codex"]`, ""), 0o600,
			"--local-services: /services/0/socket: its directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writeProtected(t, path, []byte(tc.doc), e.UID, e.GID)
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			stderr, err := refusedStart(t, e, nil, append(f.args, "--local-services", path)...)
			var lines []string
			for _, l := range strings.Split(stderr, "\n") {
				if strings.Contains(l, "refusing to start") {
					lines = append(lines, l)
				}
			}
			if err == nil || len(lines) != 1 || !strings.Contains(lines[0], tc.want) || strings.Contains(lines[0], path) {
				t.Errorf("exit %v, refusal %q; want one line saying %q without the file's path\nlog: %s", err, lines, tc.want, stderr)
			}
		})
	}
}
