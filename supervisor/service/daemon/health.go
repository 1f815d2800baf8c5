package daemon

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"time"
)

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
	out := map[string]any{"uptime_ms": time.Since(d.started).Milliseconds()}
	for i, name := range []string{"heap_live_bytes", "heap_objects", "goroutines"} {
		if samples[i].Value.Kind() == metrics.KindUint64 {
			out[name] = samples[i].Value.Uint64()
		}
	}
	for name, dir := range map[string]string{"threads": "/proc/self/task", "open_descriptors": "/proc/self/fd"} {
		n, err := countEntries(dir)
		if err != nil {
			return nil, errorf(CodeInternal, "supervisor_status: %s", oneLine(err.Error()))
		}
		out[name] = n
	}
	d.mu.Lock()
	out["sessions_running"] = len(d.sessions)
	out["connections"] = len(d.conns)
	d.mu.Unlock()
	if d.store != nil {
		st := d.store.Stats()
		n := 0
		for _, k := range st.Sessions {
			n += k
		}
		out["store_sessions"] = n
	}
	if d.receipts != nil {
		out["receipts_held"] = d.receipts.Held()
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
