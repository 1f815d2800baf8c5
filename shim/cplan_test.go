// SPDX-License-Identifier: Apache-2.0

package shim_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/glove-sandbox/glove/shim"
	"github.com/glove-sandbox/glove/shim/cstage"
)

// TestCDecodePlanRefuses: the C stages' decoder refuses every input of
// the Go decoder's bad-input table.
func TestCDecodePlanRefuses(t *testing.T) {
	names, ins := shim.PlanRefusals(t)
	for i, in := range ins {
		if p, err := cstage.Decode(in); err == nil {
			t.Errorf("%s: C decoder accepted it as %+v", names[i], p)
		}
	}
}

// TestCDecodePlanEveryField: every field set by FillPlan comes out of the
// C decoder as the Go encoder put it in.
func TestCDecodePlanEveryField(t *testing.T) {
	in := shim.EncodePlan(shim.FillPlan())
	p, err := cstage.Decode(in)
	if err != nil {
		t.Fatal(err)
	}
	if back := shim.EncodePlan(p); !bytes.Equal(back, in) {
		t.Errorf("the C decoder changed the plan:\n in %q\nout %q", in, back)
	}
}

// FuzzCDecodePlan: the C and Go decoders accept exactly the same inputs,
// and decode each accepted one to the same plan (its encoding is the
// input: one plan, one encoding). A difference would make the C stages
// build another sandbox than the one stage 0 decided.
func FuzzCDecodePlan(f *testing.F) {
	f.Add(shim.EncodePlan(shim.FillPlan()))
	_, ins := shim.PlanRefusals(f)
	for _, in := range ins {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		gp, gerr := shim.DecodePlan(data)
		cp, cerr := cstage.Decode(data)
		if (gerr == nil) != (cerr == nil) {
			t.Fatalf("Go decoder: %v; C decoder: %v", gerr, cerr)
		}
		if cerr != nil {
			return
		}
		if g, c := shim.EncodePlan(gp), shim.EncodePlan(cp); !bytes.Equal(g, c) || !bytes.Equal(c, data) {
			t.Fatalf("decoders differ:\n  in %q\n  Go %q\n   C %q", data, g, c)
		}
	})
}

// joinRefusals is the bad-input table of --cgroup-join's value, which the
// C constructor (join.c) and Main (parseJoin) parse alike.
var joinRefusals = []string{
	"", ":", "5", "5:", ":6", "5:6,", "5:,6", "5:6,,7", "5;6", "5:6;7", " 5:6", "5:6 ", "5:6\n",
	"05:6", "5:06", "+5:6", "-5:6", "5:-6", "0:6", "2:6", "5:2", "5:5", "5:6,5",
	"1048577:6", "5:1048577", "99999999999999999999:6", "5:0x6", "5:6,7,8,9,10,11,12,13,14",
}

// TestJoinParseRefuses: both parsers refuse every bad value, and accept
// the shapes gloved sends.
func TestJoinParseRefuses(t *testing.T) {
	for _, in := range joinRefusals {
		if fds, err := shim.ParseJoin(in); err == nil {
			t.Errorf("Go parser accepted %q as %v", in, fds)
		}
		if fds := cstage.JoinParse(in); fds != nil {
			t.Errorf("C parser accepted %q as %v", in, fds)
		}
	}
	for in, want := range map[string][]int{"5:6,7": {5, 6, 7}, "3:1048576": {3, 1048576}, "9:3,4,5,6,7,8,10,11": {9, 3, 4, 5, 6, 7, 8, 10, 11}} {
		g, err := shim.ParseJoin(in)
		c := cstage.JoinParse(in)
		if err != nil || !slices.Equal(g, want) || !slices.Equal(c, want) {
			t.Errorf("%q: Go %v (%v), C %v, want %v", in, g, err, c, want)
		}
	}
}

// FuzzCJoinParse: the C and Go parsers of --cgroup-join's value accept
// exactly the same values, with the same descriptors.
func FuzzCJoinParse(f *testing.F) {
	f.Add("5:6,7")
	for _, in := range joinRefusals {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if strings.IndexByte(in, 0) >= 0 {
			return // a C string ends there; argv cannot hold one
		}
		g, err := shim.ParseJoin(in)
		c := cstage.JoinParse(in)
		if (err == nil) != (c != nil) || !slices.Equal(g, c) {
			t.Errorf("%q: Go %v (%v), C %v", in, g, err, c)
		}
	})
}
