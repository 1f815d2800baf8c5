// SPDX-License-Identifier: Apache-2.0

package materialize

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkCopyTree copies a tree of 1000 small files (4 KiB, in 10
// directories) and 4 large ones (4 MiB) into a fresh directory of the same
// file system, and times /bin/cp -a of the same tree in the same run as the
// anchor; the ratio is logged and reported as cp-ratio (ours/cp, >1: we
// are faster).
func BenchmarkCopyTree(b *testing.B) {
	src := b.TempDir()
	var total int64
	for i := range 1000 {
		mustWrite(b, filepath.Join(src, fmt.Sprintf("d%02d/f%04d", i%10, i)), pattern(4096), 0o644)
		total += 4096
	}
	for i := range 4 {
		mustWrite(b, filepath.Join(src, fmt.Sprintf("large/l%d", i)), pattern(4<<20), 0o644)
		total += 4 << 20
	}
	work := b.TempDir()
	s, err := Open(src)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.SetBytes(total)
	var ours time.Duration
	n := 0
	for b.Loop() {
		b.StopTimer()
		dst := filepath.Join(work, fmt.Sprintf("ours%d", n))
		if err := os.Mkdir(dst, 0o755); err != nil {
			b.Fatal(err)
		}
		fd := openDir(b, dst)
		b.StartTimer()
		start := time.Now()
		if _, err := s.CopyTo(fd, Options{}); err != nil {
			b.Fatal(err)
		}
		ours += time.Since(start)
		b.StopTimer()
		unix.Close(fd)
		if err := os.RemoveAll(dst); err != nil {
			b.Fatal(err)
		}
		n++
		b.StartTimer()
	}
	b.StopTimer()
	// The anchor: cp -a of the same tree, as many times (at most 20).
	runs := min(n, 20)
	var cp time.Duration
	for i := range runs {
		dst := filepath.Join(work, fmt.Sprintf("cp%d", i))
		start := time.Now()
		if out, err := exec.Command("/bin/cp", "-a", src, dst).CombinedOutput(); err != nil {
			b.Fatalf("cp -a: %v: %s", err, out)
		}
		cp += time.Since(start)
		if err := os.RemoveAll(dst); err != nil {
			b.Fatal(err)
		}
	}
	oursMBs := float64(total) * float64(n) / ours.Seconds() / 1e6
	cpMBs := float64(total) * float64(runs) / cp.Seconds() / 1e6
	b.ReportMetric(cpMBs, "cp-MB/s")
	b.ReportMetric(oursMBs/cpMBs, "cp-ratio")
	b.Logf("tree %d bytes: materialize %.1f MB/s (%d runs), cp -a %.1f MB/s (%d runs), ratio %.2f",
		total, oursMBs, n, cpMBs, runs, oursMBs/cpMBs)
}
