// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"github.com/glove-sandbox/glove/testenv"
	"os"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
)

func generateBase(t *testing.T) string { return testenv.ProtectedDir(t, "generate") }

// mkdirMode creates dir with exactly mode (no umask).
func mkdirMode(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

const generateScript = "#!/bin/sh\necho adapter\n"

func writeScript(t *testing.T, p string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(generateScript), 0o755); err != nil {
		t.Fatal(err)
	}
}

// generatedPolicy is a full policy around one generated entry, spliced
// in as printed, with the path aliases and destinations the test's
// --alias and --destination flags name.
func generatedPolicy(entry string) string {
	return `{
  "schema_version": 1,
  "revision": 1,
  "max_plan_ttl_ms": 120000,
  "runtime_templates": [` + entry + `],
  "path_aliases": [
    {
      "alias": "cache",
      "host_path": "/srv/glove-generate-test/cache",
      "target_path": "/cache",
      "max_ttl_secs": 120,
      "access": [{"access": "read_only", "materialization": "bind", "create_policy": "must_exist", "cleanup_policy": "none", "max_bytes": 0}]
    },
    {
      "alias": "workspace",
      "host_path": "/srv/glove-generate-test/work",
      "target_path": "/workspace",
      "max_ttl_secs": 120,
      "access": [{"access": "ephemeral_write", "materialization": "copy", "create_policy": "empty_directory", "cleanup_policy": "remove", "max_bytes": 2097152}]
    }
  ],
  "library_projection_destinations": [{"alias": "libraries", "target_path": "/opt/libraries"}],
  "resource_profiles": [
    {"profile_id": "small", "cpu_time_ms": 1000, "memory_bytes": 67108864, "pids": 16, "wall_time_ms": 2000, "disk_bytes": 2097152, "terminal_output_bytes": 1048576}
  ],
  "egress_policy_ids": [],
  "tool_policy_ids": [],
  "secret_handles": []
}
`
}

// roundTrip validates the generated entry inside a full policy through
// the command line, then the same entry with one byte of an argument
// changed, which must fail on the digest.
func roundTrip(t *testing.T, entry string) {
	t.Helper()
	code, out, errs := run("policy", "validate", "--file", writeProtected(t, "policy.json", generatedPolicy(entry)))
	if code != ExitOK || errs != "" || !strings.HasPrefix(out, "valid: ") {
		t.Fatalf("validate: exit %d, stdout %q, stderr %q\nentry:\n%s", code, out, errs, entry)
	}
	if !strings.Contains(entry, `"--version"`) {
		t.Fatalf("entry lacks the argument --version:\n%s", entry)
	}
	changed := strings.Replace(entry, `"--version"`, `"--versioN"`, 1)
	code, _, errs = run("policy", "validate", "--file", writeProtected(t, "changed.json", generatedPolicy(changed)))
	if code != ExitUsage {
		t.Fatalf("changed argument: exit %d, stderr %q", code, errs)
	}
	oneLine(t, errs, "/runtime_templates/0/adapter_command_digest", "does not match the launch fields")
}

// commonFlags are given out of canonical order on purpose.
var commonFlags = []string{
	"--arg", "--version", "--arg", "", "--arg", "-a",
	"--env", "TERM=xterm", "--env", "PATH=/usr/bin:/bin", "--env", "LANG=C.UTF-8=x",
	"--read-only-path", "/opt/glove-generate-test/b", "--read-only-path", "/opt/glove-generate-test/a",
	"--alias", "workspace", "--alias", "cache",
	"--destination", "libraries",
}

func decodeEntry(t *testing.T, out string) policy.RuntimeTemplate {
	t.Helper()
	if !strings.HasSuffix(out, "}\n") || !strings.Contains(out, "\n  \"") {
		t.Fatalf("stdout is not one indented JSON object ending in a newline: %q", out)
	}
	var tpl policy.RuntimeTemplate
	if err := json.Unmarshal([]byte(out), &tpl, json.RejectUnknownMembers(true)); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	return tpl
}

func checkCommon(t *testing.T, tpl policy.RuntimeTemplate) {
	t.Helper()
	l := tpl.Launch
	eq := func(name string, got []string, want ...string) {
		if strings.Join(got, "\x00") != strings.Join(want, "\x00") || len(got) != len(want) {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	eq("arguments", l.Arguments, "--version", "", "-a")
	eq("environment", l.Environment, "LANG=C.UTF-8=x", "PATH=/usr/bin:/bin", "TERM=xterm")
	eq("read_only_paths", l.ReadOnlyPaths, "/opt/glove-generate-test/a", "/opt/glove-generate-test/b")
	eq("allowed_path_aliases", tpl.AllowedPathAliases, "cache", "workspace")
	eq("allowed_projection_destinations", tpl.AllowedProjectionDestinations, "libraries")
	if tpl.SandboxBackend != policy.BackendLinuxProduction {
		t.Errorf("sandbox_backend %q", tpl.SandboxBackend)
	}
	if want := policy.AdapterDigest(&tpl); tpl.AdapterCommandDigest != want {
		t.Errorf("adapter_command_digest %s, want %s", tpl.AdapterCommandDigest, want)
	}
}

func TestGenerateExecutable(t *testing.T) {
	base := generateBase(t)
	bin := base + "/bin"
	mkdirMode(t, bin, 0o755)
	exe := bin + "/adapter"
	writeScript(t, exe)
	if err := os.Symlink("adapter", bin+"/link"); err != nil {
		t.Fatal(err)
	}

	args := append([]string{"policy", "generate", "--runtime", "cloudflare-os", "--template-id", "cf-safe", "--executable", exe}, commonFlags...)
	code, out, errs := run(args...)
	if code != ExitOK {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	oneLine(t, errs, "note: source roots: every path a launch binds lies beneath glove-mounter's source root")
	tpl := decodeEntry(t, out)
	if tpl.RuntimeTemplateID != "cf-safe" || tpl.RuntimeID != "cloudflare-os" || tpl.Launch.ExecutablePath != exe ||
		tpl.Launch.RuntimeDiscovery != "" || len(tpl.Launch.ExecutableSearchPaths) != 0 {
		t.Fatalf("entry %+v", tpl)
	}
	if strings.Contains(out, "runtime_discovery") || strings.Contains(out, "executable_search_paths") {
		t.Errorf("pinned entry names discovery members:\n%s", out)
	}
	checkCommon(t, tpl)
	roundTrip(t, out)

	// A symbolic link is resolved: the entry pins the target, and a note
	// says so on stderr.
	args = append([]string{"policy", "generate", "--runtime", "cloudflare-os", "--template-id", "cf-safe", "--executable", bin + "/link"}, commonFlags...)
	code, out2, errs := run(args...)
	if code != ExitOK {
		t.Fatalf("link: exit %d, stderr %q", code, errs)
	}
	oneLine(t, errs, "note:", bin+"/link resolves to "+exe)
	if got := decodeEntry(t, out2).Launch.ExecutablePath; got != exe {
		t.Fatalf("link: executable_path %q, want the target %q", got, exe)
	}
	if out2 != out {
		t.Fatalf("link: entry differs from the target's:\n%s\n%s", out2, out)
	}
}

func TestGenerateDiscovery(t *testing.T) {
	base := generateBase(t)
	empty, good := base+"/empty", base+"/good"
	mkdirMode(t, empty, 0o755)
	mkdirMode(t, good, 0o755)
	writeScript(t, good+"/codex")
	sum := sha256.Sum256([]byte(generateScript))

	args := append([]string{"policy", "generate", "--runtime", "codex", "--template-id", "codex-safe",
		"--search-path", good, "--search-path", empty}, commonFlags...)
	code, out, errs := run(args...)
	if code != ExitOK {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	oneLine(t, errs, "note: codex found "+good+"/codex", "sha256="+hex.EncodeToString(sum[:]))
	tpl := decodeEntry(t, out)
	l := tpl.Launch
	if tpl.RuntimeID != "codex" || l.RuntimeDiscovery != "codex" || l.ExecutablePath != "" ||
		len(l.ExecutableSearchPaths) != 2 || l.ExecutableSearchPaths[0] != good || l.ExecutableSearchPaths[1] != empty {
		t.Fatalf("entry %+v", tpl)
	}
	if strings.Contains(out, "executable_path") {
		t.Errorf("discovery entry names executable_path:\n%s", out)
	}
	checkCommon(t, tpl)
	roundTrip(t, out)

	// A search directory reached through a symbolic link is refused
	// with its canonical form, not rewritten.
	if err := os.Symlink("good", base+"/link"); err != nil {
		t.Fatal(err)
	}
	code, out, errs = run("policy", "generate", "--runtime", "codex", "--template-id", "codex-safe", "--search-path", base+"/link")
	if code != ExitUsage || out != "" {
		t.Fatalf("link: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	oneLine(t, errs, "glove: policy generate: ", `its canonical form is "`+good+`"`)

	// Search order is kept and the directories passed over are named.
	code, _, errs = run("policy", "generate", "--runtime", "codex", "--template-id", "codex-safe",
		"--search-path", empty, "--search-path", good)
	if code != ExitOK {
		t.Fatalf("reversed: exit %d, stderr %q", code, errs)
	}
	oneLine(t, errs, "note: codex found "+good+"/codex", "passed over: "+empty+`: no entry named "codex"`)
}

func TestGenerateDiscoveryFailure(t *testing.T) {
	base := generateBase(t)
	bad := base + "/bad"
	mkdirMode(t, bad, 0o775)
	writeScript(t, bad+"/codex")
	code, out, errs := run("policy", "generate", "--runtime", "codex", "--template-id", "codex-safe", "--search-path", bad)
	if code != ExitFail || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	oneLine(t, errs, "glove: policy generate: ", "not installed", bad+": writable by group or others (mode 0775)")
}

func TestGenerateUsage(t *testing.T) {
	base := "/usr/bin" // exists on any Linux host; the faults below come before it is searched
	sh, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pin := []string{"--runtime", "x", "--template-id", "x", "--executable", sh}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--runtime is required"},
		{[]string{"--runtime", "codex"}, "--template-id is required"},
		{[]string{"--runtime", "codex", "--template-id", "c"}, "one of --executable or --search-path is required"},
		{[]string{"--runtime", "codex", "--template-id", "c", "--executable", sh, "--search-path", base}, "exclusive"},
		{[]string{"--runtime", "x", "--template-id", "x", "--executable", "bin/sh"}, `--executable "bin/sh" is not absolute`},
		{[]string{"--runtime", "codex", "--template-id", "c", "--search-path", "usr/bin"}, `--search-path "usr/bin" is not absolute`},
		{[]string{"--runtime", "codex", "--template-id", "c", "--search-path", "/usr//bin/"}, `its canonical form is "/usr/bin"`},
		{[]string{"--runtime", "codex", "--template-id", "c", "--search-path", "/usr/../usr/bin"}, `its canonical form is "/usr/bin"`},
		{[]string{"--runtime", "codex", "--template-id", "c", "--search-path", base, "--search-path", base}, "given twice"},
		{[]string{"--runtime", "cloudflare-os", "--template-id", "c", "--search-path", base}, "not a runtime_discovery runtime"},
		{[]string{"--runtime", "Codex", "--template-id", "c", "--executable", sh}, `--runtime "Codex" is not an identifier`},
		{[]string{"--runtime", "x", "--template-id", "c/d", "--executable", sh}, `--template-id "c/d" is not an identifier`},
		{append(pin, "--alias", "w", "--alias", "w"), `--alias "w" is given twice`},
		{append(pin, "--alias", "W"), `--alias "W" is not an identifier`},
		{append(pin, "--destination", "d", "--destination", "d"), `--destination "d" is given twice`},
		{append(pin, "--env", "NOVALUE"), `--env "NOVALUE" is not NAME=VALUE`},
		{append(pin, "--env", "1X=y"), `--env "1X=y" is not NAME=VALUE`},
		{append(pin, "--env", "A=1", "--env", "A=2"), "--env A is given twice"},
		{append(pin, "--env", "HOME=/root"), "/runtime_templates/0/launch/environment/0: HOME is set by Glove itself"},
		{append(pin, "--read-only-path", "/opt/x/"), `--read-only-path "/opt/x/" is not canonical (it cleans to "/opt/x")`},
		{append(pin, "--read-only-path", "/opt", "--read-only-path", "/opt/x"), `"/opt/x" lies beneath read-only path "/opt"`},
		{append(pin, "--read-only-path", "/proc/self"), "kernel interface"},
		{append(pin, "--backend", "macos"), `/runtime_templates/0/sandbox_backend: "macos" is not supported`},
		{append(pin, "--arg", "a\x00b"), "/runtime_templates/0/launch/arguments/0: contains a NUL byte"},
		{[]string{"--runtime", "x", "--template-id", "x", "--executable", "/usr"}, "is not a regular file"},
		{[]string{"--runtime", "x", "--template-id", "x", "--executable", "/nonexistent/glove-generate"}, "no such file or directory"},
		{[]string{"--bogus"}, "flag provided but not defined"},
		{append(pin, "extra"), `unexpected argument "extra"`},
	} {
		code, out, errs := run(append([]string{"policy", "generate"}, c.args...)...)
		if code != ExitUsage || out != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", c.args, code, out, errs)
			continue
		}
		first, _, _ := strings.Cut(errs, "\n")
		if !strings.HasPrefix(errs, "glove: policy generate: ") || !strings.Contains(first, c.want) {
			t.Errorf("%q: stderr %q, want a \"glove: policy generate: \" line with %q", c.args, errs, c.want)
		}
	}
	code, _, errs := run("policy")
	if code != ExitUsage || !strings.Contains(errs, usagePolicyGenerate) {
		t.Fatalf("policy usage lacks generate: %q", errs)
	}
}
