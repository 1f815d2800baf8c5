// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/testenv"
)

// TestGlovedCredentialVariable runs a stand-in harness that gets an API
// key as the environment variable OPENAI_API_KEY from a credential
// policy and prints a digest of what it got, and judges from outside:
//   - the program got exactly the source's line (the digest), and a
//     session of another template without the handle does not have the
//     variable;
//   - while the program runs, its bundle is there but its config.json
//     is not (glove-shim unlinked it once read), and of every process on
//     the host only the program's /proc/PID/environ holds the key (not
//     gloved's, not glove-shim's stages');
//   - the receipt names the handle and the lease (version 1 at start and
//     at end: a variable is never taken back);
//   - the key appears in none of gloved's log, the statuses, the
//     receipts, the session store (but the lease), the policy file and
//     `glove policy explain`'s text and JSON.
func TestGlovedCredentialVariable(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	srcDir, err := os.MkdirTemp(e.Base, "cred-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(srcDir) })
	if err := os.Chown(srcDir, e.UID, e.GID); err != nil {
		t.Fatal(err)
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		t.Fatal(err)
	}
	key := "sk-" + hex.EncodeToString(raw[:])
	src := filepath.Join(srcDir, "openai.key")
	writeProtected(t, src, []byte(key+"\n"), e.UID, e.GID)
	f := newFixture(t, e, map[string][]string{
		"envsum": {"envsum", "OPENAI_API_KEY", "4"},
		"plain":  {"envsum", "OPENAI_API_KEY", "0"},
	})
	f.pol.SecretHandles = []string{"openai-key"}
	f.pol.CredentialPolicies = []policy.CredentialPolicy{{Handle: "openai-key", SourcePath: src, EnvironmentVariable: "OPENAI_API_KEY", MaxBytes: 256}}
	if err := policy.Validate(f.pol); err != nil {
		t.Fatal(err)
	}
	polFile := filepath.Join(f.dir, "policy.json")
	writeProtected(t, polFile, policy.Canonical(f.pol), e.UID, e.GID)
	g := startGloved(t, e, f.args...)
	c := dial(t, g.socket)
	var statuses []string
	sessionStatus := func(id string) {
		t.Helper()
		raw, e := c.call("session_status", map[string]any{"session_id": id})
		if e != nil {
			t.Fatalf("session_status %s: %v\nlog: %s", id, e, g.log)
		}
		statuses = append(statuses, string(raw))
	}

	st := f.create(c, "s-env-1", withHandles(f.plan("envsum", "tiny"), "openai-key"))
	c.ok("start_session", map[string]any{"session_id": "s-env-1", "start_token": st}, nil)
	sessionStatus("s-env-1")
	// While the program runs: its bundle without config.json, and the
	// key in the environment of the program alone.
	var holders []string
	var bundleSeen, configGone bool
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && (len(holders) == 0 || !configGone); time.Sleep(20 * time.Millisecond) {
		dirs, _ := filepath.Glob(filepath.Join(f.matRoot, "bundle-s-env-1-*"))
		if len(dirs) == 1 {
			bundleSeen = true
			_, err := os.Lstat(filepath.Join(dirs[0], "config.json"))
			configGone = os.IsNotExist(err)
		}
		holders = environHolders(t, []byte(key))
	}
	if !bundleSeen || !configGone {
		t.Errorf("while the session runs: bundle seen %v, its config.json gone %v; want the bundle without config.json", bundleSeen, configGone)
	}
	if len(holders) != 1 || filepath.Base(holders[0]) != filepath.Base(f.exe) {
		t.Errorf("processes whose environment holds the key: %q, want the program (%s) alone", holders, filepath.Base(f.exe))
	}
	end := attach(t, c, "s-env-1")
	sessionStatus("s-env-1")
	sum := sha256.Sum256([]byte(key))
	if want := "env OPENAI_API_KEY set true sha256 " + hex.EncodeToString(sum[:]); !strings.Contains(end.output, want) || end.Status != 0 {
		t.Errorf("status %d, output %q; want 0 and %q\nlog: %s", end.Status, end.output, want, g.log)
	}

	pt := f.create(c, "s-env-plain", f.plan("plain", "tiny"))
	c.ok("start_session", map[string]any{"session_id": "s-env-plain", "start_token": pt}, nil)
	plain := attach(t, c, "s-env-plain")
	sessionStatus("s-env-plain")
	if !strings.Contains(plain.output, "env OPENAI_API_KEY set false") {
		t.Errorf("a session without the handle: %q, want the variable unset", plain.output)
	}
	g.stop(t)

	g2 := startGloved(t, e, f.args...)
	var page struct {
		Envelopes []receipt.Envelope `json:"envelopes"`
	}
	rawReceipts, rerr := dial(t, g2.socket).call("receipts_page", map[string]any{"after": 0, "limit": 10})
	if rerr != nil {
		t.Fatal(rerr)
	}
	g2.stop(t)
	if err := json.Unmarshal(rawReceipts, &page); err != nil {
		t.Fatal(err)
	}
	if err := receipt.Verify(f.key, testAnchor, page.Envelopes); err != nil {
		t.Errorf("receipts: %v", err)
	}
	for _, env := range page.Envelopes {
		cl := env.Body.CredentialLeases
		switch env.Body.SessionID {
		case "s-env-1":
			if len(cl) != 1 || cl[0].Handle != "openai-key" || cl[0].Version != 1 || cl[0].VersionAtEnd != 1 {
				t.Errorf("receipt of s-env-1: credential leases %+v, want openai-key at version 1..1", cl)
			}
		case "s-env-plain":
			if len(cl) != 0 {
				t.Errorf("receipt of s-env-plain: credential leases %+v, want none", cl)
			}
		}
	}
	ex := policy.Explain(f.pol)
	exJSON, err := json.Marshal(ex)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ex.Text(), "OPENAI_API_KEY") {
		t.Errorf("explain does not name the variable:\n%s", ex.Text())
	}
	polText, err := os.ReadFile(polFile)
	if err != nil {
		t.Fatal(err)
	}
	places := map[string]string{"gloved's log": g.log.String() + g2.log.String(), "statuses": strings.Join(statuses, "\n"),
		"receipts": string(rawReceipts), "explain": ex.Text(), "explain JSON": string(exJSON), "the policy": string(polText)}
	for _, s := range statuses {
		if !strings.Contains(s, "s-env") {
			t.Fatalf("a status that is not one: %s", s)
		}
	}
	// The source's path is in the policy and explain by design: only the
	// key is looked for there.
	for _, where := range []string{"the policy", "explain", "explain JSON"} {
		if strings.Contains(places[where], key) {
			t.Errorf("the key appears in %s", where)
		}
		delete(places, where)
	}
	checkNoSecret(t, f, places, [][]byte{[]byte(key)}, src)
}

// environHolders lists the executables of the host's processes whose
// environment holds secret (read as root from /proc/PID/environ).
func environHolders(t *testing.T, secret []byte) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ent := range ents {
		if _, err := strconv.Atoi(ent.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "environ"))
		if err != nil || !bytes.Contains(b, secret) {
			continue // gone, or a kernel thread
		}
		exe, _ := os.Readlink(filepath.Join("/proc", ent.Name(), "exe"))
		out = append(out, exe)
	}
	return out
}
