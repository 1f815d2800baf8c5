// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/supervisor/state/store"
)

// setupDir is a configuration directory as setup service requires one:
// the running user's, writable by nobody else.
func setupDir(t *testing.T) string {
	t.Helper()
	d := filepath.Join(t.TempDir(), "etc-glove")
	mkdirMode(t, d, 0o755)
	return d
}

// selfOptions runs setupService with the running user as the service
// user (fchown to oneself needs no privilege), so that everything but
// the root check and other owners runs without root.
func selfOptions(dir string) setupOptions {
	return setupOptions{configDir: dir, storeDir: filepath.Join(dir, "store"), uid: os.Geteuid(), gid: os.Getegid(),
		user: "self", rand: rand.Reader,
		template: &generateInput{runtime: "sh", executable: "/bin/sh", templateID: "sh", backend: policy.BackendLinuxProduction,
			arguments: []string{"-c", "echo hi"}, readOnly: []string{"/usr/lib"}}}
}

func runSetup(t *testing.T, o setupOptions) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := setupService(o, &out, &errb)
	return out.String(), errb.String(), err
}

type fileState struct {
	data  []byte
	ino   uint64
	mtime syscall.Timespec
}

func stateOf(t *testing.T, p string) fileState {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return fileState{data, st.Ino, st.Mtim}
}

func setupPaths(dir string) (pol, key, env string) {
	return filepath.Join(dir, setupPolicyName), filepath.Join(dir, setupKeyName), filepath.Join(dir, setupEnvName)
}

// TestSetupStarterPolicy: the starter policy is the guided shape (a
// ten-minute plan lifetime, a two-minute small and a five-minute
// interactive profile, nothing else), the policy package validates it,
// and `glove policy validate` accepts the file as setup wrote it.
func TestSetupStarterPolicy(t *testing.T) {
	dir := setupDir(t)
	if _, stderr, err := runSetup(t, selfOptions(dir)); err != nil {
		t.Fatalf("setup: %v (stderr %q)", err, stderr)
	}
	polPath, _, _ := setupPaths(dir)
	data, err := os.ReadFile(polPath)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := policy.Validate(p); err != nil {
		t.Fatalf("the starter policy does not validate: %v", err)
	}
	if p.MaxPlanTTLMs != 10*60_000 {
		t.Errorf("max_plan_ttl_ms %d, want ten minutes", p.MaxPlanTTLMs)
	}
	walls := map[string]uint64{}
	for _, r := range p.ResourceProfiles {
		walls[r.ProfileID] = r.WallTimeMs
	}
	if len(walls) != 2 || walls["small"] != 2*60_000 || walls["interactive"] != 5*60_000 {
		t.Errorf("profiles' wall times %v, want exactly small 2 min and interactive 5 min", walls)
	}
	if len(p.RuntimeTemplates) != 1 || p.RuntimeTemplates[0].RuntimeID != "sh" || p.RuntimeTemplates[0].Launch.ExecutablePath == "" {
		t.Errorf("templates %+v, want the one pinned sh template", p.RuntimeTemplates)
	}
	var out, errb bytes.Buffer
	if code := Run([]string{"policy", "validate", "--file", polPath}, &out, &errb); code != ExitOK {
		t.Fatalf("glove policy validate: exit %d: %s", code, errb.String())
	}
	if !strings.HasPrefix(out.String(), "valid: revision 1, 1 runtime template") {
		t.Errorf("glove policy validate: %q", out.String())
	}
}

// TestSetupIdempotent: a second run with the three files present changes
// none of them (same bytes, inode and mtime), says so, and prints no
// anchor; the first printed the anchor gloved.env holds, and never the key.
func TestSetupIdempotent(t *testing.T) {
	dir := setupDir(t)
	first, _, err := runSetup(t, selfOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	polPath, keyPath, envPath := setupPaths(dir)
	before := map[string]fileState{}
	for _, p := range []string{polPath, keyPath, envPath} {
		before[p] = stateOf(t, p)
	}
	anchor, err := envAnchor(before[envPath].data)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(first, anchor) != 1 {
		t.Errorf("the first run prints the anchor %d times, want once:\n%s", strings.Count(first, anchor), first)
	}
	if strings.Contains(first, hex.EncodeToString(before[keyPath].data)) {
		t.Errorf("the first run prints the key")
	}
	second, _, err := runSetup(t, selfOptions(dir))
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	for _, p := range []string{polPath, keyPath, envPath} {
		if a := stateOf(t, p); !bytes.Equal(a.data, before[p].data) || a.ino != before[p].ino || a.mtime != before[p].mtime {
			t.Errorf("the second run changed %s", p)
		}
		if !strings.Contains(second, "kept "+p) {
			t.Errorf("the second run does not report %s kept:\n%s", p, second)
		}
	}
	if !strings.Contains(second, "nothing changed") || strings.Contains(second, anchor) || strings.Contains(second, "wrote") {
		t.Errorf("second run's report:\n%s", second)
	}
	left, err := filepath.Glob(filepath.Join(dir, ".glove-setup-*"))
	if err != nil || len(left) != 0 {
		t.Errorf("temporary files left: %v %v", left, err)
	}
}

// TestSetupRefusesOverwrite: an operator's file is never replaced. A
// policy of theirs is kept while the missing key and env are written; a
// key without its env (or the reverse) is refused naming it, writing
// nothing; a receipt journal in the store refuses a new pair; a kept
// file gloved would refuse is reported; and a file that appears between
// the check and the rename is not replaced.
func TestSetupRefusesOverwrite(t *testing.T) {
	mine := []byte("the operator's own\n")
	t.Run("policy kept, pair written", func(t *testing.T) {
		dir := setupDir(t)
		polPath, keyPath, envPath := setupPaths(dir)
		if _, _, err := runSetup(t, selfOptions(dir)); err != nil {
			t.Fatal(err)
		}
		own := stateOf(t, polPath)
		for _, p := range []string{keyPath, envPath} {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
		out, _, err := runSetup(t, selfOptions(dir))
		if err != nil {
			t.Fatalf("setup with the policy present: %v", err)
		}
		if a := stateOf(t, polPath); !bytes.Equal(a.data, own.data) || a.ino != own.ino {
			t.Error("the policy was replaced")
		}
		if !strings.Contains(out, "kept "+polPath) || !strings.Contains(out, "wrote "+keyPath) || !strings.Contains(out, "wrote "+envPath) {
			t.Errorf("report:\n%s", out)
		}
	})
	for _, c := range []struct{ have, missing string }{{setupKeyName, setupEnvName}, {setupEnvName, setupKeyName}} {
		t.Run(c.have+" without "+c.missing, func(t *testing.T) {
			dir := setupDir(t)
			have := filepath.Join(dir, c.have)
			if err := os.WriteFile(have, mine, 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, err := runSetup(t, selfOptions(dir))
			if err == nil || !strings.Contains(err.Error(), have+" exists but "+filepath.Join(dir, c.missing)+" does not") {
				t.Fatalf("got %v, want a refusal naming %s", err, have)
			}
			if got, _ := os.ReadFile(have); !bytes.Equal(got, mine) {
				t.Error("the operator's file changed")
			}
			ents, _ := os.ReadDir(dir)
			if len(ents) != 1 {
				t.Errorf("the refusal wrote something: %v", ents)
			}
		})
	}
	t.Run("receipts in the store", func(t *testing.T) {
		dir := setupDir(t)
		o := selfOptions(dir)
		mkdirMode(t, o.storeDir, 0o700)
		if err := os.WriteFile(filepath.Join(o.storeDir, receipt.FileName), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := runSetup(t, o); err == nil || !strings.Contains(err.Error(), "holds receipts") {
			t.Fatalf("got %v, want a refusal naming the receipt journal", err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Errorf("the refusal wrote something: %v", ents)
		}
	})
	t.Run("kept key gloved would refuse", func(t *testing.T) {
		dir := setupDir(t)
		if _, _, err := runSetup(t, selfOptions(dir)); err != nil {
			t.Fatal(err)
		}
		_, keyPath, _ := setupPaths(dir)
		if err := os.Chmod(keyPath, 0o640); err != nil {
			t.Fatal(err)
		}
		if _, _, err := runSetup(t, selfOptions(dir)); err == nil || !strings.Contains(err.Error(), keyPath+" exists but gloved would refuse it") {
			t.Fatalf("got %v, want the kept key reported", err)
		}
	})
	t.Run("appears before the rename", func(t *testing.T) {
		dir := setupDir(t)
		p := filepath.Join(dir, "late")
		if err := os.WriteFile(p, mine, 0o600); err != nil {
			t.Fatal(err)
		}
		err := writeNew(setupFile{path: p, data: []byte("new"), uid: os.Geteuid(), gid: os.Getegid(), mode: 0o600})
		if err == nil || !strings.Contains(err.Error(), "not replaced") {
			t.Fatalf("got %v, want a refusal", err)
		}
		if got, _ := os.ReadFile(p); !bytes.Equal(got, mine) {
			t.Errorf("replaced: %q", got)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, ".glove-setup-*")); len(left) != 0 {
			t.Errorf("temporary files left: %v", left)
		}
	})
}

// TestSetupNeedsRoot: anyone but root gets one line and exit 1, and
// nothing is written.
func TestSetupNeedsRoot(t *testing.T) {
	saved := setupEuid
	setupEuid = func() int { return 1000 }
	defer func() { setupEuid = saved }()
	dir := setupDir(t)
	var out, errb bytes.Buffer
	code := Run([]string{"setup", "service", "--config-dir", dir, "--runtime", "sh", "--executable", "/bin/sh"}, &out, &errb)
	if code != ExitFail || errb.String() != "glove: setup service: must run as root (it writes root's configuration directory and gives files to the service user)\n" || out.Len() != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("wrote %v", ents)
	}
}

// TestSetupServiceRoot (root): the command as an operator runs it, for
// an existing unprivileged user (nobody) in a temporary configuration
// directory: each file's owner and mode as the unit and gloved need
// them, the key's size, the anchor printed the one gloved.env holds.
func TestSetupServiceRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: setup service gives files to another user")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir := setupDir(t)
	var out, errb bytes.Buffer
	code := Run([]string{"setup", "service", "--config-dir", dir, "--user", "nobody", "--session-store", filepath.Join(dir, "store"),
		"--runtime", "sh", "--executable", "/bin/sh", "--arg", "-c", "--arg", "echo hi"}, &out, &errb)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	polPath, keyPath, envPath := setupPaths(dir)
	for _, c := range []struct {
		path     string
		uid, gid int
		mode     uint32
	}{{keyPath, uid, gid, 0o600}, {polPath, uid, gid, 0o600}, {envPath, 0, 0, 0o644}} {
		var st unix.Stat_t
		if err := unix.Lstat(c.path, &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != c.uid || int(st.Gid) != c.gid || st.Mode&0o7777 != c.mode || st.Nlink != 1 {
			t.Errorf("%s: uid %d gid %d mode %04o links %d; want a regular file %d:%d %04o, one link", c.path, st.Uid, st.Gid, st.Mode&0o7777, st.Nlink, c.uid, c.gid, c.mode)
		}
	}
	key, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(key) < store.MinKeyBytes || len(key) > store.MaxKeyBytes {
		t.Errorf("key of %d bytes", len(key))
	}
	env, err := os.ReadFile(envPath)
	if err != nil {
		t.Fatal(err)
	}
	anchor, err := envAnchor(env)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "receipt anchor for the controller (printed this once; it is also in "+envPath+"): "+anchor+"\n") {
		t.Errorf("report lacks the anchor:\n%s", out.String())
	}
	if strings.Contains(out.String()+errb.String(), hex.EncodeToString(key)) {
		t.Error("the key is printed")
	}
	// Again: nothing changes.
	out.Reset()
	if code := Run([]string{"setup", "service", "--config-dir", dir, "--user", "nobody", "--session-store", filepath.Join(dir, "store")}, &out, &errb); code != ExitOK || !strings.Contains(out.String(), "nothing changed") {
		t.Errorf("second run: exit %d\n%s%s", code, out.String(), errb.String())
	}
}
