// SPDX-License-Identifier: Apache-2.0

// Package store is gloved's durable session store: every session created
// from a validated plan, and every lifecycle transition, as records of an
// append-only, hash-chained journal (supervisor/state/journal).
//
// The journal gives integrity and crash consistency; this package gives
// meaning and replays it strictly: a record that could not have been
// written by this code (a transition of an unknown session, an illegal
// transition, a second creation of the same session or key) makes Open
// fail. The store is never repaired silently.
//
// Lifecycle:
//
//	created → preparing → starting → running → stopping → exited
//	any state that is not exited or failed → failed
//
// Transitions are append-only and idempotent: asking for the state a
// session is already in succeeds without writing.
//
// Two steps of it have no record of their own (issue 19: every record
// is an fdatasync on the start path). Starting is gloved's, in memory: a
// crash in it is recovered exactly as one in preparing (the same clean-up,
// no runtime to check in either), so its record bought nothing. Running
// is entered by Run, whose one record carries the runtime identity too:
// the identity and the state are durable together, and no new store holds
// a session starting with a runtime but not running. Stores written by
// earlier versions (a starting transition, then a runtime record, then a
// transition to running) still replay to the same sessions.
//
// # Capacity and compaction
//
// The journal is bounded (10,000 records, 64 MiB), so the store keeps
// only a live set in it (compact.go): when the journal passes a
// threshold, and on Compact, a new generation replaces it whose first
// record is a checkpoint (the previous generation's last sequence number
// and hash, and how many snapshot records follow) and whose snapshot
// records carry every session still needed: non-terminal ones, with the
// plan of those still created; terminal ones not yet cleaned up; and
// cleaned-up ones for the idempotency retention window (Options.Retention),
// without their plan. A cleaned-up session older than the window leaves
// the store, and its id and key may be used again.
//
// Every record a session can still write, through its terminal state and
// its cleanup, is reserved when it is created (records and bytes under
// the bounds, and blocks on disk by preallocation): a session once
// created never meets a full journal or a full disk, and recovery can
// always record a failure. When the store cannot make that room,
// Create refuses with ErrFull or journal.ErrNoSpace and writes nothing.
package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/glove-sandbox/glove/names"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/state/journal"
)

// FileName is the journal's name inside the store directory.
const FileName = "sessions.journal"

// Kind tags the journal so a receipt journal cannot be opened as a store.
const Kind = "sessions"

// MaxPlanBytes bounds the canonical plan stored with a session.
const MaxPlanBytes = 256 << 10

// State is a lifecycle state.
type State string

// The lifecycle states.
const (
	Created   State = "created"
	Preparing State = "preparing"
	Starting  State = "starting"
	Running   State = "running"
	Stopping  State = "stopping"
	Exited    State = "exited"
	Failed    State = "failed"
)

// next is the one forward step from each state; failed is reachable from
// every non-terminal state.
var next = map[State]State{
	Created: Preparing, Preparing: Starting, Starting: Running, Running: Stopping, Stopping: Exited,
}

// Terminal reports whether no transition leaves s.
func (s State) Terminal() bool { return s == Exited || s == Failed }

func legal(from, to State) bool {
	if from.Terminal() {
		return false
	}
	return to == Failed || next[from] == to
}

// ValidSessionID reports whether s is a well-formed session id
// (names.NamePattern, shared with receipts, cgroups and gloved's API).
func ValidSessionID(s string) bool { return names.Name(s) }

// Errors callers tell apart with errors.Is.
var (
	ErrConflict   = errors.New("conflicts with an existing session")
	ErrNotFound   = errors.New("no such session")
	ErrTransition = errors.New("illegal transition")
	ErrInvalid    = errors.New("invalid request")
	ErrCorrupt    = errors.New("store replay failed")
	// ErrFull: the store cannot hold another session, even after
	// compaction (its live set fills the journal's bounds).
	ErrFull = errors.New("session store full")
)

var (
	keyRe    = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)
	reasonRe = regexp.MustCompile(`^[a-z0-9_:.-]{0,64}$`)
)

// CreateRequest is what create_session stores.
type CreateRequest struct {
	SessionID      string
	IdempotencyKey string
	// ControllerPlanDigest is the controller's 64-hex BLAKE3 digest,
	// stored for correlation, not recomputed.
	ControllerPlanDigest string
	// PlanContentDigest is Glove's SHA-256 of Plan.
	PlanContentDigest string
	// Plan is the canonical plan JSON.
	Plan []byte
}

// Session is one session's durable state.
type Session struct {
	ID                   string
	IdempotencyKey       string
	ControllerPlanDigest string
	PlanContentDigest    string
	Plan                 []byte
	State                State
	// Reason says why the last transition happened (e.g. "limit:pids").
	Reason    string
	CreatedAt time.Time
	UpdatedAt time.Time
	// CleanedAt is when the controller cleaned the ended session up
	// (zero until then). From then the session is kept only for the
	// idempotency retention window.
	CleanedAt time.Time
	// Runtime identifies the session's processes once they exist.
	Runtime *Runtime
}

// Runtime identifies a started session's processes durably, so that a
// restarted gloved can tell them apart from anything that later reuses a
// pid: the boot, the shim's pid and its start time (clock ticks since
// boot, /proc/PID/stat field 22), and the inode of the session's cgroup
// directory. Recovery acts only through the session's cgroup, never on a
// bare pid.
type Runtime struct {
	BootID      string `json:"boot_id"`
	PID         int    `json:"pid"`
	StartTicks  uint64 `json:"start_ticks"`
	CgroupInode uint64 `json:"cgroup_inode"`
	// LaunchDigest is the managed-launch digest (session.LaunchDigest):
	// what the session was launched with, transport included.
	LaunchDigest string `json:"launch_digest,omitempty"`
}

func (r *Runtime) check() error {
	if len(r.BootID) != 36 || r.PID <= 0 || r.StartTicks == 0 || r.CgroupInode == 0 {
		return fmt.Errorf("%w: runtime identity %+v", ErrInvalid, *r)
	}
	if r.LaunchDigest != "" && !policy.ValidSHA256Hex(r.LaunchDigest) {
		return fmt.Errorf("%w: launch digest %q", ErrInvalid, r.LaunchDigest)
	}
	for i := 0; i < len(r.BootID); i++ {
		c := r.BootID[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c == '-') {
			return fmt.Errorf("%w: boot id %q", ErrInvalid, r.BootID)
		}
	}
	return nil
}

// record is one journal entry. Exactly the fields of its Type are set.
type record struct {
	// "create", "transition", "running", "cleanup", "checkpoint" or
	// "snapshot"; "runtime" only in stores of earlier versions.
	Type    string `json:"type"`
	Session string `json:"session"`
	AtMS    int64  `json:"at_ms"`
	// create
	Key        string `json:"key,omitempty"`
	Controller string `json:"controller_plan_digest,omitempty"`
	Content    string `json:"plan_content_digest,omitempty"`
	// Plan travels as base64 so its bytes come back exactly as stored:
	// the byte-identical retry rule compares them after a restart.
	Plan []byte `json:"plan,omitempty"`
	// transition
	From   State  `json:"from,omitempty"`
	To     State  `json:"to,omitempty"`
	Reason string `json:"reason,omitempty"`
	// running (with From), and runtime (earlier versions)
	Runtime *Runtime `json:"runtime,omitempty"`
	// checkpoint (the first record of a compacted journal)
	Checkpoint *checkpoint `json:"checkpoint,omitempty"`
	// snapshot (the records a checkpoint announces)
	Snapshot []snap `json:"snapshot,omitempty"`
}

// Store is an open session store. It is safe for concurrent use; writes
// are serialized.
type Store struct {
	mu       sync.Mutex
	j        *journal.Journal
	sessions map[string]*Session
	byKey    map[string]string
	now      func() time.Time
	o        Options
	// Replay of a compacted journal: snapshot records still expected.
	snapsDue int
	// next* are the journal figures at which Create compacts first.
	nextRecords int
	nextBytes   int64
	// compacted counts compactions by this Store; lastCompact is the
	// last one's outcome, for Stats.
	compacted   int
	lastCompact CompactInfo
	reserveErr  error
	// dirty: records were appended since the last compaction, so
	// another one could free something.
	dirty bool
}

// Options configure Open.
type Options struct {
	// Dir is the store directory: owned by the service user, mode 0700.
	Dir string
	// Now is the clock (tests); time.Now when nil.
	Now func() time.Time
	// Retention is how long a cleaned-up session's id and idempotency
	// key are kept (DefaultRetention when 0; MinRetention..MaxRetention).
	Retention time.Duration
	// MaxRecords and MaxBytes bound the journal (its defaults when 0;
	// tests use small ones).
	MaxRecords int
	MaxBytes   int64
	// OnCompact, when set, is told of every automatic compaction and its
	// outcome (gloved logs it).
	OnCompact func(CompactInfo, error)
}

// Retention bounds.
const (
	DefaultRetention = 24 * time.Hour
	MinRetention     = time.Minute
	MaxRetention     = 365 * 24 * time.Hour
)

// Open opens or creates the store and replays it. It then compacts when
// the journal is past its threshold and reserves, on disk, room for every
// record the sessions it holds can still write. Neither failing fails
// Open (recovery must be able to start, and the records it writes are
// within the bounds): Stats says what failed.
func Open(o Options) (*Store, journal.OpenInfo, error) {
	if o.Retention == 0 {
		o.Retention = DefaultRetention
	}
	if o.Retention < MinRetention || o.Retention > MaxRetention {
		return nil, journal.OpenInfo{}, fmt.Errorf("open session store: retention %v outside %v..%v", o.Retention, MinRetention, MaxRetention)
	}
	j, recs, info, err := journal.Open(journal.Options{Dir: o.Dir, Name: FileName, Kind: Kind,
		MaxRecordBytes: MaxPlanBytes + 4096, MaxRecords: o.MaxRecords, MaxBytes: o.MaxBytes})
	if err != nil {
		return nil, info, fmt.Errorf("open session store: %w", err)
	}
	s := &Store{j: j, sessions: map[string]*Session{}, byKey: map[string]string{}, now: o.Now, o: o}
	if s.now == nil {
		s.now = time.Now
	}
	for i, r := range recs {
		if err := s.replay(r, i == 0); err != nil {
			j.Close()
			return nil, info, fmt.Errorf("open session store: record %d: %w: %w", r.Seq, ErrCorrupt, err)
		}
	}
	if s.snapsDue != 0 {
		j.Close()
		return nil, info, fmt.Errorf("open session store: %w: checkpoint announces %d more snapshot records", ErrCorrupt, s.snapsDue)
	}
	s.dirty = len(recs) > 0
	s.setThresholds()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pastThreshold() {
		// Best effort: a compaction that fails (a full disk) leaves the
		// journal as it was, and its reservations still hold.
		s.autoCompact()
	}
	if err := s.j.Preallocate(s.reservedBytes()); err != nil {
		s.reserveErr = err
	}
	return s, info, nil
}

// Close closes the store.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.j.Close()
}

func (s *Store) replay(r journal.Record, first bool) error {
	var rec record
	dec := json.NewDecoder(bytes.NewReader(r.Payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	// A compacted journal (its first record is not record 1) starts
	// with exactly one checkpoint and the snapshots it announces;
	// nothing else may hold either.
	based := first && r.Seq > 1
	switch {
	case based != (rec.Type == "checkpoint"):
		return fmt.Errorf("record type %q where a checkpoint is %s", rec.Type, map[bool]string{true: "required", false: "not allowed"}[based])
	case s.snapsDue > 0 && rec.Type != "snapshot":
		return fmt.Errorf("record type %q where the checkpoint announced %d more snapshots", rec.Type, s.snapsDue)
	case s.snapsDue == 0 && rec.Type == "snapshot":
		return errors.New("snapshot record not announced by a checkpoint")
	}
	switch rec.Type {
	case "checkpoint":
		return s.replayCheckpoint(r, rec)
	case "snapshot":
		s.snapsDue--
		return s.replaySnapshot(rec)
	case "cleanup":
		sess, ok := s.sessions[rec.Session]
		if !ok {
			return fmt.Errorf("cleanup of unknown session %s", rec.Session)
		}
		if err := cleanupAllowed(sess); err != nil {
			return err
		}
		sess.CleanedAt = time.UnixMilli(rec.AtMS)
	case "create":
		req := CreateRequest{SessionID: rec.Session, IdempotencyKey: rec.Key, ControllerPlanDigest: rec.Controller,
			PlanContentDigest: rec.Content, Plan: rec.Plan}
		if err := checkCreate(req); err != nil {
			return err
		}
		if _, dup := s.sessions[rec.Session]; dup {
			return fmt.Errorf("session %s created twice", rec.Session)
		}
		if _, dup := s.byKey[rec.Key]; dup {
			return fmt.Errorf("idempotency key reused by session %s", rec.Session)
		}
		s.apply(req, time.UnixMilli(rec.AtMS))
	case "transition":
		sess, ok := s.sessions[rec.Session]
		if !ok {
			return fmt.Errorf("transition of unknown session %s", rec.Session)
		}
		if sess.State != rec.From || !legal(rec.From, rec.To) || !reasonRe.MatchString(rec.Reason) {
			return fmt.Errorf("session %s: transition %s→%s recorded in state %s", rec.Session, rec.From, rec.To, sess.State)
		}
		sess.State, sess.Reason, sess.UpdatedAt = rec.To, rec.Reason, time.UnixMilli(rec.AtMS)
		sess.dropPlan()
	case "running":
		sess, ok := s.sessions[rec.Session]
		if !ok {
			return fmt.Errorf("running of unknown session %s", rec.Session)
		}
		if err := runAllowed(sess, rec.From, rec.Runtime); err != nil {
			return err
		}
		rt := *rec.Runtime
		sess.State, sess.Reason, sess.Runtime, sess.UpdatedAt = Running, "", &rt, time.UnixMilli(rec.AtMS)
	case "runtime":
		// Written by earlier versions only, between their starting and
		// running transitions: still replayed, so that an operator's
		// store opens after an upgrade, and a session it left starting
		// with a runtime is recovered through that runtime as before.
		sess, ok := s.sessions[rec.Session]
		if !ok {
			return fmt.Errorf("runtime of unknown session %s", rec.Session)
		}
		if err := runtimeAllowed(sess, rec.Runtime); err != nil {
			return err
		}
		rt := *rec.Runtime
		sess.Runtime, sess.UpdatedAt = &rt, time.UnixMilli(rec.AtMS)
	default:
		return fmt.Errorf("unknown record type %q", rec.Type)
	}
	return nil
}

// runtimeAllowed checks an earlier version's runtime record: one identity
// per session, recorded while it starts.
func runtimeAllowed(sess *Session, rt *Runtime) error {
	if rt == nil {
		return fmt.Errorf("%w: session %s: runtime record without identity", ErrInvalid, sess.ID)
	}
	if err := rt.check(); err != nil {
		return err
	}
	if sess.Runtime != nil {
		return fmt.Errorf("%w: session %s: runtime recorded twice", ErrConflict, sess.ID)
	}
	if sess.State != Starting {
		return fmt.Errorf("%w: session %s: runtime recorded in state %s", ErrTransition, sess.ID, sess.State)
	}
	return nil
}

// runAllowed checks a move to running: from preparing, the state it is
// in (from), with a valid identity and none recorded before. Threat: a
// running session whose processes gloved cannot identify would be one a
// restarted gloved cannot check, and one recorded for a session that has
// ended (or that an earlier version left starting, which only recovery
// may end) would name processes that are no session's.
func runAllowed(sess *Session, from State, rt *Runtime) error {
	if rt == nil {
		return fmt.Errorf("%w: session %s: running without its runtime identity", ErrInvalid, sess.ID)
	}
	if err := rt.check(); err != nil {
		return err
	}
	if sess.Runtime != nil {
		return fmt.Errorf("%w: session %s: runtime recorded twice", ErrConflict, sess.ID)
	}
	if from != Preparing || sess.State != from {
		return fmt.Errorf("%w: session %s: running from %s recorded in state %s", ErrTransition, sess.ID, from, sess.State)
	}
	return nil
}

// Run records, in one durable record, the identity of a preparing
// session's processes and its move to running (once). gloved calls it
// before it releases the program: a crash before the record leaves a
// session recovery ends with no runtime to check (nothing was released),
// a crash after it one whose processes recovery can identify and kill
// through its cgroup.
func (s *Store) Run(id string, rt Runtime) (Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[id]
	if !ok {
		return Session{}, fmt.Errorf("record %q running: %w", id, ErrNotFound)
	}
	if err := runAllowed(sess, sess.State, &rt); err != nil {
		return Session{}, fmt.Errorf("record %s running: %w", id, err)
	}
	at := s.now()
	if err := s.append(record{Type: "running", Session: id, AtMS: at.UnixMilli(), From: sess.State, Runtime: &rt}); err != nil {
		return Session{}, fmt.Errorf("record %s running: %w", id, err)
	}
	sess.State, sess.Reason, sess.Runtime, sess.UpdatedAt = Running, "", &rt, time.UnixMilli(at.UnixMilli())
	return sess.copy(), nil
}

func (s *Store) apply(req CreateRequest, at time.Time) *Session {
	sess := &Session{
		ID: req.SessionID, IdempotencyKey: req.IdempotencyKey, ControllerPlanDigest: req.ControllerPlanDigest,
		PlanContentDigest: req.PlanContentDigest, Plan: append([]byte(nil), req.Plan...),
		State: Created, CreatedAt: at, UpdatedAt: at,
	}
	s.sessions[req.SessionID] = sess
	s.byKey[req.IdempotencyKey] = req.SessionID
	return sess
}

func checkCreate(req CreateRequest) error {
	switch {
	case !names.Name(req.SessionID):
		return fmt.Errorf("%w: session id %q is not [a-z0-9][a-z0-9-]{0,63}", ErrInvalid, req.SessionID)
	case !keyRe.MatchString(req.IdempotencyKey):
		return fmt.Errorf("%w: idempotency key is not 1-128 of [A-Za-z0-9._:-]", ErrInvalid)
	case !policy.ValidSHA256Hex(req.ControllerPlanDigest):
		return fmt.Errorf("%w: controller_plan_digest is not 64 lowercase hex characters", ErrInvalid)
	case !policy.ValidSHA256Hex(req.PlanContentDigest):
		return fmt.Errorf("%w: plan_content_digest is not 64 lowercase hex characters", ErrInvalid)
	case len(req.Plan) == 0 || len(req.Plan) > MaxPlanBytes || !json.Valid(req.Plan):
		return fmt.Errorf("%w: plan is not 1..%d bytes of JSON", ErrInvalid, MaxPlanBytes)
	}
	return nil
}

// Create stores a new session. A byte-identical retry with the same
// idempotency key returns the original session and existing=true;
// reusing the session id or the key with any other content fails closed
// with ErrConflict. The caller has validated the plan and computed its
// content digest.
func (s *Store) Create(req CreateRequest) (sess Session, existing bool, err error) {
	if err := checkCreate(req); err != nil {
		return Session{}, false, fmt.Errorf("create session: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.byKey[req.IdempotencyKey]; ok {
		old := s.sessions[id]
		// A compacted session keeps its plan only while created; the
		// content digest (Glove's SHA-256 of the canonical plan)
		// stands for it after that.
		if old.ID == req.SessionID && old.ControllerPlanDigest == req.ControllerPlanDigest &&
			old.PlanContentDigest == req.PlanContentDigest && (old.Plan == nil || bytes.Equal(old.Plan, req.Plan)) {
			return old.copy(), true, nil
		}
		return Session{}, false, fmt.Errorf("create session %s: idempotency key %w", req.SessionID, ErrConflict)
	}
	if _, ok := s.sessions[req.SessionID]; ok {
		return Session{}, false, fmt.Errorf("create session %s: session id %w", req.SessionID, ErrConflict)
	}
	at := s.now()
	rec := record{Type: "create", Session: req.SessionID, AtMS: at.UnixMilli(), Key: req.IdempotencyKey,
		Controller: req.ControllerPlanDigest, Content: req.PlanContentDigest, Plan: req.Plan}
	data, err := json.Marshal(rec)
	if err != nil {
		return Session{}, false, fmt.Errorf("create session %s: encode record: %w", req.SessionID, err)
	}
	if err := s.admit(len(data)); err != nil {
		return Session{}, false, fmt.Errorf("create session %s: %w", req.SessionID, err)
	}
	if _, err := s.j.Append(data); err != nil {
		return Session{}, false, fmt.Errorf("create session %s: append record: %w", req.SessionID, err)
	}
	s.dirty = true
	return s.apply(req, time.UnixMilli(at.UnixMilli())).copy(), false, nil
}

// Get returns a session.
func (s *Store) Get(id string) (Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[id]
	if !ok {
		return Session{}, fmt.Errorf("session %q: %w", id, ErrNotFound)
	}
	return sess.copy(), nil
}

// List returns every session's id, in no particular order.
func (s *Store) List() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.sessions))
	for id := range s.sessions {
		ids = append(ids, id)
	}
	return ids
}

// Transition moves a session to state to, durably, and returns it. Asking
// for the current state is a no-op success; anything the lifecycle does
// not allow is ErrTransition and writes nothing, and so is a move to
// starting (never recorded) or to running (Run records it, with the
// runtime identity).
func (s *Store) Transition(id string, to State, reason string) (Session, error) {
	if !reasonRe.MatchString(reason) {
		return Session{}, fmt.Errorf("transition %s: %w: reason %q", id, ErrInvalid, reason)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[id]
	if !ok {
		return Session{}, fmt.Errorf("transition %q: %w", id, ErrNotFound)
	}
	if sess.State == to {
		return sess.copy(), nil
	}
	if !legal(sess.State, to) {
		return Session{}, fmt.Errorf("transition %s: %w: %s→%s", id, ErrTransition, sess.State, to)
	}
	if to == Starting || to == Running {
		// legal still allows both for the records of earlier versions;
		// this version writes neither as a transition.
		return Session{}, fmt.Errorf("transition %s: %w: %s→%s is not a recorded transition (running is recorded by Run)", id, ErrTransition, sess.State, to)
	}
	at := s.now()
	rec := record{Type: "transition", Session: id, AtMS: at.UnixMilli(), From: sess.State, To: to, Reason: reason}
	if err := s.append(rec); err != nil {
		return Session{}, fmt.Errorf("transition %s: %w", id, err)
	}
	sess.State, sess.Reason, sess.UpdatedAt = to, reason, time.UnixMilli(at.UnixMilli())
	c := sess.copy()
	sess.dropPlan()
	return c, nil
}

// dropPlan lets a session's plan go from memory once it has left
// created: only a start reads it, and compaction writes it only for a
// created session. Threat: every session of the retention window
// (a day by default) keeping its whole plan in gloved's memory.
func (s *Session) dropPlan() {
	if s.State != Created {
		s.Plan = nil
	}
}

// append writes one of a session's lifecycle records: always within the
// room its creation reserved (maxLifecyclePayload each).
func (s *Store) append(rec record) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode record: %w", err)
	}
	if len(data) > maxLifecyclePayload {
		return fmt.Errorf("encode record: %d bytes, over the %d reserved for a lifecycle record", len(data), maxLifecyclePayload)
	}
	if _, err := s.j.Append(data); err != nil {
		return fmt.Errorf("append record: %w", err)
	}
	s.dirty = true
	return nil
}

// Cleanup records that the controller cleaned up an ended session: from
// now on it is kept only for the retention window. A second cleanup is a
// no-op success.
func (s *Store) Cleanup(id string) (Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[id]
	if !ok {
		return Session{}, fmt.Errorf("clean up %q: %w", id, ErrNotFound)
	}
	if !sess.CleanedAt.IsZero() {
		return sess.copy(), nil
	}
	if err := cleanupAllowed(sess); err != nil {
		return Session{}, fmt.Errorf("clean up %s: %w", id, err)
	}
	at := s.now()
	if err := s.append(record{Type: "cleanup", Session: id, AtMS: at.UnixMilli()}); err != nil {
		return Session{}, fmt.Errorf("clean up %s: %w", id, err)
	}
	sess.CleanedAt = time.UnixMilli(at.UnixMilli())
	if s.pastThreshold() {
		s.autoCompact()
	}
	return sess.copy(), nil
}

func cleanupAllowed(sess *Session) error {
	switch {
	case !sess.State.Terminal():
		return fmt.Errorf("%w: session %s is %s, not ended", ErrTransition, sess.ID, sess.State)
	case !sess.CleanedAt.IsZero():
		return fmt.Errorf("%w: session %s cleaned up twice", ErrConflict, sess.ID)
	}
	return nil
}

func (s *Session) copy() Session {
	c := *s
	c.Plan = append([]byte(nil), s.Plan...)
	if s.Runtime != nil {
		rt := *s.Runtime
		c.Runtime = &rt
	}
	return c
}
