// SPDX-License-Identifier: Apache-2.0

package daemon

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"time"
)

// SupervisorStatus is supervisor_status's answer (docs/protocol.md).
type SupervisorStatus struct {
	HeapLiveBytes   uint64 `json:"heap_live_bytes"`
	HeapObjects     uint64 `json:"heap_objects"`
	Goroutines      uint64 `json:"goroutines"`
	Threads         int    `json:"threads"`
	OpenDescriptors int    `json:"open_descriptors"`
	Connections     int    `json:"connections"`
	SessionsRunning int    `json:"sessions_running"`
	// Without a session store, the last two are absent.
	StoreSessions *int  `json:"store_sessions,omitempty"`
	ReceiptsHeld  *int  `json:"receipts_held,omitempty"`
	UptimeMs      int64 `json:"uptime_ms"`
}

// supervisorStatus answers supervisor_status: what gloved itself holds
// now, so that an operator (glove status) and the memory test see the
// same figures. Threat: a supervisor meant to run for months that grows
// with every session it ever ran ends under the OOM killer, and every
// running session with it; these figures show such growth long before.
func (d *Daemon) supervisorStatus(_ *conn, _ *call, _ *noParams) (any, *Error) {
	if testGCBeforeStatus() {
		runtime.GC()
	}
	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/objects:objects"}, {Name: "/sched/goroutines:goroutines"}}
	metrics.Read(samples)
	out := SupervisorStatus{UptimeMs: time.Since(d.started).Milliseconds()}
	for i, v := range []*uint64{&out.HeapLiveBytes, &out.HeapObjects, &out.Goroutines} {
		if samples[i].Value.Kind() == metrics.KindUint64 {
			*v = samples[i].Value.Uint64()
		}
	}
	var err error
	if out.Threads, err = countEntries("/proc/self/task"); err == nil {
		out.OpenDescriptors, err = countEntries("/proc/self/fd")
	}
	if err != nil {
		return nil, errorf(CodeInternal, "supervisor_status: %s", oneLine(err.Error()))
	}
	d.mu.Lock()
	out.SessionsRunning, out.Connections = len(d.sessions), len(d.conns)
	d.mu.Unlock()
	if d.store != nil {
		n := 0
		for _, k := range d.store.Stats().Sessions {
			n += k
		}
		out.StoreSessions = &n
	}
	if d.receipts != nil {
		n := d.receipts.Held()
		out.ReceiptsHeld = &n
	}
	return out, nil
}

// countEntries counts a directory's entries (the descriptor reading it
// included, for /proc/self/fd).
func countEntries(dir string) (int, error) {
	f, err := os.Open(dir)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", dir, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", dir, err)
	}
	return len(names), nil
}
