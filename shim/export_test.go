package shim

import "testing"

// For the tests of package shim_test (cplan_test.go), which import the C
// stages' package; that package imports shim, so these tests cannot live
// in package shim itself.
var (
	EncodePlan = encodePlan
	DecodePlan = decodePlan
	FillPlan   = fillPlan
)

// PlanRefusals is the decoders' bad-input table, as names and bytes.
func PlanRefusals(t testing.TB) (names []string, ins [][]byte) {
	for _, c := range planRefusals(t) {
		names, ins = append(names, c.name), append(ins, c.in)
	}
	return names, ins
}
