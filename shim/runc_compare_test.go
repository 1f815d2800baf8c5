// SPDX-License-Identifier: Apache-2.0

package shim_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/glove-sandbox/glove/testenv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// runcPath is Debian's runc, installed by scripts/install-deps.sh.
const runcPath = "/usr/sbin/runc"

// TestAttackTableRunc runs the attack table's bundles, unchanged but for
// what rootless runc cannot do, under runc as the service user (rootless,
// its state in a directory of that user), and compares each verdict with
// the production glove-shim's: where they differ, the case's runcDiffers
// must say why, and where a reason is given the verdicts must differ.
func TestAttackTableRunc(t *testing.T) {
	e := testenv.Get(t)
	if _, err := os.Stat(runcPath); err != nil {
		t.Skipf("skipped: %s is missing (%v); scripts/install-deps.sh installs Debian's runc, which CI has", runcPath, err)
	}
	if noUserns(t) {
		// Rootless runc makes its user namespaces itself (no --userns-fd
		// of its own), which such a host refuses the service user.
		t.Skip("skipped: this host refuses unprivileged user namespaces (hardened_test.go), which rootless runc needs; glove-shim's table runs with --userns-fd (TestAttackTable)")
	}
	testenv.CheckLeaks(t, e.UID)
	probeDir := buildProbe(t, e)
	state := filepath.Join(e.Base, "runc-state")
	if err := os.Mkdir(state, 0o700); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
	if err := os.Chown(state, e.UID, e.GID); err != nil {
		t.Fatal(err)
	}
	prod := attackConfig{name: "production", prod: true}
	var mu sync.Mutex
	rows := map[string]string{}
	for _, c := range attackCases {
		if c.runcUnsupported != "" {
			rows[c.name] = "n/a"
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rt := attackRuntime{
				path:   runcPath,
				env:    []string{"XDG_RUNTIME_DIR=" + state},
				global: []string{"--root", state},
				id:     "attack-" + c.name,
				edit:   runcBundle,
			}
			res := runAttackWith(t, e, probeDir, rt, c)
			t.Logf("runc: %s: %s", verdict(res.stopped), res.evidence)
			glove := c.expectStopped(prod)
			mu.Lock()
			rows[c.name] = verdict(res.stopped)
			mu.Unlock()
			switch {
			case res.stopped != glove && c.runcDiffers == "":
				t.Errorf("%s: runc %s, glove-shim %s, and the table names no reason (runcDiffers)\nevidence: %s",
					c.name, verdict(res.stopped), verdict(glove), res.evidence)
			case res.stopped == glove && c.runcDiffers != "":
				t.Errorf("%s: runc and glove-shim agree (%s) but the table says they differ: %s", c.name, verdict(glove), c.runcDiffers)
			}
		})
	}
	t.Cleanup(func() {
		var b strings.Builder
		b.WriteString("case                   glove-shim  runc        why they differ\n")
		for _, c := range attackCases {
			g := verdict(c.expectStopped(prod))
			b.WriteString(padRight(c.name, 23) + padRight(g, 12) + padRight(rows[c.name], 12) + c.runcDiffers + c.runcUnsupported + "\n")
		}
		t.Log("\n" + b.String())
	})
}

// runcBundle makes the bundle one rootless runc 1.1 runs: it requires
// the container's uid and gid 0 to be mapped (HostRootUID), so the service
// user is mapped to 0 and the program runs as 0 with no capability (runc
// empties every set, the bounding set included); and no cgroup it could
// not create (the standard spec has no resources anyway).
func runcBundle(s *specs.Spec) {
	s.Linux.UIDMappings[0].ContainerID = 0
	s.Linux.GIDMappings[0].ContainerID = 0
	s.Process.User.UID, s.Process.User.GID = 0, 0
	s.Linux.CgroupsPath = ""
	s.Linux.Resources = nil
}

func padRight(s string, n int) string {
	if len(s) >= n {
		return s + " "
	}
	return s + strings.Repeat(" ", n-len(s))
}
