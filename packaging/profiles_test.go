// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/helpers/cgroup"
	"github.com/glove-sandbox/glove/helpers/helperkit"
	"github.com/glove-sandbox/glove/helpers/mounter"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/engine/session"
)

// shippedBounds is one set of glove-mounter and glove-cgroup bounds Glove
// ships, named by where it comes from.
type shippedBounds struct {
	from string
	mnt  *mounter.Config
	cg   *cgroup.Config
}

// setupHostBounds reads the JSON scripts/setup-host.sh writes for file:
// the line after `write_bounds FILE \`, single-quoted, or double-quoted
// with \" escapes and its shell variables.
func setupHostBounds(t *testing.T, file string, cfg helperkit.Config) {
	t.Helper()
	f, err := os.Open("../scripts/setup-host.sh")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "write_bounds "+file+` \` || !sc.Scan() {
			continue
		}
		line := strings.TrimSpace(sc.Text())
		if len(line) < 2 || line[0] != line[len(line)-1] || (line[0] != '\'' && line[0] != '"') {
			t.Fatalf("setup-host.sh: the bounds of %s are not one quoted line: %s", file, line)
		}
		js := line[1 : len(line)-1]
		if line[0] == '"' {
			js = strings.NewReplacer(`\"`, `"`, "$cgparent", "/glove-test", "$images", "/var/lib/glove/images/test").Replace(js)
		}
		if err := helperkit.DecodeStrict([]byte(js), cfg); err != nil {
			t.Fatalf("setup-host.sh's %s: %v", file, err)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("setup-host.sh's %s: %v", file, err)
		}
		return
	}
	t.Fatalf("setup-host.sh writes no %s (no `write_bounds %s \\` line)", file, file)
}

// allShippedBounds are the package's conffiles and setup-host's bounds
// (which make demo and docs/building.md's set-up use).
func allShippedBounds(t *testing.T) []shippedBounds {
	pkg := shippedBounds{from: "packaging/etc/glove", mnt: &mounter.Config{}, cg: &cgroup.Config{}}
	decodeExample(t, "mounter.json", pkg.mnt)
	decodeExample(t, "cgroup.json", pkg.cg)
	host := shippedBounds{from: "scripts/setup-host.sh", mnt: &mounter.Config{}, cg: &cgroup.Config{}}
	setupHostBounds(t, "mounter.json", host.mnt)
	setupHostBounds(t, "cgroup.json", host.cg)
	return []shippedBounds{pkg, host}
}

// shippedProfiles are every resource profile Glove ships or documents,
// named by where each comes from: glove run's (policy.ShippedProfiles),
// glove setup service's (policy.GuidedProfiles), the demo policy's (as
// scripts/demopolicy writes it) and docs/policy.md's example.
func shippedProfiles(t *testing.T) map[string]policy.ResourceProfile {
	out := map[string]policy.ResourceProfile{}
	for _, p := range policy.ShippedProfiles() {
		out["glove run --profile "+p.ProfileID] = p
	}
	for _, p := range policy.GuidedProfiles() {
		out["glove setup service's starter policy profile "+p.ProfileID] = p
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "run", "../scripts/demopolicy", dir)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run scripts/demopolicy: %v\n%s", err, b)
	}
	for file, from := range map[string]string{
		filepath.Join(dir, "policy.json"):                             "the demo policy",
		"../supervisor/authority/policy/testdata/example-policy.json": "docs/policy.md's example",
	} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		pol, err := policy.Decode(data)
		if err != nil {
			t.Fatalf("%s: %v", from, err)
		}
		for _, p := range pol.ResourceProfiles {
			out[from+" profile "+p.ProfileID] = p
		}
	}
	return out
}

// profileFits is nil when a session of profile p gets its cgroups and
// its scratch from helpers with these bounds: the requests the session
// code makes (session.CgroupLimits, glove-shim's tasks included;
// session.TmpfsRequest, the derived inodes included), judged by the
// helpers' own bounds checks.
func profileFits(p policy.ResourceProfile, b shippedBounds) error {
	mem, pids := session.CgroupLimits(p)
	if err := b.cg.CheckLimits(mem, pids); err != nil {
		return fmt.Errorf("glove-cgroup Create: %w", err)
	}
	req := session.TmpfsRequest(p.DiskBytes)
	if err := b.mnt.CheckTmpfsBounds(req.SizeBytes, req.Inodes); err != nil {
		return fmt.Errorf("glove-mounter Tmpfs (the scratch): %w", err)
	}
	return nil
}

// TestShippedProfilesFitShippedBounds fails when a profile Glove ships or
// documents would be refused by bounds Glove ships: the `--profile
// medium` of docs/running.md (then the README's) was (1,024 pids + 32
// for glove-shim over setup-host's max_pids 1,024; a 2 GiB tmpfs over
// 1 GiB). It also checks that each shipped max_tmpfs_inodes is what the
// supervisor derives for max_tmpfs_bytes, so every size within the
// bound gets its inodes.
func TestShippedProfilesFitShippedBounds(t *testing.T) {
	bounds := allShippedBounds(t)
	profiles := shippedProfiles(t)
	if _, ok := profiles["glove run --profile harness"]; !ok {
		t.Error("no shipped harness profile")
	}
	if _, ok := profiles["the demo policy profile harness"]; !ok {
		t.Error("the demo policy does not carry the harness profile")
	}
	for _, b := range bounds {
		if want := session.InodesFor(b.mnt.MaxTmpfsBytes); b.mnt.MaxTmpfsInodes != want {
			t.Errorf("%s: max_tmpfs_inodes %d, want %d (max_tmpfs_bytes %d / %d)", b.from, b.mnt.MaxTmpfsInodes, want, b.mnt.MaxTmpfsBytes, session.BytesPerInode)
		}
		for _, from := range slices.Sorted(maps.Keys(profiles)) {
			if err := profileFits(profiles[from], b); err != nil {
				t.Errorf("%s does not launch under %s's bounds: %v", from, b.from, err)
			}
		}
	}
}

// TestProfileFitsRefuses: the check above can fail, on each bound, with
// the message the helper would give.
func TestProfileFitsRefuses(t *testing.T) {
	b := shippedBounds{from: "test", mnt: &mounter.Config{MaxTmpfsBytes: 1 << 30, MaxTmpfsInodes: 65536},
		cg: &cgroup.Config{MaxMemoryBytes: 4 << 30, MaxPids: 1024}}
	ok := policy.ResourceProfile{ProfileID: "ok", CPUTimeMs: 1, MemoryBytes: 1 << 30, Pids: 1024 - session.ShimTasks,
		WallTimeMs: 1, DiskBytes: 1 << 30, TerminalOutputBytes: 1}
	if err := profileFits(ok, b); err != nil {
		t.Fatalf("a profile at the bounds: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(*policy.ResourceProfile)
		want string
	}{
		{"pids at max_pids (glove-shim's tasks over it)", func(p *policy.ResourceProfile) { p.Pids = 1024 }, "max_pids 1024"},
		{"memory over", func(p *policy.ResourceProfile) { p.MemoryBytes = 4<<30 + 1 }, "max_memory_bytes 4294967296"},
		{"disk a byte over", func(p *policy.ResourceProfile) { p.DiskBytes = 1<<30 + 1 }, "max_tmpfs_bytes 1073741824"},
	} {
		p := ok
		c.edit(&p)
		if err := profileFits(p, b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a refusal naming %q", c.name, err, c.want)
		}
	}
	// Inodes alone: bounds whose inode limit does not keep the ratio.
	b.mnt.MaxTmpfsInodes = 65535
	if err := profileFits(ok, b); err == nil || !strings.Contains(err.Error(), "max_tmpfs_inodes 65535") {
		t.Errorf("inodes over: %v, want a refusal naming max_tmpfs_inodes", err)
	}
}
