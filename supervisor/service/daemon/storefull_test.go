// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/testenv"
)

// TestGlovedStoreFull fills the session store through gloved with the
// journals bounded to 40..47 records (a glove_testfaults build), so that
// the bound falls at each of the 6 positions a session's records take
// (creation, preparing, running, stopping, exited, cleanup), some twice:
// sessions are created and left unstarted until gloved refuses the next
// with "session store full"; then the admitted ones are started and run
// (their records were reserved), gloved is killed with one of them
// running and restarted (recovery records its failure), and every
// session ends: none is left between created and its end. Cleaning up
// (and giving up the unstarted ones) releases the room: a new session is
// admitted and runs.
func TestGlovedStoreFull(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	becomeReaper(t)
	testenv.CheckLeaks(t, e.UID)
	faulty := buildFaultyGloved(t, e)
	want := "args=[\"load\"] home=/home/agent cwd=/workspace\r\nin=\"granted tree\" err=<nil>\r\n"
	for bound := 40; bound < 48; bound++ {
		f := newFixture(t, e, map[string][]string{"load": {"load"}, "sleeper": {"sleep"}})
		env := []string{fmt.Sprintf("GLOVED_TEST_JOURNAL_RECORDS=%d", bound)}
		g := startGlovedAt(t, e, faulty, env, f.args...)
		c, err := dialRaw(g.socket)
		if err != nil {
			t.Fatal(err)
		}
		tokens := map[string]string{}
		var order []string
		refusal := ""
		for i := 0; refusal == ""; i++ {
			if i == 20 {
				t.Fatalf("bound %d: 20 sessions created, none refused", bound)
			}
			id := fmt.Sprintf("sf-%d", i)
			template := "load"
			if i == 0 {
				template = "sleeper"
			}
			plObj, err := planObject(f.plan(template, "tiny"))
			if err != nil {
				t.Fatal(err)
			}
			var cr struct {
				Token string `json:"start_token"`
			}
			if err := c.call("create_session", createParams(id, plObj), &cr); err != nil {
				if !strings.Contains(err.Error(), "-32004 session store full") {
					t.Fatalf("bound %d: create %s: %v", bound, id, err)
				}
				refusal = err.Error()
				break
			}
			tokens[id] = cr.Token
			order = append(order, id)
		}
		// Every admitted session runs to its end on the full store; the
		// first (a sleeper) is left running.
		for _, id := range order {
			if err := c.call("start_session", map[string]any{"session_id": id, "start_token": tokens[id]}, nil); err != nil {
				t.Fatalf("bound %d: start %s on a full store: %v\nlog: %s", bound, id, err, g.log)
			}
			if id == order[0] {
				continue
			}
			end, err := c.attach(id, nil)
			if err != nil || end.State != "exited" || end.output != want {
				t.Fatalf("bound %d: %s on a full store: %+v %v\nlog: %s", bound, id, end.End, err, g.log)
			}
		}
		c.Close()
		if err := g.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if err := g.cmd.Wait(); err == nil {
			t.Fatal("gloved survived SIGKILL")
		}
		reapOrphans(t)
		g = startGlovedAt(t, e, faulty, env, f.args...)
		if c, err = dialRaw(g.socket); err != nil {
			t.Fatal(err)
		}
		for _, id := range order {
			var st struct {
				State string `json:"state"`
			}
			if err := c.call("session_status", map[string]any{"session_id": id}, &st); err != nil || (st.State != "exited" && st.State != "failed") {
				t.Fatalf("bound %d: %s after the restart: %q %v\nlog: %s", bound, id, st.State, err, g.log)
			}
			if err := c.call("cleanup_session", map[string]any{"session_id": id}, nil); err != nil {
				t.Fatalf("bound %d: clean up %s: %v", bound, id, err)
			}
		}
		var archive []receipt.Envelope
		if archive, err = pageAndAck(c, f.key, archive); err != nil || len(archive) != len(order) {
			t.Fatalf("bound %d: %d receipts for %d sessions: %v", bound, len(archive), len(order), err)
		}
		// The room is back.
		plObj, err := planObject(f.plan("load", "tiny"))
		if err != nil {
			t.Fatal(err)
		}
		if err := runToEnd(c, "sf-after", createParams("sf-after", plObj), want); err != nil {
			t.Fatalf("bound %d: a session after clean-up: %v\nlog: %s", bound, err, g.log)
		}
		t.Logf("bound %d records: %d sessions admitted, then %q; all ended after a kill and restart", bound, len(order), refusal[strings.Index(refusal, "session store full"):])
		c.Close()
		g.stop(t)
		time.Sleep(10 * time.Millisecond)
	}
}
