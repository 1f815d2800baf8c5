// SPDX-License-Identifier: Apache-2.0

package spec

import "testing"

// TestEnvVar is the table of environment variable names.
func TestEnvVar(t *testing.T) {
	for s, want := range map[string]bool{
		"PATH": true, "_": true, "a1": true, "LC_ALL": true, "x_Y_9": true,
		"": false, "1A": false, "A-B": false, "A=B": false, "A B": false, "Ä": false, "A\x00": false, "A.B": false,
	} {
		if got := EnvVar(s); got != want {
			t.Errorf("EnvVar(%q) = %v, want %v", s, got, want)
		}
	}
}
