// SPDX-License-Identifier: Apache-2.0

package session

import "testing"

// TestInodesFor is the derivation's table: the floor, the ratio, and the
// shipped bounds (a 2 GiB medium disk, a 4 GiB harness disk, the 8 GiB
// max_tmpfs_bytes whose inodes are max_tmpfs_inodes).
func TestInodesFor(t *testing.T) {
	for _, c := range []struct{ size, want uint64 }{
		{0, MinInodes},
		{4096, MinInodes},
		{64 << 20, 4096},
		{64<<20 + 16<<10, 4097},
		{256 << 20, 16384},
		{1 << 30, 65536},
		{2 << 30, 131072},
		{4 << 30, 262144},
		{8 << 30, 524288},
		{1 << 40, 1 << 26},
	} {
		if got := InodesFor(c.size); got != c.want {
			t.Errorf("InodesFor(%d) = %d, want %d", c.size, got, c.want)
		}
	}
}
