// SPDX-License-Identifier: Apache-2.0

package receipt

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/state/journal"
)

// TestCompactKeepsChain: acknowledged envelopes leave, the rest and the
// outstanding reservations stay, and the chain goes on from where it was:
// the controller's archive verifies from the anchor across compactions.
func TestCompactKeepsChain(t *testing.T) {
	d := dir(t)
	r := open(t, d)
	var archive []Envelope
	for i := 1; i <= 10; i++ {
		archive = append(archive, finalize(t, r, fmt.Sprintf("s%d", i)))
	}
	for _, id := range []string{"open1", "open2"} {
		if err := r.Reserve(id, 7); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Ack(6, archive[5].EnvelopeMAC); err != nil {
		t.Fatal(err)
	}
	info, err := r.Compact()
	if err != nil {
		t.Fatal(err)
	}
	// checkpoint + 4 carried + 2 reservations.
	if info.Dropped != 6 || info.Carried != 4 || info.RecordsAfter != 7 {
		t.Fatalf("compact: %+v", info)
	}
	check := func(r *Journal) {
		t.Helper()
		page, err := r.Page(6, 100)
		if err != nil || len(page) != 4 {
			t.Fatalf("page after 6: %d envelopes, %v", len(page), err)
		}
		if err := Verify(key, archive[5].EnvelopeMAC, page); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Page(3, 100); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "have left the journal") {
			t.Fatalf("page of compacted envelopes: %v", err)
		}
		if seq, mac := r.Head(); seq != uint64(len(archive)) || mac != archive[len(archive)-1].EnvelopeMAC {
			t.Fatalf("head %d %s", seq, mac)
		}
		if r.Acked() != 6 {
			t.Fatalf("acked %d", r.Acked())
		}
		if err := r.Ack(6, archive[5].EnvelopeMAC); !errors.Is(err, ErrAck) {
			t.Fatalf("replayed ack after compaction: %v", err)
		}
	}
	check(r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r = open(t, d)
	defer r.Close()
	check(r)
	if got := strings.Join(sortedOutstanding(r), ","); got != "open1,open2" {
		t.Fatalf("outstanding after compaction: %s", got)
	}
	if rev, ok := r.Reservation("open2"); !ok || rev != 7 {
		t.Fatalf("open2's reservation after compaction: revision %d, %v", rev, ok)
	}
	e, err := r.Finalize(body("open1"))
	if err != nil {
		t.Fatal(err)
	}
	archive = append(archive, e)
	if err := Verify(key, anchor, archive); err != nil {
		t.Fatalf("the archive across the compaction: %v", err)
	}
	if err := r.Ack(11, e.EnvelopeMAC); err != nil {
		t.Fatal(err)
	}
}

func sortedOutstanding(r *Journal) []string {
	ids := r.Outstanding()
	for i := range ids {
		for j := i + 1; j < len(ids); j++ {
			if ids[j] < ids[i] {
				ids[i], ids[j] = ids[j], ids[i]
			}
		}
	}
	return ids
}

// TestReceiptEndurance: 3,000 sessions through a journal bounded to 200
// records, each receipt paged, archived and acknowledged as a controller
// does: no reservation is ever refused, the journal compacts on its own,
// and the whole archive verifies from the anchor.
func TestReceiptEndurance(t *testing.T) {
	d := dir(t)
	compactions := 0
	o := Options{Dir: d, Key: key, Anchor: anchor, MaxRecords: 200, OnCompact: func(_ CompactInfo, err error) {
		if err != nil {
			t.Errorf("compaction: %v", err)
		}
		compactions++
	}}
	r, _, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	var archive []Envelope
	for i := range 3000 {
		id := fmt.Sprintf("e%d", i)
		if err := r.Reserve(id, 7); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		if _, err := r.Finalize(body(id)); err != nil {
			t.Fatal(err)
		}
		page, err := r.Page(uint64(len(archive)), 1000)
		if err != nil {
			t.Fatal(err)
		}
		archive = append(archive, page...)
		last := archive[len(archive)-1]
		if err := r.Ack(last.Seq, last.EnvelopeMAC); err != nil {
			t.Fatal(err)
		}
		if i == 1500 {
			// A restart in the middle.
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			if r, _, err = Open(o); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer r.Close()
	if err := Verify(key, anchor, archive); err != nil || len(archive) != 3000 {
		t.Fatalf("archive of %d: %v", len(archive), err)
	}
	if compactions < 10 {
		t.Fatalf("%d compactions", compactions)
	}
	t.Logf("3000 receipts through a 200-record journal: %d compactions, journal now %d records", compactions, r.j.Count())
}

// TestCheckpointForgeriesRejected: a table of forged checkpoints and
// carried records, each refused on open.
func TestCheckpointForgeriesRejected(t *testing.T) {
	good := func(e *Envelope) *checkpoint {
		return &checkpoint{Anchor: anchor, Acked: 1, AckedMAC: e.EnvelopeMAC, Carried: 1, Reserved: 1}
	}
	cases := []struct {
		name string
		edit func(cp *checkpoint, carried *Envelope) []record
		want string
	}{
		{"another anchor", func(cp *checkpoint, e *Envelope) []record {
			cp.Anchor = hexA
			return nil
		}, "another anchor"},
		{"carried envelope off the chain", func(cp *checkpoint, e *Envelope) []record {
			cp.AckedMAC = hexA
			return nil
		}, "does not chain"},
		{"fewer carried than announced", func(cp *checkpoint, e *Envelope) []record {
			cp.Carried = 2
			return nil
		}, "announced"},
		{"carried envelope altered", func(cp *checkpoint, e *Envelope) []record {
			e.Body.ExitCode = 3
			return nil
		}, "receipt MAC"},
		{"an ack where a reservation is due", func(cp *checkpoint, e *Envelope) []record {
			return []record{{Type: "checkpoint", Checkpoint: cp}, {Type: "carried", Envelope: e}, {Type: "ack", Seq: 2, MAC: e.EnvelopeMAC}}
		}, "announced"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := dir(t)
			r := open(t, d)
			e1 := finalize(t, r, "s1")
			e2 := finalize(t, r, "s2")
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			// Compact by hand, forging one field.
			j, _, _, err := journal.Open(journal.Options{Dir: d, Name: FileName, Kind: Kind, MaxRecordBytes: MaxEnvelopeBytes})
			if err != nil {
				t.Fatal(err)
			}
			head := j.Head()
			cp := good(&e1)
			cp.PrevSeq, cp.PrevHead = j.Seq(), hex.EncodeToString(head[:])
			carried := e2
			recs := c.edit(cp, &carried)
			if recs == nil {
				recs = []record{{Type: "checkpoint", Checkpoint: cp}, {Type: "carried", Envelope: &carried}, {Type: "reserve", Session: "s9"}}
			}
			var carry [][]byte
			for _, rec := range recs {
				b, err := json.Marshal(rec)
				if err != nil {
					t.Fatal(err)
				}
				carry = append(carry, b)
			}
			if _, err := j.Compact(carry, 0); err != nil {
				t.Fatal(err)
			}
			if err := j.Close(); err != nil {
				t.Fatal(err)
			}
			_, _, err = Open(Options{Dir: d, Key: key, Anchor: anchor})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrCorrupt naming %q", err, c.want)
			}
		})
	}
}

// FuzzReplay feeds arbitrary record payloads (one per line; a leading '+'
// on the first line makes the journal a compacted one starting at
// sequence 10) to the receipt journal's replay: it must never panic, and
// what it accepts must keep its envelopes chained and its counters in
// range.
func FuzzReplay(f *testing.F) {
	e, _ := Seal(key, 1, anchor, body("s1"))
	enc := func(r record) []byte { b, _ := json.Marshal(r); return b }
	f.Add([]byte(strings.Join([]string{string(enc(record{Type: "anchor", Anchor: anchor})),
		string(enc(record{Type: "reserve", Session: "s1"})), string(enc(record{Type: "receipt", Envelope: &e})),
		string(enc(record{Type: "ack", Seq: 1, MAC: e.EnvelopeMAC}))}, "\n")))
	f.Add([]byte("+" + string(enc(record{Type: "checkpoint", Checkpoint: &checkpoint{PrevSeq: 9, PrevHead: hex.EncodeToString(make([]byte, 32)),
		Anchor: anchor, AckedMAC: anchor, Carried: 1}})) + "\n" + string(enc(record{Type: "carried", Envelope: &e}))))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := strings.Split(string(data), "\n")
		if len(lines) > 64 {
			return
		}
		r := &Journal{key: key, reserved: map[string]uint64{}, done: map[string]bool{}}
		seq := uint64(1)
		if strings.HasPrefix(lines[0], "+") {
			lines[0], seq = lines[0][1:], 10
		}
		for i, l := range lines {
			if err := r.replay(journal.Record{Seq: seq + uint64(i), Payload: []byte(l)}, anchor, i == 0); err != nil {
				return
			}
		}
		if r.acked > r.next()-1 || r.acked < r.base {
			t.Fatalf("acked %d outside %d..%d", r.acked, r.base, r.next()-1)
		}
		if err := Verify(key, r.head0(), r.envs); err != nil {
			t.Fatalf("accepted envelopes that do not verify: %v", err)
		}
	})
}
