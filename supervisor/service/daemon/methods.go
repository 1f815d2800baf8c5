// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/glove-sandbox/glove/names"
	"github.com/glove-sandbox/glove/supervisor/authority/localservice"
	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/state/journal"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/supervisor/state/store"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/sirupsen/logrus"
)

type noParams struct{}

func (d *Daemon) capabilities(_ *conn, k *call, _ *noParams) (any, *Error) {
	// inherited_stream_version is 1 only for the exact inherited-stream-v1
	// composition (configured upstream, its helper working), 0 otherwise.
	stream := 0
	if d.stream != nil {
		stream = 1
	}
	// guest_channel_schema_version is 1 only when a configured service
	// carries a supported guest-channel binding with its exact runtime
	// set (localservice); an unbound service is a generic proxy.
	channel := 0
	if d.stream != nil {
		channel = localservice.GuestChannelSchemaVersion(d.services)
	}
	// agent_runtime_adapter_schema_version is 1 only when the managed
	// lifecycle runs here: sessions of a native-skill runtime then get a
	// fresh private home with the verified skills of their bundles, and
	// the projection digest, home mount and managed environment are in
	// the launch digest the terminal receipt carries.
	adapter := 0
	if d.lifecycle {
		adapter = 1
	}
	return map[string]any{"protocol_version": ProtocolVersion, "version": Version, "methods": d.Methods(),
		"inherited_stream_version": stream, "guest_channel_schema_version": channel,
		"agent_runtime_adapter_schema_version": adapter}, nil
}

// checkPlan decodes and validates a plan given as a JSON object.
func (d *Daemon) checkPlan(raw jsontext.Value) (*plan.Plan, *Error) {
	if raw.Kind() != '{' {
		return nil, errorf(CodeInvalidParams, "params: plan must be an object")
	}
	p, err := plan.Decode(raw)
	if err != nil {
		return nil, errorf(CodeInvalidParams, "plan: %s", oneLine(err.Error()))
	}
	if err := plan.Validate(p, d.pol, time.Now()); err != nil {
		return nil, errorf(CodeRejected, "plan rejected: %s", oneLine(err.Error()))
	}
	return p, nil
}

type validateParams struct {
	Plan jsontext.Value `json:"plan"`
}

func (d *Daemon) validatePlan(_ *conn, k *call, ps *validateParams) (any, *Error) {
	p, e := d.checkPlan(ps.Plan)
	if e != nil {
		return nil, e
	}
	return map[string]any{"plan_content_digest": plan.ContentDigest(p)}, nil
}

type createParams struct {
	SessionID            string         `json:"session_id"`
	IdempotencyKey       string         `json:"idempotency_key"`
	ControllerPlanDigest string         `json:"controller_plan_digest"`
	Plan                 jsontext.Value `json:"plan"`
}

func (d *Daemon) createSession(_ *conn, k *call, ps *createParams) (any, *Error) {
	if !store.ValidSessionID(ps.SessionID) {
		return nil, errorf(CodeInvalidParams, "session_id is not %s", names.NamePattern)
	}
	k.session = ps.SessionID
	if err := plan.CheckControllerDigest(ps.ControllerPlanDigest); err != nil {
		return nil, errorf(CodeInvalidParams, "controller_plan_digest is not 64 lowercase hex characters")
	}
	p, e := d.checkPlan(ps.Plan)
	if e != nil {
		return nil, e
	}
	sess, existing, err := d.store.Create(store.CreateRequest{SessionID: ps.SessionID, IdempotencyKey: ps.IdempotencyKey,
		ControllerPlanDigest: ps.ControllerPlanDigest, PlanContentDigest: plan.ContentDigest(p), Plan: plan.Canonical(p)})
	switch {
	case errors.Is(err, store.ErrConflict):
		return nil, errorf(CodeConflict, "session id or idempotency key already used with other content")
	case errors.Is(err, store.ErrInvalid):
		return nil, errorf(CodeInvalidParams, "%s", oneLine(err.Error()))
	case err != nil:
		return nil, d.storeError(ps.SessionID, "create", err)
	}
	token, exp, err := d.auth.Issue(sess)
	if err != nil {
		return nil, errorf(CodeInternal, "start authorization failure")
	}
	return map[string]any{"session_id": sess.ID, "state": sess.State, "existing": existing,
		"start_token": token, "start_token_expires_at_ms": exp.UnixMilli()}, nil
}

type sessionParams struct {
	SessionID string `json:"session_id"`
}

// lookup returns the stored session named by the params.
func (d *Daemon) lookup(k *call, id string) (store.Session, *Error) {
	if !store.ValidSessionID(id) {
		return store.Session{}, errorf(CodeInvalidParams, "session_id is not %s", names.NamePattern)
	}
	k.session = id
	sess, err := d.store.Get(id)
	if err != nil {
		return store.Session{}, errorf(CodeNotFound, "no such session")
	}
	return sess, nil
}

// Status is session_status's result.
type Status struct {
	SessionID            string `json:"session_id"`
	State                string `json:"state"`
	Reason               string `json:"reason"`
	ControllerPlanDigest string `json:"controller_plan_digest"`
	PlanContentDigest    string `json:"plan_content_digest"`
	CreatedAtMS          int64  `json:"created_at_ms"`
	UpdatedAtMS          int64  `json:"updated_at_ms"`
	// LaunchDigest is the managed-launch digest, once the session started.
	LaunchDigest string `json:"launch_digest,omitempty"`
	// Known when this gloved ran the session to its end.
	Termination string `json:"termination,omitempty"`
	ExitCode    *int   `json:"exit_code,omitempty"`
	Signal      *int   `json:"signal,omitempty"`
}

// String is a status in one line, for logs and test evidence.
func (s Status) String() string {
	v := fmt.Sprintf("state=%s reason=%q", s.State, s.Reason)
	if s.Termination != "" {
		v += " termination=" + s.Termination
	}
	if s.ExitCode != nil {
		v += fmt.Sprintf(" exit_code=%d", *s.ExitCode)
	}
	if s.Signal != nil {
		v += fmt.Sprintf(" signal=%d", *s.Signal)
	}
	return v
}

func (d *Daemon) sessionStatus(_ *conn, k *call, ps *sessionParams) (any, *Error) {
	sess, e := d.lookup(k, ps.SessionID)
	if e != nil {
		return nil, e
	}
	d.mu.Lock()
	l := d.sessions[sess.ID]
	d.mu.Unlock()
	st := Status{SessionID: sess.ID, State: string(reportedState(sess, l != nil)), Reason: sess.Reason,
		ControllerPlanDigest: sess.ControllerPlanDigest, PlanContentDigest: sess.PlanContentDigest,
		CreatedAtMS: sess.CreatedAt.UnixMilli(), UpdatedAtMS: sess.UpdatedAt.UnixMilli()}
	if sess.Runtime != nil {
		st.LaunchDigest = sess.Runtime.LaunchDigest
	}
	if l != nil {
		if end := l.ended(); end != nil {
			st.Termination = end.Termination
			st.ExitCode, st.Signal = &end.ExitCode, &end.Signal
		}
	}
	return st, nil
}

// reportedState is the state a client is told: the store's, except that
// a session this gloved runs (live) while the store still says preparing
// is starting. Starting has no record of its own (it would be an
// fdatasync on every start that recovery does not need: a crash in it is
// recovered exactly as one in preparing), so it is known only here.
func reportedState(sess store.Session, live bool) store.State {
	if live && sess.State == store.Preparing {
		return store.Starting
	}
	return sess.State
}

type pageParams struct {
	After uint64 `json:"after"`
	Limit int    `json:"limit"`
}

// MaxPage bounds receipts_page's limit.
const MaxPage = 100

func (d *Daemon) receiptsPage(_ *conn, k *call, ps *pageParams) (any, *Error) {
	if ps.Limit < 1 || ps.Limit > MaxPage {
		return nil, errorf(CodeInvalidParams, "limit must be 1..%d", MaxPage)
	}
	envs, err := d.receipts.Page(ps.After, ps.Limit)
	switch {
	case errors.Is(err, receipt.ErrPageAcked):
		acked := d.receipts.Acked()
		return nil, errorf(CodeInvalidParams, "receipts up to %d were acknowledged and have left the journal: page after %d or later", acked, acked)
	case err != nil:
		return nil, errorf(CodeInvalidParams, "after is beyond the head")
	}
	if envs == nil {
		envs = []receipt.Envelope{}
	}
	seq, mac := d.receipts.Head()
	return map[string]any{"envelopes": envs, "head_seq": seq, "head_mac": mac}, nil
}

type ackParams struct {
	Seq         uint64 `json:"seq"`
	EnvelopeMAC string `json:"envelope_mac"`
}

func (d *Daemon) receiptsAck(_ *conn, k *call, ps *ackParams) (any, *Error) {
	if err := d.receipts.Ack(ps.Seq, ps.EnvelopeMAC); err != nil {
		if errors.Is(err, receipt.ErrAck) {
			return nil, errorf(CodeConflict, "acknowledgement rejected: not the exact envelope above the acknowledged head")
		}
		d.log.Error("receipt journal failure")
		return nil, errorf(CodeInternal, "receipt journal failure")
	}
	return map[string]any{"acked": ps.Seq}, nil
}

// storeError answers a failed durable write: a full store or a full disk
// says so (the controller can act on it: clean up, or wait for space);
// anything else is an internal failure, logged with its cause.
func (d *Daemon) storeError(id, op string, err error) *Error {
	log := d.log.WithFields(logrus.Fields{"session_id": id, "event": "store", "op": op, "error": oneLine(err.Error())})
	switch {
	case errors.Is(err, store.ErrFull):
		log.Warn("session store full")
		_, why, _ := strings.Cut(oneLine(err.Error()), store.ErrFull.Error()+": ")
		return errorf(CodeUnavailable, "session store full: %s", why)
	case errors.Is(err, receipt.ErrFull):
		log.Warn("receipt journal full")
		return errorf(CodeUnavailable, "no receipt capacity")
	case errors.Is(err, journal.ErrNoSpace):
		log.Error("no space left on device")
		return errorf(CodeUnavailable, "%s: no space left on device", map[bool]string{true: "receipt journal", false: "session store"}[strings.HasPrefix(op, "receipt")])
	}
	log.Error("session store failure")
	return errorf(CodeInternal, "session store failure")
}
