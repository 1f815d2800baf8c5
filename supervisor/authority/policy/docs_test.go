// SPDX-License-Identifier: Apache-2.0

package policy

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

const policyDoc = "../../../docs/policy.md"

// TestPolicyDocument keeps docs/policy.md and the code in step: the
// example in the document is the test example, byte for byte, and the
// table of valid access tuples lists exactly the code's rules.
func TestPolicyDocument(t *testing.T) {
	b, err := os.ReadFile(policyDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	ex := fencedBlocks(t, doc, "json example-policy")
	if len(ex) != 1 {
		t.Fatalf("%d example-policy blocks, want 1", len(ex))
	}
	if want := strings.TrimSuffix(exampleText(t), "\n"); ex[0] != want {
		t.Fatalf("the example in %s differs from %s", policyDoc, examplePath)
	}
	for _, r := range tupleRules {
		creates := make([]string, len(r.creates))
		for i, c := range r.creates {
			creates[i] = "`" + c + "`"
		}
		quota := "0"
		if r.quota {
			quota = "1..2^40"
		}
		row := fmt.Sprintf("| `%s` | `%s` | %s | `%s` | %s |", r.access, r.materialization, strings.Join(creates, " or "), r.cleanup, quota)
		if !strings.Contains(doc, row+"\n") {
			t.Errorf("%s lacks the access tuple row\n%s", policyDoc, row)
		}
	}
	if MaxAliasBytes != 1<<40 {
		t.Errorf("the document says 2^40 for max_bytes; the code says %d", uint64(MaxAliasBytes))
	}
	for _, rt := range DiscoveryRuntimes() {
		exe, _ := DiscoveryExecutable(rt)
		if row := fmt.Sprintf("| `%s` | `%s` |", rt, exe); !strings.Contains(doc, row+"\n") {
			t.Errorf("%s lacks the discovery row %s", policyDoc, row)
		}
	}
}

// TestShippedProfilesDocument: docs/policy.md's table of shipped
// profiles lists exactly ShippedProfiles, in order, with every limit,
// and each profile is valid in a policy whose plan lifetime is its wall
// time and the launch headroom.
func TestShippedProfilesDocument(t *testing.T) {
	b, err := os.ReadFile(policyDoc)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "| `harness` |") || strings.HasPrefix(l, "| `medium` |") || strings.HasPrefix(l, "| `small` |") {
			rows = append(rows, l)
		}
	}
	shipped := ShippedProfiles()
	if len(rows) != len(shipped) {
		t.Fatalf("%s: %d shipped-profile rows, want %d", policyDoc, len(rows), len(shipped))
	}
	for i, p := range shipped {
		cells := strings.Split(rows[i], "|")
		got := []string{}
		for _, c := range cells[1:8] {
			f := strings.Fields(strings.Trim(strings.TrimSpace(c), "`"))
			got = append(got, strings.Trim(f[0], "`"))
		}
		want := []string{p.ProfileID, fmt.Sprint(p.CPUTimeMs), fmt.Sprint(p.MemoryBytes), fmt.Sprint(p.Pids),
			fmt.Sprint(p.WallTimeMs), fmt.Sprint(p.DiskBytes), fmt.Sprint(p.TerminalOutputBytes)}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: row %d says %v, ShippedProfiles %v", policyDoc, i, got, want)
		}
		pol, err := Decode([]byte(exampleText(t)))
		if err != nil {
			t.Fatal(err)
		}
		pol.MaxPlanTTLMs, pol.ResourceProfiles = p.WallTimeMs+LaunchHeadroomMs, []ResourceProfile{p}
		for i := range pol.PathAliases {
			pol.PathAliases[i].MaxTTLSecs = max(pol.PathAliases[i].MaxTTLSecs, (p.WallTimeMs+LaunchHeadroomMs)/1000)
		}
		if err := Validate(pol); err != nil {
			t.Errorf("shipped profile %s: %v", p.ProfileID, err)
		}
	}
}
