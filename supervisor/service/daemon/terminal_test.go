// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/service/daemon"
	"github.com/glove-sandbox/glove/testenv"
)

// TestGlovedTerminal: a managed session's terminal is a real one (issue
// 32, "A real terminal"). start_session's rows and cols are the pty's
// size from the program's first look (bounded: out-of-range sizes are
// refused with one line and leave the session created), 24×80 when
// absent; a resize changes it (the program sees SIGWINCH and the new
// size); TERM is xterm-256color unless the template sets it; the program
// can re-open its terminal by name for writing (/dev/stderr,
// /dev/stdout, /dev/tty, /proc/self/fd/2), and what it writes there
// reaches the attach stream; /dev takes no new file or directory. Each
// check fails without its part: the size (0×0 before), TERM (unset),
// the Landlock rule for the pty ("permission denied"), the /dev/tty
// bind (a regular file made in /dev, or "no such file"), the read-only
// /dev (the file made).
func TestGlovedTerminal(t *testing.T) {
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	e.ConfigureForSessions(t)
	f := newFixture(t, e, map[string][]string{"term": {"terminal"}, "termset": {"terminal"}})
	// "term" sets no TERM (the fixture's templates set TERM=dumb, which
	// "termset" keeps): the policy is written again without it.
	tm := f.templates["term"]
	tm.Launch.Environment = nil
	tm.AdapterCommandDigest = policy.AdapterDigest(&tm)
	f.templates["term"] = tm
	for i, r := range f.pol.RuntimeTemplates {
		if r.RuntimeTemplateID == "term" {
			f.pol.RuntimeTemplates[i] = tm
		}
	}
	if err := policy.Validate(f.pol); err != nil {
		t.Fatal(err)
	}
	writeProtected(t, f.dir+"/policy.json", policy.Canonical(f.pol), e.UID, e.GID)
	g := f.start()
	// c attaches; calls made while output streams go on ctl, since a
	// call on the attached connection may read an output notification
	// where its response should be.
	c, ctl := dial(t, g.socket), dial(t, g.socket)

	tok := f.create(c, "s-term", f.plan("term", "tiny"))
	for _, bad := range []map[string]any{
		{"rows": 0, "cols": 80},
		{"rows": 24, "cols": 70000},
		{"rows": 24},
	} {
		params := map[string]any{"session_id": "s-term", "start_token": tok}
		for k, v := range bad {
			params[k] = v
		}
		_, e := c.call("start_session", params)
		if e == nil || e.Code != daemon.CodeInvalidParams || strings.Contains(e.Message, "\n") {
			t.Fatalf("start_session %v: %+v, want one line of invalid params", bad, e)
		}
		t.Logf("start_session %v: %s", bad, e.Message)
	}
	c.ok("start_session", map[string]any{"session_id": "s-term", "start_token": tok, "rows": 37, "cols": 113}, nil)
	c.ok("attach", map[string]any{"session_id": "s-term"}, nil)
	var out strings.Builder
	collect := func(what, s string) {
		t.Helper()
		readUntil(t, c, time.Now().Add(60*time.Second), what, func(m msg) bool {
			var o daemon.Output
			if m.Method == "output" && json.Unmarshal(m.Params, &o) == nil {
				out.Write(o.Data)
			}
			if m.Method == "ended" {
				t.Fatalf("%s: the session ended; output:\n%s\nlog: %s", what, out.String(), g.log)
			}
			return strings.Contains(out.String(), s)
		})
	}
	collect("the program's report", "ready")
	got := out.String()
	for _, want := range []string{
		"size 37x113", `term "xterm-256color"`,
		"wrote-through /dev/stderr", "reopen /dev/stderr <nil>",
		"wrote-through /dev/stdout", "reopen /dev/stdout <nil>",
		"wrote-through /dev/tty", "reopen /dev/tty <nil>",
		"wrote-through /proc/self/fd/2", "reopen /proc/self/fd/2 <nil>",
		"create /dev/newfile open /dev/newfile: read-only file system",
		"mkdir /dev/newdir mkdir /dev/newdir: read-only file system",
		"lstat /dev/newfile lstat /dev/newfile: no such file or directory",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the program's report lacks %q:\n%s", want, got)
		}
	}
	ctl.ok("resize", map[string]any{"session_id": "s-term", "rows": 50, "cols": 132}, nil)
	collect("the resize", "resized 50x132")
	ctl.ok("write_stdin", map[string]any{"session_id": "s-term", "data": []byte("done\n")}, nil)
	end := endOf(t, readUntil(t, c, time.Now().Add(60*time.Second), "s-term ended", isEnded))
	if end.Termination != "exited" || end.ExitCode != 0 {
		t.Errorf("s-term ended %+v, want exit 0; output:\n%s", end, out.String())
	}

	// No size: 24×80. A template's own TERM is kept.
	tok = f.create(ctl, "s-termset", f.plan("termset", "tiny"))
	ctl.ok("start_session", map[string]any{"session_id": "s-termset", "start_token": tok}, nil)
	c.ok("attach", map[string]any{"session_id": "s-termset"}, nil)
	out.Reset()
	collect("the second program's report", "ready")
	got = out.String()
	for _, want := range []string{"size 24x80", `term "dumb"`} {
		if !strings.Contains(got, want) {
			t.Errorf("the second program's report lacks %q:\n%s", want, got)
		}
	}
	ctl.ok("write_stdin", map[string]any{"session_id": "s-termset", "data": []byte("done\n")}, nil)
	readUntil(t, c, time.Now().Add(60*time.Second), "s-termset ended", isEnded)
	for _, id := range []string{"s-term", "s-termset"} {
		ctl.ok("cleanup_session", map[string]any{"session_id": id}, nil)
	}
	g.stop(t)
}
