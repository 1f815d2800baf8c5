// SPDX-License-Identifier: Apache-2.0

package receipt

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/state/journal"
)

var (
	key    = []byte(strings.Repeat("k", 32))
	anchor = strings.Repeat("0", 63) + "1"
	hexA   = strings.Repeat("a", 64)
	hexB   = strings.Repeat("b", 64)
)

func dir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "receipts")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

func open(t *testing.T, d string) *Journal {
	t.Helper()
	r, _, err := Open(Options{Dir: d, Key: key, Anchor: anchor})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func body(id string) Body {
	return Body{SessionID: id, ControllerPlanDigest: hexA, PlanContentDigest: hexB, PolicyRevision: 7,
		Termination: "limit:pids", ExitCode: 0, Signal: 9,
		Usage:       Usage{CPUTimeMS: 12, MemoryPeakBytes: 1 << 20, PidsPeak: 16, WallTimeMS: 50, TerminalOutputBytes: 3},
		StartedAtMS: 1_800_000_000_000, EndedAtMS: 1_800_000_000_050}
}

func finalize(t *testing.T, r *Journal, id string) Envelope {
	t.Helper()
	if err := r.Reserve(id, 7); err != nil {
		t.Fatal(err)
	}
	e, err := r.Finalize(body(id))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestReceiptFlow(t *testing.T) {
	d := dir(t)
	r := open(t, d)
	var envs []Envelope
	for i := 1; i <= 5; i++ {
		envs = append(envs, finalize(t, r, fmt.Sprintf("s%d", i)))
	}
	if err := Verify(key, anchor, envs); err != nil {
		t.Fatalf("verify chain: %v", err)
	}
	page, err := r.Page(0, 3)
	if err != nil || len(page) != 3 || page[2].Seq != 3 {
		t.Fatalf("page 1: %v %v", page, err)
	}
	if err := r.Ack(3, page[2].EnvelopeMAC); err != nil {
		t.Fatalf("ack 3: %v", err)
	}
	page2, err := r.Page(3, 10)
	if err != nil || len(page2) != 2 {
		t.Fatalf("page 2: %v %v", page2, err)
	}
	// A page starting past the first verifies from its predecessor.
	if err := Verify(key, page[2].EnvelopeMAC, page2); err != nil {
		t.Fatalf("verify page 2: %v", err)
	}
	r.Close()
	r = open(t, d)
	defer r.Close()
	if r.Acked() != 3 {
		t.Fatalf("acked after reopen: %d", r.Acked())
	}
	if seq, mac := r.Head(); seq != 5 || mac != envs[4].EnvelopeMAC {
		t.Fatalf("head after reopen: %d %s", seq, mac)
	}
	// The chain continues across the restart.
	e6 := finalize(t, r, "s6")
	if err := Verify(key, anchor, append(envs, e6)); err != nil {
		t.Fatalf("verify after reopen: %v", err)
	}
}

func TestReplayAndAckRejected(t *testing.T) {
	r := open(t, dir(t))
	defer r.Close()
	e1 := finalize(t, r, "s1")
	e2 := finalize(t, r, "s2")
	if err := r.Reserve("s1", 7); !errors.Is(err, ErrReplay) {
		t.Errorf("reserve after receipt: %v", err)
	}
	if _, err := r.Finalize(body("s1")); !errors.Is(err, ErrReplay) {
		t.Errorf("second receipt: %v", err)
	}
	if err := r.Reserve("s3", 7); err != nil {
		t.Fatal(err)
	}
	if err := r.Reserve("s3", 7); !errors.Is(err, ErrReplay) {
		t.Errorf("second reservation: %v", err)
	}
	if _, err := r.Finalize(body("s4")); !errors.Is(err, ErrNotFound) {
		t.Errorf("receipt without reservation: %v", err)
	}
	bad := body("s3")
	bad.Termination = "limit:coffee"
	if _, err := r.Finalize(bad); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad termination: %v", err)
	}
	if err := r.Ack(2, e1.EnvelopeMAC); !errors.Is(err, ErrAck) {
		t.Errorf("ack with another receipt's MAC: %v", err)
	}
	if err := r.Ack(3, e2.EnvelopeMAC); !errors.Is(err, ErrAck) {
		t.Errorf("ack past the head: %v", err)
	}
	if err := r.Ack(2, e2.EnvelopeMAC); err != nil {
		t.Fatal(err)
	}
	if err := r.Ack(2, e2.EnvelopeMAC); !errors.Is(err, ErrAck) {
		t.Errorf("replayed ack: %v", err)
	}
	if err := r.Ack(1, e1.EnvelopeMAC); !errors.Is(err, ErrAck) {
		t.Errorf("stale ack: %v", err)
	}
	if out := r.Outstanding(); len(out) != 1 || out[0] != "s3" {
		t.Errorf("outstanding: %v", out)
	}
}

// TestReserveReusedID: the store lets a cleaned-up session's id go after
// its retention window, and a controller may use it again. The id's
// earlier receipt, once acknowledged, leaves the journal when the id is
// reserved again, so an id never has two receipts in the journal; while
// unacknowledged it keeps the id from being reserved.
func TestReserveReusedID(t *testing.T) {
	r := open(t, dir(t))
	defer r.Close()
	e1 := finalize(t, r, "s1")
	finalize(t, r, "s2")
	if err := r.Ack(1, e1.EnvelopeMAC); err != nil {
		t.Fatal(err)
	}
	if err := r.Reserve("s2", 7); !errors.Is(err, ErrReplay) || !strings.Contains(err.Error(), "not acknowledged") {
		t.Errorf("reserve after an unacknowledged receipt: %v", err)
	}
	if err := r.Reserve("s1", 7); err != nil {
		t.Fatalf("reserve after an acknowledged receipt: %v", err)
	}
	if page, err := r.Page(1, 10); err != nil || len(page) != 1 || page[0].Body.SessionID != "s2" {
		t.Errorf("after the reuse, page after 1: %+v %v; want s2's receipt alone", page, err)
	}
	if _, err := r.Page(0, 10); !errors.Is(err, ErrInvalid) {
		t.Errorf("page after 0 once s1's receipt left: %v, want ErrInvalid", err)
	}
	e1b, err := r.Finalize(body("s1"))
	if err != nil || e1b.Seq != 3 {
		t.Fatalf("the reused id's receipt: seq %d, %v; want 3", e1b.Seq, err)
	}
	// The chain goes on from the acknowledged head.
	page, err := r.Page(1, 10)
	if err != nil || len(page) != 2 {
		t.Fatalf("page after 1: %d receipts, %v; want 2", len(page), err)
	}
	if err := Verify(key, e1.EnvelopeMAC, page); err != nil {
		t.Errorf("the chain after the reuse: %v", err)
	}
}

// TestVerifyDetectsTampering: every way a delivered chain can be altered.
func TestVerifyDetectsTampering(t *testing.T) {
	r := open(t, dir(t))
	defer r.Close()
	var envs []Envelope
	for i := 1; i <= 3; i++ {
		envs = append(envs, finalize(t, r, fmt.Sprintf("s%d", i)))
	}
	mut := map[string]func([]Envelope) ([]Envelope, string, []byte){
		"body field changed": func(e []Envelope) ([]Envelope, string, []byte) { e[1].Body.Usage.PidsPeak++; return e, anchor, key },
		"termination changed": func(e []Envelope) ([]Envelope, string, []byte) {
			e[0].Body.Termination = "exited"
			return e, anchor, key
		},
		"receipt mac changed":  func(e []Envelope) ([]Envelope, string, []byte) { e[2].ReceiptMAC = hexA; return e, anchor, key },
		"envelope mac changed": func(e []Envelope) ([]Envelope, string, []byte) { e[2].EnvelopeMAC = hexA; return e, anchor, key },
		"dropped receipt":      func(e []Envelope) ([]Envelope, string, []byte) { return []Envelope{e[0], e[2]}, anchor, key },
		"reordered":            func(e []Envelope) ([]Envelope, string, []byte) { return []Envelope{e[1], e[0], e[2]}, anchor, key },
		"replayed receipt":     func(e []Envelope) ([]Envelope, string, []byte) { return []Envelope{e[0], e[1], e[1]}, anchor, key },
		"other anchor":         func(e []Envelope) ([]Envelope, string, []byte) { return e, hexA, key },
		"other key": func(e []Envelope) ([]Envelope, string, []byte) {
			return e, anchor, []byte(strings.Repeat("x", 32))
		},
		"renumbered": func(e []Envelope) ([]Envelope, string, []byte) {
			for i := range e {
				e[i].Seq += 10
			}
			return e, anchor, key
		},
	}
	for name, m := range mut {
		c := append([]Envelope(nil), envs...)
		got, a, k := m(c)
		if err := Verify(k, a, got); !errors.Is(err, ErrVerify) {
			t.Errorf("%s: %v, want ErrVerify", name, err)
		}
	}
}

func TestAnchorIsPinned(t *testing.T) {
	d := dir(t)
	open(t, d).Close()
	if _, _, err := Open(Options{Dir: d, Key: key, Anchor: hexA}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("other anchor: %v, want ErrCorrupt", err)
	}
	if _, _, err := Open(Options{Dir: d, Key: key, Anchor: "xyz"}); err == nil {
		t.Fatal("malformed anchor accepted")
	}
}

// TestTornTailKeepsAcknowledged recreates the file a crash leaves in the
// middle of appending a receipt, after earlier receipts were
// acknowledged: the committed journal followed by the first half of the
// next record's bytes. Reopening drops only the torn record and keeps
// every acknowledged receipt.
func TestTornTailKeepsAcknowledged(t *testing.T) {
	d := dir(t)
	path := filepath.Join(d, FileName)
	r := open(t, d)
	var envs []Envelope
	for i := 1; i <= 4; i++ {
		envs = append(envs, finalize(t, r, fmt.Sprintf("s%d", i)))
	}
	if err := r.Ack(4, envs[3].EnvelopeMAC); err != nil {
		t.Fatal(err)
	}
	if err := r.Reserve("s5", 7); err != nil {
		t.Fatal(err)
	}
	r.Close()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Append the receipt for real to learn its bytes.
	r = open(t, d)
	if _, err := r.Finalize(body("s5")); err != nil {
		t.Fatal(err)
	}
	r.Close()
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	torn := after[len(before) : len(before)+(len(after)-len(before))/2]
	if err := os.WriteFile(path, append(before, torn...), 0o600); err != nil {
		t.Fatal(err)
	}
	r, info, err := Open(Options{Dir: d, Key: key, Anchor: anchor})
	if err != nil {
		t.Fatalf("reopen after torn tail: %v", err)
	}
	defer r.Close()
	if info.TornTailBytes != int64(len(torn)) {
		t.Errorf("torn tail reported as %d bytes, want %d", info.TornTailBytes, len(torn))
	}
	// The acknowledged four are archived (not served again); the head
	// is the fourth, which the next receipt chains to.
	page, err := r.Page(4, 10)
	if err != nil || len(page) != 0 || r.Acked() != 4 {
		t.Fatalf("after recovery: %d receipts after the acknowledged head, acked %d, %v", len(page), r.Acked(), err)
	}
	if _, err := r.Page(0, 10); err == nil {
		t.Error("acknowledged receipts were served again")
	}
	if seq, mac := r.Head(); seq != 4 || mac != envs[3].EnvelopeMAC {
		t.Fatalf("head after recovery %d %s, want 4 and the fourth receipt's MAC", seq, mac)
	}
	if out := r.Outstanding(); len(out) != 1 || out[0] != "s5" {
		t.Fatalf("outstanding after recovery: %v", out)
	}
	e5, err := r.Finalize(body("s5"))
	if err != nil {
		t.Fatalf("finalize after recovery: %v", err)
	}
	if err := Verify(key, envs[3].EnvelopeMAC, []Envelope{e5}); err != nil {
		t.Fatal(err)
	}
}

// TestReplayRejectsForgedRecords writes records this package would never
// write and checks Open refuses the journal.
func TestReplayRejectsForgedRecords(t *testing.T) {
	anc := `{"type":"anchor","anchor":"` + anchor + `"}`
	e, err := Seal(key, 1, anchor, body("s1"))
	if err != nil {
		t.Fatal(err)
	}
	env := fmt.Sprintf(`{"type":"receipt","envelope":{"seq":1,"prev":%q,"receipt":{"session_id":"s1","controller_plan_digest":%q,"plan_content_digest":%q,"policy_revision":7,"termination":"limit:pids","exit_code":0,"signal":9,"usage":{"cpu_time_ms":12,"memory_peak_bytes":1048576,"pids_peak":16,"wall_time_ms":50,"disk_bytes":0,"terminal_output_bytes":3},"started_at_ms":1800000000000,"ended_at_ms":1800000000050},"receipt_mac":%q,"envelope_mac":%q}}`,
		anchor, hexA, hexB, e.ReceiptMAC, e.EnvelopeMAC)
	res := `{"type":"reserve","session":"s1"}`
	cases := map[string][]string{
		"no anchor first":         {res},
		"two anchors":             {anc, anc},
		"receipt without reserve": {anc, env},
		"receipt MAC forged":      {anc, res, strings.Replace(env, e.ReceiptMAC, hexA, 1)},
		"reserve twice":           {anc, res, res},
		"ack of nothing":          {anc, `{"type":"ack","seq":1,"mac":"` + hexA + `"}`},
		"unknown type":            {anc, `{"type":"burn"}`},
		"unknown field":           {anc, `{"type":"reserve","session":"s1","x":1}`},
	}
	// The well-formed sequence opens: the cases fail for their fault.
	good := dir(t)
	writeRecords(t, good, []string{anc, res, env})
	if r, _, err := Open(Options{Dir: good, Key: key, Anchor: anchor}); err != nil {
		t.Fatalf("well-formed records: %v", err)
	} else {
		r.Close()
	}
	for name, recs := range cases {
		t.Run(name, func(t *testing.T) {
			d := dir(t)
			writeRecords(t, d, recs)
			if r, _, err := Open(Options{Dir: d, Key: key, Anchor: anchor}); !errors.Is(err, ErrCorrupt) {
				if r != nil {
					r.Close()
				}
				t.Fatalf("open: %v, want ErrCorrupt", err)
			}
		})
	}
}

func writeRecords(t *testing.T, d string, recs []string) {
	t.Helper()
	j, _, _, err := journal.Open(journal.Options{Dir: d, Name: FileName, Kind: Kind, MaxRecordBytes: MaxEnvelopeBytes})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if _, err := j.Append([]byte(r)); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
}

// TestReservationGuaranteesRoom fills a small journal with reservations
// until Reserve refuses, then checks every reserved session can still get
// its receipt and the controller can still acknowledge them.
func TestReservationGuaranteesRoom(t *testing.T) {
	r, _, err := Open(Options{Dir: dir(t), Key: key, Anchor: anchor, MaxRecords: 40})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var ids []string
	for i := 0; ; i++ {
		id := fmt.Sprintf("s%d", i)
		err := r.Reserve(id, 7)
		if errors.Is(err, ErrFull) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		if i > 40 {
			t.Fatal("Reserve never refused")
		}
	}
	if len(ids) == 0 {
		t.Fatal("no reservation fitted")
	}
	var last Envelope
	for _, id := range ids {
		if last, err = r.Finalize(body(id)); err != nil {
			t.Fatalf("finalize reserved %s: %v", id, err)
		}
	}
	if err := r.Ack(last.Seq, last.EnvelopeMAC); err != nil {
		t.Fatalf("ack when full: %v", err)
	}
}

// TestLaunchDigest: the digest is covered by the receipt MAC when present,
// checked for shape, and absent from the encoding when empty (receipts
// without it keep their MACs).
func TestLaunchDigest(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	plain, err := Seal(key, 1, hexA, body("s1"))
	if err != nil {
		t.Fatal(err)
	}
	b := body("s1")
	b.LaunchDigest = hexB
	with, err := Seal(key, 1, hexA, b)
	if err != nil {
		t.Fatal(err)
	}
	if with.ReceiptMAC == plain.ReceiptMAC {
		t.Error("the launch digest is not covered by the receipt MAC")
	}
	if data, _ := json.Marshal(plain.Body); strings.Contains(string(data), "launch_digest") {
		t.Errorf("an empty launch digest is encoded: %s", data)
	}
	with.Body.LaunchDigest = hexA
	if err := Verify(key, hexA, []Envelope{with}); err == nil {
		t.Error("a changed launch digest still verifies")
	}
	b.LaunchDigest = "not-hex"
	if _, err := Seal(key, 1, hexA, b); err == nil {
		t.Error("a malformed launch digest was sealed")
	}
}

// TestProjections: the library projections and the skill projection
// digest are covered by the receipt MAC, omitted when empty (older
// receipts keep their MACs), and malformed ones are never sealed.
func TestProjections(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	plain, err := Seal(key, 1, hexA, body("s1"))
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := json.Marshal(plain.Body); strings.Contains(string(data), "projection") {
		t.Errorf("empty projections are encoded: %s", data)
	}
	good := Projection{Identifier: "libraries/" + hexB, Destination: "libraries", Target: "/opt/glove/libraries/" + hexB, Digest: hexB}
	b := body("s1")
	b.LibraryProjections = []Projection{good}
	b.SkillProjectionDigest = hexA
	with, err := Seal(key, 1, hexA, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(key, hexA, []Envelope{with}); err != nil {
		t.Fatalf("verify: %v", err)
	}
	for name, change := range map[string]func(*Body){
		"target":      func(b *Body) { b.LibraryProjections[0].Target = "/elsewhere/" + hexB },
		"digest":      func(b *Body) { b.LibraryProjections[0].Digest = hexA },
		"dropped":     func(b *Body) { b.LibraryProjections = nil },
		"skill":       func(b *Body) { b.SkillProjectionDigest = hexB },
		"skill empty": func(b *Body) { b.SkillProjectionDigest = "" },
	} {
		e := with
		e.Body.LibraryProjections = append([]Projection(nil), with.Body.LibraryProjections...)
		change(&e.Body)
		if err := Verify(key, hexA, []Envelope{e}); err == nil {
			t.Errorf("%s: a changed projection still verifies", name)
		}
	}
	bad := map[string]Projection{
		"identifier mismatch": {Identifier: "other/" + hexB, Destination: "libraries", Target: "/t/" + hexB, Digest: hexB},
		"upper-case digest":   {Identifier: "libraries/" + strings.ToUpper(hexB), Destination: "libraries", Target: "/t", Digest: strings.ToUpper(hexB)},
		"relative target":     {Identifier: "libraries/" + hexB, Destination: "libraries", Target: "t/" + hexB, Digest: hexB},
		"escaped target":      {Identifier: "libraries/" + hexB, Destination: "libraries", Target: "/t\"x", Digest: hexB},
		"bad destination":     {Identifier: "Lib/" + hexB, Destination: "Lib", Target: "/t", Digest: hexB},
	}
	for name, p := range bad {
		b := body("s1")
		b.LibraryProjections = []Projection{p}
		if _, err := Seal(key, 1, hexA, b); err == nil {
			t.Errorf("%s: sealed", name)
		}
	}
	b = body("s1")
	for range 9 {
		b.LibraryProjections = append(b.LibraryProjections, good)
	}
	if _, err := Seal(key, 1, hexA, b); err == nil {
		t.Error("nine projections were sealed")
	}
	b = body("s1")
	b.SkillProjectionDigest = "nothex"
	if _, err := Seal(key, 1, hexA, b); err == nil {
		t.Error("a malformed skill projection digest was sealed")
	}
}
