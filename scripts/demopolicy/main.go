// SPDX-License-Identifier: Apache-2.0

// Command demopolicy writes the session policy, plan and receipt key that
// `make demo` runs (scripts/demo.sh): DIR/policy.json, DIR/plan.json and
// DIR/key, for the workspace DIR/workspace, and one library bundle with a
// skill in DIR/bundles (the --library-bundle-root). The adapter command
// digest, the plan and the bundle are computed by the policy, plan and
// library packages, as an operator's tooling would.
package main

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/library"
	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
)

// script runs in the managed session, with dash's builtins only: the
// sandbox holds /usr/bin/dash, /usr/lib and /usr/lib64, read-only, a
// copy of the workspace, and (the template's runtime is codex, a
// native-skill runtime) a private home with the bundle's skill.
const script = `echo "hello from a managed session"
read line < /workspace/README && echo "the workspace copy says: $line"
echo "HOME=$HOME CODEX_HOME=$CODEX_HOME"
read line < /home/agent/.codex/skills/demo-skill/SKILL.md && echo "the private home's skill says: $line"
for f in /opt/glove/libraries/*; do echo "library bundle, read-only: $f"; done
(echo x > /usr/lib/pwned) 2>/dev/null && echo WROTE-USR-LIB || echo "write to /usr/lib: refused"
echo note > /workspace/note && echo "wrote /workspace/note (in the copy)"
exit 3`

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: demopolicy DIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	prof := policy.ResourceProfile{ProfileID: "demo", CPUTimeMs: 10_000, MemoryBytes: 256 << 20, Pids: 64,
		WallTimeMs: 30_000, DiskBytes: 16 << 20, TerminalOutputBytes: 1 << 20}
	t := policy.RuntimeTemplate{
		RuntimeTemplateID: "demo-shell", RuntimeID: "codex", SandboxBackend: policy.BackendLinuxProduction,
		AllowedPathAliases: []string{"workspace"}, AllowedProjectionDestinations: []string{"libraries"},
		Launch: policy.Launch{ExecutablePath: "/usr/bin/dash", Arguments: []string{"-c", script},
			Environment: []string{"LANG=C"}, ReadOnlyPaths: []string{"/usr/lib", "/usr/lib64"}},
	}
	t.AdapterCommandDigest = policy.AdapterDigest(&t)
	pol := &policy.Policy{SchemaVersion: 1, Revision: 1, MaxPlanTTLMs: 3_600_000,
		RuntimeTemplates: []policy.RuntimeTemplate{t},
		PathAliases: []policy.PathAlias{{Alias: "workspace", HostPath: filepath.Join(dir, "workspace"), TargetPath: "/workspace",
			MaxTTLSecs: 3600, Access: []policy.AccessTuple{{Access: policy.AccessEphemeralWrite, Materialization: policy.MaterializationCopy,
				CreatePolicy: policy.CreateMustExist, CleanupPolicy: policy.CleanupRemove, MaxBytes: 8 << 20}}}},
		LibraryProjectionDestinations: []policy.LibraryDestination{{Alias: "libraries", TargetPath: "/opt/glove/libraries"}},
		// The demo's session runs the small demo profile; the shipped
		// harness profile is there for a harness template an operator
		// adds (docs/policy.md, "Shipped profiles"). Sorted by id.
		ResourceProfiles: []policy.ResourceProfile{prof, policy.ProfileHarness},
	}
	bundles := filepath.Join(dir, "bundles")
	if err := os.Mkdir(bundles, 0o700); err != nil {
		fail(err)
	}
	digest, err := library.Write(bundles, &library.Manifest{Schema: library.Schema, Entries: []library.Entry{{
		Kind: library.KindSkill, Name: "demo-skill", Description: "what a skill bundle looks like",
		Files: []library.File{{Path: "SKILL.md", Content: []byte("demo-skill: projected from a verified bundle\n")}},
	}}})
	if err != nil {
		fail(err)
	}
	pl := &plan.Plan{SchemaVersion: 1, PolicyRevision: 1, ExpiresAtUnixMs: uint64(time.Now().Add(30 * time.Minute).UnixMilli()),
		RuntimeTemplateID: t.RuntimeTemplateID, RuntimeID: t.RuntimeID, SandboxBackend: t.SandboxBackend,
		AdapterCommandDigest: t.AdapterCommandDigest, ResourceProfile: prof,
		PathGrants: []plan.PathGrant{{Alias: "workspace", Access: policy.AccessEphemeralWrite, Materialization: policy.MaterializationCopy,
			CreatePolicy: policy.CreateMustExist, CleanupPolicy: policy.CleanupRemove, TTLSecs: 1800, MaxBytes: 8 << 20}},
		LibraryProjections: []plan.LibraryProjection{{Digest: digest, DestinationAlias: "libraries"}}}
	if err := policy.Validate(pol); err != nil {
		fail(err)
	}
	if err := plan.Validate(pl, pol, time.Now()); err != nil {
		fail(err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		fail(err)
	}
	for name, data := range map[string][]byte{"policy.json": policy.Canonical(pol), "plan.json": plan.Canonical(pl), "key": key} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			fail(err)
		}
	}
	fmt.Printf("policy revision 1, template demo-shell, bundle %s, plan_content_digest %s\n", digest, plan.ContentDigest(pl))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "demopolicy:", err)
	os.Exit(1)
}
