// SPDX-License-Identifier: Apache-2.0

package session_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/plan"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/testenv"
)

// harnessSource is a static program standing in for an agent harness: it
// reports what it was given and writes into its workspace.
const harnessSource = `package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

func main() {
	if n, ok := strings.CutPrefix(strings.Join(os.Args[1:], " "), "--fill="); ok {
		// Write into the workspace first, then try to write n bytes more.
		err := os.WriteFile("/workspace/out", []byte("written"), 0o644)
		fmt.Println("write:", err)
		size, _ := strconv.Atoi(n)
		fmt.Println("fill:", fill("/workspace/big", size))
		os.Remove("/workspace/big")
		os.Exit(7)
	}
	if n, ok := strings.CutPrefix(strings.Join(os.Args[1:], " "), "--scratch="); ok {
		// n bytes into each writable place in turn, kept: together they
		// must not pass the profile's disk_bytes.
		size, _ := strconv.Atoi(n)
		for _, p := range []string{"/tmp/a", "/workspace/b", "/home/agent/c"} {
			fmt.Println("scratch", p, fill(p, size))
		}
		os.Exit(7)
	}
	fmt.Printf("args=%q home=%s cwd=", os.Args[1:], os.Getenv("HOME"))
	wd, _ := os.Getwd()
	fmt.Println(wd)
	data, err := os.ReadFile("/workspace/in")
	fmt.Printf("in=%q err=%v\n", data, err)
	if err := os.WriteFile("/workspace/out", []byte("written"), 0o644); err != nil {
		fmt.Println("write:", err)
	}
	if _, err := os.ReadFile("/etc/passwd"); err == nil {
		fmt.Println("READ-HOST-ETC")
	}
	os.Exit(7)
}

func fill(name string, size int) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	chunk := bytes.Repeat([]byte("z"), 1<<20)
	for size > 0 {
		n, err := f.Write(chunk[:min(size, len(chunk))])
		size -= n
		if err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
`

// buildHarness builds the harness beneath the mounter's source root
// (testenv.BuildStatic), where the policy pins it as its executable.
func buildHarness(t *testing.T, e *testenv.Env) string {
	t.Helper()
	return testenv.BuildStatic(t, e, "harness", harnessSource)
}

// writeOwned writes data as a protected file of the service user (mode
// 0600, owned by it), as policy.ReadProtected requires of what it reads.
func writeOwned(t *testing.T, e *testenv.Env, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, e.UID, e.GID); err != nil {
		t.Fatal(err)
	}
}

// planFiles writes, for `glove run --policy --plan`, a policy whose one
// template runs the harness with args and whose one alias, "workspace",
// grants ws at /workspace with tuple, and a plan choosing that tuple. dir
// is a directory (mode 0755) for further files.
func planFiles(t *testing.T, e *testenv.Env, exe, ws string, args []string, tuple policy.AccessTuple) (dir, polFile, planFile string, pl *plan.Plan) {
	t.Helper()
	prof := policy.ResourceProfile{ProfileID: "tiny", CPUTimeMs: 5000, MemoryBytes: 256 << 20, Pids: 64,
		WallTimeMs: 20000, DiskBytes: 8 << 20, TerminalOutputBytes: 1 << 20}
	tmpl := policy.RuntimeTemplate{
		RuntimeTemplateID: "harness", RuntimeID: "codex", SandboxBackend: policy.BackendLinuxProduction,
		AllowedPathAliases: []string{"workspace"},
		Launch:             policy.Launch{ExecutablePath: exe, Arguments: args, Environment: []string{"TERM=dumb"}},
	}
	tmpl.AdapterCommandDigest = policy.AdapterDigest(&tmpl)
	pol := &policy.Policy{
		SchemaVersion: 1, Revision: 3, MaxPlanTTLMs: 600000,
		RuntimeTemplates: []policy.RuntimeTemplate{tmpl},
		PathAliases: []policy.PathAlias{{Alias: "workspace", HostPath: ws, TargetPath: "/workspace", MaxTTLSecs: 600,
			Access: []policy.AccessTuple{tuple}}},
		ResourceProfiles: []policy.ResourceProfile{prof},
	}
	if err := policy.Validate(pol); err != nil {
		t.Fatalf("test policy: %v", err)
	}
	pl = &plan.Plan{
		SchemaVersion: 1, PolicyRevision: 3, ExpiresAtUnixMs: uint64(time.Now().Add(5 * time.Minute).UnixMilli()),
		RuntimeTemplateID: "harness", RuntimeID: "codex", SandboxBackend: policy.BackendLinuxProduction,
		AdapterCommandDigest: tmpl.AdapterCommandDigest, ResourceProfile: prof,
		PathGrants: []plan.PathGrant{{Alias: "workspace", Access: tuple.Access, Materialization: tuple.Materialization,
			CreatePolicy: tuple.CreatePolicy, CleanupPolicy: tuple.CleanupPolicy, TTLSecs: 300, MaxBytes: tuple.MaxBytes}},
	}
	if err := plan.Validate(pl, pol, time.Now()); err != nil {
		t.Fatalf("test plan: %v", err)
	}
	dir, err := os.MkdirTemp(e.Base, "plan-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	polFile, planFile = filepath.Join(dir, "policy.json"), filepath.Join(dir, "plan.json")
	writeOwned(t, e, polFile, policy.Canonical(pol))
	writeOwned(t, e, planFile, plan.Canonical(pl))
	return dir, polFile, planFile, pl
}

func TestGloveRunPolicyPlan(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	exe := buildHarness(t, e)
	ws := workspace(t, e, map[string]string{"in": "granted tree"})
	dir, polFile, planFile, pl := planFiles(t, e, exe, ws, []string{"--flag", "x"}, policy.AccessTuple{Access: policy.AccessEphemeralWrite,
		Materialization: policy.MaterializationCopy, CreatePolicy: policy.CreateMustExist, CleanupPolicy: policy.CleanupRemove, MaxBytes: 4 << 20})
	keyFile, key, rcpt := receiptFiles(t, e, dir)

	stdout, stderr, code := gloveRun(t, e, ws, "", "--policy", polFile, "--plan", planFile, "--receipt", rcpt, "--receipt-key", keyFile)
	if code != 7 {
		t.Fatalf("exit %d, want the harness's 7\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	// codex is a native-skill runtime: HOME is its private home.
	want := `args=["--flag" "x"] home=/home/agent cwd=/workspace` + "\n" + `in="granted tree" err=<nil>` + "\n"
	if stdout != want {
		t.Errorf("stdout %q\nwant   %q", stdout, want)
	}
	if _, err := os.Stat(filepath.Join(ws, "out")); err == nil {
		t.Error("the ephemeral copy's write reached the host")
	}
	env := readReceipt(t, rcpt, key)
	b := env.Body
	if b.Termination != "exited" || b.ExitCode != 7 || b.PolicyRevision != 3 || b.PlanContentDigest != plan.ContentDigest(pl) ||
		b.Usage.TerminalOutputBytes != uint64(len(want)) || b.Usage.WallTimeMS == 0 {
		t.Errorf("receipt body %+v", b)
	}
	// A tampered receipt does not verify.
	env.Body.ExitCode = 0
	if err := receipt.Verify(key, strings.Repeat("0", 64), []receipt.Envelope{env}); err == nil {
		t.Error("a changed exit code still verifies")
	}
	// A second run never overwrites a receipt.
	if _, stderr, code := gloveRun(t, e, ws, "", "--policy", polFile, "--plan", planFile, "--receipt", rcpt, "--receipt-key", keyFile); code != 7 || !strings.Contains(stderr, "receipt") {
		t.Errorf("second run over an existing receipt: exit %d, stderr %q", code, stderr)
	}
}

// TestDiskBytesIsSessionTotal: disk_bytes bounds what /tmp, the private
// home and the writable workspace copy hold together (issue 17, item 10).
// The profile's disk is 8 MiB and the copy's max_bytes 4 MiB: 3 MiB into
// /tmp and 3 MiB into the copy fit, 3 MiB more into the home does not
// (when each was a tmpfs of its own, all three fit: 9 MiB). Judged from
// outside by the receipt's disk_bytes too.
func TestDiskBytesIsSessionTotal(t *testing.T) {
	e := testenv.Get(t)
	e.ConfigureForSessions(t)
	testenv.CheckLeaks(t, e.UID)
	exe := buildHarness(t, e)
	ws := workspace(t, e, map[string]string{"in": "granted tree"})
	dir, polFile, planFile, _ := planFiles(t, e, exe, ws, []string{"--scratch=" + strconv.Itoa(3<<20)}, policy.AccessTuple{Access: policy.AccessEphemeralWrite,
		Materialization: policy.MaterializationCopy, CreatePolicy: policy.CreateMustExist, CleanupPolicy: policy.CleanupRemove, MaxBytes: 4 << 20})
	keyFile, key, rcpt := receiptFiles(t, e, dir)
	stdout, stderr, code := gloveRun(t, e, ws, "", "--policy", polFile, "--plan", planFile, "--receipt", rcpt, "--receipt-key", keyFile)
	if code != 7 {
		t.Fatalf("exit %d, want the harness's 7\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	want := "scratch /tmp/a <nil>\nscratch /workspace/b <nil>\nscratch /home/agent/c write /home/agent/c: no space left on device\n"
	if stdout != want {
		t.Errorf("stdout %q\nwant   %q", stdout, want)
	}
	env := readReceipt(t, rcpt, key)
	if d := env.Body.Usage.DiskBytes; d < 6<<20 || d > 8<<20 {
		t.Errorf("receipt disk_bytes %d, want between the 6 MiB written and the profile's 8 MiB", d)
	}
}

// receiptFiles makes, in dir, a receipt key the service user owns and a
// directory for the receipt glove run writes: the key's path, the key,
// and the receipt's path.
func receiptFiles(t *testing.T, e *testenv.Env, dir string) (keyFile string, key []byte, rcpt string) {
	t.Helper()
	keyFile, key = filepath.Join(dir, "key"), []byte(strings.Repeat("k", 32))
	writeOwned(t, e, keyFile, key)
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(out, e.UID, e.GID); err != nil {
		t.Fatal(err)
	}
	return keyFile, key, filepath.Join(out, "receipt.json")
}

// readReceipt reads the receipt glove run wrote and checks it verifies
// with key from the zero anchor.
func readReceipt(t *testing.T, rcpt string, key []byte) receipt.Envelope {
	t.Helper()
	data, err := os.ReadFile(rcpt)
	if err != nil {
		t.Fatalf("no receipt: %v", err)
	}
	var env receipt.Envelope
	if err := json.Unmarshal(data, &env); err != nil {
		t.Fatal(err)
	}
	if err := receipt.Verify(key, strings.Repeat("0", 64), []receipt.Envelope{env}); err != nil {
		t.Errorf("receipt does not verify: %v", err)
	}
	return env
}
