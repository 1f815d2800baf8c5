// SPDX-License-Identifier: Apache-2.0

package guest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/service/daemon"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
)

// The notifications' and session_status's shapes are gloved's own.
type (
	End    = daemon.End
	Output = daemon.Output
	Status = daemon.Status
)

// Page is receipts_page's result.
type Page struct {
	Envelopes []receipt.Envelope `json:"envelopes"`
	HeadSeq   uint64             `json:"head_seq"`
	HeadMAC   string             `json:"head_mac"`
}

var hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Sess is one session the agent drives.
type Sess struct {
	ID, Template, Profile string
	Plan                  *plan.Plan
	Token                 string

	a  *Agent
	ev *Evidence
	ac *Client // the attach connection

	mu     sync.Mutex
	out    bytes.Buffer
	next   uint64 // the offset the next output should start at
	gaps   []string
	end    *End
	states []string // states seen by polling session_status
	// SeenAt is when WaitOutput last found what it waited for.
	SeenAt time.Time
	// created is when the agent created the session (gloved's journal
	// is read from there when it failed).
	created time.Time
}

// Output is everything the session printed so far (its terminal's
// bytes; line ends are "\r\n").
func (s *Sess) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// Bytes is how many output bytes were relayed (the next offset).
func (s *Sess) Bytes() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}

// Create validates a plan for template and profile, checks gloved's
// content digest against the plan package's, and creates the session.
func (a *Agent) Create(ev *Evidence, c *Client, name, template, profile string) (*Sess, error) {
	id := name + "-" + a.st.RunTag
	pl, err := a.lp.Plan(template, profile, time.Now())
	if err != nil {
		return nil, err
	}
	obj, err := PlanObject(pl)
	if err != nil {
		return nil, err
	}
	var v struct {
		Digest string `json:"plan_content_digest"`
	}
	if err := c.Call("validate_plan", map[string]any{"plan": obj}, &v, 60*time.Second); err != nil {
		return nil, fmt.Errorf("validate_plan %s: %w", id, err)
	}
	if want := plan.ContentDigest(pl); v.Digest != want {
		return nil, fmt.Errorf("validate_plan %s: plan_content_digest %s, the plan package computes %s", id, v.Digest, want)
	}
	var cr struct {
		Existing bool   `json:"existing"`
		ID       string `json:"session_id"`
		Token    string `json:"start_token"`
		Expires  int64  `json:"start_token_expires_at_ms"`
		State    string `json:"state"`
	}
	params := map[string]any{"session_id": id, "idempotency_key": "key-" + id,
		"controller_plan_digest": ControllerDigest(pl, id), "plan": obj}
	if err := c.Call("create_session", params, &cr, 60*time.Second); err != nil {
		return nil, fmt.Errorf("create_session %s: %w", id, err)
	}
	if cr.State != "created" || cr.ID != id || !strings.HasPrefix(cr.Token, "glove-start-v1.") || cr.Existing {
		return nil, fmt.Errorf("create_session %s: %+v, want state created, a glove-start-v1 token, existing false", id, cr)
	}
	a.noteSession(id, template)
	ev.Printf("session %s: template %s, profile %s, plan_content_digest %s", id, template, profile, v.Digest)
	return &Sess{ID: id, Template: template, Profile: profile, Plan: pl, Token: cr.Token, a: a, ev: ev, created: time.Now()}, nil
}

// Start starts the session (start_session says "starting").
func (s *Sess) Start(c *Client) error {
	var r struct {
		ID    string `json:"session_id"`
		State string `json:"state"`
	}
	if err := c.Call("start_session", map[string]any{"session_id": s.ID, "start_token": s.Token}, &r, 120*time.Second); err != nil {
		return fmt.Errorf("start_session %s: %w", s.ID, err)
	}
	if r.State != "starting" {
		return fmt.Errorf("start_session %s: state %q, want starting", s.ID, r.State)
	}
	return nil
}

// Attach opens the session's own connection and attaches to it.
func (s *Sess) Attach() error {
	c, err := s.a.Dial(s.ev)
	if err != nil {
		return err
	}
	c.Trace = traceInto(s.ev, s.ID+" ")
	var r struct {
		Attached bool `json:"attached"`
	}
	if err := c.Call("attach", map[string]any{"session_id": s.ID}, &r, 60*time.Second); err != nil {
		c.Close()
		return fmt.Errorf("attach %s: %w", s.ID, err)
	}
	if !r.Attached {
		c.Close()
		return fmt.Errorf("attach %s: attached false", s.ID)
	}
	s.ac = c
	return nil
}

// Close closes the attach connection.
func (s *Sess) Close() {
	if s.ac != nil {
		s.ac.Close()
	}
}

// errEnded is returned by WaitOutput when the session ended first.
var errEnded = errors.New("the session ended")

// pump reads one notification from the attach connection.
func (s *Sess) pump(deadline time.Time) error {
	m, err := s.ac.Next(deadline)
	if err != nil {
		return err
	}
	switch m.Method {
	case "output":
		var o Output
		if err := json.Unmarshal(m.Params, &o); err != nil {
			return fmt.Errorf("output notification: %w", err)
		}
		s.mu.Lock()
		if o.SessionID != s.ID {
			s.gaps = append(s.gaps, fmt.Sprintf("output of session %q on %s's connection", o.SessionID, s.ID))
		}
		if o.Offset != s.next {
			s.gaps = append(s.gaps, fmt.Sprintf("output at offset %d, want %d", o.Offset, s.next))
		}
		s.out.Write(o.Data)
		s.next = o.Offset + uint64(len(o.Data))
		s.mu.Unlock()
	case "ended":
		var e End
		if err := json.Unmarshal(m.Params, &e); err != nil {
			return fmt.Errorf("ended notification: %w", err)
		}
		s.mu.Lock()
		s.end = &e
		s.mu.Unlock()
		s.ev.Printf("session %s ended: %+v", s.ID, e)
	default:
		return fmt.Errorf("unexpected notification %q", m.Method)
	}
	return nil
}

// WaitOutput reads output until it contains want.
func (s *Sess) WaitOutput(want string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if strings.Contains(s.Output(), want) {
			s.SeenAt = time.Now()
			return nil
		}
		if s.Ended() != nil {
			return fmt.Errorf("%w before printing %q (%s; output %s)%s", errEnded, want, s.endText(), Tail(s.Output(), 300), s.FailDetail())
		}
		if err := s.pump(deadline); err != nil {
			return fmt.Errorf("waiting for %q from %s: %v (output %s)", want, s.ID, err, Tail(s.Output(), 300))
		}
	}
}

// Ended is the ended notification, once it came.
func (s *Sess) Ended() *End {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.end
}

// WaitEnd reads notifications until "ended".
func (s *Sess) WaitEnd(timeout time.Duration) (*End, error) {
	deadline := time.Now().Add(timeout)
	for s.Ended() == nil {
		if err := s.pump(deadline); err != nil {
			return nil, fmt.Errorf("waiting for %s to end: %v (output %s)", s.ID, err, Tail(s.Output(), 300))
		}
	}
	return s.Ended(), nil
}

// Gaps are offset faults seen in the output stream.
func (s *Sess) Gaps() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.gaps...)
}

// Status asks session_status.
func (a *Agent) Status(c *Client, id string) (Status, error) {
	var st Status
	err := c.Call("session_status", map[string]any{"session_id": id}, &st, 60*time.Second)
	return st, err
}

// WaitState polls session_status until the session is in one of states.
func (s *Sess) WaitState(c *Client, timeout time.Duration, states ...string) (Status, error) {
	deadline := time.Now().Add(timeout)
	for {
		st, err := s.a.Status(c, s.ID)
		if err != nil {
			return st, err
		}
		s.mu.Lock()
		if len(s.states) == 0 || s.states[len(s.states)-1] != st.State {
			s.states = append(s.states, st.State)
		}
		s.mu.Unlock()
		for _, w := range states {
			if st.State == w {
				return st, nil
			}
		}
		if st.State == "exited" || st.State == "failed" || time.Now().After(deadline) {
			return st, fmt.Errorf("session %s is %s (want %s)", s.ID, st, strings.Join(states, " or "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// States are the states polling saw, in order.
func (s *Sess) States() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.states...)
}

// Run creates, starts and attaches to a session and waits for its end;
// observe (if not nil) runs once the session is running, concurrently
// with the wait. It returns the session and its final status.
func (a *Agent) Run(ev *Evidence, c *Client, name, template, profile string, observe func(s *Sess)) (*Sess, Status, error) {
	s, err := a.Create(ev, c, name, template, profile)
	if err != nil {
		return nil, Status{}, err
	}
	if err := s.Start(c); err != nil {
		st, _ := a.Status(c, s.ID)
		ev.Printf("after the failed start: %s", st)
		return s, st, err
	}
	if err := s.Attach(); err != nil {
		return s, Status{}, err
	}
	defer s.Close()
	done := make(chan struct{})
	if observe != nil {
		go func() {
			defer close(done)
			observe(s)
		}()
	} else {
		close(done)
	}
	end, err := s.WaitEnd(a.cfg.SessionTimeout)
	<-done
	if err != nil {
		// Do not leave it running; a failed stop is part of the failure.
		if serr := c.Call("stop_session", map[string]any{"session_id": s.ID, "grace_ms": 100}, nil, 30*time.Second); serr != nil {
			err = errors.Join(err, fmt.Errorf("stop the session: %w", serr))
		}
		return s, Status{}, err
	}
	st, err := a.Status(c, s.ID)
	if err != nil {
		return s, st, err
	}
	ev.Printf("session %s: %s; output (%d bytes): %s", s.ID, st, s.Bytes(), Tail(s.Output(), 1500))
	if end.State != st.State {
		return s, st, fmt.Errorf("ended says state %s, session_status %s", end.State, st.State)
	}
	return s, st, nil
}

// Receipts pages through every receipt after the acknowledged head (all
// of them before the first acknowledgement) and verifies their chain
// from the acknowledged receipt's MAC (or the anchor) with the service
// key. Acknowledged receipts are not served again: the agent, as a
// controller, archived them.
func (a *Agent) Receipts(ev *Evidence, c *Client) ([]receipt.Envelope, error) {
	var all []receipt.Envelope
	a.mu.Lock()
	acked, prev := a.st.AckedSeq, a.st.AckedMAC
	a.mu.Unlock()
	if acked == 0 {
		prev = a.st.Anchor
	}
	after := acked
	for {
		var p Page
		if err := c.Call("receipts_page", map[string]any{"after": after, "limit": 100}, &p, 60*time.Second); err != nil {
			return all, err
		}
		all = append(all, p.Envelopes...)
		if len(p.Envelopes) < 100 {
			if p.HeadSeq != acked+uint64(len(all)) {
				return all, fmt.Errorf("receipts_page: head_seq %d, %d envelopes after the acknowledged %d", p.HeadSeq, len(all), acked)
			}
			break
		}
		after = p.Envelopes[len(p.Envelopes)-1].Seq
	}
	key, err := os.ReadFile(KeyFile)
	if err != nil {
		return all, err
	}
	if err := receipt.Verify(key, prev, all); err != nil {
		return all, fmt.Errorf("the receipts after the acknowledged %d do not verify with the key from its MAC (or the anchor): %w", acked, err)
	}
	ev.Printf("receipts: %d after the acknowledged %d, verified", len(all), acked)
	return all, nil
}

// ReceiptFor is the verified terminal receipt of session id.
func (a *Agent) ReceiptFor(ev *Evidence, c *Client, id string) (receipt.Envelope, error) {
	all, err := a.Receipts(ev, c)
	if err != nil {
		return receipt.Envelope{}, err
	}
	for _, e := range all {
		if e.Body.SessionID == id {
			b, _ := json.Marshal(e.Body)
			ev.Printf("receipt %d of %s: %s", e.Seq, id, b)
			return e, nil
		}
	}
	return receipt.Envelope{}, fmt.Errorf("no receipt for %s among %d", id, len(all))
}

// Tail is the end of s, at most n bytes, quoted.
func Tail(s string, n int) string {
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return fmt.Sprintf("%q", s)
}

func traceInto(ev *Evidence, prefix string) func(dir, line string) {
	return func(dir, line string) {
		if len(line) > 600 {
			line = line[:600] + fmt.Sprintf("… (%d bytes)", len(line))
		}
		ev.Printf("%s%s %s", prefix, dir, line)
	}
}

// ImageName is the retained image's file name (session.ImageName).
func ImageName(session, alias string) string {
	base := session + "_" + alias
	const suffix = ".img"
	if len(base)+len(suffix) > 64 {
		sum := sha256Hex([]byte(base))
		base = base[:64-len(suffix)-1-16] + "-" + sum[:16]
	}
	return base + suffix
}

// MaterializationRoot is gloved's --materialization-root in the unit.
const MaterializationRoot = "/var/lib/glove/materialization"

// ImagePath is the retained image of session and alias.
func ImagePath(session, alias string) string {
	return filepath.Join(MaterializationRoot, ImageName(session, alias))
}

func (s *Sess) endText() string {
	e := s.Ended()
	if e == nil {
		return "not ended"
	}
	return fmt.Sprintf("%s %s, status %d", e.State, e.Termination, e.Status)
}

// Failed reports whether the session ended failed (it never ran, or its
// launch broke).
func (s *Sess) Failed() bool {
	e := s.Ended()
	return e != nil && e.State == "failed"
}

// FailDetail is, for a session that ended failed, what gloved's journal
// (its helpers' JSON lines) says went wrong since the session was
// created: "; gloved's journal: ..." (empty otherwise).
func (s *Sess) FailDetail() string {
	if !s.Failed() {
		return ""
	}
	lines := s.a.glovedLog(s.ev, s.created)
	if d := JournalErrors(lines); d != "" {
		return "; gloved's journal: " + d
	}
	return "; gloved's journal has no error line for it"
}

// JournalErrors picks the error lines of gloved's JSON log (its own and
// its helpers'): each distinct "helper: msg: err" once, joined.
func JournalErrors(lines []string) string {
	var out []string
	seen := map[string]bool{}
	for _, l := range lines {
		i := strings.Index(l, "{")
		if i < 0 {
			continue
		}
		var m map[string]any
		if json.Unmarshal([]byte(l[i:]), &m) != nil {
			continue
		}
		lvl, _ := m["level"].(string)
		msg, _ := m["msg"].(string)
		errText, _ := m["err"].(string)
		if errText == "" {
			errText, _ = m["error"].(string)
		}
		if errText == "" && lvl != "error" && lvl != "fatal" {
			continue
		}
		who, _ := m["helper"].(string)
		if who == "" {
			who = "gloved"
		}
		t := who + ": " + msg
		if errText != "" {
			t += ": " + errText
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return strings.Join(out, "; ")
}

// glovedLog is gloved's log since t: its journal, or the development
// stand-in's log file.
func (a *Agent) glovedLog(ev *Evidence, t time.Time) []string {
	var text string
	if d, ok := a.svc.(*devService); ok {
		data, _ := os.ReadFile(d.logPath)
		for _, l := range strings.Split(string(data), "\n") {
			var m struct {
				Time time.Time `json:"time"`
			}
			if i := strings.Index(l, "{"); i >= 0 && json.Unmarshal([]byte(l[i:]), &m) == nil && !m.Time.Before(t.Add(-time.Second)) {
				text += l + "\n"
			}
		}
	} else {
		r := Run(nil, RunOpts{Timeout: 30 * time.Second}, "journalctl", "-u", UnitName, "--since", fmt.Sprintf("@%d", t.Add(-time.Second).Unix()),
			"-o", "cat", "--no-pager")
		text = r.Stdout
	}
	if ev != nil {
		ev.Printf("gloved's log since %s:\n%s", t.UTC().Format(time.RFC3339), indent(strings.TrimSpace(text)))
	}
	return strings.Split(text, "\n")
}
