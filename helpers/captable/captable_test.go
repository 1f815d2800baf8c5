package captable

import (
	"os"
	"strings"
	"testing"
)

func TestRows(t *testing.T) {
	seen := map[string]bool{}
	for _, e := range Table {
		if seen[e.Binary] {
			t.Errorf("%s listed twice", e.Binary)
		}
		seen[e.Binary] = true
		if e.Dir != DirBin && e.Dir != DirLibexec {
			t.Errorf("%s: directory %q", e.Binary, e.Dir)
		}
		if e.Helper != (e.Dir == DirLibexec) {
			t.Errorf("%s: helpers, and only helpers, live in %s", e.Binary, DirLibexec)
		}
		if !e.Helper && len(e.Caps) != 0 {
			t.Errorf("%s: only a helper may hold a capability (the supervisor and the CLI parse untrusted input)", e.Binary)
		}
		if e.Why == "" {
			t.Errorf("%s: no reason given", e.Binary)
		}
	}
}

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
		"glove-shim":            {0, ""},
		"gloved":                {0, ""},
		"glove":                 {0, ""},
	}
	if len(cases) != len(Table) {
		t.Fatalf("table has %d rows, this test knows %d: review the new row here", len(Table), len(cases))
	}
	for name, want := range cases {
		e, ok := Lookup(name)
		if !ok {
			t.Errorf("%s: no row", name)
			continue
		}
		if e.Mask() != want.mask || e.SetcapText() != want.setcap {
			t.Errorf("%s: mask %x setcap %q, want %x %q", name, e.Mask(), e.SetcapText(), want.mask, want.setcap)
		}
	}
	if MaskString(1<<21) != "0000000000200000" {
		t.Errorf("MaskString(1<<21) = %s", MaskString(1<<21))
	}
}

// TestMakefileBuildsEveryRow keeps `make build` and the table in step.
func TestMakefileBuildsEveryRow(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range Table {
		if !strings.Contains(string(mk), "/cmd/"+e.Binary+" ") && !strings.Contains(string(mk), "/cmd/"+e.Binary+"\n") {
			t.Errorf("Makefile's CMDS does not build %s", e.Binary)
		}
	}
}

// TestFields: one line a row, six fields without spaces, as
// scripts/setup-host.sh reads them.
func TestFields(t *testing.T) {
	lines := strings.Split(strings.TrimSuffix(Fields(), "\n"), "\n")
	if len(lines) != len(Table) {
		t.Fatalf("%d lines for %d rows", len(lines), len(Table))
	}
	for i, l := range lines {
		f := strings.Split(l, " ")
		e := Table[i]
		if len(f) != 6 || f[0] != e.Binary || f[1] != e.Dir || (e.Bounds != "" && f[4] != e.Bounds) {
			t.Errorf("line %q for row %s", l, e.Binary)
		}
		if e.Helper && (f[2] != "0750" || f[3] != "root:glove") {
			t.Errorf("line %q: a helper is 0750 root:glove", l)
		}
		if caps := e.SetcapText(); (caps == "" && f[5] != "none") || (caps != "" && f[5] != caps) {
			t.Errorf("line %q: capabilities %q", l, caps)
		}
	}
}
