// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/testenv"
)

// TestGlovedStreamAuditLifetime: a session's stream audit file lives as
// long as its record in the store. Sessions run through an inherited
// stream; one is cleaned up, one is not, and a stray audit file of no
// session is left in the store. gloved restarts with its store clock a
// day and an hour ahead (a glove_testfaults build), so the cleaned-up
// session is past the retention window: the stray file goes at start-up,
// the cleaned-up session's file goes with its record at the next
// compaction, the other sessions keep theirs, and the cleaned-up
// session's id, used again, runs its stream with a fresh audit file.
func TestGlovedStreamAuditLifetime(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	faulty := buildFaultyGloved(t, e)
	f := newFixture(t, e, map[string][]string{"streamer": {"stream"}})
	sock := startUpstream(t, e, f)
	args := withStream(t, e, f, sock)
	const bound = "GLOVED_TEST_JOURNAL_RECORDS=40"
	auditOf := func(id string) string { return filepath.Join(f.storeDir, "stream-"+id+".audit") }

	// The receipt journal has the same bound: each session's receipt is
	// acknowledged, as a controller does.
	var acked uint64
	run := func(c *client, id string) {
		t.Helper()
		tok := f.create(c, id, f.plan("streamer", "tiny"))
		c.ok("start_session", map[string]any{"session_id": id, "start_token": tok}, nil)
		if end := attach(t, c, id); end.Status != 0 || !strings.Contains(end.output, "reply pong:again") {
			t.Fatalf("%s: status %d, output %q", id, end.Status, end.output)
		}
		var page struct {
			Envelopes []receipt.Envelope `json:"envelopes"`
		}
		c.ok("receipts_page", map[string]any{"after": acked, "limit": 100}, &page)
		if len(page.Envelopes) == 0 {
			t.Fatalf("%s: no receipt", id)
		}
		last := page.Envelopes[len(page.Envelopes)-1]
		c.ok("receipts_ack", map[string]any{"seq": last.Seq, "envelope_mac": last.EnvelopeMAC}, nil)
		acked = last.Seq
	}
	g := startGlovedAt(t, e, faulty, []string{bound}, args...)
	c := dial(t, g.socket)
	run(c, "sa-gone")
	c.ok("cleanup_session", map[string]any{"session_id": "sa-gone"}, nil)
	run(c, "sa-kept")
	g.stop(t)
	for _, id := range []string{"sa-gone", "sa-kept"} {
		if _, err := os.Stat(auditOf(id)); err != nil {
			t.Fatalf("the stream audit of %s: %v", id, err)
		}
	}
	// A stray audit file, as a compaction by `glove store` would leave.
	writeProtected(t, auditOf("sa-stray"), []byte(`{"seq":1}`+"\n"), e.UID, e.GID)

	g = startGlovedAt(t, e, faulty, []string{bound, "GLOVED_TEST_STORE_CLOCK_SKEW=25h"}, args...)
	c = dial(t, g.socket)
	if _, err := os.Stat(auditOf("sa-stray")); !os.IsNotExist(err) {
		t.Errorf("the stray audit file after start-up: %v, want it removed\nlog: %s", err, g.log)
	}
	// Sessions until a compaction lets sa-gone go (the bound of 40
	// records brings one within a few).
	var ran []string
	for i := 0; !logLine(g, `"event":"stream_audit_removed"`, `"session_id":"sa-gone"`, `"why":"its session left the store"`); i++ {
		if i == 8 {
			t.Fatalf("8 sessions and no compaction removed sa-gone's audit\nlog: %s", g.log)
		}
		id := fmt.Sprintf("sa-%d", i)
		run(c, id)
		c.ok("cleanup_session", map[string]any{"session_id": id}, nil)
		ran = append(ran, id)
	}
	if _, err := os.Stat(auditOf("sa-gone")); !os.IsNotExist(err) {
		t.Errorf("the audit of sa-gone, which left the store: %v, want it removed", err)
	}
	for _, id := range append([]string{"sa-kept"}, ran...) {
		if _, err := os.Stat(auditOf(id)); err != nil {
			t.Errorf("the audit of %s, still in the store: %v", id, err)
		}
	}
	// The id is free again, and so is its audit file.
	run(c, "sa-gone")
	g.stop(t)
	audit, err := os.ReadFile(auditOf("sa-gone"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(audit)), "\n"); len(lines) != 4 || !strings.HasPrefix(lines[0], `{"seq":1,"session":"sa-gone"`) {
		t.Errorf("the reused id's audit holds %d records, want its own 4 from seq 1:\n%s", len(lines), audit)
	}
	for _, want := range [][]string{
		{`"event":"stream_audit_removed"`, `"session_id":"sa-stray"`, `"why":"no session of the store has its id"`},
		{`"dropped":1`},
	} {
		if !logLine(g, want...) {
			t.Errorf("gloved's log has no line with %q:\n%s", want, g.log)
		}
	}
}

// logLine says whether a line of gloved's log holds every one of parts.
func logLine(g *gloved, parts ...string) bool {
	for _, l := range strings.Split(g.log.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}
