// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/state/journal"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/supervisor/state/store"
	"github.com/glove-sandbox/glove/testenv"
)

// TestGlovedCompactionCrash kills gloved (SIGKILL) at every fault point of
// a compaction of each journal, in the middle of a controller's work
// (sessions created, run, cleaned up; receipts paged, archived and
// acknowledged), then restarts it on the same store. Every time: gloved
// starts, the interrupted session is ended, every session whose cleanup
// was answered is still known to a retried create_session (its
// idempotency key kept), the receipts after the archive chain to the
// archive's last MAC, and the whole archive verifies from the anchor.
// Both journals are bounded to 48 records (a glove_testfaults build) so
// compactions come every few sessions.
func TestGlovedCompactionCrash(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	becomeReaper(t)
	testenv.CheckLeaks(t, e.UID)
	f := newFixture(t, e, map[string][]string{"load": {"load"}})
	faulty := buildFaultyGloved(t, e)
	want := "args=[\"load\"] home=/home/agent cwd=/workspace\r\nin=\"granted tree\" err=<nil>\r\n"
	bound := "GLOVED_TEST_JOURNAL_RECORDS=48"

	var archive []receipt.Envelope
	cleaned := map[string]map[string]any{} // session id → its create params
	n := 0
	for _, kind := range []string{store.Kind, receipt.Kind} {
		for _, point := range []string{"compact-begin", "compact-partial", "compact-written", "compact-synced", "compact-renamed", "compact-dir-synced"} {
			name := kind + ":" + point
			g := startGlovedAt(t, e, faulty, []string{"GLOVED_TEST_JOURNAL_FAULT=" + name, bound}, f.args...)
			c, err := dialRaw(g.socket)
			if err != nil {
				t.Fatal(err)
			}
			var inflight string
			for i := 0; ; i++ {
				if i == 40 {
					t.Fatalf("%s: 40 sessions without reaching the fault point\nlog: %s", name, g.log)
				}
				id := fmt.Sprintf("cc-%03d", n)
				n++
				plObj, err := planObject(f.plan("load", "tiny"))
				if err != nil {
					t.Fatal(err)
				}
				params := createParams(id, plObj)
				inflight = id
				if err = runToEnd(c, id, params, want); err == nil {
					cleaned[id] = params
					archive, err = pageAndAck(c, f.key, archive)
				}
				if err != nil {
					break
				}
			}
			c.Close()
			done := make(chan error, 1)
			go func() { done <- g.cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("%s: a request failed but gloved did not die\nlog: %s", name, g.log)
			}
			if ws, ok := g.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("%s: gloved ended with %v, want SIGKILL at the fault point\nlog: %s", name, g.cmd.ProcessState, g.log)
			}
			reapOrphans(t)

			// The same store, the same bounds, no fault.
			g2 := startGlovedAt(t, e, faulty, []string{bound}, f.args...)
			c2, err := dialRaw(g2.socket)
			if err != nil {
				t.Fatal(err)
			}
			var st struct {
				State string `json:"state"`
			}
			if err := c2.call("session_status", map[string]any{"session_id": inflight}, &st); err == nil && st.State != "exited" && st.State != "failed" && st.State != "created" {
				t.Errorf("%s: the interrupted session %s is %s after the restart", name, inflight, st.State)
			}
			for id, params := range cleaned {
				var cr struct {
					Existing bool `json:"existing"`
				}
				if err := c2.call("create_session", params, &cr); err != nil || !cr.Existing {
					t.Fatalf("%s: retried create_session of cleaned-up %s: existing %v, %v\nlog: %s", name, id, cr.Existing, err, g2.log)
				}
			}
			if archive, err = pageAndAck(c2, f.key, archive); err != nil {
				t.Fatalf("%s: receipts after the restart: %v\nlog: %s", name, err, g2.log)
			}
			for _, j := range []struct{ file, kind string }{{store.FileName, store.Kind}, {receipt.FileName, receipt.Kind}} {
				js, err := journal.Peek(f.storeDir, j.file, j.kind)
				if err != nil || js.Records > 48 {
					t.Fatalf("%s: %s journal after the restart: %+v %v", name, j.kind, js, err)
				}
			}
			t.Logf("%s: killed after %d sessions; restarted, %d cleaned-up sessions known, %d receipts archived", name, n, len(cleaned), len(archive))
			c2.Close()
			g2.stop(t)
			if strings.Contains(g2.log.String(), "compaction failed") {
				t.Errorf("%s: %s", name, g2.log)
			}
		}
	}
	if err := receipt.Verify(f.key, testAnchor, archive); err != nil {
		t.Fatalf("the archive of %d receipts: %v", len(archive), err)
	}
}

// runToEnd runs one session to its end and cleans it up.
func runToEnd(c *rawClient, id string, params map[string]any, want string) error {
	var cr struct {
		Token string `json:"start_token"`
	}
	if err := c.call("create_session", params, &cr); err != nil {
		return err
	}
	if err := c.call("start_session", map[string]any{"session_id": id, "start_token": cr.Token}, nil); err != nil {
		return err
	}
	end, err := c.attach(id, nil)
	if err != nil {
		return err
	}
	if end.State != "exited" || end.output != want {
		return fmt.Errorf("%s: ended %+v with %q", id, end.End, end.output)
	}
	return c.call("cleanup_session", map[string]any{"session_id": id}, nil)
}

// pageAndAck pages every receipt after the archive, checks it chains to
// the archive, archives and acknowledges it.
func pageAndAck(c *rawClient, key []byte, archive []receipt.Envelope) ([]receipt.Envelope, error) {
	for {
		var page struct {
			Envelopes []receipt.Envelope `json:"envelopes"`
		}
		if err := c.call("receipts_page", map[string]any{"after": len(archive), "limit": 100}, &page); err != nil {
			return archive, err
		}
		if len(page.Envelopes) == 0 {
			return archive, nil
		}
		prev := testAnchor
		if len(archive) > 0 {
			prev = archive[len(archive)-1].EnvelopeMAC
		}
		if err := receipt.Verify(key, prev, page.Envelopes); err != nil {
			return archive, errors.Join(errors.New("receipts do not chain to the archive"), err)
		}
		archive = append(archive, page.Envelopes...)
		last := archive[len(archive)-1]
		if err := c.call("receipts_ack", map[string]any{"seq": last.Seq, "envelope_mac": last.EnvelopeMAC}, nil); err != nil {
			return archive, err
		}
	}
}
