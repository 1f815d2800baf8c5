// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"github.com/glove-sandbox/glove/testenv"
	"os"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
)

func detectBase(t *testing.T) string { return testenv.ProtectedDir(t, "detect") }

func TestPolicyDetect(t *testing.T) {
	base := detectBase(t)
	bad, good := base+"/bad", base+"/good"
	for dir, mode := range map[string]os.FileMode{bad: 0o775, good: 0o755} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
	}
	const content = "#!/bin/sh\necho codex\n"
	for _, p := range []string{bad + "/codex", good + "/codex", bad + "/pi"} {
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sum := sha256.Sum256([]byte(content))
	digest := hex.EncodeToString(sum[:])

	code, out, errs := run("policy", "detect", "--search-path", bad, "--search-path", good)
	if code != ExitOK || errs != "" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	rts := policy.DiscoveryRuntimes()
	if len(lines) != len(rts)+1 || !strings.HasPrefix(lines[len(rts)], "source roots: every path a launch binds lies beneath") {
		t.Fatalf("%d lines for %d runtimes and the source roots:\n%s", len(lines), len(rts), out)
	}
	for i, rt := range rts {
		if !strings.HasPrefix(lines[i], rt+": ") {
			t.Errorf("line %d %q does not start with %q", i, lines[i], rt)
		}
	}
	byRuntime := map[string]string{}
	for i, rt := range rts {
		byRuntime[rt] = lines[i]
	}
	if l := byRuntime["codex"]; !strings.Contains(l, "found "+good+"/codex sha256:"+digest) ||
		!strings.Contains(l, bad+": "+bad+": writable by group or others (mode 0775)") {
		t.Errorf("codex line %q", l)
	}
	if l := byRuntime["pi"]; !strings.Contains(l, "pi: not installed (pi)") || !strings.Contains(l, "writable by group or others") ||
		!strings.Contains(l, good+`: no entry named "pi"`) {
		t.Errorf("pi line %q", l)
	}

	code, out, errs = run("policy", "detect", "--json", "--search-path", bad, "--search-path", good)
	if code != ExitOK || errs != "" {
		t.Fatalf("json: exit %d, stderr %q", code, errs)
	}
	var rep struct {
		SearchPaths []string `json:"search_paths"`
		Runtimes    []struct {
			Runtime    string `json:"runtime"`
			Executable string `json:"executable"`
			Installed  bool   `json:"installed"`
			Path       string `json:"path"`
			Identity   struct {
				Ino    uint64 `json:"ino"`
				Size   int64  `json:"size"`
				SHA256 string `json:"sha256"`
			} `json:"identity"`
			Rejected []struct {
				Dir    string `json:"dir"`
				Reason string `json:"reason"`
			} `json:"rejected"`
		} `json:"runtimes"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(rep.SearchPaths) != 2 || rep.SearchPaths[0] != bad || rep.SearchPaths[1] != good || len(rep.Runtimes) != len(rts) {
		t.Fatalf("report %s", out)
	}
	for i, r := range rep.Runtimes {
		if r.Runtime != rts[i] {
			t.Errorf("runtime %d = %q, want %q", i, r.Runtime, rts[i])
		}
		exe, _ := policy.DiscoveryExecutable(r.Runtime)
		if r.Executable != exe {
			t.Errorf("%s: executable %q, want %q", r.Runtime, r.Executable, exe)
		}
		if r.Runtime == "codex" {
			if !r.Installed || r.Path != good+"/codex" || r.Identity.SHA256 != digest || r.Identity.Size != int64(len(content)) || r.Identity.Ino == 0 {
				t.Errorf("codex: %+v", r)
			}
			if len(r.Rejected) != 1 || r.Rejected[0].Dir != bad {
				t.Errorf("codex rejected %+v", r.Rejected)
			}
			continue
		}
		if r.Installed || r.Path != "" || len(r.Rejected) != 2 {
			t.Errorf("%s: %+v", r.Runtime, r)
		}
	}
}

func TestPolicyDetectUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--search-path is required"},
		{[]string{"--json"}, "--search-path is required"},
		{[]string{"--search-path", "relative"}, "not an absolute canonical directory"},
		{[]string{"--search-path", "/usr/bin/"}, "not an absolute canonical directory"},
		{[]string{"--search-path", "/usr/bin", "extra"}, `unexpected argument "extra"`},
		{[]string{"--bogus"}, "flag provided but not defined"},
	} {
		var out, errb bytes.Buffer
		code := Run(append([]string{"policy", "detect"}, c.args...), &out, &errb)
		if code != ExitUsage || out.Len() != 0 {
			t.Errorf("%q: exit %d, stdout %q", c.args, code, &out)
		}
		errs := errb.String()
		if !strings.HasPrefix(errs, "glove: ") || !strings.Contains(errs, c.want) || !strings.HasSuffix(errs, usagePolicyDetect+"\n") {
			t.Errorf("%q: stderr %q, want a \"glove: \" line with %q and the usage line", c.args, errs, c.want)
		}
	}
	var out, errb bytes.Buffer
	Run([]string{"help"}, &out, &errb)
	if !strings.Contains(out.String(), "glove policy detect --search-path DIR") {
		t.Fatalf("usage lacks glove policy detect:\n%s", out.String())
	}
}
