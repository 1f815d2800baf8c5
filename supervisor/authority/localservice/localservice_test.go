// SPDX-License-Identifier: Apache-2.0

package localservice

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/internal/jsonedit"
)

// baseDoc is a valid configuration of the pathname transport with two
// services: a generic one for codex and pi, and the Sage-bound one.
const baseDoc = `{"schema_version":1,"services":[` +
	`{"alias":"model","socket":"/run/glove-upstream/model.sock","runtime_ids":["codex","pi"]},` +
	`{"alias":"sage","socket":"/run/glove-sage/sage.sock","runtime_ids":["pi"],` +
	`"binding":{"adapter":"sage-guest","schema":"sage.guest-observation-v1"}}]}`

// streamDoc is a valid inherited-stream-v1 configuration.
const streamDoc = `{"schema_version":1,"transport":"inherited-stream-v1","services":[` +
	`{"alias":"model","socket":"/run/glove-upstream/model.sock","runtime_ids":["codex","pi"]}]}`

func decodeValid(t testing.TB, doc string) *Config {
	t.Helper()
	c, err := Decode([]byte(doc))
	if err != nil {
		t.Fatalf("decode: %v\n%s", err, doc)
	}
	if err := Validate(c); err != nil {
		t.Fatalf("validate: %v\n%s", err, doc)
	}
	return c
}

func TestValid(t *testing.T) {
	for _, doc := range []string{baseDoc, streamDoc} {
		c := decodeValid(t, doc)
		canon := Canonical(c)
		c2 := decodeValid(t, string(canon))
		if !reflect.DeepEqual(c, c2) || string(Canonical(c2)) != string(canon) {
			t.Errorf("canonical round trip of\n%s\ngave\n%s", doc, canon)
		}
	}
}

type badCase struct {
	name, doc, ptr, phrase string
}

// services builds n services with distinct sorted aliases and sockets.
func services(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"alias": fmt.Sprintf("s%03d", i),
			"socket": fmt.Sprintf("/run/s/%d.sock", i), "runtime_ids": []any{"codex"}}
	}
	return out
}

func strs(prefix string, n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = prefix + string(rune('a'+i/26)) + string(rune('a'+i%26))
	}
	return out
}

// badDocs is the bad-input table: every rule of docs/local-services.md,
// each as one mutation of a valid document, with the JSON Pointer and
// a fragment of the message its fault must have.
func badDocs(t testing.TB) []badCase {
	set := func(doc, p string, v any) string { return jsonedit.Set(p, v)(t, doc) }
	rep := func(doc, old, new string) string { return jsonedit.Rep(old, new)(t, doc) }
	sage := `"binding":{"adapter":"sage-guest","schema":"sage.guest-observation-v1"}`
	return []badCase{
		// The document as a whole.
		{"empty", ``, "", "empty document"},
		{"not an object", `[]`, "", "must be a JSON object"},
		{"trailing data", baseDoc + `{}`, "", "trailing data"},
		{"too large", baseDoc + strings.Repeat(" ", MaxConfigBytes), "", "more than the 65536 allowed"},
		{"duplicate member", rep(baseDoc, `{"schema_version":1,`, `{"schema_version":1,"schema_version":1,`), "/schema_version", "duplicate member name"},
		{"null", rep(baseDoc, sage, `"binding":null`), "/services/1/binding", "null is not allowed"},
		// schema_version.
		{"schema_version absent", set(baseDoc, "/schema_version", nil), "/schema_version", "schema_version 0, want 1"},
		{"schema_version 2", set(baseDoc, "/schema_version", 2), "/schema_version", "schema_version 2, want 1"},
		{"schema_version a string", set(baseDoc, "/schema_version", "1"), "/schema_version", "found a string"},
		{"schema_version a fraction", rep(baseDoc, `"schema_version":1`, `"schema_version":1.5`), "/schema_version", "number 1.5"},
		// transport.
		{"transport empty", set(baseDoc, "/transport", ""), "/transport", `transport "" is not supported`},
		{"transport other", set(streamDoc, "/transport", "pathname-v1"), "/transport", `transport "pathname-v1" is not supported`},
		{"transport case", set(streamDoc, "/transport", "Inherited-Stream-V1"), "/transport", "is not supported"},
		{"transport a number", set(streamDoc, "/transport", 1), "/transport", "found a number"},
		{"stream with two services", set(baseDoc, "/transport", TransportInheritedStream), "/services", "exactly one adapter-bound alias; 2 services"},
		// services.
		{"services absent", set(baseDoc, "/services", nil), "/services", "0 services"},
		{"services empty", set(baseDoc, "/services", []any{}), "/services", "0 services"},
		{"services an object", set(baseDoc, "/services", map[string]any{}), "/services", "found an object, want an array"},
		{"too many services", set(baseDoc, "/services", services(MaxServices+1)), "/services", "65 services; give 1 to 64"},
		// Members that do not exist: nothing but alias, socket, runtime
		// ids and binding is configurable.
		{"top-level uid", set(baseDoc, "/uid", 1000), "/uid", `unknown member "uid"`},
		{"top-level tcp", set(baseDoc, "/tcp", "127.0.0.1:8080"), "/tcp", `unknown member "tcp"`},
		{"service uid", set(baseDoc, "/services/0/uid", 1000), "/services/0/uid", `unknown member "uid"`},
		{"service tcp", set(baseDoc, "/services/0/tcp", "127.0.0.1:8080"), "/services/0/tcp", `unknown member "tcp"`},
		{"service target", set(baseDoc, "/services/0/target", "/run/guest.sock"), "/services/0/target", `unknown member "target"`},
		{"service token", set(baseDoc, "/services/0/token", "x"), "/services/0/token", `unknown member "token"`},
		{"service credentials", set(baseDoc, "/services/0/credentials", []any{"codex-token"}), "/services/0/credentials", `unknown member "credentials"`},
		{"service member case", set(baseDoc, "/services/0/Alias", "x"), "/services/0/Alias", `unknown member "Alias"`},
		{"binding payload", set(baseDoc, "/services/1/binding/payload", "{}"), "/services/1/binding/payload", `unknown member "payload"`},
		// alias.
		{"alias absent", set(baseDoc, "/services/0/alias", nil), "/services/0/alias", `alias "" is not an identifier`},
		{"alias upper case", set(baseDoc, "/services/0/alias", "Model"), "/services/0/alias", `alias "Model" is not an identifier`},
		{"alias with a slash", set(baseDoc, "/services/0/alias", "a/b"), "/services/0/alias", "is not an identifier"},
		{"aliases unsorted", set(baseDoc, "/services/0/alias", "zed"), "/services/1/alias", `"sage" is not sorted after "zed"`},
		{"alias duplicate", set(baseDoc, "/services/1/alias", "model"), "/services/1/alias", `"model" is a duplicate`},
		// socket.
		{"socket absent", set(baseDoc, "/services/0/socket", nil), "/services/0/socket", "socket is empty"},
		{"socket relative", set(baseDoc, "/services/0/socket", "run/model.sock"), "/services/0/socket", "not an absolute path"},
		{"socket with ..", set(baseDoc, "/services/0/socket", "/run/x/../model.sock"), "/services/0/socket", "not a clean path"},
		{"socket with //", set(baseDoc, "/services/0/socket", "/run//model.sock"), "/services/0/socket", "not a clean path"},
		{"socket with a trailing /", set(baseDoc, "/services/0/socket", "/run/model.sock/"), "/services/0/socket", "not a clean path"},
		{"socket /", set(baseDoc, "/services/0/socket", "/"), "/services/0/socket", "socket is /"},
		{"socket with NUL", set(baseDoc, "/services/0/socket", "/run/m\x00.sock"), "/services/0/socket", "NUL byte"},
		{"socket too long", set(baseDoc, "/services/0/socket", "/"+strings.Repeat("d/", 2047)+"s"), "/services/0/socket", "4096 bytes, more than 4095"},
		{"socket name too long", set(baseDoc, "/services/0/socket", "/run/"+strings.Repeat("s", 256)), "/services/0/socket", "name is 256 bytes, more than 255"},
		{"socket twice", set(baseDoc, "/services/1/socket", "/run/glove-upstream/model.sock"), "/services/1/socket", "the same socket as /services/0/socket"},
		{"socket a number", set(baseDoc, "/services/0/socket", 7), "/services/0/socket", "found a number"},
		// runtime_ids.
		{"runtime_ids absent", set(baseDoc, "/services/0/runtime_ids", nil), "/services/0/runtime_ids", "0 runtime_ids"},
		{"runtime_ids empty", set(baseDoc, "/services/0/runtime_ids", []any{}), "/services/0/runtime_ids", "0 runtime_ids"},
		{"too many runtime_ids", set(baseDoc, "/services/0/runtime_ids", strs("r", MaxRuntimeIDs+1)), "/services/0/runtime_ids", "65 runtime_ids; give 1 to 64"},
		{"runtime id upper case", set(baseDoc, "/services/0/runtime_ids/0", "Codex"), "/services/0/runtime_ids/0", `runtime id "Codex" is not an identifier`},
		{"runtime id empty", set(baseDoc, "/services/0/runtime_ids/1", ""), "/services/0/runtime_ids/1", `runtime id "" is not an identifier`},
		{"runtime_ids unsorted", set(baseDoc, "/services/0/runtime_ids", []any{"pi", "codex"}), "/services/0/runtime_ids/1", `"codex" is not sorted after "pi"`},
		{"runtime_ids duplicate", set(baseDoc, "/services/0/runtime_ids", []any{"pi", "pi"}), "/services/0/runtime_ids/1", `"pi" is a duplicate`},
		{"runtime_ids a string", set(baseDoc, "/services/0/runtime_ids", "codex"), "/services/0/runtime_ids", "found a string, want an array"},
		// binding.
		{"binding empty", set(baseDoc, "/services/1/binding", map[string]any{}), "/services/1/binding/adapter", `adapter "" is not`},
		{"binding adapter absent", set(baseDoc, "/services/1/binding/adapter", nil), "/services/1/binding/adapter", `adapter "" is not`},
		{"binding schema absent", set(baseDoc, "/services/1/binding/schema", nil), "/services/1/binding/schema", `schema "" is not`},
		{"binding adapter charset", set(baseDoc, "/services/1/binding/adapter", "Sage Guest"), "/services/1/binding/adapter", `adapter "Sage Guest" is not`},
		{"binding adapter too long", set(baseDoc, "/services/1/binding/adapter", strings.Repeat("a", 129)), "/services/1/binding/adapter", "is not [a-z0-9]"},
		{"binding schema charset", set(baseDoc, "/services/1/binding/schema", "sage/guest"), "/services/1/binding/schema", `schema "sage/guest" is not`},
		{"binding a string", set(baseDoc, "/services/1/binding", "sage-guest"), "/services/1/binding", "found a string, want an object"},
		{"binding unknown adapter", set(baseDoc, "/services/1/binding/adapter", "other-guest"), "/services/1/binding", `unsupported binding: adapter "other-guest"`},
		{"binding unknown schema", set(baseDoc, "/services/1/binding/schema", "sage.guest-proposal-v1"), "/services/1/binding", `unsupported binding: adapter "sage-guest" with schema "sage.guest-proposal-v1" is not`},
		{"sage binding for codex and pi", rep(baseDoc, `"runtime_ids":["pi"],`+sage, `"runtime_ids":["codex","pi"],`+sage), "/services/1/binding", `supported only for runtime_ids ["pi"]`},
		{"sage binding for codex", rep(baseDoc, `"runtime_ids":["pi"],`+sage, `"runtime_ids":["codex"],`+sage), "/services/1/binding", `supported only for runtime_ids ["pi"]`},
		{"sage binding for opencode", rep(baseDoc, `"runtime_ids":["pi"],`+sage, `"runtime_ids":["opencode"],`+sage), "/services/1/binding", `supported only for runtime_ids ["pi"]`},
	}
}

func TestBadDocs(t *testing.T) {
	for _, tc := range badDocs(t) {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Decode([]byte(tc.doc))
			if err == nil {
				err = Validate(c)
			}
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.doc)
			}
			jsonedit.CheckFault(t, err, tc.ptr, tc.phrase)
		})
	}
}

// TestDerived: the guest channel schema version and the runtime
// allowlist, as gloved computes them from a configuration.
func TestDerived(t *testing.T) {
	sage := `,"binding":{"adapter":"sage-guest","schema":"sage.guest-observation-v1"}`
	one := func(transport, runtimes, binding string) string {
		return `{"schema_version":1` + transport + `,"services":[{"alias":"model","socket":"/run/u/m.sock","runtime_ids":` + runtimes + binding + `}]}`
	}
	stream := `,"transport":"inherited-stream-v1"`
	for _, tc := range []struct {
		name, doc string
		version   int
	}{
		{"sage for pi", one(stream, `["pi"]`, sage), 1},
		{"sage for pi, pathname", one("", `["pi"]`, sage), 1},
		{"sage beside a generic service", baseDoc, 1},
		{"unbound for pi", one(stream, `["pi"]`, ""), 0},
		{"unbound for codex and pi", streamDoc, 0},
		{"codex only", one(stream, `["codex"]`, ""), 0},
		{"opencode only", one(stream, `["opencode"]`, ""), 0},
	} {
		if got := GuestChannelSchemaVersion(decodeValid(t, tc.doc)); got != tc.version {
			t.Errorf("%s: guest channel schema version %d, want %d", tc.name, got, tc.version)
		}
	}
	// Validate refuses the Sage binding with another runtime set; the
	// version is 0 for it all the same, should one reach it unvalidated.
	for _, rts := range []string{`["codex"]`, `["codex","pi"]`, `["opencode"]`} {
		c, err := Decode([]byte(one(stream, rts, sage)))
		if err != nil {
			t.Fatal(err)
		}
		if got := GuestChannelSchemaVersion(c); got != 0 {
			t.Errorf("sage for %s (unvalidated): version %d, want 0", rts, got)
		}
	}
	if got := GuestChannelSchemaVersion(nil); got != 0 {
		t.Errorf("no configuration: version %d, want 0", got)
	}

	c := decodeValid(t, streamDoc)
	for rt, want := range map[string]bool{"codex": true, "pi": true, "opencode": false, "cod": false, "": false} {
		s, ok := ServiceFor(c, rt)
		if ok != want || (ok && s.Alias != "model") {
			t.Errorf("ServiceFor(%q) = %+v, %v; want allowed %v", rt, s, ok, want)
		}
	}
	// The pathname transport has no inherited stream, whatever runtimes
	// its services allow.
	p := decodeValid(t, baseDoc)
	if s, ok := ServiceFor(p, "pi"); ok {
		t.Errorf("pathname transport: ServiceFor(pi) = %+v", s)
	}
	if _, ok := ServiceFor(nil, "pi"); ok {
		t.Error("no configuration: ServiceFor(pi) allowed")
	}
	for rt, want := range map[string]string{"pi": "model sage", "codex": "model", "opencode": ""} {
		var got []string
		for _, s := range ServicesFor(p, rt) {
			got = append(got, s.Alias)
		}
		if strings.Join(got, " ") != want {
			t.Errorf("ServicesFor(%q) = %v, want %q", rt, got, want)
		}
	}
}

// TestLoad: the file is read under the protected-file rules, and a fault
// names the file and its JSON Pointer on one line.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", streamDoc, 0o600)
	c, err := Load(good)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := ServiceFor(c, "codex"); !ok || s.Socket != "/run/glove-upstream/model.sock" {
		t.Errorf("loaded %+v", c)
	}
	if err := os.Symlink(good, filepath.Join(dir, "link.json")); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]string{
		"mode 0644":  write("open.json", streamDoc, 0o644),
		"mode 0400":  write("ro.json", streamDoc, 0o400),
		"a link":     filepath.Join(dir, "link.json"),
		"too large":  write("big.json", streamDoc+strings.Repeat(" ", MaxConfigBytes), 0o600),
		"a hardlink": func() string { p := write("h.json", streamDoc, 0o600); must(t, os.Link(p, p+"2")); return p }(),
	} {
		if _, err := Load(p); !errors.Is(err, policy.ErrUnprotected) {
			t.Errorf("%s: %v, want ErrUnprotected", name, err)
		}
	}
	bad := write("bad.json", strings.Replace(streamDoc, `"codex","pi"`, `"pi","codex"`, 1), 0o600)
	_, err = Load(bad)
	if err == nil || !strings.Contains(err.Error(), bad+": /services/0/runtime_ids/1: ") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a bad file: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
