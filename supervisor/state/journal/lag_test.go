// SPDX-License-Identifier: Apache-2.0

package journal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// lagHeader rewrites both header slots of a file of cPayload records to
// commit only records 1..n, as a crash leaves the header of the single
// fdatasync protocol: the records after n are found by their hashes.
func lagHeader(b []byte, n int) {
	cur := curSlot(b)
	cur.count, cur.length, cur.head = uint64(n), dataStart, genesisHash(cur.id, cur.kind)
	if n > 0 {
		cur.length = uint64(cRecEnd(n))
		copy(cur.head[:], b[cRecEnd(n)-32:cRecEnd(n)])
	}
	putSlot(b, cur)
	old := cur
	old.index, old.gen = 1-cur.index, cur.gen-1
	putSlot(b, old)
}

// cJournal writes the three-record journal of the corruption tests and
// returns its directory, path and bytes.
func cJournal(t *testing.T) (string, string, []byte) {
	t.Helper()
	dir := testDir(t)
	j, _, _ := mustOpen(t, testOpts(dir))
	for i := 1; i <= 3; i++ {
		if _, err := j.Append(bytes.Repeat([]byte{byte('a' + i)}, cPayload)); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, testName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != cRecEnd(3) {
		t.Fatalf("setup: file is %d bytes, want %d", len(b), cRecEnd(3))
	}
	return dir, path, b
}

// TestHeaderLagAccepted: records past the header's commit point that
// continue the chain are committed; a partial one after them is a torn
// tail. The reopen brings nothing back and the journal goes on.
func TestHeaderLagAccepted(t *testing.T) {
	rs := int(RecordSize(cPayload))
	cases := []struct {
		name    string
		lag     int // records the header commits
		mutate  func(b []byte) []byte
		records int
		torn    int64
	}{
		{"header one record behind", 2, nil, 3, 0},
		{"header two records behind", 1, nil, 3, 0},
		{"header at the empty file", 0, nil, 3, 0},
		{"header behind, then a torn record", 1, func(b []byte) []byte {
			return append(b, make([]byte, rs/2)...)
		}, 3, int64(rs / 2)},
		{"header behind, last record cut short", 1, func(b []byte) []byte {
			return b[:len(b)-10]
		}, 2, int64(rs - 10)},
		// The price of a commit without a second header write: damage to
		// the one record past the header that is also the file's last
		// reads as a torn append (reported in TornTailBytes), as it
		// would after a crash in its write. Every other record is held
		// to the header or to the record after it (below).
		{"header behind, last record damaged", 2, func(b []byte) []byte {
			b[cRecOff(3)+recHeaderLen+7] ^= 1
			return b
		}, 2, int64(rs)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, path, b := cJournal(t)
			lagHeader(b, c.lag)
			if c.mutate != nil {
				b = c.mutate(b)
			}
			if err := os.WriteFile(path, b, 0600); err != nil {
				t.Fatal(err)
			}
			if st, err := Peek(dir, testName, "sessions"); err != nil || st.Seq != uint64(c.records) || st.Records != c.records {
				t.Fatalf("peek: %+v %v, want %d records", st, err, c.records)
			}
			j, recs, info, err := Open(testOpts(dir))
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if len(recs) != c.records || info.TornTailBytes != c.torn || j.Count() != c.records {
				t.Fatalf("%d records (count %d), torn %d; want %d, %d", len(recs), j.Count(), info.TornTailBytes, c.records, c.torn)
			}
			for i, r := range recs {
				if !bytes.Equal(r.Payload, bytes.Repeat([]byte{byte('a' + i + 1)}, cPayload)) {
					t.Fatalf("record %d payload %q", i+1, r.Payload)
				}
			}
			if got := refChain(t, j.id, j.kind, recs); got != j.Head() {
				t.Fatalf("head %x, recomputed %x", j.Head(), got)
			}
			if _, err := j.Append([]byte("next")); err != nil {
				t.Fatal(err)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			// Close committed everything in the header: the file now
			// holds no records past it.
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if s := curSlot(after); s.count != uint64(c.records+1) || s.length != uint64(len(after)) {
				t.Fatalf("header after close commits %d records, %d bytes; file %d bytes", s.count, s.length, len(after))
			}
			j, recs, info = mustOpen(t, testOpts(dir))
			defer j.Close()
			if len(recs) != c.records+1 || info.TornTailBytes != 0 {
				t.Fatalf("second open: %d records, torn %d", len(recs), info.TornTailBytes)
			}
		})
	}
}

// TestCorruptionPastHeader: the bytes past the header's commit point are
// untrusted like the rest. Whole records must continue the chain, and
// what follows the last of them must be what one torn append leaves.
func TestCorruptionPastHeader(t *testing.T) {
	rs := int(RecordSize(cPayload))
	cases := []struct {
		name   string
		lag    int
		opts   func(o *Options)
		mutate func(b []byte) []byte
		want   string
	}{
		{"damaged record before a whole one", 1, nil, func(b []byte) []byte {
			b[cRecOff(2)+recHeaderLen+7] ^= 1
			return b
		}, fmt.Sprintf("%d bytes past the committed length are not a torn record 2 (externally extended)", 2*rs)},
		{"damaged hash before a whole record", 1, nil, func(b []byte) []byte {
			b[cRecEnd(2)-1] ^= 0x80
			return b
		}, "not a torn record 2 (externally extended)"},
		{"swapped records past the header", 1, nil, func(b []byte) []byte {
			r2 := bytes.Clone(b[cRecOff(2):cRecEnd(2)])
			copy(b[cRecOff(2):], b[cRecOff(3):cRecEnd(3)])
			copy(b[cRecOff(3):], r2)
			return b
		}, "not a torn record 2 (externally extended)"},
		{"record missing past the header", 1, nil, func(b []byte) []byte {
			return append(b[:cRecOff(2)], b[cRecOff(3):cRecEnd(3)]...)
		}, "not a torn record 2 (externally extended)"},
		{"stale record after the whole ones", 1, nil, func(b []byte) []byte {
			return append(b, b[cRecOff(2):cRecEnd(2)]...)
		}, "not a torn record 4 (externally extended)"},
		{"record of another chain past the header", 2, nil, func(b []byte) []byte {
			// Well-formed, right sequence number, chained to another
			// journal's record 2.
			var id [16]byte
			id[0] = 1
			prev := recordHash(id, 2, &[32]byte{}, nil)
			p := bytes.Repeat([]byte{'x'}, cPayload)
			h := recordHash(id, 3, &prev, p)
			return append(b[:cRecOff(3)], encodeRecord(3, &prev, p, &h)...)
		}, "not a torn record 3 (externally extended)"},
		// A damaged length field must not pass for a torn append: the
		// record still verifies under its true length, which a torn
		// one never does, so Open refuses rather than drop it and the
		// durable records after it.
		{"enlarged length of the last record", 2, nil, func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[cRecOff(3):], cPayload+8)
			return b
		}, fmt.Sprintf("record 3 is whole in %d bytes but its length field says %d (damaged length)", rs, cPayload+8)},
		{"enlarged length over the record after it", 1, nil, func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[cRecOff(2):], uint32(cPayload+rs))
			return b
		}, fmt.Sprintf("record 2 is whole in %d bytes but its length field says %d (damaged length)", rs, cPayload+rs)},
		{"records past the header over MaxRecords", 1, func(o *Options) { o.MaxRecords = 2 }, func(b []byte) []byte {
			return b
		}, "record 3 past the header would pass the 2-record bound"},
		{"records past the header over MaxRecordBytes", 0, func(o *Options) { o.MaxRecordBytes = 64 }, func(b []byte) []byte {
			return b
		}, fmt.Sprintf("%d bytes past the committed length, more than one append leaves (externally extended)", 3*rs)},
		{"header ahead of a record past it", 2, nil, func(b []byte) []byte {
			// The header commits record 2 and the file is cut inside it.
			return b[:cRecOff(2)+50]
		}, "shorter than the committed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, path, b := cJournal(t)
			lagHeader(b, c.lag)
			b = c.mutate(b)
			if err := os.WriteFile(path, b, 0600); err != nil {
				t.Fatal(err)
			}
			o := testOpts(dir)
			if c.opts != nil {
				c.opts(&o)
			}
			j, _, _, err := Open(o)
			if err == nil {
				j.Close()
				t.Fatal("open succeeded")
			}
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant ErrCorrupt naming %q", err, c.want)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, b) {
				t.Fatal("rejected open changed the file")
			}
		})
	}
}

// closePoints are the fault points of the checkpoint Close writes.
var closePoints = []string{"checkpoint-before", "checkpoint-partial"}

// TestCloseCrash kills a writer inside Close's checkpoint: every record
// is still there, nothing is torn, and the journal goes on.
func TestCloseCrash(t *testing.T) {
	for _, point := range closePoints {
		for _, k := range []int{1, 4} {
			t.Run(fmt.Sprintf("%s/k=%d", point, k), func(t *testing.T) {
				t.Parallel()
				dir := testDir(t)
				runCrashChild(t, "^TestCloseCrashChild$", dir, point, k)
				j, recs, info, err := Open(testOpts(dir))
				if err != nil {
					t.Fatalf("reopen after crash: %v", err)
				}
				checkRecords(t, j, recs, k)
				if info.TornTailBytes != 0 {
					t.Fatalf("torn tail %d", info.TornTailBytes)
				}
				appendRange(t, j, k+1, k+1)
				j.Close()
				j, recs, _ = mustOpen(t, testOpts(dir))
				defer j.Close()
				checkRecords(t, j, recs, k+1)
			})
		}
	}
}

// runCrashChild runs the test named by run in a child that is to SIGKILL
// itself at point, and checks that it did.
func runCrashChild(t *testing.T, run, dir, point string, k int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "GLOVE_JOURNAL_CRASH_DIR="+dir,
		"GLOVE_JOURNAL_CRASH_POINT="+point, fmt.Sprintf("GLOVE_JOURNAL_CRASH_K=%d", k))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child was not killed (err %v):\n%s", err, out)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended by %v, want SIGKILL:\n%s", ee, out)
	}
}

// crashAt makes the process SIGKILL itself the n-th time it reaches
// point.
func crashAt(point string, n int) {
	seen := 0
	faultHook = func(p string) {
		if p == point {
			if seen++; seen == n {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				time.Sleep(time.Hour) // never return into the journal
			}
		}
	}
}

// TestCloseCrashChild is the child side of TestCloseCrash: it appends
// records 1..k and SIGKILLs itself at the named point of Close.
func TestCloseCrashChild(t *testing.T) {
	dir := os.Getenv("GLOVE_JOURNAL_CRASH_DIR")
	point := os.Getenv("GLOVE_JOURNAL_CRASH_POINT")
	if dir == "" || !strings.HasPrefix(point, "checkpoint-") {
		t.Skip("child process of TestCloseCrash")
	}
	var k int
	fmt.Sscan(os.Getenv("GLOVE_JOURNAL_CRASH_K"), &k)
	j, _, _ := mustOpen(t, testOpts(dir))
	appendRange(t, j, 1, k)
	crashAt(point, 1)
	defer func() { faultHook = nil }()
	j.Close()
	t.Fatalf("close finished without reaching %s", point)
}

// TestSlotLag: an append writes the header slot only when its record
// would be the slotLag-th past the header, so between appends the file
// holds fewer than slotLag records past the header in force, and the
// header commits only records before the latest append. Counted from
// the header in force, across a compaction too; Close brings it level.
func TestSlotLag(t *testing.T) {
	dir := testDir(t)
	path := filepath.Join(dir, testName)
	j, _, _ := mustOpen(t, testOpts(dir))
	defer j.Close()
	var slots []uint64
	seq := uint64(0)
	faultHook = func(p string) {
		if p == "header-written" {
			slots = append(slots, seq)
		}
	}
	defer func() { faultHook = nil }()
	check := func(what string) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if s := curSlot(b); s.count >= seq || seq-s.count >= slotLag {
			t.Fatalf("%s, record %d: header commits %d", what, seq, s.count)
		}
	}
	for seq = 1; seq <= 3*slotLag; seq++ {
		appendRange(t, j, int(seq), int(seq))
		check("new journal")
		if b, _ := os.ReadFile(path); curSlot(b).count != headerAfter(int(seq)) {
			t.Fatalf("record %d: header commits %d, want %d", seq, curSlot(b).count, headerAfter(int(seq)))
		}
	}
	if want := []uint64{slotLag, 2*slotLag - 1, 3*slotLag - 2}; fmt.Sprint(slots) != fmt.Sprint(want) {
		t.Fatalf("slots written by appends %v, want %v", slots, want)
	}
	// A compaction leaves the header level: the next slot is written
	// by the slotLag-th append after it.
	if _, err := j.Compact(carry(2), 0); err != nil {
		t.Fatal(err)
	}
	level := j.Seq()
	slots = nil
	for seq = level + 1; seq <= level+slotLag; seq++ {
		if _, err := j.Append(payloadFor(int(seq))); err != nil {
			t.Fatal(err)
		}
		check("compacted journal")
	}
	if fmt.Sprint(slots) != fmt.Sprint([]uint64{level + slotLag}) {
		t.Fatalf("slots written after the compaction %v, want [%d]", slots, level+slotLag)
	}
	seq--
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if s := curSlot(b); s.count != seq || s.length != uint64(len(b)) {
		t.Fatalf("after close: header commits %d records, %d bytes; want %d, %d", s.count, s.length, seq, len(b))
	}
	j, recs, info := mustOpen(t, testOpts(dir))
	defer j.Close()
	if len(recs) != 2+slotLag || info.TornTailBytes != 0 || j.Seq() != seq {
		t.Fatalf("reopen: %d records, torn %d, seq %d", len(recs), info.TornTailBytes, j.Seq())
	}
}

// TestOpenLevelsLaggingHeader: a file with slotLag or more records past
// its header (left by a crash that tore the slot of the append that had
// to write one) gets a checkpoint from Open, so crashes in a row cannot
// let the records past the header grow; one with fewer is left as it is.
func TestOpenLevelsLaggingHeader(t *testing.T) {
	for _, n := range []int{slotLag - 1, slotLag, slotLag + 1} {
		t.Run(fmt.Sprintf("records=%d", n), func(t *testing.T) {
			dir := testDir(t)
			path := filepath.Join(dir, testName)
			j, _, _ := mustOpen(t, testOpts(dir))
			appendRange(t, j, 1, n)
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			lagHeader(b, 0)
			if err := os.WriteFile(path, b, 0600); err != nil {
				t.Fatal(err)
			}
			if st, err := Peek(dir, testName, "sessions"); err != nil || st.Seq != uint64(n) {
				t.Fatalf("peek: %+v %v, want %d records", st, err, n)
			}
			j, recs, info := mustOpen(t, testOpts(dir))
			defer j.Close()
			checkRecords(t, j, recs, n)
			if info.TornTailBytes != 0 {
				t.Fatalf("torn tail %d", info.TornTailBytes)
			}
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want := uint64(0)
			if n >= slotLag {
				want = uint64(n)
			}
			if s := curSlot(after); s.count != want {
				t.Fatalf("after open: header commits %d, want %d", s.count, want)
			}
			if n < slotLag && !bytes.Equal(after, b) {
				t.Fatal("open changed a file whose header lags by fewer than slotLag records")
			}
		})
	}
}
