// SPDX-License-Identifier: Apache-2.0

package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/state/journal"
)

// clock is a test clock the store reads; tests move it.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newClock() *clock { return &clock{t: time.UnixMilli(1_800_000_000_000)} }

// fastDir is a private directory on tmpfs when there is one: the
// endurance tests write hundreds of thousands of records, and what they
// test is the store's logic, not the disk's fdatasync.
func fastDir(t testing.TB) string {
	t.Helper()
	base := t.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		b, err := os.MkdirTemp("/dev/shm", "glove-store-test-")
		if err == nil {
			t.Cleanup(func() {
				if err := os.RemoveAll(b); err != nil {
					t.Error(err)
				}
			})
			base = b
		}
	}
	d := filepath.Join(base, "store")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

var testRT = Runtime{BootID: "01234567-89ab-cdef-0123-456789abcdef", PID: 42, StartTicks: 7, CgroupInode: 9}

// lifecycleSteps is how many records a session writes after its creation
// (preparing, running with its runtime, stopping, exited, cleanup).
const lifecycleSteps = 5

// lifecycle walks a created session to exited and cleans it up, checking
// every write succeeds: a session once created never meets a full store.
func lifecycle(t testing.TB, s *Store, id string, steps int) {
	t.Helper()
	do := []func() error{
		func() error { _, err := s.Transition(id, Preparing, ""); return err },
		func() error { _, err := s.Run(id, testRT); return err },
		func() error { _, err := s.Transition(id, Stopping, "stop"); return err },
		func() error { _, err := s.Transition(id, Exited, "exited"); return err },
		func() error { _, err := s.Cleanup(id); return err },
	}
	for i, f := range do[:steps] {
		if err := f(); err != nil {
			t.Fatalf("session %s, step %d: %v", id, i+1, err)
		}
	}
}

// TestCompactRoundTrip: a compacted store reopens with every session as it
// was (a plan only while created), and goes on from there.
func TestCompactRoundTrip(t *testing.T) {
	d := dir(t)
	c := newClock()
	s, _, err := Open(Options{Dir: d, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	for steps := 0; steps <= lifecycleSteps; steps++ {
		id := fmt.Sprintf("s%d", steps)
		if _, _, err := s.Create(req(id, "k"+id)); err != nil {
			t.Fatal(err)
		}
		c.t = c.t.Add(time.Second)
		lifecycle(t, s, id, steps)
	}
	if _, _, err := s.Create(req("f1", "kf1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition("f1", Failed, "plan_rejected"); err != nil {
		t.Fatal(err)
	}
	want := map[string]Session{}
	for _, id := range s.List() {
		sess, _ := s.Get(id)
		if sess.State != Created {
			sess.Plan = nil
		}
		want[id] = sess
	}
	info, err := s.Compact()
	if err != nil {
		t.Fatal(err)
	}
	// Records before: a creation and steps records for each of s0..s5,
	// and f1's creation and failure.
	if info.Sessions != lifecycleSteps+2 || info.Dropped != 0 || info.RecordsAfter != 2 || info.RecordsBefore != (lifecycleSteps+1)+(0+1+2+3+4+5)+2 {
		t.Fatalf("compact: %+v", info)
	}
	check := func(s *Store) {
		t.Helper()
		if len(s.List()) != len(want) {
			t.Fatalf("%d sessions, want %d", len(s.List()), len(want))
		}
		for id, w := range want {
			got, err := s.Get(id)
			if err != nil || !reflect.DeepEqual(got, w) {
				t.Fatalf("session %s after compaction:\n got %+v %v\nwant %+v", id, got, err, w)
			}
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, _, err = Open(Options{Dir: d, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s)
	// Retries of every session still answer as before; the lifecycles
	// go on.
	for id := range want {
		if _, existing, err := s.Create(req(id, "k"+id)); err != nil || !existing {
			t.Fatalf("retry of %s after compaction: %v %v", id, existing, err)
		}
	}
	if _, _, err := s.Create(req("s3", "other")); !errors.Is(err, ErrConflict) {
		t.Fatalf("reused id after compaction: %v", err)
	}
	if _, err := s.Transition("s2", Stopping, "stop"); err != nil { // s2 is running
		t.Fatal(err)
	}
	lifecycle(t, s, "s0", lifecycleSteps)
}

// TestRetention: a cleaned-up session answers retries for the retention
// window; after it, a compaction lets it go and its id and key are free.
func TestRetention(t *testing.T) {
	d := dir(t)
	c := newClock()
	s, _, err := Open(Options{Dir: d, Now: c.now, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Create(req("s1", "k1")); err != nil {
		t.Fatal(err)
	}
	lifecycle(t, s, "s1", lifecycleSteps)
	c.t = c.t.Add(59 * time.Minute)
	if info, err := s.Compact(); err != nil || info.Dropped != 0 || info.DroppedIDs != nil {
		t.Fatalf("compaction inside the window: %+v %v", info, err)
	}
	if sess, existing, err := s.Create(req("s1", "k1")); err != nil || !existing || sess.State != Exited || sess.CleanedAt.IsZero() {
		t.Fatalf("retry inside the window: %+v %v %v", sess, existing, err)
	}
	c.t = c.t.Add(time.Minute)
	if info, err := s.Compact(); err != nil || info.Dropped != 1 || info.Sessions != 0 || !slices.Equal(info.DroppedIDs, []string{"s1"}) {
		t.Fatalf("compaction after the window: %+v %v", info, err)
	}
	if sess, existing, err := s.Create(req("s1", "k1")); err != nil || existing || sess.State != Created {
		t.Fatalf("create after the window: %+v %v %v", sess, existing, err)
	}
}

// TestCleanupRules: only an ended session is cleaned up; twice is a no-op.
func TestCleanupRules(t *testing.T) {
	s := open(t, dir(t))
	defer s.Close()
	if _, _, err := s.Create(req("s1", "k1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cleanup("s1"); !errors.Is(err, ErrTransition) {
		t.Fatalf("cleanup of a created session: %v", err)
	}
	if _, err := s.Cleanup("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cleanup of an unknown session: %v", err)
	}
	lifecycle(t, s, "s1", lifecycleSteps)
	n := s.j.Count()
	if _, err := s.Cleanup("s1"); err != nil || s.j.Count() != n {
		t.Fatalf("second cleanup: %v (records %d→%d)", err, n, s.j.Count())
	}
}

// TestEndurance drives 20,000 sessions through the store (create to
// cleanup, with the clock moving a second per session and a one-hour
// retention): the journal stays within its bounds by compacting on its
// own, and reopens with exactly the live set.
func TestEndurance(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	d := fastDir(t)
	c := newClock()
	var compactions, failed int
	o := Options{Dir: d, Now: c.now, Retention: time.Hour, OnCompact: func(_ CompactInfo, err error) {
		compactions++
		if err != nil {
			failed++
		}
	}}
	s, _, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	maxRecords, maxBytes := 0, int64(0)
	const n = 20000
	for i := range n {
		id := fmt.Sprintf("e%05d", i)
		if _, _, err := s.Create(req(id, "k"+id)); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		lifecycle(t, s, id, lifecycleSteps)
		c.t = c.t.Add(time.Second)
		st := s.j.Stats()
		maxRecords, maxBytes = max(maxRecords, st.Records), max(maxBytes, st.Bytes)
	}
	st := s.Stats()
	t.Logf("%d sessions in %v: %d compactions; journal peak %d records, %d bytes; now %d records, %d bytes, %d sessions kept, chain at %d",
		n, time.Since(start).Round(time.Millisecond), compactions, maxRecords, maxBytes, st.Journal.Records, st.Journal.Bytes, st.Cleaned, st.Journal.Seq)
	if compactions == 0 || failed != 0 || maxRecords > st.Journal.MaxRecords || maxBytes > st.Journal.MaxBytes {
		t.Fatalf("%d compactions (%d failed), peak %d records %d bytes", compactions, failed, maxRecords, maxBytes)
	}
	// Every record ever written is in the chain: a creation and
	// lifecycleSteps more per session.
	perSession := 1 + lifecycleSteps
	if st.Journal.Seq < uint64(perSession*n) {
		t.Fatalf("chain at %d, want at least %d", st.Journal.Seq, perSession*n)
	}
	// The retention window holds 3,600 of them.
	if st.Cleaned > 3601+st.Journal.MaxRecords/2/perSession || st.Cleaned < 3600 {
		t.Fatalf("%d cleaned-up sessions kept", st.Cleaned)
	}
	live := s.List()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, _, err = Open(o)
	if err != nil {
		t.Fatalf("reopen after the endurance run: %v", err)
	}
	defer s.Close()
	if len(s.List()) != len(live) {
		t.Fatalf("%d sessions after reopen, %d before", len(s.List()), len(live))
	}
}

// TestFillPositions: with the journal's record bound placed at each of the
// 6 positions a session's records can land, sessions are refused at
// creation, never stopped in the middle: every admitted session reaches
// its end and its cleanup, a session interrupted at any step can be
// recorded as failed after a reopen (what gloved's recovery does), and
// the refusal says the store is full.
func TestFillPositions(t *testing.T) {
	for pos := range 1 + lifecycleSteps {
		t.Run(fmt.Sprint(pos), func(t *testing.T) {
			d := dir(t)
			o := Options{Dir: d, MaxRecords: 40 + pos}
			s, _, err := Open(o)
			if err != nil {
				t.Fatal(err)
			}
			admitted := 0
			for i := 0; ; i++ {
				id := fmt.Sprintf("p%d", i)
				_, _, err := s.Create(req(id, "k"+id))
				if errors.Is(err, ErrFull) {
					break
				}
				if err != nil {
					t.Fatalf("create %d: %v", i, err)
				}
				admitted++
				// No cleanup: the journal only fills. The last session
				// stops part-way (a crash), at a step set by pos.
				steps := lifecycleSteps - 1
				if i%3 == 2 {
					steps = pos % lifecycleSteps
				}
				lifecycle(t, s, id, steps)
			}
			if admitted == 0 {
				t.Fatal("no session admitted")
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// Restart: recovery records each unfinished session as failed
			// and the controller cleans every one up.
			s, _, err = Open(o)
			if err != nil {
				t.Fatalf("reopen of a full store: %v", err)
			}
			defer s.Close()
			for _, id := range s.List() {
				sess, _ := s.Get(id)
				if !sess.State.Terminal() {
					if _, err := s.Transition(id, Failed, "recovered:gone"); err != nil {
						t.Fatalf("recover %s from %s: %v", id, sess.State, err)
					}
				}
				if _, err := s.Cleanup(id); err != nil {
					t.Fatalf("clean up %s: %v", id, err)
				}
			}
			st := s.j.Stats()
			if st.Records > st.MaxRecords {
				t.Fatalf("%d records over the bound %d", st.Records, st.MaxRecords)
			}
			t.Logf("bound %d records: %d sessions admitted, journal at %d", o.MaxRecords, admitted, st.Records)
		})
	}
}

// BenchmarkSessions runs whole store-level sessions (create to cleanup,
// 6 records each, on tmpfs when there is one; GLOVE_STORE_BENCH_DIR names
// another directory) and reports records, bytes and time per session.
// A million: go test -run=NONE -bench=Sessions -benchtime=1000000x ./supervisor/state/store/
func BenchmarkSessions(b *testing.B) {
	d := fastDir(b)
	if env := os.Getenv("GLOVE_STORE_BENCH_DIR"); env != "" {
		d = filepath.Join(env, fmt.Sprintf("bench-%d", time.Now().UnixNano()))
		if err := os.Mkdir(d, 0o700); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(d) })
	}
	c := newClock()
	s, _, err := Open(Options{Dir: d, Now: c.now, Retention: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	before := s.j.Stats()
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("b%07d", i)
		if _, _, err := s.Create(req(id, "k"+id)); err != nil {
			b.Fatal(err)
		}
		lifecycle(b, s, id, lifecycleSteps)
		c.t = c.t.Add(time.Second)
	}
	b.StopTimer()
	st := s.Stats()
	b.ReportMetric(float64(st.Journal.Seq-before.Seq)/float64(b.N), "records/session")
	b.ReportMetric(float64(st.Journal.Written-before.Written)/float64(b.N), "bytes/session")
	b.ReportMetric(float64(st.Compactions), "compactions")
	b.ReportMetric(float64(st.Journal.Bytes), "live-bytes")
}

// TestOpenBrickedStore: a store written by a gloved before compaction
// existed, filled to the journal's 10,000-record bound with its last
// session left starting (what bricked installations after 1,428
// sessions), opens, compacts, and takes recovery's failure record and new
// sessions again.
func TestOpenBrickedStore(t *testing.T) {
	d := fastDir(t)
	j, _, _, err := journal.Open(journal.Options{Dir: d, Name: FileName, Kind: Kind, MaxRecordBytes: MaxPlanBytes + 4096})
	if err != nil {
		t.Fatal(err)
	}
	at := int64(1_800_000_000_000)
	put := func(r record) {
		t.Helper()
		at++
		r.AtMS = at
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	steps := []State{Preparing, Starting, "runtime", Running, Stopping, Exited}
	for i := 0; i <= 1428; i++ {
		id := fmt.Sprintf("e%05d", i)
		r := req(id, "k"+id)
		put(record{Type: "create", Session: id, Key: r.IdempotencyKey, Controller: r.ControllerPlanDigest, Content: r.PlanContentDigest, Plan: r.Plan})
		from := Created
		for k, to := range steps {
			if i == 1428 && k == 3 {
				break // the 10,000th record is its runtime
			}
			if to == "runtime" {
				rt := testRT
				put(record{Type: "runtime", Session: id, Runtime: &rt})
				continue
			}
			put(record{Type: "transition", Session: id, From: from, To: to})
			from = to
		}
	}
	if n := j.Count(); n != 10000 {
		t.Fatalf("setup: %d records", n)
	}
	if _, err := j.Append([]byte(`{}`)); !errors.Is(err, journal.ErrFull) {
		t.Fatalf("setup: the journal is not full: %v", err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	compacted := 0
	s, _, err := Open(Options{Dir: d, OnCompact: func(_ CompactInfo, err error) {
		if err != nil {
			t.Errorf("compaction at open: %v", err)
		}
		compacted++
	}})
	if err != nil {
		t.Fatalf("open the full store: %v", err)
	}
	defer s.Close()
	if compacted != 1 {
		t.Fatalf("%d compactions at open", compacted)
	}
	if sess, err := s.Transition("e01428", Failed, "recovered:gone"); err != nil || sess.State != Failed {
		t.Fatalf("recovery's failure record: %v", err)
	}
	if _, _, err := s.Create(req("new", "knew")); err != nil {
		t.Fatalf("a new session: %v", err)
	}
	lifecycle(t, s, "new", lifecycleSteps)
	st := s.Stats()
	t.Logf("opened a store of 10,000 records (1,429 sessions): compacted to %d records, %d bytes", st.Journal.Records, st.Journal.Bytes)
}
