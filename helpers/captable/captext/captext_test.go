// SPDX-License-Identifier: Apache-2.0

package captext

import (
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/helpers/captable"
)

func TestMasksAndSetcapText(t *testing.T) {
	cases := map[string]struct {
		mask   uint64
		setcap string
	}{
		"glove-mounter":         {1 << 21, "cap_sys_admin=ep"},
		"glove-loopext4":        {1<<21 | 1<<1, "cap_dac_override,cap_sys_admin=ep"},
		"glove-loopext4-format": {0, ""},
		"glove-cgroup":          {0, ""},
		"glove-streamproxy":     {0, ""},
		"glove-userns":          {1 << 21, "cap_sys_admin=ep"},
		"glove-shim":            {0, ""},
		"gloved":                {0, ""},
		"glove":                 {0, ""},
	}
	if len(cases) != len(captable.Table) {
		t.Fatalf("table has %d rows, this test knows %d: review the new row here", len(captable.Table), len(cases))
	}
	for name, want := range cases {
		e, ok := captable.Lookup(name)
		if !ok {
			t.Errorf("%s: no row", name)
			continue
		}
		if e.Mask() != want.mask || SetcapText(e) != want.setcap {
			t.Errorf("%s: mask %x setcap %q, want %x %q", name, e.Mask(), SetcapText(e), want.mask, want.setcap)
		}
	}
	if MaskString(1<<21) != "0000000000200000" {
		t.Errorf("MaskString(1<<21) = %s", MaskString(1<<21))
	}
}

// TestFields: one line a row, six fields without spaces, as
// scripts/setup-host.sh reads them.
func TestFields(t *testing.T) {
	lines := strings.Split(strings.TrimSuffix(Fields(), "\n"), "\n")
	if len(lines) != len(captable.Table) {
		t.Fatalf("%d lines for %d rows", len(lines), len(captable.Table))
	}
	for i, l := range lines {
		f := strings.Split(l, " ")
		e := captable.Table[i]
		if len(f) != 6 || f[0] != e.Binary || f[1] != e.Dir || (e.Bounds != "" && f[4] != e.Bounds) {
			t.Errorf("line %q for row %s", l, e.Binary)
		}
		if e.Helper && (f[2] != "0750" || f[3] != "root:glove") {
			t.Errorf("line %q: a helper is 0750 root:glove", l)
		}
		if caps := SetcapText(e); (caps == "" && f[5] != "none") || (caps != "" && f[5] != caps) {
			t.Errorf("line %q: capabilities %q", l, caps)
		}
	}
}
