// Package store is gloved's durable session store: every session created
// from a validated plan, and every lifecycle transition, as records of an
// append-only, hash-chained journal (supervisor/journal).
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
package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/glove-sandbox/glove/supervisor/journal"
	"github.com/glove-sandbox/glove/supervisor/policy"
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

// SessionIDPattern is the charset of session ids, shared with receipts.
const SessionIDPattern = `^[a-z0-9][a-z0-9-]{0,63}$`

// ValidSessionID reports whether s is a well-formed session id.
func ValidSessionID(s string) bool { return sessionIDRe.MatchString(s) }

// Errors callers tell apart with errors.Is.
var (
	ErrConflict   = errors.New("conflicts with an existing session")
	ErrNotFound   = errors.New("no such session")
	ErrTransition = errors.New("illegal transition")
	ErrInvalid    = errors.New("invalid request")
	ErrCorrupt    = errors.New("store replay failed")
)

var (
	sessionIDRe = regexp.MustCompile(SessionIDPattern)
	keyRe       = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)
	reasonRe    = regexp.MustCompile(`^[a-z0-9_:.-]{0,64}$`)
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
	Type    string `json:"type"` // "create", "transition" or "runtime"
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
	// runtime
	Runtime *Runtime `json:"runtime,omitempty"`
}

// Store is an open session store. It is safe for concurrent use; writes
// are serialized.
type Store struct {
	mu       sync.Mutex
	j        *journal.Journal
	sessions map[string]*Session
	byKey    map[string]string
	now      func() time.Time
}

// Options configure Open.
type Options struct {
	// Dir is the store directory: owned by the service user, mode 0700.
	Dir string
	// Now is the clock (tests); time.Now when nil.
	Now func() time.Time
}

// Open opens or creates the store and replays it.
func Open(o Options) (*Store, journal.OpenInfo, error) {
	j, recs, info, err := journal.Open(journal.Options{Dir: o.Dir, Name: FileName, Kind: Kind, MaxRecordBytes: MaxPlanBytes + 4096})
	if err != nil {
		return nil, info, fmt.Errorf("open session store: %w", err)
	}
	s := &Store{j: j, sessions: map[string]*Session{}, byKey: map[string]string{}, now: o.Now}
	if s.now == nil {
		s.now = time.Now
	}
	for _, r := range recs {
		if err := s.replay(r); err != nil {
			j.Close()
			return nil, info, fmt.Errorf("open session store: record %d: %w: %w", r.Seq, ErrCorrupt, err)
		}
	}
	return s, info, nil
}

// Close closes the store.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.j.Close()
}

func (s *Store) replay(r journal.Record) error {
	var rec record
	dec := json.NewDecoder(bytes.NewReader(r.Payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	switch rec.Type {
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
	case "runtime":
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

// runtimeAllowed: one identity per session, recorded while it starts.
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

// SetRuntime records, durably, the identity of a starting session's
// processes (state starting, once).
func (s *Store) SetRuntime(id string, rt Runtime) (Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[id]
	if !ok {
		return Session{}, fmt.Errorf("set runtime %q: %w", id, ErrNotFound)
	}
	if err := runtimeAllowed(sess, &rt); err != nil {
		return Session{}, fmt.Errorf("set runtime %s: %w", id, err)
	}
	at := s.now()
	if err := s.append(record{Type: "runtime", Session: id, AtMS: at.UnixMilli(), Runtime: &rt}); err != nil {
		return Session{}, fmt.Errorf("set runtime %s: %w", id, err)
	}
	sess.Runtime, sess.UpdatedAt = &rt, time.UnixMilli(at.UnixMilli())
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
	case !sessionIDRe.MatchString(req.SessionID):
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
		if old.ID == req.SessionID && old.ControllerPlanDigest == req.ControllerPlanDigest &&
			old.PlanContentDigest == req.PlanContentDigest && bytes.Equal(old.Plan, req.Plan) {
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
	if err := s.append(rec); err != nil {
		return Session{}, false, fmt.Errorf("create session %s: %w", req.SessionID, err)
	}
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
// not allow is ErrTransition and writes nothing.
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
	at := s.now()
	rec := record{Type: "transition", Session: id, AtMS: at.UnixMilli(), From: sess.State, To: to, Reason: reason}
	if err := s.append(rec); err != nil {
		return Session{}, fmt.Errorf("transition %s: %w", id, err)
	}
	sess.State, sess.Reason, sess.UpdatedAt = to, reason, time.UnixMilli(at.UnixMilli())
	return sess.copy(), nil
}

func (s *Store) append(rec record) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode record: %w", err)
	}
	if _, err := s.j.Append(data); err != nil {
		return fmt.Errorf("append record: %w", err)
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
