// SPDX-License-Identifier: Apache-2.0

package session_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/packaging"
	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/engine/session"
	"github.com/glove-sandbox/glove/testenv"
)

// shippedSizeBounds is the package's bounds file name's max_* members.
func shippedSizeBounds(t *testing.T, name string) map[string]uint64 {
	t.Helper()
	b, err := packaging.ShippedSizeBounds(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestShippedBoundsHarness runs `glove run --profile harness` under the
// size bounds the package ships (issue 32: the README's --profile medium
// was refused at once, and any disk_bytes over 256 MiB was): the session
// starts with a scratch of the profile's 4 GiB and the inodes derived
// from it, more than the 1 GiB codex doctor wants free in CODEX_HOME.
// Over a bound, the launch fails with 125 and a message naming that one
// bound and its value.
func TestShippedBoundsHarness(t *testing.T) {
	e := testenv.Get(t)
	mnt, cg := shippedSizeBounds(t, "mounter.json"), shippedSizeBounds(t, "cgroup.json")
	e.ConfigureForSessionsBounds(t, mnt, cg)
	testenv.CheckLeaks(t, e.UID)
	ws := workspace(t, e, map[string]string{"in": "x\n"})
	prof := policy.ProfileHarness

	// %b blocks, %S their size, %f free blocks, %c inodes: of the scratch
	// (/tmp is a directory of it, as is the workspace copy).
	out, errs, code := gloveRun(t, e, ws, "", "--profile", "harness", "--", "stat", "-f", "-c", "%b %S %f %c", "/tmp")
	if code != 0 {
		t.Fatalf("glove run --profile harness: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	f := strings.Fields(out)
	var n [4]uint64
	for i := range n {
		if len(f) != 4 {
			break
		}
		n[i], _ = strconv.ParseUint(f[i], 10, 64)
	}
	if len(f) != 4 || n[0]*n[1] != prof.DiskBytes || n[2]*n[1] < 1<<30 || n[3] != session.InodesFor(prof.DiskBytes) {
		t.Errorf("the scratch: %q (blocks, block size, free blocks, inodes); want %d bytes, over 1 GiB free, %d inodes",
			out, prof.DiskBytes, session.InodesFor(prof.DiskBytes))
	}
	t.Logf("the harness profile's scratch under the shipped bounds: %s", strings.TrimSpace(out))

	for _, c := range []struct {
		name, limit, want string
	}{
		{"disk a page over max_tmpfs_bytes", fmt.Sprintf("disk_bytes=%d", mnt["max_tmpfs_bytes"]+4096),
			fmt.Sprintf("tmpfs: size %d is over mounter.json's max_tmpfs_bytes %d", mnt["max_tmpfs_bytes"]+4096, mnt["max_tmpfs_bytes"])},
		{"pids one over max_pids with glove-shim's tasks", fmt.Sprintf("pids=%d", cg["max_pids"]-session.ShimTasks+1),
			fmt.Sprintf("pids limit %d is over cgroup.json's max_pids %d", cg["max_pids"]+1, cg["max_pids"])},
		{"memory over max_memory_bytes", fmt.Sprintf("memory_bytes=%d", cg["max_memory_bytes"]+1),
			fmt.Sprintf("memory limit %d is over cgroup.json's max_memory_bytes %d", cg["max_memory_bytes"]+1, cg["max_memory_bytes"])},
	} {
		_, errs, code := gloveRun(t, e, ws, "", "--profile", "harness", "--limit", c.limit, "--", "true")
		if code != 125 || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want 125 and %q", c.name, code, errs, c.want)
		} else {
			for _, l := range strings.Split(errs, "\n") {
				if strings.HasPrefix(l, "glove: run: ") && strings.Contains(l, c.want) {
					t.Logf("%s: %s", c.name, l)
				}
			}
		}
		for _, other := range []string{"max_tmpfs_bytes", "max_tmpfs_inodes", "max_memory_bytes", "max_pids"} {
			if !strings.Contains(c.want, other) && strings.Contains(errs, other) {
				t.Errorf("%s: stderr %q also names %s", c.name, errs, other)
			}
		}
	}
}
