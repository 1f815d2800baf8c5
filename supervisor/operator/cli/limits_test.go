// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
)

// TestLimitFlag: --limit takes exactly the policy's six limits, each at
// most its ceiling, once; apply sets the named field and no other.
func TestLimitFlag(t *testing.T) {
	bad := map[string]string{
		"pids":                        "want NAME=VALUE",
		"pids=0":                      "want NAME=VALUE",
		"pids=08":                     "want NAME=VALUE",
		"pids=-1":                     "want NAME=VALUE",
		"cpu=5":                       "unknown limit (cpu_time_ms, memory_bytes, pids, wall_time_ms, disk_bytes, terminal_output_bytes)",
		"wall_time_ms=99999999999999": "above the ceiling",
	}
	for in, want := range bad {
		if err := (limitList{}).Set(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Set(%q) = %v, want an error with %q", in, err, want)
		}
	}
	l := limitList{}
	if err := l.Set("pids=8"); err != nil {
		t.Fatal(err)
	}
	if err := l.Set("pids=9"); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("a second pids: %v", err)
	}
	p := policy.ResourceProfile{Pids: 100, MemoryBytes: 5}
	l.apply(&p)
	if p.Pids != 8 || p.MemoryBytes != 5 {
		t.Errorf("apply: pids %d memory %d, want 8 and 5", p.Pids, p.MemoryBytes)
	}
}
