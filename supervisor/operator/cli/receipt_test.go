// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/state/receipt"
)

func TestReceiptVerify(t *testing.T) {
	dir := t.TempDir()
	key := []byte(strings.Repeat("s", 32))
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	anchor := strings.Repeat("a", 64)
	digest := strings.Repeat("d", 64)
	body := func(id string, code int) receipt.Body {
		return receipt.Body{SessionID: id, ControllerPlanDigest: digest, PlanContentDigest: digest, PolicyRevision: 1,
			Termination: "exited", ExitCode: code, StartedAtMS: 1_800_000_000_000, EndedAtMS: 1_800_000_000_050}
	}
	e1, err := receipt.Seal(key, 1, anchor, body("s1", 0))
	if err != nil {
		t.Fatal(err)
	}
	e2, err := receipt.Seal(key, 2, e1.EnvelopeMAC, body("s2", 3))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, v any) string {
		b, _ := json.Marshal(v)
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tampered := e2
	tampered.Body.ExitCode = 0
	cases := []struct {
		name string
		args []string
		code int
		out  string
	}{
		{"one envelope", []string{"verify", "--key", keyFile, "--anchor", anchor, write("one", e1)}, ExitOK, "verified: 1 receipt(s)"},
		{"a page", []string{"verify", "--key", keyFile, "--anchor", anchor, write("page", []receipt.Envelope{e1, e2})}, ExitOK, "verified: 2 receipt(s)"},
		{"tampered", []string{"verify", "--key", keyFile, "--anchor", anchor, write("bad", []receipt.Envelope{e1, tampered})}, ExitFail, ""},
		{"wrong anchor", []string{"verify", "--key", keyFile, write("one2", e1)}, ExitFail, ""},
		{"out of order", []string{"verify", "--key", keyFile, "--anchor", anchor, write("rev", []receipt.Envelope{e2, e1})}, ExitFail, ""},
		{"not json", []string{"verify", "--key", keyFile, "--anchor", anchor, write("junk", "x")}, ExitFail, ""},
		{"no key", []string{"verify", write("one3", e1)}, ExitUsage, ""},
		{"bad anchor", []string{"verify", "--key", keyFile, "--anchor", "xyz", write("one4", e1)}, ExitUsage, ""},
		{"no subcommand", []string{}, ExitUsage, ""},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		if got := Run(append([]string{"receipt"}, c.args...), &out, &errb); got != c.code {
			t.Errorf("%s: exit %d, want %d (stderr %s)", c.name, got, c.code, &errb)
		}
		if c.out != "" && !strings.Contains(out.String(), c.out) {
			t.Errorf("%s: output %q lacks %q", c.name, &out, c.out)
		}
		if c.code != ExitOK && strings.Count(strings.TrimSpace(errb.String()), "\n") > 1 {
			t.Errorf("%s: error is not one line plus usage: %q", c.name, &errb)
		}
	}
}
