// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/state/lease"
	"github.com/glove-sandbox/glove/supervisor/state/store"
)

// TestStatusHere runs every probe on this host through the command line
// and checks the report's structure: the JSON decodes, every item is
// present once and in order, the text has one line per item naming it,
// and the exit status and last line agree with the required items.
func TestStatusHere(t *testing.T) {
	code, out, errs := run("status", "--json")
	if errs != "" {
		t.Fatalf("stderr %q", errs)
	}
	var r statusReport
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("--json does not decode: %v\n%s", err, out)
	}
	names := statusNames()
	if len(r.Items) != len(names) {
		t.Fatalf("%d items, want %d: %+v", len(r.Items), len(names), r.Items)
	}
	var missing []string
	for i, it := range r.Items {
		if it.Name != names[i] {
			t.Fatalf("item %d is %q, want %q", i, it.Name, names[i])
		}
		if it.Detail == "" {
			t.Fatalf("item %q has no detail", it.Name)
		}
		if it.Required && !it.OK {
			missing = append(missing, it.Name)
		}
	}
	if r.Ready != (len(missing) == 0) || strings.Join(r.Missing, ",") != strings.Join(missing, ",") {
		t.Fatalf("ready %v missing %v, but failed required items are %v", r.Ready, r.Missing, missing)
	}
	if want := map[bool]int{true: ExitOK, false: ExitFail}[r.Ready]; code != want {
		t.Fatalf("--json exit %d, want %d (ready %v)", code, want, r.Ready)
	}
	// Probes the kernel of every supported host answers.
	for _, it := range r.Items {
		if (it.Name == "seccomp" || it.Name == "loop-devices" || it.Name == "mkfs.ext4") && !it.OK {
			t.Errorf("%s: %s", it.Name, it.Detail)
		}
	}

	tcode, text, errs := run("status")
	if errs != "" || tcode != code {
		t.Fatalf("text: exit %d (json %d), stderr %q", tcode, code, errs)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		// A non-ok item's fix is a line of its own below it.
		if strings.HasPrefix(strings.TrimSpace(l), "fix: ") {
			continue
		}
		lines = append(lines, l)
	}
	if len(lines) != len(names)+1 {
		t.Fatalf("%d lines, want %d items and a last line:\n%s", len(lines), len(names), text)
	}
	for i, n := range names {
		f := strings.Fields(strings.TrimPrefix(lines[i], n))
		if !strings.HasPrefix(lines[i], n+" ") || len(f) < 2 {
			t.Fatalf("line %d %q does not name %q", i, lines[i], n)
		}
		word := map[bool]string{true: "ok", false: "FAIL"}[r.Items[i].OK]
		if !r.Items[i].OK && !r.Items[i].Required {
			word = "weak"
		}
		if f[0] != word {
			t.Fatalf("line %d %q: %q, want %q", i, lines[i], f[0], word)
		}
	}
	last := lines[len(lines)-1]
	if r.Ready != strings.HasPrefix(last, "ready: ") || (!r.Ready && last != "not ready: "+strings.Join(missing, ", ")) {
		t.Fatalf("last line %q, ready %v, missing %v", last, r.Ready, missing)
	}
}

// fakeProbe points every input at fakes under a temporary directory: a
// cgroup2 hierarchy with memory and pids, /dev/null as loop-control
// (wrong device), no helper, and a user namespace probe that succeeds.
func fakeProbe(t *testing.T, mountinfo string) statusProbe {
	t.Helper()
	dir := t.TempDir()
	mi := filepath.Join(dir, "mountinfo")
	if err := os.WriteFile(mi, []byte(strings.ReplaceAll(mountinfo, "DIR", dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte("cpu memory pids\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return statusProbe{
		mountinfo:      mi,
		loopControl:    "/dev/null",
		mkfs:           "/usr/sbin/mkfs.ext4",
		libexec:        filepath.Join(dir, "no-libexec"),
		procSys:        filepath.Join(dir, "no-proc-sys"),
		userns:         func(string) error { return nil },
		usernsHelper:   func() error { return errors.New("glove-userns is not enabled in /etc/glove/userns.json") },
		selfCgroup:     filepath.Join(dir, "no-self-cgroup"),
		cgroupConf:     filepath.Join(dir, "no-cgroup.json"),
		release:        func() string { return "6.1.0-30-cloud-amd64" },
		pid1:           func() string { return "systemd" },
		systemdVersion: func() int { return 252 },
		uid:            os.Geteuid,
		openTreeAttr:   func() bool { return false },
		mountCalls:     mountCalls(),
		storeDir:       filepath.Join(dir, "no-store"),
		freeBytes:      func(string) (uint64, error) { return 1 << 30, nil },
	}
}

const (
	v2Line     = "40 30 0:37 / DIR rw,relatime - cgroup2 cgroup2 rw\n"
	v1MemLine  = "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
	v1PidsLine = "38 30 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
	v1Named    = "39 30 0:36 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd\n"
	otherLine  = "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
	nonRootV2  = "41 30 0:37 /sub /mnt/sub rw,relatime - cgroup2 cgroup2 rw\n"
)

func item(t *testing.T, r statusReport, name string) statusItem {
	t.Helper()
	for _, it := range r.Items {
		if it.Name == name {
			return it
		}
	}
	t.Fatalf("no item %q", name)
	return statusItem{}
}

func TestStatusCgroups(t *testing.T) {
	cases := []struct {
		name, mountinfo string
		ok              bool
		detail          string
	}{
		{"v2 with memory and pids", otherLine + v2Line, true, "memory in v2; pids in v2"},
		{"pure v1", otherLine + v1MemLine + v1PidsLine + v1Named, false, "no cgroup2 hierarchy"},
		{"nothing mounted", otherLine, false, "no cgroup hierarchy mounted"},
		{"only a bind of a v2 subtree", otherLine + nonRootV2, false, "no cgroup2 hierarchy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := fakeProbe(t, c.mountinfo).run()
			it := item(t, r, "cgroups")
			if it.OK != c.ok || !strings.Contains(it.Detail, c.detail) {
				t.Fatalf("ok %v detail %q, want ok %v with %q", it.OK, it.Detail, c.ok, c.detail)
			}
		})
	}
}

func TestStatusHybridControllers(t *testing.T) {
	p := fakeProbe(t, otherLine+v2Line+v1MemLine+v1PidsLine+v1Named)
	// The v2 hierarchy holds no controller: memory and pids come from v1.
	if err := os.WriteFile(filepath.Join(filepath.Dir(p.mountinfo), "cgroup.controllers"), []byte("\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	it := item(t, p.run(), "cgroups")
	if !it.OK || !strings.Contains(it.Detail, "memory in v1; pids in v1") || !strings.Contains(it.Detail, "v1 [memory pids]") {
		t.Fatalf("ok %v detail %q", it.OK, it.Detail)
	}
	// Without the v1 pids hierarchy, pids is missing.
	p = fakeProbe(t, otherLine+v2Line+v1MemLine)
	if err := os.WriteFile(filepath.Join(filepath.Dir(p.mountinfo), "cgroup.controllers"), []byte("memory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	it = item(t, p.run(), "cgroups")
	if it.OK || !strings.Contains(it.Detail, "no pids controller") {
		t.Fatalf("ok %v detail %q", it.OK, it.Detail)
	}
}

// TestStatusForcedFailures: every injected fault fails its item, the
// report is not ready, the exit status is 1 and the last line names
// exactly the failed required items.
func TestStatusForcedFailures(t *testing.T) {
	p := fakeProbe(t, otherLine+v1MemLine+v1PidsLine)
	p.userns = func(string) error { return errors.New("operation not permitted") }
	r := p.run()
	want := []string{"user-namespaces", "cgroups", "cgroup-delegation", "loop-devices"}
	for _, n := range statusNames() {
		if strings.HasPrefix(n, "helper ") {
			want = append(want, n)
		}
	}
	for _, n := range want {
		if it := item(t, r, n); it.OK {
			t.Errorf("%s ok with an injected fault: %q", n, it.Detail)
		}
	}
	for _, n := range statusNames() {
		if strings.HasPrefix(n, "helper ") {
			if it := item(t, r, n); !strings.Contains(it.Detail, "no such file or directory") {
				t.Errorf("%s: %q", n, it.Detail)
			}
		}
	}
	if it := item(t, r, "loop-devices"); !strings.Contains(it.Detail, "not the loop-control device") {
		t.Errorf("loop-devices: %q", it.Detail)
	}
	if r.Ready {
		t.Fatal("ready with failed items")
	}
	var out bytes.Buffer
	if code := writeStatus(r, false, &out); code != ExitFail {
		t.Fatalf("exit %d, want %d", code, ExitFail)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	// Order of the report: user-namespaces, cgroups, loop-devices,
	// then the helpers (landlock, seccomp and mkfs.ext4 are the host's).
	if last := lines[len(lines)-1]; last != "not ready: "+strings.Join(want, ", ") {
		t.Fatalf("last line %q, want the failed items %v", last, want)
	}
	for _, l := range lines[:len(lines)-1] {
		for _, n := range want {
			if strings.HasPrefix(l, n+" ") && !strings.Contains(l, " FAIL ") {
				t.Fatalf("line %q does not say FAIL", l)
			}
		}
	}

	// Debian's switch refusing the service user: not ready, with the fix,
	// until glove-userns is enabled; then ready in the glove-userns mode.
	p = fakeProbe(t, otherLine+v2Line)
	if err := os.MkdirAll(filepath.Join(p.procSys, "kernel"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.procSys, "kernel/unprivileged_userns_clone"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.userns = func(string) error { return errors.New("userns FAIL: EPERM: operation not permitted") }
	if it := item(t, p.run(), "user-namespaces"); it.OK || !strings.Contains(it.Detail, "unprivileged_userns_clone=0") || !strings.Contains(it.Fix, "userns.json") {
		t.Fatalf("helper off: ok %v detail %q fix %q", it.OK, it.Detail, it.Fix)
	}
	p.usernsHelper = func() error { return nil }
	if it := item(t, p.run(), "user-namespaces"); !it.OK || !strings.Contains(it.Detail, "mode glove-userns") {
		t.Fatalf("helper on: ok %v detail %q", it.OK, it.Detail)
	}
	// No user namespace for anyone: not ready, whatever the helper says.
	if err := os.MkdirAll(filepath.Join(p.procSys, "user"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.procSys, "user/max_user_namespaces"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if it := item(t, p.run(), "user-namespaces"); it.OK || !strings.Contains(it.Detail, "max_user_namespaces=0") || !strings.Contains(it.Fix, "sysctl") {
		t.Fatalf("max 0: ok %v detail %q fix %q", it.OK, it.Detail, it.Fix)
	}
}

// TestUsernsEnabled reads glove-userns's opt-in strictly.
func TestUsernsEnabled(t *testing.T) {
	dir := t.TempDir()
	for body, want := range map[string]string{
		`{"schema_version":1,"enabled":true}`:       "",
		`{"schema_version":1,"enabled":false}`:      "not enabled",
		`{"schema_version":1,"enabled":true,"x":1}`: "unknown",
		`{"schema_version":1,"enabled":"true"}`:     "enabled",
	} {
		p := filepath.Join(dir, "userns.json")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		err := usernsEnabled(p)()
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
	if err := usernsEnabled(filepath.Join(dir, "none.json"))(); err == nil {
		t.Errorf("a missing file counts as enabled")
	}
}

// TestStatusLocalServices: Yama's ptrace_scope 3 fails the
// local-services item (gloved could not read a connect's address); 0, 1,
// 2 or no Yama pass it.
func TestStatusLocalServices(t *testing.T) {
	p := fakeProbe(t, otherLine+v2Line)
	if it := item(t, p.run(), "local-services"); !it.OK || !strings.Contains(it.Detail, "no Yama") || it.Required {
		t.Fatalf("no Yama: ok %v required %v %q", it.OK, it.Required, it.Detail)
	}
	if err := os.MkdirAll(filepath.Join(p.procSys, "kernel/yama"), 0o755); err != nil {
		t.Fatal(err)
	}
	for v, ok := range map[string]bool{"0": true, "1": true, "2": true, "3": false} {
		if err := os.WriteFile(filepath.Join(p.procSys, "kernel/yama/ptrace_scope"), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		it := item(t, p.run(), "local-services")
		if it.OK != ok || !strings.Contains(it.Detail, "ptrace_scope "+v) || (!ok && it.Fix == "") {
			t.Errorf("ptrace_scope %s: ok %v %q fix %q", v, it.OK, it.Detail, it.Fix)
		}
	}
}

// TestStatusHelperChecks installs fake helpers with wrong modes: each is
// reported with its fault.
func TestStatusHelperChecks(t *testing.T) {
	p := fakeProbe(t, otherLine+v2Line)
	p.libexec = t.TempDir()
	if err := os.WriteFile(filepath.Join(p.libexec, "glove-cgroup"), []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(p.libexec, "glove-cgroup"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/bin/true", filepath.Join(p.libexec, "glove-shim")); err != nil {
		t.Fatal(err)
	}
	r := p.run()
	if it := item(t, r, "helper glove-cgroup"); it.OK || !strings.Contains(it.Detail, "mode 0755, not 0750") {
		t.Fatalf("glove-cgroup: ok %v %q", it.OK, it.Detail)
	}
	if it := item(t, r, "helper glove-shim"); it.OK || !strings.Contains(it.Detail, "not a regular file") {
		t.Fatalf("glove-shim: ok %v %q", it.OK, it.Detail)
	}
}

func TestDecodeFileCaps(t *testing.T) {
	enc := func(words ...uint32) []byte {
		b := make([]byte, 4*len(words))
		for i, w := range words {
			binary.LittleEndian.PutUint32(b[4*i:], w)
		}
		return b
	}
	cases := []struct {
		name string
		b    []byte
		want fileCapSet
		err  bool
	}{
		// setcap cap_sys_admin=ep: revision 2, effective, bit 21.
		{"rev2 sys_admin", enc(0x02000001, 1<<21, 0, 0, 0), fileCapSet{permitted: 1 << 21, effective: true}, false},
		{"rev2 dac+sys_admin", enc(0x02000001, 1<<21|1<<1, 0, 0, 0), fileCapSet{permitted: 1<<21 | 1<<1, effective: true}, false},
		{"rev2 high word, inheritable", enc(0x02000000, 0, 1, 1<<3, 1<<4), fileCapSet{permitted: 1 << 35, inheritable: 1 | 1<<36}, false},
		{"rev3 with rootid", enc(0x03000001, 1<<21, 0, 0, 0, 1000), fileCapSet{permitted: 1 << 21, effective: true}, false},
		{"rev1", enc(0x01000001, 1<<21, 0), fileCapSet{permitted: 1 << 21, effective: true}, false},
		{"rev2 short", enc(0x02000001, 1<<21, 0), fileCapSet{}, true},
		{"rev3 long", enc(0x03000001, 1<<21, 0, 0, 0, 0, 0), fileCapSet{}, true},
		{"unknown revision", enc(0x04000001, 1<<21, 0, 0, 0), fileCapSet{}, true},
		{"unknown flag", enc(0x02000003, 1<<21, 0, 0, 0), fileCapSet{}, true},
		{"empty", nil, fileCapSet{}, true},
	}
	for _, c := range cases {
		got, err := decodeFileCaps(c.b)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("%s: got %+v, %v; want %+v, error %v", c.name, got, err, c.want, c.err)
		}
	}
}

// TestStatusStore: the session-store item reports each journal's figures
// from its header, and a full disk fails it and the report.
func TestStatusStore(t *testing.T) {
	p := fakeProbe(t, otherLine+v2Line)
	if it := item(t, p.run(), "session-store"); !it.OK || !strings.Contains(it.Detail, "not set up") {
		t.Fatalf("no store: %+v", it)
	}
	p.storeDir = filepath.Join(t.TempDir(), "store")
	if err := os.Mkdir(p.storeDir, 0o700); err != nil {
		t.Fatal(err)
	}
	st, _, err := store.Open(store.Options{Dir: p.storeDir})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, _, err := st.Create(store.CreateRequest{SessionID: fmt.Sprintf("s%d", i), IdempotencyKey: fmt.Sprintf("k%d", i),
			ControllerPlanDigest: strings.Repeat("a", 64), PlanContentDigest: strings.Repeat("b", 64), Plan: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	defer st.Close()
	it := item(t, p.run(), "session-store")
	if !it.OK || !strings.Contains(it.Detail, "sessions.journal: 3 of 10000 records") ||
		!strings.Contains(it.Detail, "receipts.journal: not created yet") || !strings.Contains(it.Detail, "1.0 GiB free") ||
		!strings.Contains(it.Detail, "credential leases: none") {
		t.Fatalf("store: %+v", it)
	}
	// Credential leases: each handle with its version, a spoiled one
	// named as such, and never a credential.
	ls, err := lease.Open(filepath.Join(p.storeDir, "leases"))
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close()
	for _, h := range []string{"codex-token", "spoiled"} {
		l, err := ls.Acquire(h, []byte("secret-"+h))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Commit([]byte("rotated-" + h)); err != nil {
			t.Fatal(err)
		}
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(p.storeDir, "leases", "spoiled.lease"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	it = item(t, p.run(), "session-store")
	if !strings.Contains(it.Detail, "credential leases: codex-token version 2, spoiled (not valid: remove it to import the source again)") ||
		strings.Contains(it.Detail, "secret") || strings.Contains(it.Detail, "rotated") {
		t.Fatalf("leases: %+v", it)
	}
	p.freeBytes = func(string) (uint64, error) { return 4096, nil }
	r := p.run()
	it = item(t, r, "session-store")
	if it.OK || !it.Required || !strings.Contains(it.Detail, "no space left on device: 4096 bytes free") || it.Fix == "" || r.Ready {
		t.Fatalf("full disk: %+v (ready %v)", it, r.Ready)
	}
}

// TestStoreCompactCommand: the operator's compaction of a stopped store,
// and its refusal while a writer holds it.
func TestStoreCompactCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	st, _, err := store.Open(store.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		id := fmt.Sprintf("s%d", i)
		if _, _, err := st.Create(store.CreateRequest{SessionID: id, IdempotencyKey: "k" + id,
			ControllerPlanDigest: strings.Repeat("a", 64), PlanContentDigest: strings.Repeat("b", 64), Plan: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Transition(id, store.Failed, "x"); err != nil {
			t.Fatal(err)
		}
	}
	code, _, errs := run("store", "compact", "--session-store", dir)
	if code != ExitFail || !strings.Contains(errs, "held by a running gloved") {
		t.Fatalf("while held: exit %d, %q", code, errs)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run("store", "compact", "--session-store", dir)
	if code != ExitOK || errs != "" || !strings.Contains(out, "sessions.journal: 6 records") || !strings.Contains(out, "-> 2 records") {
		t.Fatalf("exit %d, %q, %q", code, out, errs)
	}
	if code, _, _ := run("store", "compact", "--receipt-key", "k"); code != ExitUsage {
		t.Fatalf("key without anchor: exit %d", code)
	}
}
