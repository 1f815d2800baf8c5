// SPDX-License-Identifier: Apache-2.0

package session

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/spec"
	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/internal/strictjson"
	"github.com/glove-sandbox/glove/supervisor/state/lease"
	"golang.org/x/sys/unix"
)

// TestParseInotify: events of one read are decoded in order, their
// names without the NUL padding; an event whose name runs past the bytes
// read ends the list; a queue overflow is told.
func TestParseInotify(t *testing.T) {
	ev := func(wd int32, mask uint32, name string, pad int) []byte {
		b := make([]byte, unix.SizeofInotifyEvent)
		binary.NativeEndian.PutUint32(b[0:4], uint32(wd))
		binary.NativeEndian.PutUint32(b[4:8], mask)
		binary.NativeEndian.PutUint32(b[12:16], uint32(len(name)+pad))
		return append(append(b, name...), make([]byte, pad)...)
	}
	var b []byte
	b = append(b, ev(1, unix.IN_CLOSE_WRITE, "auth.json", 7)...)
	b = append(b, ev(2, unix.IN_Q_OVERFLOW, "", 0)...)
	b = append(b, ev(3, unix.IN_MOVED_TO, "x", 3)...)
	got := parseInotify(b)
	want := []inotifyEvent{{wd: 1, name: "auth.json"}, {wd: 2, overflow: true}, {wd: 3, name: "x"}}
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	trunc := ev(4, unix.IN_CLOSE_WRITE, "name", 12)
	if got := parseInotify(append(ev(1, unix.IN_CLOSE_WRITE, "a", 3), trunc[:len(trunc)-1]...)); len(got) != 1 {
		t.Errorf("a truncated event: %+v, want only the whole one before it", got)
	}
	if got := parseInotify(make([]byte, unix.SizeofInotifyEvent-1)); len(got) != 0 {
		t.Errorf("a short read: %+v", got)
	}
}

// TestVariableValue: a lease's content becomes a variable's value only as
// one line of UTF-8 without NUL, its one trailing newline removed; the
// refusals never quote the content.
func TestVariableValue(t *testing.T) {
	for in, want := range map[string]string{
		"sk-123\n": "sk-123", "sk-123\r\n": "sk-123", "sk-123": "sk-123", "ключ\n": "ключ", "a b=c\n": "a b=c",
	} {
		if got, err := variableValue([]byte(in)); err != nil || got != want {
			t.Errorf("%q: %q %v, want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "\n", "\r\n", "sk\n\n", "a\nb", "a\rb", "sk\r", "s\x00k", "s\xffk\n"} {
		if got, err := variableValue([]byte(in)); err == nil {
			t.Errorf("%q: accepted as %q", in, got)
		} else if len(in) > 2 && strings.Contains(err.Error(), in[:2]) {
			t.Errorf("%q: the refusal quotes the content: %v", in, err)
		}
	}
}

// TestVariableCredentialLaunch resolves a plan with a credential
// delivered as a variable and checks where its value is: in the bundle's
// environment (the program's) and nowhere of the Launch, whose Env, the
// managed-launch digest's preimage and Check see only the handle, the
// variable's name, the lease and its version. A second lease version
// changes the digest; a value that is not one line is refused at start.
func TestVariableCredentialLaunch(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "openai.key")
	secret := "sk-test-" + strings.Repeat("x7", 20)
	if err := os.WriteFile(src, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tmpl := policy.RuntimeTemplate{RuntimeTemplateID: "generic", RuntimeID: "generic", SandboxBackend: policy.BackendLinuxProduction,
		Launch: policy.Launch{ExecutablePath: "/usr/bin/true", Environment: []string{"TERM=dumb"}}}
	tmpl.AdapterCommandDigest = policy.AdapterDigest(&tmpl)
	pol := &policy.Policy{RuntimeTemplates: []policy.RuntimeTemplate{tmpl}, SecretHandles: []string{"openai-key"},
		CredentialPolicies: []policy.CredentialPolicy{{Handle: "openai-key", SourcePath: src, EnvironmentVariable: "OPENAI_API_KEY", MaxBytes: 256}}}
	store, err := lease.Open(filepath.Join(dir, "leases"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	profile := policy.ResourceProfile{ProfileID: "p", CPUTimeMs: 1, MemoryBytes: 1, Pids: 1, WallTimeMs: 1, DiskBytes: 1, TerminalOutputBytes: 1}
	pl := &plan.Plan{RuntimeTemplateID: "generic", ResourceProfile: profile, SecretHandles: []string{"openai-key"}}
	resolve := func() (*Launch, *Pins, string) {
		t.Helper()
		l, pins, err := Resolve(pol, pl, "s1", Sources{Leases: store})
		if err != nil {
			t.Fatal(err)
		}
		pre := string(strictjson.Canonical(launchPreimage{Env: l.Env, Credentials: l.Credentials}))
		for _, where := range []string{strings.Join(l.Env, "\n"), pre, LaunchDigest(l, tmpl.AdapterCommandDigest, nil)} {
			if strings.Contains(where, secret) || strings.Contains(where, "OPENAI_API_KEY=") {
				t.Errorf("the value is in the launch: %s", where)
			}
		}
		if len(l.Credentials) != 1 || l.Credentials[0].Variable != "OPENAI_API_KEY" || l.Credentials[0].Destination != "" {
			t.Fatalf("credentials %+v", l.Credentials)
		}
		return l, pins, LaunchDigest(l, tmpl.AdapterCommandDigest, nil)
	}
	l, pins, d1 := resolve()
	usr, err := os.Open("/usr")
	if err != nil {
		t.Fatal(err)
	}
	defer usr.Close()
	env, err := secretEnv(l, pins)
	if err != nil {
		t.Fatal(err)
	}
	// Any open directory stands for the mounts: descriptors only place them.
	p := &prepared{pins: pins, scratch: usr}
	for range l.Mounts {
		p.mounts = append(p.mounts, usr)
	}
	files, srcs := p.descriptors(l)
	bundle, err := writeBundle(t.TempDir(), l, env, srcs, len(files), 0, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := spec.DecodeStrict(data)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(s.Process.Env, "OPENAI_API_KEY="+secret) || !slices.Contains(s.Process.Env, "TERM=dumb") {
		t.Errorf("the bundle's environment %q lacks the variable or the template's", s.Process.Env)
	}
	if s.Annotations[spec.ConfigAnnotation] != spec.ConfigUnlinkAfterRead {
		t.Errorf("the bundle does not ask glove-shim to unlink config.json: %v", s.Annotations)
	}
	// Check refuses a variable the environment already has.
	clash := *l
	clash.Env = append(append([]string(nil), l.Env...), "OPENAI_API_KEY=plain")
	if err := clash.Check(); !errors.Is(err, ErrInvalid) {
		t.Errorf("a variable credential over an environment entry: %v, want ErrInvalid", err)
	}
	if _, err := pins.leases[0].Commit([]byte("sk-rotated\n")); err != nil {
		t.Fatal(err)
	}
	if err := pins.Close(); err != nil {
		t.Fatal(err)
	}
	_, pins2, d2 := resolve()
	if d1 == d2 {
		t.Errorf("the digest did not change with the lease's version")
	}
	if err := pins2.Close(); err != nil {
		t.Fatal(err)
	}
	// A lease that cannot be one variable: refused at start, the value
	// not in the error.
	if err := os.WriteFile(src, []byte("line one\nline two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Resolve(pol, pl, "s1", Sources{Leases: store}); !errors.Is(err, ErrCredential) || strings.Contains(err.Error(), "line one") {
		t.Errorf("a two-line credential: %v, want ErrCredential without the value", err)
	}
}
