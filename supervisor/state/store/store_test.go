// SPDX-License-Identifier: Apache-2.0

package store

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/state/journal"
)

func dir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "store")
	if err := os.Mkdir(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

func open(t *testing.T, d string) *Store {
	t.Helper()
	s, _, err := Open(Options{Dir: d})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var (
	hexA = strings.Repeat("a", 64)
	hexB = strings.Repeat("b", 64)
	hexC = strings.Repeat("c", 64)
)

func req(id, key string) CreateRequest {
	return CreateRequest{SessionID: id, IdempotencyKey: key, ControllerPlanDigest: hexA, PlanContentDigest: hexB,
		Plan: []byte(`{"schema_version":1,"note":"<&>"}`)}
}

func TestCreateIdempotency(t *testing.T) {
	d := dir(t)
	s := open(t, d)
	first, existing, err := s.Create(req("s1", "k1"))
	if err != nil || existing || first.State != Created {
		t.Fatalf("create: %+v %v %v", first, existing, err)
	}
	again, existing, err := s.Create(req("s1", "k1"))
	if err != nil || !existing || !again.CreatedAt.Equal(first.CreatedAt) {
		t.Fatalf("identical retry: %+v %v %v", again, existing, err)
	}
	conflicts := map[string]CreateRequest{
		"same key, other session": req("s2", "k1"),
		"same session, other key": req("s1", "k2"),
	}
	other := req("s1", "k1")
	other.Plan = []byte(`{"schema_version":1,"note":"other"}`)
	conflicts["same key, other plan"] = other
	other2 := req("s1", "k1")
	other2.ControllerPlanDigest = hexC
	conflicts["same key, other controller digest"] = other2
	other3 := req("s1", "k1")
	other3.PlanContentDigest = hexC
	conflicts["same key, other content digest"] = other3
	for name, r := range conflicts {
		if _, _, err := s.Create(r); !errors.Is(err, ErrConflict) {
			t.Errorf("%s: %v, want ErrConflict", name, err)
		}
	}
	s.Close()
	// After a restart the retry rule compares the stored bytes exactly.
	s = open(t, d)
	defer s.Close()
	again, existing, err = s.Create(req("s1", "k1"))
	if err != nil || !existing {
		t.Fatalf("identical retry after reopen: %v %v", existing, err)
	}
	if _, _, err := s.Create(other); !errors.Is(err, ErrConflict) {
		t.Errorf("other plan after reopen: %v, want ErrConflict", err)
	}
}

func TestCreateRejectsInvalid(t *testing.T) {
	s := open(t, dir(t))
	defer s.Close()
	mut := map[string]func(*CreateRequest){
		"session id uppercase":   func(r *CreateRequest) { r.SessionID = "S1" },
		"session id empty":       func(r *CreateRequest) { r.SessionID = "" },
		"session id slash":       func(r *CreateRequest) { r.SessionID = "a/b" },
		"session id too long":    func(r *CreateRequest) { r.SessionID = strings.Repeat("a", 65) },
		"key empty":              func(r *CreateRequest) { r.IdempotencyKey = "" },
		"key with space":         func(r *CreateRequest) { r.IdempotencyKey = "a b" },
		"controller digest case": func(r *CreateRequest) { r.ControllerPlanDigest = strings.Repeat("A", 64) },
		"controller digest 63":   func(r *CreateRequest) { r.ControllerPlanDigest = strings.Repeat("a", 63) },
		"content digest":         func(r *CreateRequest) { r.PlanContentDigest = "x" },
		"plan empty":             func(r *CreateRequest) { r.Plan = nil },
		"plan not JSON":          func(r *CreateRequest) { r.Plan = []byte("{") },
		"plan too large":         func(r *CreateRequest) { r.Plan = []byte(`"` + strings.Repeat("a", MaxPlanBytes) + `"`) },
	}
	for name, m := range mut {
		r := req("s1", "k1")
		m(&r)
		if _, _, err := s.Create(r); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if n := len(s.List()); n != 0 {
		t.Errorf("%d sessions stored after only invalid requests", n)
	}
}

func TestLifecycle(t *testing.T) {
	d := dir(t)
	s := open(t, d)
	if _, _, err := s.Create(req("s1", "k1")); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		to State
		do func() (Session, error)
	}{
		{Preparing, func() (Session, error) { return s.Transition("s1", Preparing, "") }},
		{Running, func() (Session, error) { return s.Run("s1", rt) }},
		{Stopping, func() (Session, error) { return s.Transition("s1", Stopping, "") }},
		{Exited, func() (Session, error) { return s.Transition("s1", Exited, "") }},
	}
	for _, st := range steps {
		n := s.j.Count()
		got, err := st.do()
		if err != nil || got.State != st.to || s.j.Count() != n+1 {
			t.Fatalf("→%s: %v %v (records %d→%d, want one)", st.to, got.State, err, n, s.j.Count())
		}
		// Idempotent: the same transition again writes nothing.
		size := s.j.Size()
		if _, err := s.Transition("s1", st.to, ""); err != nil || s.j.Size() != size {
			t.Fatalf("repeat →%s: %v (size %d→%d)", st.to, err, size, s.j.Size())
		}
	}
	for _, to := range []State{Failed, Created, Running} {
		if _, err := s.Transition("s1", to, ""); !errors.Is(err, ErrTransition) {
			t.Errorf("exited→%s: %v, want ErrTransition", to, err)
		}
	}
	s.Close()
	s = open(t, d)
	defer s.Close()
	got, err := s.Get("s1")
	if err != nil || got.State != Exited || got.Runtime == nil || *got.Runtime != rt {
		t.Fatalf("after reopen: %v %+v %v", got.State, got.Runtime, err)
	}
}

// advance walks a new session to state to the way gloved does.
func advance(t *testing.T, s *Store, id string, to State) {
	t.Helper()
	if _, _, err := s.Create(req(id, id)); err != nil {
		t.Fatal(err)
	}
	steps := map[State][]func() error{
		Created:   nil,
		Preparing: {func() error { _, err := s.Transition(id, Preparing, ""); return err }},
		Running:   {func() error { _, err := s.Transition(id, Preparing, ""); return err }, func() error { _, err := s.Run(id, rt); return err }},
		Stopping: {func() error { _, err := s.Transition(id, Preparing, ""); return err }, func() error { _, err := s.Run(id, rt); return err },
			func() error { _, err := s.Transition(id, Stopping, ""); return err }},
	}[to]
	for _, f := range steps {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestIllegalTransitions(t *testing.T) {
	s := open(t, dir(t))
	defer s.Close()
	// The transitions Transition writes: starting is never recorded and
	// running only by Run, so neither is one of them.
	forward := map[State]State{Created: Preparing, Running: Stopping, Stopping: Exited}
	all := []State{Created, Preparing, Starting, Running, Stopping, Exited, Failed}
	for _, from := range []State{Created, Preparing, Running, Stopping} {
		for _, to := range all {
			id := strings.ToLower(string(from) + "-" + string(to))
			advance(t, s, id, from)
			n := s.j.Count()
			_, err := s.Transition(id, to, "limit:pids")
			ok := to == from || to == Failed || forward[from] == to
			if ok != (err == nil) {
				t.Errorf("%s→%s: err %v, legal %v", from, to, err, ok)
			}
			if err != nil && s.j.Count() != n {
				t.Errorf("%s→%s: refused, but wrote %d records", from, to, s.j.Count()-n)
			}
		}
	}
	if _, err := s.Transition("nope", Failed, ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown session: %v", err)
	}
	if _, err := s.Transition("created-created", Failed, "Bad Reason"); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad reason: %v", err)
	}
}

var (
	rt     = Runtime{BootID: "01234567-89ab-cdef-0123-456789abcdef", PID: 42, StartTicks: 1000, CgroupInode: 77}
	rtJSON = `{"boot_id":"01234567-89ab-cdef-0123-456789abcdef","pid":42,"start_ticks":1000,"cgroup_inode":77}`
	create = `{"type":"create","session":"s1","at_ms":1,"key":"k1","controller_plan_digest":"` + hexA + `","plan_content_digest":"` + hexB + `","plan":"e30="}`
	// What an earlier version wrote for a session it started, in order.
	toPreparing = `{"type":"transition","session":"s1","at_ms":2,"from":"created","to":"preparing"}`
	toStarting  = `{"type":"transition","session":"s1","at_ms":3,"from":"preparing","to":"starting"}`
	oldRuntime  = `{"type":"runtime","session":"s1","at_ms":4,"runtime":` + rtJSON + `}`
	oldRunning  = `{"type":"transition","session":"s1","at_ms":5,"from":"starting","to":"running"}`
	// What this version writes instead of the last three.
	running = `{"type":"running","session":"s1","at_ms":5,"from":"preparing","runtime":` + rtJSON + `}`
)

// TestRun: Run records the runtime identity and the move to running in
// one record, only from preparing, once, and only with a valid identity.
func TestRun(t *testing.T) {
	d := dir(t)
	s := open(t, d)
	if _, _, err := s.Create(req("s1", "k1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run("s1", rt); !errors.Is(err, ErrTransition) {
		t.Errorf("run while created: %v, want ErrTransition", err)
	}
	if _, err := s.Transition("s1", Preparing, ""); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*Runtime){
		"pid 0":             func(r *Runtime) { r.PID = 0 },
		"no start time":     func(r *Runtime) { r.StartTicks = 0 },
		"no cgroup inode":   func(r *Runtime) { r.CgroupInode = 0 },
		"short boot id":     func(r *Runtime) { r.BootID = r.BootID[1:] },
		"bad launch digest": func(r *Runtime) { r.LaunchDigest = "zz" },
	} {
		bad := rt
		edit(&bad)
		if _, err := s.Run("s1", bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := s.Run("nope", rt); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown session: %v", err)
	}
	n := s.j.Count()
	got, err := s.Run("s1", rt)
	if err != nil || got.State != Running || got.Runtime == nil || *got.Runtime != rt {
		t.Fatalf("run: %+v %v", got, err)
	}
	if s.j.Count() != n+1 {
		t.Errorf("run wrote %d records, want one", s.j.Count()-n)
	}
	if _, err := s.Run("s1", rt); !errors.Is(err, ErrConflict) {
		t.Errorf("twice: %v, want ErrConflict", err)
	}
	got.Runtime.PID = 1 // a copy: the store's record is unchanged
	advance(t, s, "f1", Preparing)
	if _, err := s.Transition("f1", Failed, "helpers"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run("f1", rt); !errors.Is(err, ErrTransition) {
		t.Errorf("run of a failed session: %v, want ErrTransition", err)
	}
	s.Close()
	s = open(t, d)
	defer s.Close()
	again, err := s.Get("s1")
	if err != nil || again.Runtime == nil || *again.Runtime != rt || again.State != Running {
		t.Errorf("after reopen: %+v %v", again, err)
	}
}

// writeJournal writes records straight into a new store journal.
func writeJournal(t *testing.T, recs ...string) string {
	t.Helper()
	d := dir(t)
	j, _, _, err := journal.Open(journal.Options{Dir: d, Name: FileName, Kind: Kind})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if _, err := j.Append([]byte(r)); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestReplayEarlierVersions: a store an earlier version wrote (starting,
// then the runtime, then running, each its own record) opens after an
// upgrade with the same session the merged running record gives; one it
// left starting with a runtime still opens so, for recovery to check that
// runtime and record the failure, and nothing can move it to running.
func TestReplayEarlierVersions(t *testing.T) {
	get := func(d string) Session {
		t.Helper()
		s, _, err := Open(Options{Dir: d})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		defer s.Close()
		sess, err := s.Get("s1")
		if err != nil {
			t.Fatal(err)
		}
		return sess
	}
	old := get(writeJournal(t, create, toPreparing, toStarting, oldRuntime, oldRunning))
	merged := get(writeJournal(t, create, toPreparing, running))
	if old.State != Running || old.Runtime == nil || *old.Runtime != rt {
		t.Fatalf("earlier version's running session: %+v", old)
	}
	if !reflect.DeepEqual(old, merged) {
		t.Fatalf("the same session differs by format:\nearlier %+v\nmerged  %+v", old, merged)
	}

	d := writeJournal(t, create, toPreparing, toStarting, oldRuntime)
	s, _, err := Open(Options{Dir: d})
	if err != nil {
		t.Fatalf("open a store left starting with a runtime: %v", err)
	}
	defer s.Close()
	sess, err := s.Get("s1")
	if err != nil || sess.State != Starting || sess.Runtime == nil || *sess.Runtime != rt {
		t.Fatalf("left starting: %+v %v", sess, err)
	}
	if _, err := s.Run("s1", rt); !errors.Is(err, ErrConflict) {
		t.Errorf("run of a session with a runtime: %v, want ErrConflict", err)
	}
	if _, err := s.Transition("s1", Running, ""); !errors.Is(err, ErrTransition) {
		t.Errorf("transition to running: %v, want ErrTransition", err)
	}
	// Room for what it can still write: recovery's failure, the cleanup.
	if st := s.Stats(); st.ReservedRecords != 2 {
		t.Errorf("%d records reserved for a session left starting, want 2", st.ReservedRecords)
	}
	if sess, err := s.Transition("s1", Failed, "recovered:gone"); err != nil || sess.State != Failed || sess.Runtime == nil {
		t.Fatalf("recovery's failure: %+v %v", sess, err)
	}
}

// TestReplayRejectsForgedRecords writes records this package would never
// write straight into the journal and checks Open refuses the store, and
// why (want; any refusal for the cases without one).
func TestReplayRejectsForgedRecords(t *testing.T) {
	withRT := func(rec, edit string) string { return strings.Replace(rec, rtJSON, edit, 1) }
	failed := `{"type":"transition","session":"s1","at_ms":6,"from":"preparing","to":"failed","reason":"helpers"}`
	cases := map[string]struct {
		recs []string
		want string
	}{
		"transition of unknown session": {[]string{`{"type":"transition","session":"s9","at_ms":1,"from":"created","to":"preparing"}`}, ""},
		"illegal transition":            {[]string{create, `{"type":"transition","session":"s1","at_ms":1,"from":"created","to":"running"}`}, ""},
		"transition from wrong state":   {[]string{create, `{"type":"transition","session":"s1","at_ms":1,"from":"running","to":"stopping"}`}, ""},
		"session created twice":         {[]string{create, create}, ""},
		"key reused":                    {[]string{create, strings.Replace(create, `"session":"s1"`, `"session":"s2"`, 1)}, ""},
		"unknown type":                  {[]string{`{"type":"delete","session":"s1","at_ms":1}`}, ""},
		"unknown field":                 {[]string{strings.Replace(create, `"at_ms":1`, `"at_ms":1,"extra":1`, 1)}, ""},
		"invalid digest":                {[]string{strings.Replace(create, hexA, "zz", 1)}, ""},
		"trailing data":                 {[]string{create + ` {}`}, ""},
		"not JSON":                      {[]string{`create s1`}, ""},
		"runtime of unknown session":    {[]string{strings.Replace(oldRuntime, `"s1"`, `"s9"`, 1)}, "runtime of unknown session s9"},
		"runtime while created":         {[]string{create, oldRuntime}, "runtime recorded in state created"},
		"runtime without identity":      {[]string{create, toPreparing, toStarting, `{"type":"runtime","session":"s1","at_ms":1}`}, "runtime record without identity"},
		"runtime twice":                 {[]string{create, toPreparing, toStarting, oldRuntime, oldRuntime}, "runtime recorded twice"},
		"runtime with a bad launch digest": {[]string{create, toPreparing, toStarting,
			withRT(oldRuntime, strings.Replace(rtJSON, "}", `,"launch_digest":"zz"}`, 1))}, `launch digest "zz"`},
		"runtime with a bad boot id": {[]string{create, toPreparing, toStarting,
			withRT(oldRuntime, strings.Replace(rtJSON, "0123", "01G3", 1))}, "boot id"},
		"runtime of a failed session": {[]string{create, toPreparing, toStarting,
			strings.Replace(failed, `"from":"preparing"`, `"from":"starting"`, 1), oldRuntime}, "runtime recorded in state failed"},
		"runtime of a running session": {[]string{create, toPreparing, running, oldRuntime}, "runtime recorded twice"},

		// The merged record: refused for what refused the two it merges.
		"running of unknown session": {[]string{strings.Replace(running, `"s1"`, `"s9"`, 1)}, "running of unknown session s9"},
		"running without identity": {[]string{create, toPreparing,
			`{"type":"running","session":"s1","at_ms":5,"from":"preparing"}`}, "running without its runtime identity"},
		"running with pid 0": {[]string{create, toPreparing,
			withRT(running, strings.Replace(rtJSON, `"pid":42`, `"pid":0`, 1))}, "runtime identity"},
		"running with a bad boot id": {[]string{create, toPreparing,
			withRT(running, strings.Replace(rtJSON, "0123", "01G3", 1))}, "boot id"},
		"running with a bad launch digest": {[]string{create, toPreparing,
			withRT(running, strings.Replace(rtJSON, "}", `,"launch_digest":"zz"}`, 1))}, `launch digest "zz"`},
		"running while created": {[]string{create,
			strings.Replace(running, `"from":"preparing"`, `"from":"created"`, 1)}, "running from created recorded in state created"},
		"running from preparing while created": {[]string{create, running}, "running from preparing recorded in state created"},
		"running from starting":                {[]string{create, toPreparing, toStarting, strings.Replace(running, `"from":"preparing"`, `"from":"starting"`, 1)}, "running from starting recorded in state starting"},
		"running of a failed session":          {[]string{create, toPreparing, failed, running}, "running from preparing recorded in state failed"},
		"running twice":                        {[]string{create, toPreparing, running, running}, "runtime recorded twice"},
		"running after an earlier runtime": {[]string{create, toPreparing, toStarting, oldRuntime,
			strings.Replace(running, `"from":"preparing"`, `"from":"starting"`, 1)}, "runtime recorded twice"},
		"earlier running after running": {[]string{create, toPreparing, running, oldRunning}, "transition starting→running recorded in state running"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			d := writeJournal(t, c.recs...)
			s, _, err := Open(Options{Dir: d})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), c.want) {
				if s != nil {
					s.Close()
				}
				t.Fatalf("open: %v, want ErrCorrupt naming %q", err, c.want)
			}
		})
	}
}

func TestAuthorizer(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	now := time.UnixMilli(1_800_000_000_000)
	clock := func() time.Time { return now }
	a, err := NewAuthorizer(key, time.Minute, clock)
	if err != nil {
		t.Fatal(err)
	}
	s := Session{ID: "s1", ControllerPlanDigest: hexA, PlanContentDigest: hexB}
	tok, _, err := a.Issue(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Verify(tok, s); err != nil {
		t.Fatalf("verify: %v", err)
	}
	other, _ := NewAuthorizer([]byte(strings.Repeat("x", 32)), time.Minute, clock)
	parts := strings.Split(tok, ".")
	flip := func(s string) string {
		b := []byte(s)
		if b[0] == 'a' {
			b[0] = 'b'
		} else {
			b[0] = 'a'
		}
		return string(b)
	}
	bad := map[string]struct {
		a   *Authorizer
		tok string
		s   Session
	}{
		"other session":           {a, tok, Session{ID: "s2", ControllerPlanDigest: hexA, PlanContentDigest: hexB}},
		"other controller digest": {a, tok, Session{ID: "s1", ControllerPlanDigest: hexC, PlanContentDigest: hexB}},
		"other content digest":    {a, tok, Session{ID: "s1", ControllerPlanDigest: hexA, PlanContentDigest: hexC}},
		"other key":               {other, tok, s},
		"tampered mac":            {a, strings.Join([]string{parts[0], parts[1], parts[2], flip(parts[3])}, "."), s},
		"tampered nonce":          {a, strings.Join([]string{parts[0], parts[1], flip(parts[2]), parts[3]}, "."), s},
		"extended expiry":         {a, strings.Join([]string{parts[0], "9" + parts[1], parts[2], parts[3]}, "."), s},
		"leading zero expiry":     {a, strings.Join([]string{parts[0], "0" + parts[1], parts[2], parts[3]}, "."), s},
		"uppercase mac":           {a, strings.Join([]string{parts[0], parts[1], parts[2], strings.ToUpper(parts[3])}, "."), s},
		"wrong prefix":            {a, strings.Replace(tok, "glove-start-v1", "glove-start-v2", 1), s},
		"missing part":            {a, strings.Join(parts[:3], "."), s},
		"empty":                   {a, "", s},
	}
	for name, c := range bad {
		if err := c.a.Verify(c.tok, c.s); !errors.Is(err, ErrAuthorization) {
			t.Errorf("%s: %v, want ErrAuthorization", name, err)
		}
	}
	now = now.Add(time.Minute)
	if err := a.Verify(tok, s); !errors.Is(err, ErrAuthorization) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired: %v", err)
	}
	if _, err := NewAuthorizer(key[:31], time.Minute, clock); err == nil {
		t.Error("31-byte key accepted")
	}
	if _, err := NewAuthorizer(key, time.Hour, clock); err == nil {
		t.Error("one-hour lifetime accepted")
	}
}

func TestLoadKey(t *testing.T) {
	d := t.TempDir()
	good := filepath.Join(d, "good")
	if err := os.WriteFile(good, []byte(strings.Repeat("k", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	if k, err := LoadKey(good); err != nil || len(k) != 32 {
		t.Fatalf("good key: %d %v", len(k), err)
	}
	short := filepath.Join(d, "short")
	os.WriteFile(short, []byte("k"), 0o600)
	open := filepath.Join(d, "open")
	os.WriteFile(open, []byte(strings.Repeat("k", 32)), 0o600)
	os.Chmod(open, 0o644)
	long := filepath.Join(d, "long")
	os.WriteFile(long, []byte(strings.Repeat("k", 65)), 0o600)
	for _, p := range []string{short, open, long, filepath.Join(d, "missing")} {
		if _, err := LoadKey(p); err == nil {
			t.Errorf("%s accepted", filepath.Base(p))
		}
	}
}
