package shim_test

import (
	"bytes"
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
