// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/testenv"
)

// TestGlovedRefusesOwnState: a policy that would grant gloved's own state
// (issue 17, item 8) keeps gloved from starting, with a line naming the
// alias and what it would expose; and a launch whose workspace has become
// the session store since gloved started (a bind mount over it, so the
// name is unchanged) fails by identity before the program exists, with
// the store reason own_state.
func TestGlovedRefusesOwnState(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	f := newFixture(t, e, map[string][]string{"harness": {"--flag", "x"}})
	ws := f.pol.PathAliases[0].HostPath

	for _, tc := range []struct{ name, host, want string }{
		{"store", f.storeDir, `host_path SESSION-STORE: cannot grant Glove's own state: the tree is the session store`},
		{"parent", f.dir, `cannot grant Glove's own state: the tree contains the session store`},
		{"in-runtime", f.run, `the tree is the runtime directory`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.pol.PathAliases[0].HostPath = tc.host
			if err := policy.Validate(f.pol); err != nil {
				t.Fatalf("test policy: %v", err)
			}
			writeProtected(t, filepath.Join(f.dir, "policy.json"), policy.Canonical(f.pol), e.UID, e.GID)
			stderr, err := refusedStart(t, e, nil, f.args...)
			if err == nil || !strings.Contains(stderr, tc.want) {
				t.Errorf("gloved with alias %s: exit %v, stderr %s; want a refusal saying %q", tc.host, err, stderr, tc.want)
			}
		})
	}
	f.pol.PathAliases[0].HostPath = ws
	writeProtected(t, filepath.Join(f.dir, "policy.json"), policy.Canonical(f.pol), e.UID, e.GID)

	g := f.start()
	c := dial(t, g.socket)
	// The workspace's name now reaches the session store.
	unmount := mountOver(t, f.storeDir, ws)
	tok := f.create(c, "own-1", f.plan("harness", "tiny"))
	c.ok("start_session", map[string]any{"session_id": "own-1", "start_token": tok}, nil)
	end := attach(t, c, "own-1")
	unmount()
	if end.State != "failed" || strings.Contains(end.output, "args=") {
		t.Errorf("a launch granting the session store: ended %+v, output %q; want failed before the program ran", end.End, end.output)
	}
	if st := status(t, c, "own-1"); st.State != "failed" || st.Reason != "own_state" {
		t.Errorf("status %+v, want failed, reason own_state\nlog: %s", st, g.log)
	}
	// With the workspace back, the next session runs.
	tok = f.create(c, "own-2", f.plan("harness", "tiny"))
	c.ok("start_session", map[string]any{"session_id": "own-2", "start_token": tok}, nil)
	if end := attach(t, c, "own-2"); end.ExitCode != 7 || !strings.Contains(end.output, `in="granted tree"`) {
		t.Errorf("the next session: ended %+v, output %q", end.End, end.output)
	}
	g.stop(t)
}

// TestGlovedHidesHelpers: a template that shows the sandbox the directory
// of gloved's helpers (their executables are the service group's alone,
// mode 0750, and a sandbox keeps the service user's groups) shows it
// empty: gloved masks its --libexec wherever a bind shows it (issue 17,
// item 7). The helpers are hard links of the installed ones (same inode,
// owner, mode and file capabilities) in a directory the mounter may bind.
func TestGlovedHidesHelpers(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	lx := filepath.Join(e.Base, "sources", "libexec-glove")
	if err := os.Mkdir(lx, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(lx); err != nil {
			t.Error(err)
		}
	})
	installed := filepath.Dir(e.HelperPath("glove-shim"))
	ents, err := os.ReadDir(installed)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range ents {
		if err := os.Link(filepath.Join(installed, d.Name()), filepath.Join(lx, d.Name())); err != nil {
			t.Fatal(err)
		}
		names = append(names, d.Name())
	}
	f := newFixture(t, e, map[string][]string{"lister": {"ls", lx}})
	tm := f.pol.RuntimeTemplates[0]
	tm.Launch.ReadOnlyPaths = []string{lx}
	tm.AdapterCommandDigest = policy.AdapterDigest(&tm)
	f.pol.RuntimeTemplates[0], f.templates["lister"] = tm, tm
	if err := policy.Validate(f.pol); err != nil {
		t.Fatalf("test policy: %v", err)
	}
	writeProtected(t, filepath.Join(f.dir, "policy.json"), policy.Canonical(f.pol), e.UID, e.GID)
	for i, a := range f.args {
		if a == "--libexec" {
			f.args[i+1] = lx
		}
	}
	g := f.start()
	c := dial(t, g.socket)
	tok := f.create(c, "hide-1", f.plan("lister", "tiny"))
	c.ok("start_session", map[string]any{"session_id": "hide-1", "start_token": tok}, nil)
	end := attach(t, c, "hide-1")
	g.stop(t)
	t.Logf("the helper directory %v, in the sandbox: %q", names, strings.TrimSpace(end.output))
	if len(names) == 0 || !strings.Contains(end.output, "entries [] <nil>") {
		t.Errorf("the sandbox sees the helper directory as %q, want it empty (the host's holds %v)", end.output, names)
	}
}

// TestGlovedSandboxViewNoHostPath: in a real session the mount table names
// no path of gloved's own state: the root is a tmpfs whose source is "/"
// (glove-shim's tmpfs root), not the bundle under the runtime directory,
// and the workspace copy shows no materialization path (issue 17, item 6;
// the shim's attack case mountinfo-host-path is the layer check).
func TestGlovedSandboxViewNoHostPath(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	f := newFixture(t, e, map[string][]string{"mounts": {"mountinfo"}})
	g := f.start()
	c := dial(t, g.socket)
	tok := f.create(c, "view-1", f.plan("mounts", "tiny"))
	c.ok("start_session", map[string]any{"session_id": "view-1", "start_token": tok}, nil)
	end := attach(t, c, "view-1")
	g.stop(t)
	out := end.output
	t.Logf("the sandbox's mount table:\n%s", out)
	if !strings.Contains(out, "mountinfo read <nil>") || !strings.Contains(out, "mount / / tmpfs") {
		t.Fatalf("the sandbox's mount table: %q, want it read and a tmpfs root whose source is /", out)
	}
	for _, p := range []string{f.run, f.matRoot, f.storeDir, f.ws} {
		if strings.Contains(out, p) {
			t.Errorf("the sandbox's mount table names the host path %s:\n%s", p, out)
		}
	}
}
