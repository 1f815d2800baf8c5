// SPDX-License-Identifier: Apache-2.0

package testenv

import "testing"

// TestHostServiceMount: only systemd's credential mounts are the host's
// own; every other new mount still counts as a leak.
func TestHostServiceMount(t *testing.T) {
	for line, want := range map[string]bool{
		"249 31 0:40 / /run/credentials/getty@tty1.service ro,nosuid - tmpfs tmpfs rw": true,
		"250 31 0:41 / /run/credentialsx rw - tmpfs tmpfs rw":                          false,
		"251 31 0:42 / /var/lib/glove-testenv/run-1/x rw - tmpfs none rw":              false,
		"252 31 7:0 / /tmp/m rw - ext4 /dev/loop0 rw":                                  false,
		"253 31 0:43 /run/credentials/a /elsewhere rw - tmpfs tmpfs rw":                false,
		"short": false,
	} {
		if got := hostServiceMount(line); got != want {
			t.Errorf("hostServiceMount(%q) = %v, want %v", line, got, want)
		}
	}
}
