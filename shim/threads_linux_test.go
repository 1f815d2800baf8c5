package shim

import (
	"testing"
	"time"
)

// TestWarmThreads: after warmThreads(n) the process holds at least n+1
// threads (the Go runtime keeps idle threads; the readers had one each),
// and it costs well under a millisecond a thread.
func TestWarmThreads(t *testing.T) {
	const n = 12
	t0 := time.Now()
	warmThreads(n)
	took := time.Since(t0)
	if got := threads(); got < n+1 {
		t.Errorf("%d threads after warming %d", got, n)
	}
	t.Logf("warmed %d threads in %v; the process has %d", n, took, threads())
}
