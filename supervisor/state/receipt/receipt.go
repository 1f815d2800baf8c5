// SPDX-License-Identifier: Apache-2.0

// Package receipt is gloved's durable journal of authenticated terminal
// receipts: what a session was allowed (its plan digests) and how it
// ended (termination and usage), MACed with HMAC-SHA-256 and chained from
// a trusted anchor, so the controller can detect a receipt that was
// altered, dropped, reordered or replayed.
//
// Lifecycle of one receipt:
//
//	Reserve(session)   before launch: capacity for its receipt is set aside
//	                   durably, so a session never runs without room to
//	                   record how it ended
//	Finalize(body)     when it ends: the envelope is appended and synced
//	                   before Finalize returns, so success is never
//	                   reported for a receipt a crash could lose
//	Page(after, n)     delivery, in order
//	Ack(seq, mac)      the controller archived everything up to seq; the
//	                   MAC must be that envelope's exact MAC
//
// The journal (supervisor/state/journal) recovers a torn tail by dropping the
// uncommitted record only, so no acknowledged receipt (acknowledged means
// committed, delivered and archived) is ever lost.
//
// Acknowledged receipts leave the journal by compaction: a new journal
// generation whose first record is a checkpoint (the anchor, the
// acknowledged sequence number and that envelope's MAC, the newest
// envelope's sequence number) followed by the envelopes not yet
// acknowledged and the outstanding reservations. The envelope chain goes
// on from the checkpoint unchanged: the next envelope's Prev is the MAC
// of the newest one, compacted or not, so the controller's archive
// verifies across compactions. Compaction runs when a reservation would
// not fit, when the journal passes half its bounds after an
// acknowledgement, and on Compact.
package receipt

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"sync"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/state/journal"
	"github.com/glove-sandbox/glove/supervisor/state/store"
)

// FileName is the journal's name inside the receipt directory.
const FileName = "receipts.journal"

// Kind tags the journal.
const Kind = "receipts"

// MaxEnvelopeBytes bounds one receipt record; reservations count it.
const MaxEnvelopeBytes = 4096

// ackHeadroom is capacity kept for acknowledgements, so a full journal
// can still be drained by the controller.
const ackHeadroom = 16

// Errors callers tell apart with errors.Is.
var (
	ErrFull     = errors.New("receipt journal has no capacity for another reservation")
	ErrReplay   = errors.New("replayed receipt")
	ErrNotFound = errors.New("no reservation")
	ErrAck      = errors.New("acknowledgement rejected")
	ErrInvalid  = errors.New("invalid receipt")
	ErrCorrupt  = errors.New("receipt journal replay failed")
	ErrVerify   = errors.New("receipt verification failed")
	// ErrPageAcked and ErrPageBeyondHead say why Page refused (each
	// with ErrInvalid): a controller told only "invalid" cannot tell a
	// cursor below its own acknowledged head from one past the journal.
	ErrPageAcked      = errors.New("receipts up to the acknowledged head have left the journal")
	ErrPageBeyondHead = errors.New("after is beyond the head")
)

var (
	// safeTargetRe keeps a projection target's JSON encoding canonical:
	// an absolute path of characters no encoder escapes differently.
	safeTargetRe = regexp.MustCompile(`^/[A-Za-z0-9._/-]+$`)
	leaseIDRe    = regexp.MustCompile(`^[0-9a-f]{32}$`)
	terminalRe   = regexp.MustCompile(`^(exited|signaled|failed|limit:(cpu_time_ms|memory_bytes|pids|wall_time_ms|disk_bytes|terminal_output_bytes))$`)
)

// Usage is what the session consumed, against its six limits.
type Usage struct {
	CPUTimeMS           uint64 `json:"cpu_time_ms"`
	MemoryPeakBytes     uint64 `json:"memory_peak_bytes"`
	PidsPeak            uint64 `json:"pids_peak"`
	WallTimeMS          uint64 `json:"wall_time_ms"`
	DiskBytes           uint64 `json:"disk_bytes"`
	TerminalOutputBytes uint64 `json:"terminal_output_bytes"`
}

// Body is the receipt proper.
type Body struct {
	SessionID            string `json:"session_id"`
	ControllerPlanDigest string `json:"controller_plan_digest"`
	PlanContentDigest    string `json:"plan_content_digest"`
	PolicyRevision       uint64 `json:"policy_revision"`
	// Termination is exited, signaled, failed or limit:<limit name>.
	Termination string `json:"termination"`
	ExitCode    int    `json:"exit_code"`
	Signal      int    `json:"signal"`
	Usage       Usage  `json:"usage"`
	StartedAtMS int64  `json:"started_at_ms"`
	EndedAtMS   int64  `json:"ended_at_ms"`
	// LaunchDigest is the managed-launch digest of a session that started
	// (docs/protocol.md); absent for one that never did. Last, and
	// omitted when empty, so receipts without it keep their MACs.
	LaunchDigest string `json:"launch_digest,omitempty"`
	// LibraryProjections are the library bundles the session was
	// launched with, and SkillProjectionDigest a native-skill runtime's
	// derived skill projection digest (docs/library-bundles.md). Both
	// are also inside the launch digest; both are omitted when empty, so
	// receipts without them keep their MACs.
	LibraryProjections    []Projection `json:"library_projections,omitempty"`
	SkillProjectionDigest string       `json:"skill_projection_digest,omitempty"`
	// CredentialLeases are the credential leases the session was
	// launched with: handle, lease identity, the version launched and the
	// version after the session (one more when the session rotated the
	// credential). Never the credential. Omitted when empty, so receipts
	// without them keep their MACs.
	CredentialLeases []CredentialLease `json:"credential_leases,omitempty"`
	// StageTreeDigest is the content digest of the staged tree a
	// discovered runtime ran from (docs/policy.md, "Staging a runtime"),
	// also inside the launch digest. Omitted when empty, so receipts
	// without it keep their MACs.
	StageTreeDigest string `json:"stage_tree_digest,omitempty"`
}

// CredentialLease is one credential lease of a session, as its receipt
// commits it.
type CredentialLease struct {
	Handle       string `json:"handle"`
	LeaseID      string `json:"lease_id"`
	Version      uint64 `json:"version"`
	VersionAtEnd uint64 `json:"version_at_end"`
}

// maxCredentialLeases bounds a receipt's lease list (the session engine
// allows at most 8 per launch).
const maxCredentialLeases = 8

func (c *CredentialLease) check() bool {
	return policy.ValidIdentifier(c.Handle) && leaseIDRe.MatchString(c.LeaseID) &&
		c.Version >= 1 && c.VersionAtEnd >= c.Version && c.VersionAtEnd <= policy.MaxSafeInteger
}

// Projection is one library bundle projection, as the launch committed
// it: its identifier ("<destination>/<digest>"), destination alias,
// target inside the sandbox and SHA-256 digest.
type Projection struct {
	Identifier  string `json:"identifier"`
	Destination string `json:"destination"`
	Target      string `json:"target"`
	Digest      string `json:"digest"`
}

// maxProjections bounds a receipt's projection list (the session engine
// allows at most 8 per launch).
const maxProjections = 8

// ValidProjection reports whether p can be carried by a receipt.
func ValidProjection(p *Projection) bool { return p.check() }

func (p *Projection) check() bool {
	return policy.ValidSHA256Hex(p.Digest) && policy.ValidIdentifier(p.Destination) &&
		p.Identifier == p.Destination+"/"+p.Digest && len(p.Target) <= 1024 && safeTargetRe.MatchString(p.Target)
}

// Check validates a body. The charsets keep its JSON encoding canonical
// (no escaping can differ between encoders).
func (b *Body) Check() error {
	switch {
	case !store.ValidSessionID(b.SessionID):
		return fmt.Errorf("%w: session_id %q", ErrInvalid, b.SessionID)
	case !policy.ValidSHA256Hex(b.ControllerPlanDigest):
		return fmt.Errorf("%w: controller_plan_digest", ErrInvalid)
	case !policy.ValidSHA256Hex(b.PlanContentDigest):
		return fmt.Errorf("%w: plan_content_digest", ErrInvalid)
	case !terminalRe.MatchString(b.Termination):
		return fmt.Errorf("%w: termination %q", ErrInvalid, b.Termination)
	case b.ExitCode < 0 || b.ExitCode > 255 || b.Signal < 0 || b.Signal > 64:
		return fmt.Errorf("%w: exit code %d signal %d", ErrInvalid, b.ExitCode, b.Signal)
	case b.StartedAtMS <= 0 || b.EndedAtMS < b.StartedAtMS:
		return fmt.Errorf("%w: times %d..%d", ErrInvalid, b.StartedAtMS, b.EndedAtMS)
	case b.LaunchDigest != "" && !policy.ValidSHA256Hex(b.LaunchDigest):
		return fmt.Errorf("%w: launch_digest", ErrInvalid)
	case b.SkillProjectionDigest != "" && !policy.ValidSHA256Hex(b.SkillProjectionDigest):
		return fmt.Errorf("%w: skill_projection_digest", ErrInvalid)
	case b.StageTreeDigest != "" && !policy.ValidSHA256Hex(b.StageTreeDigest):
		return fmt.Errorf("%w: stage_tree_digest", ErrInvalid)
	case len(b.LibraryProjections) > maxProjections:
		return fmt.Errorf("%w: %d library projections, more than %d", ErrInvalid, len(b.LibraryProjections), maxProjections)
	case len(b.CredentialLeases) > maxCredentialLeases:
		return fmt.Errorf("%w: %d credential leases, more than %d", ErrInvalid, len(b.CredentialLeases), maxCredentialLeases)
	}
	for i := range b.CredentialLeases {
		if !b.CredentialLeases[i].check() {
			return fmt.Errorf("%w: credential_leases[%d]", ErrInvalid, i)
		}
	}
	for i := range b.LibraryProjections {
		if !b.LibraryProjections[i].check() {
			return fmt.Errorf("%w: library_projections[%d]", ErrInvalid, i)
		}
	}
	return nil
}

// Envelope is one delivered receipt: the body, its MAC, and its place in
// the chain. Prev is the previous envelope's MAC, or the anchor for the
// first one.
type Envelope struct {
	Seq         uint64 `json:"seq"`
	Prev        string `json:"prev"`
	Body        Body   `json:"receipt"`
	ReceiptMAC  string `json:"receipt_mac"`
	EnvelopeMAC string `json:"envelope_mac"`
}

// Keys derived from the service key, one per domain, so a MAC of one kind
// can never verify as another (a start authorization as a receipt, a
// receipt MAC as an envelope MAC).
func receiptKey(master []byte) []byte  { return derive(master, "glove-receipt-key-v1") }
func envelopeKey(master []byte) []byte { return derive(master, "glove-receipt-envelope-key-v1") }

func derive(master []byte, label string) []byte {
	h := hmac.New(sha256.New, master)
	h.Write([]byte(label))
	return h.Sum(nil)
}

func bodyMAC(master []byte, b *Body) (string, error) {
	data, err := json.Marshal(b)
	if err != nil {
		return "", fmt.Errorf("encode receipt: %w", err)
	}
	h := hmac.New(sha256.New, receiptKey(master))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil)), nil
}

func envMAC(master []byte, seq uint64, prev, receiptMAC string) string {
	h := hmac.New(sha256.New, envelopeKey(master))
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], seq)
	h.Write(n[:])
	h.Write([]byte(prev))
	h.Write([]byte(receiptMAC))
	return hex.EncodeToString(h.Sum(nil))
}

// Seal computes an envelope's MACs.
func Seal(master []byte, seq uint64, prev string, b Body) (Envelope, error) {
	if err := b.Check(); err != nil {
		return Envelope{}, err
	}
	rm, err := bodyMAC(master, &b)
	if err != nil {
		return Envelope{}, err
	}
	return Envelope{Seq: seq, Prev: prev, Body: b, ReceiptMAC: rm, EnvelopeMAC: envMAC(master, seq, prev, rm)}, nil
}

// Verify checks a run of envelopes: each MAC, consecutive sequence
// numbers from the first one's, and the chain from prev (the anchor when
// the run starts at 1, or the MAC of the envelope before the run).
func Verify(master []byte, prev string, envs []Envelope) error {
	for i, e := range envs {
		if i > 0 && e.Seq != envs[i-1].Seq+1 {
			return fmt.Errorf("%w: envelope %d follows %d", ErrVerify, e.Seq, envs[i-1].Seq)
		}
		if e.Prev != prev {
			return fmt.Errorf("%w: envelope %d does not chain to its predecessor", ErrVerify, e.Seq)
		}
		want, err := Seal(master, e.Seq, e.Prev, e.Body)
		if err != nil {
			return fmt.Errorf("%w: envelope %d: %w", ErrVerify, e.Seq, err)
		}
		if !hmac.Equal([]byte(want.ReceiptMAC), []byte(e.ReceiptMAC)) {
			return fmt.Errorf("%w: envelope %d: receipt MAC", ErrVerify, e.Seq)
		}
		if !hmac.Equal([]byte(want.EnvelopeMAC), []byte(e.EnvelopeMAC)) {
			return fmt.Errorf("%w: envelope %d: envelope MAC", ErrVerify, e.Seq)
		}
		prev = e.EnvelopeMAC
	}
	return nil
}

// record is one journal entry; exactly the fields of its Type are set.
type record struct {
	Type     string    `json:"type"` // anchor, reserve, receipt, ack, checkpoint, carried
	Anchor   string    `json:"anchor,omitempty"`
	Session  string    `json:"session,omitempty"`
	Envelope *Envelope `json:"envelope,omitempty"`
	Seq      uint64    `json:"seq,omitempty"`
	MAC      string    `json:"mac,omitempty"`
	// Revision (reserve): the policy revision the session was started
	// under, for a receipt recovery seals after the policy changed.
	Revision uint64 `json:"revision,omitempty"`
	// checkpoint: the first record of a compacted journal
	Checkpoint *checkpoint `json:"checkpoint,omitempty"`
}

// checkpoint carries the receipt chain's state over a compaction.
type checkpoint struct {
	// PrevSeq and PrevHead: the previous generation's last journal
	// record (sequence number, hash in hex), which this one chains to.
	PrevSeq  uint64 `json:"prev_seq"`
	PrevHead string `json:"prev_head"`
	Anchor   string `json:"anchor"`
	// Acked is the acknowledged envelope sequence number and AckedMAC
	// its MAC (the anchor when 0): the first carried envelope chains to it.
	Acked    uint64 `json:"acked"`
	AckedMAC string `json:"acked_mac"`
	// Carried envelopes (Acked+1 onwards) and reservations follow, as
	// "carried" and "reserve" records, in that order.
	Carried  int `json:"carried"`
	Reserved int `json:"reserved"`
}

// Options configure Open.
type Options struct {
	// Dir holds the journal: owned by the service user, mode 0700.
	Dir string
	// OnCompact, when set, is told of every automatic compaction and its
	// outcome (gloved logs it).
	OnCompact func(CompactInfo, error)
	// Key is the service key (store.LoadKey).
	Key []byte
	// Anchor is the controller's trusted anchor, 64 lowercase hex: the
	// first envelope chains to it. It is recorded when the journal is
	// created and must match on every later open.
	Anchor string
	// MaxRecords bounds the journal (the journal's default when 0).
	MaxRecords int
}

// CompactInfo says what a compaction did.
type CompactInfo struct {
	RecordsBefore, RecordsAfter int
	BytesBefore, BytesAfter     int64
	// Dropped: acknowledged envelopes that left; Carried: envelopes kept.
	Dropped, Carried int
}

// Journal is an open receipt journal. Safe for concurrent use.
type Journal struct {
	mu     sync.Mutex
	j      *journal.Journal
	o      Options
	key    []byte
	anchor string
	// envs are the envelopes base+1.. still in the journal; baseMAC is
	// envelope base's MAC (the anchor when base is 0).
	envs     []Envelope
	base     uint64
	baseMAC  string
	reserved map[string]uint64 // reserved, no receipt yet: the policy revision it started under
	done     map[string]bool   // has a receipt in the journal file (in envs, or acknowledged: ackedIDs)
	// ackedIDs are the sessions whose receipts were acknowledged since
	// the last compaction: their envelopes have left envs (forgetAcked)
	// and leave the file at the next compaction.
	ackedIDs []string
	acked    uint64
	// Replay of a compacted journal: records the checkpoint announced.
	carryDue, reserveDue int
	compacted            int
	// nextRecords, nextBytes: the file size at which an acknowledgement
	// compacts (half the bounds, or twice the last compaction's result).
	nextRecords int
	nextBytes   int64
}

// Held is how many sessions the journal holds in memory: envelopes not
// yet compacted away and reservations without a receipt.
func (r *Journal) Held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.envs) + len(r.reserved)
}

// Open opens or creates the journal and replays it strictly.
func Open(o Options) (*Journal, journal.OpenInfo, error) {
	if !policy.ValidSHA256Hex(o.Anchor) {
		return nil, journal.OpenInfo{}, fmt.Errorf("open receipts: anchor is not 64 lowercase hex characters")
	}
	if len(o.Key) < 32 {
		return nil, journal.OpenInfo{}, fmt.Errorf("open receipts: key of %d bytes, need at least 32", len(o.Key))
	}
	j, recs, info, err := journal.Open(journal.Options{Dir: o.Dir, Name: FileName, Kind: Kind, MaxRecordBytes: MaxEnvelopeBytes, MaxRecords: o.MaxRecords})
	if err != nil {
		return nil, info, fmt.Errorf("open receipts: %w", err)
	}
	r := &Journal{j: j, o: o, key: append([]byte(nil), o.Key...), reserved: map[string]uint64{}, done: map[string]bool{}}
	for i, rec := range recs {
		if err := r.replay(rec, o.Anchor, i == 0); err != nil {
			j.Close()
			return nil, info, fmt.Errorf("open receipts: record %d: %w: %w", rec.Seq, ErrCorrupt, err)
		}
	}
	if r.carryDue != 0 || r.reserveDue != 0 {
		j.Close()
		return nil, info, fmt.Errorf("open receipts: %w: the checkpoint announces %d more envelopes and %d more reservations", ErrCorrupt, r.carryDue, r.reserveDue)
	}
	if r.anchor == "" {
		if err := r.append(record{Type: "anchor", Anchor: o.Anchor}); err != nil {
			j.Close()
			return nil, info, fmt.Errorf("open receipts: record anchor: %w", err)
		}
		r.anchor = o.Anchor
	}
	if r.baseMAC == "" {
		r.baseMAC = r.anchor
	}
	r.setThresholds()
	return r, info, nil
}

func (r *Journal) setThresholds() {
	st := r.j.Stats()
	r.nextRecords = min(st.MaxRecords, max(st.MaxRecords/2, 2*st.Records))
	r.nextBytes = min(st.MaxBytes, max(st.MaxBytes/2, 2*st.Bytes))
}

func (r *Journal) replay(rec journal.Record, anchor string, first bool) error {
	var x record
	dec := json.NewDecoder(bytes.NewReader(rec.Payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&x); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	// A compacted journal starts with its checkpoint and the records it
	// announces; an uncompacted one with the anchor.
	based := first && rec.Seq > 1
	switch {
	case based != (x.Type == "checkpoint"):
		return fmt.Errorf("record type %q where a checkpoint is %s", x.Type, map[bool]string{true: "required", false: "not allowed"}[based])
	case !based && (x.Type == "anchor") != (r.anchor == ""):
		return errors.New("the anchor must be the first record, and only the first")
	case r.carryDue > 0 && x.Type != "carried", r.carryDue == 0 && r.reserveDue > 0 && x.Type != "reserve":
		return fmt.Errorf("record type %q where the checkpoint announced %d envelopes and %d reservations more", x.Type, r.carryDue, r.reserveDue)
	case r.carryDue == 0 && x.Type == "carried":
		return errors.New("carried envelope not announced by a checkpoint")
	}
	switch x.Type {
	case "checkpoint":
		cp := x.Checkpoint
		switch {
		case cp == nil:
			return errors.New("checkpoint record without a checkpoint")
		case cp.PrevSeq != rec.Seq-1 || cp.PrevHead != hex.EncodeToString(rec.Prev[:]):
			return fmt.Errorf("checkpoint names record %d, but follows record %d", cp.PrevSeq, rec.Seq-1)
		case cp.Anchor != anchor:
			return errors.New("journal was created for another anchor")
		case cp.Carried < 0 || cp.Reserved < 0 || (cp.Acked == 0) != (cp.AckedMAC == cp.Anchor) || !policy.ValidSHA256Hex(cp.AckedMAC):
			return errors.New("checkpoint fields out of range")
		}
		r.anchor, r.base, r.baseMAC, r.acked = cp.Anchor, cp.Acked, cp.AckedMAC, cp.Acked
		r.carryDue, r.reserveDue = cp.Carried, cp.Reserved
	case "carried":
		r.carryDue--
		if x.Envelope == nil {
			return errors.New("carried record without an envelope")
		}
		if r.done[x.Envelope.Body.SessionID] {
			return fmt.Errorf("session %s carried twice", x.Envelope.Body.SessionID)
		}
		if err := Verify(r.key, r.head(), []Envelope{*x.Envelope}); err != nil {
			return err
		}
		if x.Envelope.Seq != r.next() {
			return fmt.Errorf("receipt %d out of order", x.Envelope.Seq)
		}
		r.addReceipt(*x.Envelope)
	case "anchor":
		if x.Anchor != anchor {
			return errors.New("journal was created for another anchor")
		}
		r.anchor = x.Anchor
	case "reserve":
		if r.reserveDue > 0 {
			r.reserveDue--
		}
		if _, dup := r.reserved[x.Session]; dup || r.done[x.Session] || !store.ValidSessionID(x.Session) {
			return fmt.Errorf("reservation of session %q repeated or invalid", x.Session)
		}
		r.reserved[x.Session] = x.Revision
	case "receipt":
		if x.Envelope == nil {
			return errors.New("receipt without a reservation")
		}
		if _, ok := r.reserved[x.Envelope.Body.SessionID]; !ok {
			return errors.New("receipt without a reservation")
		}
		if err := Verify(r.key, r.head(), []Envelope{*x.Envelope}); err != nil {
			return err
		}
		if x.Envelope.Seq != r.next() {
			return fmt.Errorf("receipt %d out of order", x.Envelope.Seq)
		}
		r.addReceipt(*x.Envelope)
	case "ack":
		if err := r.checkAck(x.Seq, x.MAC); err != nil {
			return err
		}
		r.acked = x.Seq
		r.forgetAcked()
	default:
		return fmt.Errorf("unknown record type %q", x.Type)
	}
	return nil
}

// forgetAcked lets the acknowledged envelopes go from memory (mu held):
// the controller has archived them, so they are no longer served, and
// the file keeps them only until its next compaction. Only their
// sessions' ids stay (ackedIDs), so that a reused id still waits for its
// earlier receipt to leave the file. Threat: a journal bounded on disk
// whose memory holds thousands of archived envelopes between
// compactions, a sawtooth of megabytes that follows the journal's bounds
// rather than the receipts outstanding.
func (r *Journal) forgetAcked() {
	n := r.acked - r.base
	if n == 0 {
		return
	}
	for _, e := range r.envs[:n] {
		r.ackedIDs = append(r.ackedIDs, e.Body.SessionID)
	}
	r.baseMAC = r.envs[n-1].EnvelopeMAC
	r.envs = append([]Envelope(nil), r.envs[n:]...)
	r.base = r.acked
}

func (r *Journal) addReceipt(e Envelope) {
	r.envs = append(r.envs, e)
	delete(r.reserved, e.Body.SessionID)
	r.done[e.Body.SessionID] = true
}

// head is the MAC the next envelope chains to.
func (r *Journal) head() string {
	if len(r.envs) == 0 {
		if r.baseMAC == "" {
			return r.anchor
		}
		return r.baseMAC
	}
	return r.envs[len(r.envs)-1].EnvelopeMAC
}

// head0 is the MAC the oldest envelope in envs chains to.
func (r *Journal) head0() string {
	if r.baseMAC == "" {
		return r.anchor
	}
	return r.baseMAC
}

// next is the next envelope's sequence number.
func (r *Journal) next() uint64 { return r.base + uint64(len(r.envs)) + 1 }

// Close closes the journal.
func (r *Journal) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.j.Close()
}

// Reserve durably sets aside capacity for the session's terminal receipt,
// and records the policy revision it is started under (Reservation). A
// second reservation, or one for a session that already has its
// receipt, is a replay.
func (r *Journal) Reserve(sessionID string, revision uint64) error {
	if !store.ValidSessionID(sessionID) {
		return fmt.Errorf("reserve: %w: session id %q", ErrInvalid, sessionID)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.reserved[sessionID]; dup {
		return fmt.Errorf("reserve %s: %w: it is reserved already", sessionID, ErrReplay)
	}
	if r.done[sessionID] {
		// The id is used again after its earlier session left the
		// store (past the retention window). Its earlier receipt must
		// leave the journal first, so that an id has one receipt there
		// at a time: only once the controller has archived it.
		if !r.ackedReceipt(sessionID) {
			return fmt.Errorf("reserve %s: %w: the receipt of an earlier session of this id is not acknowledged", sessionID, ErrReplay)
		}
		info, err := r.compact()
		if r.o.OnCompact != nil {
			r.o.OnCompact(info, err)
		}
		if err != nil {
			return fmt.Errorf("reserve %s: let the earlier session's acknowledged receipt leave: %w", sessionID, err)
		}
	}
	outstanding := len(r.reserved) + 1
	needBytes := journal.RecordSize(256) + int64(outstanding)*journal.RecordSize(MaxEnvelopeBytes) + ackHeadroom*journal.RecordSize(256)
	fits := func() (bool, string) {
		recs, bytes := r.j.Remaining()
		needRecs := 1 + outstanding + ackHeadroom
		return recs >= needRecs && bytes >= needBytes, fmt.Sprintf("%d records and %d bytes left, %d outstanding", recs, bytes, outstanding-1)
	}
	ok, why := fits()
	if !ok && (r.acked > r.base || len(r.ackedIDs) > 0) {
		// Acknowledged receipts can leave the file: make room.
		r.autoCompact()
		ok, why = fits()
	}
	if !ok {
		return fmt.Errorf("reserve %s: %w (%s)", sessionID, ErrFull, why)
	}
	// On disk too: a full disk refuses the reservation, never the
	// receipt of a session that ran.
	if err := r.j.Preallocate(needBytes); err != nil {
		return fmt.Errorf("reserve %s: %w", sessionID, err)
	}
	if err := r.append(record{Type: "reserve", Session: sessionID, Revision: revision}); err != nil {
		return fmt.Errorf("reserve %s: %w", sessionID, err)
	}
	r.reserved[sessionID] = revision
	return nil
}

// ackedReceipt says whether sessionID's receipt is among the acknowledged
// ones still in the journal (mu held).
func (r *Journal) ackedReceipt(sessionID string) bool {
	return slices.Contains(r.ackedIDs, sessionID)
}

// Reservation is the policy revision an outstanding reservation recorded
// (0 for one made before revisions were recorded), and whether there is
// one.
func (r *Journal) Reservation(sessionID string) (uint64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rev, ok := r.reserved[sessionID]
	return rev, ok
}

// Compact writes a new journal generation without the acknowledged
// envelopes and the acknowledgement records (see the package comment).
func (r *Journal) Compact() (CompactInfo, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.compact()
}

func (r *Journal) autoCompact() {
	info, err := r.compact()
	if r.o.OnCompact != nil {
		r.o.OnCompact(info, err)
	}
}

func (r *Journal) compact() (CompactInfo, error) {
	st := r.j.Stats()
	info := CompactInfo{RecordsBefore: st.Records, BytesBefore: st.Bytes}
	keep := r.envs[r.acked-r.base:]
	ackedMAC := r.anchor
	if r.acked > 0 {
		if r.acked > r.base {
			ackedMAC = r.envs[r.acked-r.base-1].EnvelopeMAC
		} else {
			ackedMAC = r.baseMAC
		}
	}
	head := r.j.Head()
	ids := make([]string, 0, len(r.reserved))
	for id := range r.reserved {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	cp := record{Type: "checkpoint", Checkpoint: &checkpoint{PrevSeq: r.j.Seq(), PrevHead: hex.EncodeToString(head[:]),
		Anchor: r.anchor, Acked: r.acked, AckedMAC: ackedMAC, Carried: len(keep), Reserved: len(ids)}}
	carry := make([][]byte, 0, 1+len(keep)+len(ids))
	add := func(rec record) error {
		data, err := json.Marshal(rec)
		if err != nil {
			return fmt.Errorf("compact receipts: encode record: %w", err)
		}
		carry = append(carry, data)
		return nil
	}
	if err := add(cp); err != nil {
		return info, err
	}
	for i := range keep {
		if err := add(record{Type: "carried", Envelope: &keep[i]}); err != nil {
			return info, err
		}
	}
	for _, id := range ids {
		if err := add(record{Type: "reserve", Session: id, Revision: r.reserved[id]}); err != nil {
			return info, err
		}
	}
	// The outstanding reservations keep their room on disk.
	prealloc := int64(len(ids))*journal.RecordSize(MaxEnvelopeBytes) + ackHeadroom*journal.RecordSize(256)
	if _, err := r.j.Compact(carry, prealloc); err != nil {
		return info, fmt.Errorf("compact receipts: %w", err)
	}
	info.Dropped = int(r.acked-r.base) + len(r.ackedIDs)
	for _, e := range r.envs[:r.acked-r.base] {
		delete(r.done, e.Body.SessionID)
	}
	for _, id := range r.ackedIDs {
		delete(r.done, id)
	}
	r.ackedIDs = nil
	r.envs = append([]Envelope(nil), keep...)
	r.base, r.baseMAC = r.acked, ackedMAC
	st = r.j.Stats()
	info.RecordsAfter, info.BytesAfter, info.Carried = st.Records, st.Bytes, len(keep)
	r.compacted++
	r.setThresholds()
	return info, nil
}

// Finalize seals and durably appends the session's terminal receipt. It
// returns only after the envelope is on disk.
func (r *Journal) Finalize(b Body) (Envelope, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done[b.SessionID] {
		return Envelope{}, fmt.Errorf("finalize %s: %w", b.SessionID, ErrReplay)
	}
	if _, ok := r.reserved[b.SessionID]; !ok {
		return Envelope{}, fmt.Errorf("finalize %s: %w", b.SessionID, ErrNotFound)
	}
	e, err := Seal(r.key, r.next(), r.head(), b)
	if err != nil {
		return Envelope{}, fmt.Errorf("finalize %s: %w", b.SessionID, err)
	}
	if err := r.append(record{Type: "receipt", Envelope: &e}); err != nil {
		return Envelope{}, fmt.Errorf("finalize %s: %w", b.SessionID, err)
	}
	r.addReceipt(e)
	return e, nil
}

// Page returns up to limit envelopes after sequence number after.
// Acknowledged envelopes are no longer served (forgetAcked).
func (r *Journal) Page(after uint64, limit int) ([]Envelope, error) {
	if limit <= 0 || limit > 1000 {
		return nil, fmt.Errorf("page: %w: limit %d outside 1..1000", ErrInvalid, limit)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	last := r.next() - 1
	if after > last {
		return nil, fmt.Errorf("page: %w: %w: after %d, head is %d", ErrInvalid, ErrPageBeyondHead, after, last)
	}
	if after < r.base {
		return nil, fmt.Errorf("page: %w: %w: receipts up to %d were acknowledged and have left the journal; page after %d or later", ErrInvalid, ErrPageAcked, r.base, r.base)
	}
	end := min(after+uint64(limit), last)
	return append([]Envelope(nil), r.envs[after-r.base:end-r.base]...), nil
}

// Acked is the highest acknowledged sequence number.
func (r *Journal) Acked() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.acked
}

// Head is the newest envelope's sequence number and MAC (0 and the anchor
// when there is none).
func (r *Journal) Head() (uint64, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next() - 1, r.head()
}

// Ack records that the controller archived every envelope up to seq. The
// MAC must be exactly that envelope's; an acknowledgement at or below the
// acknowledged head is a replay.
func (r *Journal) Ack(seq uint64, mac string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.checkAck(seq, mac); err != nil {
		return err
	}
	if err := r.append(record{Type: "ack", Seq: seq, MAC: mac}); err != nil {
		return fmt.Errorf("ack %d: %w", seq, err)
	}
	r.acked = seq
	r.forgetAcked()
	if st := r.j.Stats(); st.Records >= r.nextRecords || st.Bytes >= r.nextBytes {
		r.autoCompact()
	}
	return nil
}

func (r *Journal) checkAck(seq uint64, mac string) error {
	switch {
	case seq <= r.acked:
		return fmt.Errorf("ack %d: %w: already acknowledged up to %d (replay)", seq, ErrAck, r.acked)
	case seq >= r.next():
		return fmt.Errorf("ack %d: %w: no such receipt (head is %d)", seq, ErrAck, r.next()-1)
	case !hmac.Equal([]byte(mac), []byte(r.envs[seq-r.base-1].EnvelopeMAC)):
		return fmt.Errorf("ack %d: %w: MAC does not match that receipt", seq, ErrAck)
	}
	return nil
}

// Outstanding lists sessions reserved without a receipt (recovery must
// finish or fail each).
func (r *Journal) Outstanding() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for id := range r.reserved {
		ids = append(ids, id)
	}
	return ids
}

func (r *Journal) append(rec record) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode record: %w", err)
	}
	if len(data) > MaxEnvelopeBytes {
		return fmt.Errorf("%w: record of %d bytes", ErrInvalid, len(data))
	}
	if _, err := r.j.Append(data); err != nil {
		return fmt.Errorf("append record: %w", err)
	}
	return nil
}
