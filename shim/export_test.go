// SPDX-License-Identifier: Apache-2.0

package shim

import "testing"

// For the tests of package shim_test: cplan_test.go imports the C stages'
// package, which imports shim, so those tests cannot live in package shim
// itself; the seccomp cache's tests plant entries in a real run.
var (
	EncodePlan       = encodePlan
	DecodePlan       = decodePlan
	FillPlan         = fillPlan
	EncodeCacheEntry = encodeCacheEntry
	DecodeCacheEntry = decodeCacheEntry
	ParseJoin        = parseJoin
)

// PlanRefusals is the decoders' bad-input table, as names and bytes.
func PlanRefusals(t testing.TB) (names []string, ins [][]byte) {
	for _, c := range planRefusals(t) {
		names, ins = append(names, c.name), append(ins, c.in)
	}
	return names, ins
}
