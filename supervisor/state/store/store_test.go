package store

import (
	"errors"
	"os"
	"path/filepath"
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
	for _, to := range []State{Preparing, Starting, Running, Stopping, Exited} {
		got, err := s.Transition("s1", to, "")
		if err != nil || got.State != to {
			t.Fatalf("→%s: %v %v", to, got.State, err)
		}
		// Idempotent: the same transition again writes nothing.
		size := s.j.Size()
		if _, err := s.Transition("s1", to, ""); err != nil || s.j.Size() != size {
			t.Fatalf("repeat →%s: %v (size %d→%d)", to, err, size, s.j.Size())
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
	if err != nil || got.State != Exited {
		t.Fatalf("after reopen: %v %v", got.State, err)
	}
}

func TestIllegalTransitions(t *testing.T) {
	s := open(t, dir(t))
	defer s.Close()
	path := []State{Created, Preparing, Starting, Running, Stopping}
	all := []State{Created, Preparing, Starting, Running, Stopping, Exited, Failed}
	for i, from := range path {
		for _, to := range all {
			id := strings.ToLower(string(from) + "-" + string(to))
			if _, _, err := s.Create(req(id, id)); err != nil {
				t.Fatal(err)
			}
			for _, step := range path[1 : i+1] {
				if _, err := s.Transition(id, step, ""); err != nil {
					t.Fatal(err)
				}
			}
			_, err := s.Transition(id, to, "limit:pids")
			ok := to == from || to == Failed || (i+1 < len(path) && path[i+1] == to) || (from == Stopping && to == Exited)
			if ok != (err == nil) {
				t.Errorf("%s→%s: err %v, legal %v", from, to, err, ok)
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
	rt         = Runtime{BootID: "01234567-89ab-cdef-0123-456789abcdef", PID: 42, StartTicks: 1000, CgroupInode: 77}
	rtJSON     = `{"boot_id":"01234567-89ab-cdef-0123-456789abcdef","pid":42,"start_ticks":1000,"cgroup_inode":77}`
	toStarting = []string{`{"type":"transition","session":"s1","at_ms":1,"from":"created","to":"preparing"}`,
		`{"type":"transition","session":"s1","at_ms":1,"from":"preparing","to":"starting"}`}
)

func TestRuntime(t *testing.T) {
	d := dir(t)
	s := open(t, d)
	if _, _, err := s.Create(req("s1", "k1")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetRuntime("s1", rt); !errors.Is(err, ErrTransition) {
		t.Errorf("runtime while created: %v, want ErrTransition", err)
	}
	for _, to := range []State{Preparing, Starting} {
		if _, err := s.Transition("s1", to, ""); err != nil {
			t.Fatal(err)
		}
	}
	bad := rt
	bad.PID = 0
	if _, err := s.SetRuntime("s1", bad); !errors.Is(err, ErrInvalid) {
		t.Errorf("pid 0: %v, want ErrInvalid", err)
	}
	if _, err := s.SetRuntime("nope", rt); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown session: %v", err)
	}
	got, err := s.SetRuntime("s1", rt)
	if err != nil || got.Runtime == nil || *got.Runtime != rt {
		t.Fatalf("set runtime: %+v %v", got.Runtime, err)
	}
	if _, err := s.SetRuntime("s1", rt); !errors.Is(err, ErrConflict) {
		t.Errorf("twice: %v, want ErrConflict", err)
	}
	got.Runtime.PID = 1 // a copy: the store's record is unchanged
	s.Close()
	s = open(t, d)
	defer s.Close()
	again, err := s.Get("s1")
	if err != nil || again.Runtime == nil || *again.Runtime != rt || again.State != Starting {
		t.Errorf("after reopen: %+v %v", again, err)
	}
}

// TestReplayRejectsForgedRecords writes records this package would never
// write straight into the journal and checks Open refuses the store.
func TestReplayRejectsForgedRecords(t *testing.T) {
	create := `{"type":"create","session":"s1","at_ms":1,"key":"k1","controller_plan_digest":"` + hexA + `","plan_content_digest":"` + hexB + `","plan":"e30="}`
	cases := map[string][]string{
		"transition of unknown session": {`{"type":"transition","session":"s9","at_ms":1,"from":"created","to":"preparing"}`},
		"illegal transition":            {create, `{"type":"transition","session":"s1","at_ms":1,"from":"created","to":"running"}`},
		"transition from wrong state":   {create, `{"type":"transition","session":"s1","at_ms":1,"from":"running","to":"stopping"}`},
		"session created twice":         {create, create},
		"key reused":                    {create, strings.Replace(create, `"session":"s1"`, `"session":"s2"`, 1)},
		"unknown type":                  {`{"type":"delete","session":"s1","at_ms":1}`},
		"unknown field":                 {strings.Replace(create, `"at_ms":1`, `"at_ms":1,"extra":1`, 1)},
		"invalid digest":                {strings.Replace(create, hexA, "zz", 1)},
		"trailing data":                 {create + ` {}`},
		"not JSON":                      {`create s1`},
		"runtime of unknown session":    {`{"type":"runtime","session":"s9","at_ms":1,"runtime":` + rtJSON + `}`},
		"runtime while created":         {create, `{"type":"runtime","session":"s1","at_ms":1,"runtime":` + rtJSON + `}`},
		"runtime without identity":      {create, toStarting[0], toStarting[1], `{"type":"runtime","session":"s1","at_ms":1}`},
		"runtime twice": {create, toStarting[0], toStarting[1], `{"type":"runtime","session":"s1","at_ms":1,"runtime":` + rtJSON + `}`,
			`{"type":"runtime","session":"s1","at_ms":1,"runtime":` + rtJSON + `}`},
		"runtime with a bad launch digest": {create, toStarting[0], toStarting[1],
			`{"type":"runtime","session":"s1","at_ms":1,"runtime":` + strings.Replace(rtJSON, "}", `,"launch_digest":"zz"}`, 1) + `}`},
		"runtime with a bad boot id": {create, toStarting[0], toStarting[1],
			`{"type":"runtime","session":"s1","at_ms":1,"runtime":` + strings.Replace(rtJSON, "0123", "01G3", 1) + `}`},
	}
	for name, recs := range cases {
		t.Run(name, func(t *testing.T) {
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
			j.Close()
			if s, _, err := Open(Options{Dir: d}); !errors.Is(err, ErrCorrupt) {
				if s != nil {
					s.Close()
				}
				t.Fatalf("open: %v, want ErrCorrupt", err)
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
