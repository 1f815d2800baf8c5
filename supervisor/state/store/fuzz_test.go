// SPDX-License-Identifier: Apache-2.0

package store

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/state/journal"
)

// FuzzReplay feeds arbitrary record payloads (one per line; the first
// line's leading byte, if '+', makes the journal a compacted one starting
// at sequence 10) to the store's replay. It must never panic, and what it
// accepts must be a store whose every session is well-formed.
func FuzzReplay(f *testing.F) {
	plan := `{"schema_version":1}`
	cr, _ := json.Marshal(record{Type: "create", Session: "s1", AtMS: 1, Key: "k1", Controller: hexA, Content: hexB, Plan: []byte(plan)})
	tr, _ := json.Marshal(record{Type: "transition", Session: "s1", AtMS: 2, From: Created, To: Failed, Reason: "x"})
	cl, _ := json.Marshal(record{Type: "cleanup", Session: "s1", AtMS: 3})
	cp, _ := json.Marshal(record{Type: "checkpoint", AtMS: 4, Checkpoint: &checkpoint{PrevSeq: 9, PrevHead: hex.EncodeToString(make([]byte, 32)), Snapshots: 1, Sessions: 1}})
	sn, _ := json.Marshal(record{Type: "snapshot", Snapshot: []snap{{ID: "s2", Key: "k2", Controller: hexA, Content: hexB, State: Exited, Reason: "exited", CreatedMS: 1, UpdatedMS: 2, CleanedMS: 3}}})
	// A session started by this version (preparing, then the merged
	// running record) and by an earlier one (starting, its runtime,
	// then running: the records that one merges).
	prep, _ := json.Marshal(record{Type: "transition", Session: "s1", AtMS: 2, From: Created, To: Preparing})
	rt := testRT
	run, _ := json.Marshal(record{Type: "running", Session: "s1", AtMS: 3, From: Preparing, Runtime: &rt})
	st, _ := json.Marshal(record{Type: "transition", Session: "s1", AtMS: 3, From: Preparing, To: Starting})
	ort, _ := json.Marshal(record{Type: "runtime", Session: "s1", AtMS: 4, Runtime: &rt})
	orun, _ := json.Marshal(record{Type: "transition", Session: "s1", AtMS: 5, From: Starting, To: Running})
	f.Add(bytes.Join([][]byte{cr, tr, cl}, []byte("\n")))
	f.Add(bytes.Join([][]byte{append([]byte("+"), cp...), sn, cr}, []byte("\n")))
	f.Add(bytes.Join([][]byte{cr, prep, run}, []byte("\n")))
	f.Add(bytes.Join([][]byte{cr, prep, st, ort, orun}, []byte("\n")))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := bytes.Split(data, []byte("\n"))
		if len(lines) > 64 {
			return
		}
		s := &Store{sessions: map[string]*Session{}, byKey: map[string]string{}}
		seq := uint64(1)
		if len(lines[0]) > 0 && lines[0][0] == '+' {
			lines[0], seq = lines[0][1:], 10
		}
		for i, l := range lines {
			r := journal.Record{Seq: seq + uint64(i), Payload: l}
			if err := s.replay(r, i == 0); err != nil {
				return
			}
		}
		for id, sess := range s.sessions {
			if sess.ID != id || !ValidSessionID(id) || !validStates[sess.State] || s.byKey[sess.IdempotencyKey] != id {
				t.Fatalf("accepted a malformed session %+v", sess)
			}
			if !sess.CleanedAt.IsZero() && !sess.State.Terminal() {
				t.Fatalf("accepted a cleaned-up session in state %s", sess.State)
			}
			// A runtime is recorded with running (or, by an earlier
			// version, while starting), never before, and always one
			// recovery can use.
			if sess.Runtime != nil && (sess.State == Created || sess.State == Preparing || sess.Runtime.check() != nil) {
				t.Fatalf("accepted a runtime %+v in state %s", *sess.Runtime, sess.State)
			}
		}
	})
}

// TestReplayRejects: a table of checkpoint and snapshot forgeries, each
// refused by replay with its reason.
func TestReplayRejects(t *testing.T) {
	zero := hex.EncodeToString(make([]byte, 32))
	enc := func(r record) []byte { b, _ := json.Marshal(r); return b }
	cp := func(prev uint64, head string, n int) []byte {
		return enc(record{Type: "checkpoint", AtMS: 4, Checkpoint: &checkpoint{PrevSeq: prev, PrevHead: head, Snapshots: n, Sessions: n}})
	}
	good := snap{ID: "s2", Key: "k2", Controller: hexA, Content: hexB, State: Exited, CreatedMS: 1, UpdatedMS: 2}
	sn := func(edit func(x *snap)) []byte {
		x := good
		if edit != nil {
			edit(&x)
		}
		return enc(record{Type: "snapshot", Snapshot: []snap{x}})
	}
	create := enc(record{Type: "create", Session: "s1", AtMS: 1, Key: "k1", Controller: hexA, Content: hexB, Plan: []byte(`{}`)})
	cases := []struct {
		name  string
		based bool
		recs  [][]byte
		want  string
	}{
		{"checkpoint in an uncompacted journal", false, [][]byte{cp(0, zero, 0)}, "checkpoint is not allowed"},
		{"compacted journal without a checkpoint", true, [][]byte{create}, "checkpoint is required"},
		{"checkpoint names another record", true, [][]byte{cp(8, zero, 1), sn(nil)}, "checkpoint names record 8"},
		{"checkpoint names another hash", true, [][]byte{cp(9, hexA, 1), sn(nil)}, "checkpoint names record 9"},
		{"fewer snapshots than announced", true, [][]byte{cp(9, zero, 2), sn(nil), create}, "announced 1 more snapshots"},
		{"snapshot not announced", true, [][]byte{cp(9, zero, 1), sn(nil), sn(nil)}, "not announced"},
		{"plan kept past created", true, [][]byte{cp(9, zero, 1), sn(func(x *snap) { x.Plan = []byte(`{}`) })}, "plan kept past created"},
		{"cleaned up while running", true, [][]byte{cp(9, zero, 1), sn(func(x *snap) { x.State, x.CleanedMS = Running, 3 })}, "cleaned up in state running"},
		{"unknown state", true, [][]byte{cp(9, zero, 1), sn(func(x *snap) { x.State = "paused" })}, `state "paused"`},
		{"runtime while preparing", true, [][]byte{cp(9, zero, 1), sn(func(x *snap) { x.State, x.Runtime = Preparing, &testRT })}, "runtime in state preparing"},
		{"times out of order", true, [][]byte{cp(9, zero, 1), sn(func(x *snap) { x.UpdatedMS = 0 })}, "times out of order"},
		{"carried twice", true, [][]byte{cp(9, zero, 2), sn(nil), sn(nil)}, "carried twice"},
		{"cleanup of a running session", false, [][]byte{create, enc(record{Type: "cleanup", Session: "s1", AtMS: 2})}, "not ended"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &Store{sessions: map[string]*Session{}, byKey: map[string]string{}}
			seq := uint64(1)
			if c.based {
				seq = 10
			}
			var err error
			for i, p := range c.recs {
				if err = s.replay(journal.Record{Seq: seq + uint64(i), Payload: p}, i == 0); err != nil {
					break
				}
			}
			if err == nil && s.snapsDue != 0 {
				err = fmt.Errorf("announced %d more snapshots", s.snapsDue)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error naming %q", err, c.want)
			}
		})
	}
}
