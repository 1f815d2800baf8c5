// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/state/journal"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/supervisor/state/store"
	"github.com/glove-sandbox/glove/testenv"
)

// enduranceSessions is how many real sessions TestGlovedEndurance runs
// (GLOVE_ENDURANCE_SESSIONS overrides it).
const enduranceSessions = 2000

// TestGlovedEndurance drives real sessions through gloved as a controller
// does — create, start, attach to the end, clean up; receipts paged,
// archived and acknowledged as they come — with a restart of gloved half
// way. Both journals must stay within their bounds by compacting on their
// own (each session costs 8 store records and 3 receipt records, so 2,000
// sessions write 16,000 and 6,000 records against a 10,000-record bound),
// every receipt must verify from the anchor across the compactions, and
// nothing may leak.
func TestGlovedEndurance(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: thousands of sessions")
	}
	n := enduranceSessions
	if v := os.Getenv("GLOVE_ENDURANCE_SESSIONS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 2 {
			t.Fatalf("GLOVE_ENDURANCE_SESSIONS=%q", v)
		}
	}
	e := testenv.Get(t)
	testenv.CheckLeaks(t, e.UID)
	e.ConfigureForSessions(t)
	f := newFixture(t, e, map[string][]string{"load": {"load"}})
	g := f.start()
	began := time.Now()
	var archive []receipt.Envelope
	var logs strings.Builder
	for half, count := range []int{n / 2, n - n/2} {
		if half == 1 {
			g.stop(t)
			logs.WriteString(g.log.String())
			g = f.start()
		}
		archive = enduranceRun(t, f, g, half*(n/2), count, archive)
	}
	elapsed := time.Since(began)
	g.stop(t)
	logs.WriteString(g.log.String())

	if err := receipt.Verify(f.key, testAnchor, archive); err != nil || len(archive) != n {
		t.Fatalf("archive of %d receipts (want %d): %v", len(archive), n, err)
	}
	for _, j := range []struct{ name, kind string }{{store.FileName, store.Kind}, {receipt.FileName, receipt.Kind}} {
		st, err := journal.Peek(f.storeDir, j.name, j.kind)
		if err != nil {
			t.Fatal(err)
		}
		compactions := strings.Count(logs.String(), `"journal":"`+j.kind+`"`)
		t.Logf("%s: chain at record %d, the file holds %d records and %d bytes; %d automatic compactions", j.kind, st.Seq, st.Records, st.Bytes, compactions)
		if st.Records > 10000 || st.Bytes > 64<<20 || compactions == 0 && st.Seq > 10000 {
			t.Errorf("%s: %d records, %d bytes, %d compactions", j.kind, st.Records, st.Bytes, compactions)
		}
	}
	if strings.Contains(logs.String(), "compaction failed") {
		t.Errorf("a compaction failed:\n%s", logs.String())
	}
	t.Logf("%d sessions in %v (%.1f ms each)", n, elapsed.Round(time.Millisecond), float64(elapsed.Milliseconds())/float64(n))
}

// enduranceRun runs count sessions, numbered from first, over 4
// connections, while a controller goroutine pages, archives (verifying
// the chain from the last archived MAC) and acknowledges receipts.
func enduranceRun(t *testing.T, f *fixture, g *gloved, first, count int, archive []receipt.Envelope) []receipt.Envelope {
	t.Helper()
	const workers = 4
	want := "args=[\"load\"] home=/home/agent cwd=/workspace\r\nin=\"granted tree\" err=<nil>\r\n"
	jobs := make(chan int)
	errs := make(chan error, workers+1)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dialRaw(g.socket)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			for i := range jobs {
				id := fmt.Sprintf("end-%05d", i)
				plObj, err := planObject(f.plan("load", "tiny"))
				if err == nil {
					err = runToEnd(c, id, createParams(id, plObj), want)
				}
				if err != nil {
					errs <- err
					for range jobs {
					}
					return
				}
			}
		}()
	}
	stop := make(chan struct{})
	ctl := make(chan []receipt.Envelope, 1)
	go func() {
		a, err := controller(g, f.key, archive, stop)
		if err != nil {
			errs <- err
		}
		ctl <- a
	}()
	for i := first; i < first+count; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	close(stop)
	archive = <-ctl
	close(errs)
	for err := range errs {
		t.Fatalf("%v\nlog: %s", err, g.log)
	}
	return archive
}

// controller pages receipts after the archive's head every 20 ms until
// stop (then once more), verifies each page chains to the archive, and
// acknowledges the new head.
func controller(g *gloved, key []byte, archive []receipt.Envelope, stop chan struct{}) ([]receipt.Envelope, error) {
	c, err := dialRaw(g.socket)
	if err != nil {
		return archive, err
	}
	defer c.Close()
	for done := false; !done; {
		select {
		case <-stop:
			done = true
		case <-time.After(20 * time.Millisecond):
		}
		for {
			var page struct {
				Envelopes []receipt.Envelope `json:"envelopes"`
			}
			if err := c.call("receipts_page", map[string]any{"after": len(archive), "limit": 100}, &page); err != nil {
				return archive, err
			}
			if len(page.Envelopes) == 0 {
				break
			}
			prev := testAnchor
			if len(archive) > 0 {
				prev = archive[len(archive)-1].EnvelopeMAC
			}
			if err := receipt.Verify(key, prev, page.Envelopes); err != nil {
				return archive, fmt.Errorf("receipts after %d: %w", len(archive), err)
			}
			archive = append(archive, page.Envelopes...)
			last := archive[len(archive)-1]
			if err := c.call("receipts_ack", map[string]any{"seq": last.Seq, "envelope_mac": last.EnvelopeMAC}, nil); err != nil {
				return archive, err
			}
		}
	}
	return archive, nil
}
