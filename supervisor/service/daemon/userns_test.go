// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/testenv"
)

// TestGlovedUserNamespaceHelper runs a session through glove-userns (the
// mode of a host whose kernel refuses the service user a user namespace,
// forced here by the test build's GLOVED_TEST_USERNS_MODE on a host that
// does not need it) and one in the unprivileged mode, and judges each from
// its program's own view and gloved's log:
//   - glove-userns: gloved logs the mode at start and, per session, the
//     inode of the namespace glove-userns made; the program runs in that
//     very namespace (its /proc/self/ns/user), mapped "1000 UID 1" (the
//     sandbox's user onto the service user): user namespace 1, joined, no
//     nested one (the mount lock cannot exist where the host refuses
//     nesting);
//   - unprivileged: the program's namespace maps "1000 0 1" (user
//     namespace 2, nested in the shim's user namespace 1, whose root is
//     the service user: the mount lock).
func TestGlovedUserNamespaceHelper(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	f := newFixture(t, e, map[string][]string{"ids": {"ids"}})
	run := func(t *testing.T, g *gloved, id string) string {
		t.Helper()
		c := dial(t, g.socket)
		tok := f.create(c, id, f.plan("ids", "tiny"))
		c.ok("start_session", map[string]any{"session_id": id, "start_token": tok}, nil)
		end := attach(t, c, id)
		out := strings.ReplaceAll(end.output, "\r\n", "\n")
		if end.Status != 0 {
			t.Fatalf("%s: status %d\n%s\nlog: %s", id, end.Status, out, g.log)
		}
		return out
	}

	t.Run("glove-userns", func(t *testing.T) {
		g := startGlovedAt(t, e, buildFaultyGloved(t, e), []string{"GLOVED_TEST_USERNS_MODE=glove-userns"}, f.args...)
		logOnFailure(t, g)
		out := run(t, g, "un-helper")
		if !strings.Contains(g.log.String(), `"mode":"glove-userns"`) {
			t.Errorf("gloved did not log the glove-userns mode:\n%s", g.log)
		}
		m := regexp.MustCompile(`"event":"user_namespace","inode":(\d+)[^\n]*"session_id":"un-helper"`).FindStringSubmatch(g.log.String())
		if m == nil {
			m = regexp.MustCompile(`"inode":(\d+)[^\n]*"session_id":"un-helper"`).FindStringSubmatch(g.log.String())
		}
		if m == nil {
			t.Fatalf("no user_namespace line for the session in gloved's log:\n%s", g.log)
		}
		for _, want := range []string{fmt.Sprintf("uid_map 1000 %d 1 err=<nil>", e.UID), fmt.Sprintf("userns user:[%s] err=<nil>", m[1])} {
			if !strings.Contains(out, want+"\n") {
				t.Errorf("the program's view lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("unprivileged", func(t *testing.T) {
		g := startGloved(t, e, f.args...)
		logOnFailure(t, g)
		out := run(t, g, "un-plain")
		if !strings.Contains(g.log.String(), `"mode":"unprivileged"`) {
			t.Errorf("gloved did not log the unprivileged mode:\n%s", g.log)
		}
		if !strings.Contains(out, "uid_map 1000 0 1 err=<nil>\n") {
			t.Errorf("the program is not in a nested user namespace:\n%s", out)
		}
	})
}
