// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/service/daemon"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/testenv"
)

// supervisorFigures is supervisor_status's answer and gloved's VmRSS.
type supervisorFigures struct {
	daemon.SupervisorStatus
	RSS string
}

func (f supervisorFigures) String() string {
	deref := func(p *int) int {
		if p == nil {
			return -1
		}
		return *p
	}
	return fmt.Sprintf("heap %d bytes (%d objects), %d goroutines, %d threads, %d descriptors, %d running, %d in the store, %d receipts held, RSS %s",
		f.HeapLiveBytes, f.HeapObjects, f.Goroutines, f.Threads, f.OpenDescriptors, f.SessionsRunning, deref(f.StoreSessions), deref(f.ReceiptsHeld), f.RSS)
}

// ackAll pages every receipt after seq (whose MAC is mac), checks each
// page chains on, acknowledges the last, and returns the new last seq
// and MAC: a controller that archives as it goes.
func ackAll(c *rawClient, key []byte, seq uint64, mac string) (uint64, string, error) {
	for {
		var page struct {
			Envelopes []receipt.Envelope `json:"envelopes"`
		}
		if err := c.call("receipts_page", map[string]any{"after": seq, "limit": 100}, &page); err != nil {
			return seq, mac, err
		}
		if len(page.Envelopes) == 0 {
			return seq, mac, nil
		}
		if err := receipt.Verify(key, mac, page.Envelopes); err != nil {
			return seq, mac, errors.Join(errors.New("receipts do not chain on"), err)
		}
		last := page.Envelopes[len(page.Envelopes)-1]
		if err := c.call("receipts_ack", map[string]any{"seq": last.Seq, "envelope_mac": last.EnvelopeMAC}, nil); err != nil {
			return seq, mac, err
		}
		seq, mac = last.Seq, last.EnvelopeMAC
	}
}

// memorySessions is how many sessions TestGlovedMemoryFlat runs:
// $GLOVE_MEMORY_SESSIONS, for a longer run by hand, or 2,000.
func memorySessions(t *testing.T) int {
	if v := os.Getenv("GLOVE_MEMORY_SESSIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 600 {
			t.Fatalf("GLOVE_MEMORY_SESSIONS=%q: want a number of at least 600", v)
		}
		return n
	}
	return 2000
}

// TestGlovedMemoryFlat drives a real gloved as a controller would, one
// session at a time — create, start, attach to the end, page and
// acknowledge the receipts, clean up — through thousands of sessions,
// with a one-minute idempotency retention whose window the store's clock
// (a glove_testfaults build) passes every half second. What gloved holds
// after the last session — its live heap after a collection, its heap
// objects, goroutines, threads and descriptors, the sessions in its store
// and its receipt journal's memory — must be what it held after the first
// 500, within a small constant: a supervisor that runs for months holds
// only what its bounds allow.
func TestGlovedMemoryFlat(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	f := newFixture(t, e, map[string][]string{"load": {"load"}})
	faulty := buildFaultyGloved(t, e)
	args := append(slices.Clone(f.args), "--idempotency-retention", "1m")
	env := []string{"GLOVED_TEST_STORE_CLOCK_RATE=120", "GLOVED_TEST_GC_ON_STATUS=1"}
	// By hand: a directory (writable by the service user) gets a heap
	// profile at each figure taken, to see what grows.
	if dir := os.Getenv("GLOVE_MEMORY_PROFILES"); dir != "" {
		env = append(env, "GLOVED_TEST_HEAP_PROFILES="+dir)
	}
	g := startGlovedAt(t, e, faulty, env, args...)
	logOnFailure(t, g)
	c, err := dialRaw(g.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := "args=[\"load\"] home=/home/agent cwd=/workspace\r\nin=\"granted tree\" err=<nil>\r\n"
	plObj, err := planObject(f.plan("load", "tiny"))
	if err != nil {
		t.Fatal(err)
	}
	figures := func() supervisorFigures {
		var s supervisorFigures
		if err := c.call("supervisor_status", nil, &s.SupervisorStatus); err != nil {
			t.Fatalf("supervisor_status: %v", err)
		}
		// Resident memory, for the record (the heap is what is judged:
		// the runtime returns freed pages to the kernel lazily).
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", g.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(st), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				s.RSS = strings.TrimSpace(v)
			}
		}
		return s
	}
	n, warm := memorySessions(t), 500
	var base supervisorFigures
	seq, mac := uint64(0), testAnchor
	for i := range n {
		if i%250 == 249 {
			// A plan expires five minutes after it is made: a long
			// run makes a new one now and then, as a controller would.
			if plObj, err = planObject(f.plan("load", "tiny")); err != nil {
				t.Fatal(err)
			}
		}
		id := fmt.Sprintf("m-%06d", i)
		if err := runToEnd(c, id, createParams(id, plObj), want); err != nil {
			t.Fatalf("session %d: %v\nlog: %s", i, err, g.log)
		}
		if seq, mac, err = ackAll(c, f.key, seq, mac); err != nil {
			t.Fatalf("receipts after session %d: %v", i, err)
		}
		switch {
		case i+1 == warm:
			base = figures()
			t.Logf("after %d sessions: %s", i+1, base)
		case (i+1)%500 == 0:
			t.Logf("after %d sessions: %s", i+1, figures())
		}
	}
	end := figures()
	t.Logf("after %d sessions: %s", n, end)
	// The bounds: the heap may differ by what a collection's timing and
	// the sessions inside the retention window at either moment make
	// (a few hundred KiB); it may not grow with the sessions run. 1,500
	// sessions at the 4 KB each gloved once kept would be 6 MB.
	if end.HeapLiveBytes > base.HeapLiveBytes+1<<20 || end.HeapObjects > base.HeapObjects+base.HeapObjects/4 {
		t.Errorf("the live heap grew from %d bytes (%d objects) after %d sessions to %d bytes (%d objects) after %d",
			base.HeapLiveBytes, base.HeapObjects, warm, end.HeapLiveBytes, end.HeapObjects, n)
	}
	if end.Goroutines > base.Goroutines+4 || end.Threads > base.Threads+4 || end.OpenDescriptors > base.OpenDescriptors+4 {
		t.Errorf("goroutines, threads, descriptors %d, %d, %d after %d sessions; %d, %d, %d after %d",
			base.Goroutines, base.Threads, base.OpenDescriptors, warm, end.Goroutines, end.Threads, end.OpenDescriptors, n)
	}
	// The store keeps a cleaned-up session past the window until its
	// next compaction, at half its 10,000-record bound: 1,000 sessions of
	// 5 records at most, and those of the window. The receipt journal
	// holds none once acknowledged.
	if end.StoreSessions == nil || *end.StoreSessions > 1100 || end.ReceiptsHeld == nil || *end.ReceiptsHeld != 0 || end.SessionsRunning != 0 {
		t.Errorf("after %d sessions: %s: want at most 1,100 in the store, 0 receipts held, 0 running", n, end)
	}
	g.stop(t)
}
