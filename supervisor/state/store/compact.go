// SPDX-License-Identifier: Apache-2.0

package store

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/glove-sandbox/glove/supervisor/state/journal"
)

// maxLifecyclePayload bounds every record but a creation and a snapshot
// (a transition, a move to running with its runtime identity, a cleanup:
// each a few hundred bytes, their fields all bounded); it is what a
// creation reserves per record.
const maxLifecyclePayload = 1024

// snapBatchBytes is how much encoded session state one snapshot record
// packs (a created session's plan may take a record of its own).
const snapBatchBytes = 192 << 10

// future is how many records the session can still write: each forward
// record to exited and the cleanup (a failure from any state takes one
// record, then the cleanup: never more). Starting has no record, and
// running's carries the runtime identity (Run).
func future(sess *Session) int {
	switch sess.State {
	case Created:
		return 5 // preparing, running, stopping, exited, cleanup
	case Preparing:
		return 4
	case Starting:
		// Only an earlier version's session is durably starting, and
		// only recovery's failure and the cleanup can follow it
		// (Transition does not write running, and Run starts from
		// preparing).
		return 2
	case Running:
		return 3
	case Stopping:
		return 2
	}
	if sess.CleanedAt.IsZero() {
		return 1
	}
	return 0
}

// reserved is the room every session's future records need (mu held).
func (s *Store) reserved() (records int, bytes int64) {
	for _, sess := range s.sessions {
		records += future(sess)
	}
	return records, int64(records) * journal.RecordSize(maxLifecyclePayload)
}

func (s *Store) reservedBytes() int64 { _, b := s.reserved(); return b }

// checkpoint is the first record of a compacted journal.
type checkpoint struct {
	// PrevSeq and PrevHead are the previous generation's last record
	// (its sequence number and hash, hex), which this record chains to.
	PrevSeq  uint64 `json:"prev_seq"`
	PrevHead string `json:"prev_head"`
	// Snapshots is how many snapshot records follow; Sessions how many
	// sessions they carry; Dropped how many cleaned-up sessions past the
	// retention window this compaction let go.
	Snapshots int `json:"snapshots"`
	Sessions  int `json:"sessions"`
	Dropped   int `json:"dropped"`
}

// snap is one session's whole state in a snapshot record.
type snap struct {
	ID         string `json:"id"`
	Key        string `json:"key"`
	Controller string `json:"controller_plan_digest"`
	Content    string `json:"plan_content_digest"`
	// Plan only while the session is created (nothing reads it later).
	Plan      []byte   `json:"plan,omitempty"`
	State     State    `json:"state"`
	Reason    string   `json:"reason,omitempty"`
	CreatedMS int64    `json:"created_ms"`
	UpdatedMS int64    `json:"updated_ms"`
	CleanedMS int64    `json:"cleaned_ms,omitempty"`
	Runtime   *Runtime `json:"runtime,omitempty"`
}

func (s *Store) replayCheckpoint(r journal.Record, rec record) error {
	cp := rec.Checkpoint
	switch {
	case cp == nil:
		return errors.New("checkpoint record without a checkpoint")
	case cp.PrevSeq != r.Seq-1 || cp.PrevHead != hex.EncodeToString(r.Prev[:]):
		return fmt.Errorf("checkpoint names record %d, but follows record %d", cp.PrevSeq, r.Seq-1)
	case cp.Snapshots < 0 || cp.Sessions < 0 || cp.Dropped < 0 || cp.Snapshots > cp.Sessions:
		return fmt.Errorf("checkpoint counts out of range (%d snapshots, %d sessions)", cp.Snapshots, cp.Sessions)
	}
	s.snapsDue = cp.Snapshots
	return nil
}

func (s *Store) replaySnapshot(rec record) error {
	if len(rec.Snapshot) == 0 {
		return errors.New("empty snapshot record")
	}
	for _, x := range rec.Snapshot {
		if err := s.restore(x); err != nil {
			return fmt.Errorf("snapshot of session %q: %w", x.ID, err)
		}
	}
	return nil
}

// restore adds one snapshot session, checked as strictly as the records
// that made it.
func (s *Store) restore(x snap) error {
	req := CreateRequest{SessionID: x.ID, IdempotencyKey: x.Key, ControllerPlanDigest: x.Controller,
		PlanContentDigest: x.Content, Plan: x.Plan}
	if x.State != Created {
		// Checked with a stand-in: a session past created has no plan.
		if x.Plan != nil {
			return errors.New("plan kept past created")
		}
		req.Plan = []byte("{}")
	}
	if err := checkCreate(req); err != nil {
		return err
	}
	switch {
	case !validStates[x.State]:
		return fmt.Errorf("state %q", x.State)
	case !reasonRe.MatchString(x.Reason):
		return fmt.Errorf("reason %q", x.Reason)
	case x.CleanedMS != 0 && !x.State.Terminal():
		return fmt.Errorf("cleaned up in state %s", x.State)
	case x.CreatedMS <= 0 || x.UpdatedMS < x.CreatedMS || (x.CleanedMS != 0 && x.CleanedMS < x.CreatedMS):
		return errors.New("times out of order")
	case x.Runtime != nil && (x.State == Created || x.State == Preparing):
		return fmt.Errorf("runtime in state %s", x.State)
	}
	if x.Runtime != nil {
		if err := x.Runtime.check(); err != nil {
			return err
		}
	}
	if _, dup := s.sessions[x.ID]; dup {
		return errors.New("carried twice")
	}
	if _, dup := s.byKey[x.Key]; dup {
		return errors.New("idempotency key carried twice")
	}
	sess := s.apply(req, time.UnixMilli(x.CreatedMS))
	sess.Plan = append([]byte(nil), x.Plan...)
	if x.Plan == nil {
		sess.Plan = nil
	}
	sess.State, sess.Reason, sess.UpdatedAt = x.State, x.Reason, time.UnixMilli(x.UpdatedMS)
	if x.CleanedMS != 0 {
		sess.CleanedAt = time.UnixMilli(x.CleanedMS)
	}
	if x.Runtime != nil {
		rt := *x.Runtime
		sess.Runtime = &rt
	}
	return nil
}

var validStates = map[State]bool{Created: true, Preparing: true, Starting: true, Running: true, Stopping: true, Exited: true, Failed: true}

// CompactInfo says what a compaction did.
type CompactInfo struct {
	At time.Time
	// Before and After: records and bytes in the journal's file.
	RecordsBefore, RecordsAfter int
	BytesBefore, BytesAfter     int64
	// Sessions carried over; Dropped: cleaned-up sessions past the
	// retention window let go.
	Sessions, Dropped int
	// DroppedIDs are the dropped sessions' ids, sorted: what gloved
	// keeps beside the store for a session (its stream audit) goes with
	// them.
	DroppedIDs []string
	// Err is why the compaction failed (the journal is then unchanged).
	Err error
}

// Compact replaces the journal with a checkpoint of the live set now
// (see the package comment).
func (s *Store) Compact() (CompactInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.compact()
}

// autoCompact compacts because the journal passed its threshold (mu
// held); its outcome goes to OnCompact and Stats, never to the caller,
// whose own write is already within its reserved room.
func (s *Store) autoCompact() {
	info, err := s.compact()
	if s.o.OnCompact != nil {
		s.o.OnCompact(info, err)
	}
}

func (s *Store) compact() (CompactInfo, error) {
	now := s.now()
	st := s.j.Stats()
	info := CompactInfo{At: now, RecordsBefore: st.Records, BytesBefore: st.Bytes}
	ids := make([]string, 0, len(s.sessions))
	var drop []string
	for id, sess := range s.sessions {
		if !sess.CleanedAt.IsZero() && now.Sub(sess.CleanedAt) >= s.o.Retention {
			drop = append(drop, id)
			continue
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	// Pack the sessions' snapshots into records of about snapBatchBytes.
	var batches [][]byte
	var cur []snap
	curBytes := 0
	flush := func() error {
		if len(cur) == 0 {
			return nil
		}
		b, err := json.Marshal(record{Type: "snapshot", Snapshot: cur})
		if err != nil {
			return fmt.Errorf("compact: encode snapshot: %w", err)
		}
		batches, cur, curBytes = append(batches, b), nil, 0
		return nil
	}
	for _, id := range ids {
		x := snapOf(s.sessions[id])
		b, err := json.Marshal(x)
		if err != nil {
			return info, fmt.Errorf("compact: encode session %s: %w", id, err)
		}
		if curBytes > 0 && curBytes+len(b) > snapBatchBytes {
			if err := flush(); err != nil {
				return info, err
			}
		}
		cur, curBytes = append(cur, x), curBytes+len(b)+1
	}
	if err := flush(); err != nil {
		return info, err
	}
	head := s.j.Head()
	cp, err := json.Marshal(record{Type: "checkpoint", AtMS: now.UnixMilli(), Checkpoint: &checkpoint{
		PrevSeq: s.j.Seq(), PrevHead: hex.EncodeToString(head[:]), Snapshots: len(batches), Sessions: len(ids), Dropped: len(drop)}})
	if err != nil {
		return info, fmt.Errorf("compact: encode checkpoint: %w", err)
	}
	// The new file gets the same disk reservation the sessions have.
	var reserve int64
	for _, id := range ids {
		reserve += int64(future(s.sessions[id])) * journal.RecordSize(maxLifecyclePayload)
	}
	if _, err := s.j.Compact(append([][]byte{cp}, batches...), reserve); err != nil {
		info.Err = fmt.Errorf("compact session store: %w", err)
		s.lastCompact = info
		return info, info.Err
	}
	for _, id := range drop {
		delete(s.byKey, s.sessions[id].IdempotencyKey)
		delete(s.sessions, id)
	}
	for _, sess := range s.sessions {
		if sess.State != Created {
			sess.Plan = nil
		}
	}
	st = s.j.Stats()
	info.RecordsAfter, info.BytesAfter, info.Sessions, info.Dropped = st.Records, st.Bytes, len(ids), len(drop)
	sort.Strings(drop)
	info.DroppedIDs = drop
	s.compacted++
	s.lastCompact, s.dirty = info, false
	s.setThresholds()
	return info, nil
}

func snapOf(sess *Session) snap {
	x := snap{ID: sess.ID, Key: sess.IdempotencyKey, Controller: sess.ControllerPlanDigest, Content: sess.PlanContentDigest,
		State: sess.State, Reason: sess.Reason, CreatedMS: sess.CreatedAt.UnixMilli(), UpdatedMS: sess.UpdatedAt.UnixMilli()}
	if sess.State == Created {
		x.Plan = sess.Plan
	}
	if !sess.CleanedAt.IsZero() {
		x.CleanedMS = sess.CleanedAt.UnixMilli()
	}
	if sess.Runtime != nil {
		rt := *sess.Runtime
		x.Runtime = &rt
	}
	return x
}

// setThresholds sets when the next automatic compaction runs: at half
// the bounds, or at twice what the live set takes now if that is more
// (so a large live set is not rewritten on every creation).
func (s *Store) setThresholds() {
	st := s.j.Stats()
	s.nextRecords = min(st.MaxRecords, max(st.MaxRecords/2, 2*st.Records))
	s.nextBytes = min(st.MaxBytes, max(st.MaxBytes/2, 2*st.Bytes))
}

func (s *Store) pastThreshold() bool {
	st := s.j.Stats()
	return s.dirty && (st.Records >= s.nextRecords || st.Bytes >= s.nextBytes)
}

// admit makes sure a creation record of n bytes and everything the new
// session can still write fit, with the room every other session
// reserved: compacting first when the journal is past its threshold or
// the room is short, then preallocating the whole reservation on disk
// (mu held). Nothing is written when it refuses.
func (s *Store) admit(n int) error {
	if s.pastThreshold() {
		s.autoCompact()
	}
	fits := func() (bool, string) {
		recs, bytes := s.reserved()
		recs += 1 + future(&Session{State: Created})
		bytes += journal.RecordSize(n) + int64(future(&Session{State: Created}))*journal.RecordSize(maxLifecyclePayload)
		st := s.j.Stats()
		if st.Records+recs <= st.MaxRecords && st.Bytes+bytes <= st.MaxBytes {
			return true, ""
		}
		return false, fmt.Sprintf("%d of %d records and %d of %d bytes used; %d records and %d bytes needed for the %d sessions held and this one",
			st.Records, st.MaxRecords, st.Bytes, st.MaxBytes, recs, bytes, len(s.sessions))
	}
	ok, why := fits()
	if !ok && s.dirty {
		s.autoCompact()
		ok, why = fits()
	}
	if !ok {
		return fmt.Errorf("%w: %s", ErrFull, why)
	}
	_, bytes := s.reserved()
	bytes += journal.RecordSize(n) + int64(future(&Session{State: Created}))*journal.RecordSize(maxLifecyclePayload)
	if err := s.j.Preallocate(bytes); err != nil {
		s.reserveErr = err
		return fmt.Errorf("reserve room for the session's records: %w", err)
	}
	s.reserveErr = nil
	return nil
}

// Stats describes the store's use of its journal.
type Stats struct {
	Journal journal.Stats
	// Sessions by state; Cleaned: cleaned-up sessions kept for the
	// retention window.
	Sessions map[State]int
	Cleaned  int
	// ReservedRecords and ReservedBytes: room set aside for the
	// sessions' future records.
	ReservedRecords int
	ReservedBytes   int64
	// ReserveErr: the last attempt to reserve that room on disk failed
	// (the disk is full); until one succeeds, creations are refused.
	ReserveErr     error
	Retention      time.Duration
	Compactions    int
	LastCompaction CompactInfo
}

// Stats returns the store's figures now.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Journal: s.j.Stats(), Sessions: map[State]int{}, Retention: s.o.Retention,
		Compactions: s.compacted, LastCompaction: s.lastCompact, ReserveErr: s.reserveErr}
	for _, sess := range s.sessions {
		st.Sessions[sess.State]++
		if !sess.CleanedAt.IsZero() {
			st.Cleaned++
		}
	}
	st.ReservedRecords, st.ReservedBytes = s.reserved()
	return st
}
