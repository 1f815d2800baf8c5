// SPDX-License-Identifier: Apache-2.0

package stage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/testenv"
)

// TestStageEntryPoint: which entry points are staged, and what a refusal
// says instead (issue 32: a script entry point was staged alone and
// failed at launch with "execve: no such file or directory"; a package
// without one gave no hint where its native program is).
func TestStageEntryPoint(t *testing.T) {
	base := testBase(t)
	dir := base + "/runtimes"
	mkdir(t, dir, 0o755)
	arch := npmArch()
	other := "arm64"
	if arch == "arm64" {
		other = "x64"
	}
	nm := base + "/proj/node_modules"
	// An npm install of a wrapper package and its platform packages.
	codexPkg := nm + "/@openai/codex"
	write(t, codexPkg+"/package.json", `{"name":"@openai/codex","bin":{"codex":"bin/codex.js"},
		"optionalDependencies":{"@openai/codex-linux-`+other+`":"1","@openai/codex-linux-`+arch+`":"npm:@openai/codex@1-linux-`+arch+`","@openai/codex-darwin-arm64":"1"}}`, 0o644)
	write(t, codexPkg+"/bin/codex.js", "#!/usr/bin/env node\nimport x from 'y';\n", 0o755)
	codexPlat := nm + "/@openai/codex-linux-" + arch
	vendored := "vendor/x-unknown-linux-musl/bin/codex"
	write(t, codexPlat+"/package.json", `{"name":"@openai/codex"}`, 0o644)
	write(t, codexPlat+"/"+vendored, testenv.FakeELF("codex"), 0o755)
	write(t, codexPlat+"/vendor/x-unknown-linux-musl/bin/codex-code-mode-host", testenv.FakeELF("host"), 0o755)
	write(t, codexPlat+"/vendor/x-unknown-linux-musl/codex-path/rg", testenv.FakeELF("rg"), 0o755)
	mkdir(t, nm+"/.bin", 0o755)
	if err := os.Symlink("../@openai/codex/bin/codex.js", nm+"/.bin/codex"); err != nil {
		t.Fatal(err)
	}
	// claude-code: a plain and a musl platform package, both installed.
	claudePkg := nm + "/@anthropic-ai/claude-code"
	write(t, claudePkg+"/package.json", `{"optionalDependencies":{"@anthropic-ai/claude-code-linux-`+arch+`-musl":"1","@anthropic-ai/claude-code-linux-`+arch+`":"1"}}`, 0o644)
	write(t, claudePkg+"/bin/claude.exe", testenv.FakeELF("stub"), 0o755)
	for _, p := range []string{"", "-musl"} {
		write(t, nm+"/@anthropic-ai/claude-code-linux-"+arch+p+"/package.json", "{}", 0o644)
		write(t, nm+"/@anthropic-ai/claude-code-linux-"+arch+p+"/claude", testenv.FakeELF("claude"), 0o755)
	}
	// A package whose platform package is not installed.
	write(t, base+"/lone/node_modules/pi/package.json", `{"optionalDependencies":{"pi-linux-`+arch+`":"1"}}`, 0o644)
	write(t, base+"/lone/node_modules/pi/bin/pi", "#!/usr/bin/env node\n", 0o755)
	// Scripts and files outside any npm package.
	write(t, base+"/plain/bin/codex", "#!/bin/sh\nexec node codex.js\n", 0o755)
	write(t, base+"/text/bin/codex", "codex\n", 0o755)
	otherELF := []byte(testenv.FakeELF("x"))
	otherELF[18] ^= 0x01 // another e_machine
	write(t, base+"/foreign/bin/codex", string(otherELF), 0o755)
	write(t, base+"/twotargets/vendor/a/bin/codex", testenv.FakeELF("a"), 0o755)
	write(t, base+"/twotargets/vendor/b/bin/codex", testenv.FakeELF("b"), 0o755)
	// A real dynamically linked program of the host, for its interpreter.
	data, err := os.ReadFile("/usr/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	write(t, base+"/dynamic/bin/codex", string(data), 0o755)

	platHint := "the native binary is in the platform package @openai/codex-linux-" + arch + " (" + codexPlat + "/" + vendored + "): stage that (--source " + codexPlat + ")"
	for _, c := range []struct {
		name, runtime, source string
		want                  string // error substring; "" for success
		entry, interp         string
	}{
		{"npm bin link to a node script", "codex", nm + "/.bin/codex",
			"entry point " + codexPkg + "/bin/codex.js is a script (#!/usr/bin/env node) whose interpreter is not in the stage, and Glove stages no interpreter; " + platHint, "", ""},
		{"wrapper package", "codex", codexPkg,
			"no entry point bin/codex or codex in " + codexPkg + "; " + platHint, "", ""},
		{"platform package (vendor/<target>/bin)", "codex", codexPlat, "", vendored, ""},
		{"claude-code wrapper prefers the plain platform package", "claude-code", claudePkg,
			"the native binary is in the platform package @anthropic-ai/claude-code-linux-" + arch + " (" + nm + "/@anthropic-ai/claude-code-linux-" + arch + "/claude): stage that", "", ""},
		{"claude-code platform package", "claude-code", nm + "/@anthropic-ai/claude-code-linux-" + arch, "", "claude", ""},
		{"platform package not installed", "pi", base + "/lone/node_modules/pi",
			"the native binary is in the platform package pi-linux-" + arch + ", which is not installed beside it", "", ""},
		{"script outside a package", "codex", base + "/plain",
			"is a script (#!/bin/sh) whose interpreter is not in the stage, and Glove stages no interpreter: stage the native executable, or launch the interpreter as a pinned executable_path", "", ""},
		{"neither ELF nor script", "codex", base + "/text", "entry point bin/codex in " + base + "/text is neither an ELF executable nor a script", "", ""},
		{"ELF of another machine", "codex", base + "/foreign", "an ELF executable for", "", ""},
		{"two vendored targets", "codex", base + "/twotargets", "2 entry points vendor/a/bin/codex, vendor/b/bin/codex", "", ""},
		{"dynamic ELF reports its interpreter", "codex", base + "/dynamic", "", "bin/codex", "/ld-"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep, err := Stage(Options{Runtime: c.runtime, Source: c.source, Directory: dir, DryRun: true})
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("Stage = %+v, %v\nwant an error containing %q", rep, err, c.want)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Fatalf("error is not one line: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rel := strings.TrimPrefix(rep.EntryPoint, rep.StagedPath+"/"); rel != c.entry || rep.SearchPath != filepath.Dir(rep.EntryPoint) {
				t.Fatalf("entry point %s, search path %s; want %s", rep.EntryPoint, rep.SearchPath, c.entry)
			}
			if (c.interp == "") != (rep.Interpreter == "") || !strings.Contains(rep.Interpreter, c.interp) {
				t.Fatalf("interpreter %q, want one containing %q", rep.Interpreter, c.interp)
			}
		})
	}
}
