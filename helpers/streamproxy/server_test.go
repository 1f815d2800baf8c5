// SPDX-License-Identifier: Apache-2.0

package streamproxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestErrCode maps each way Serve ends to its stable code.
func TestErrCode(t *testing.T) {
	for err, want := range map[error]string{
		io.EOF:                                  "eof",
		fmt.Errorf("%w: x", ErrFraming):         "framing",
		fmt.Errorf("%w: x", ErrPipelined):       "pipelined",
		fmt.Errorf("%w: x", ErrUpstreamDrift):   "upstream_drift",
		fmt.Errorf("%w: x", ErrTimeout):         "timeout",
		fmt.Errorf("%w: x", ErrCanceled):        "canceled",
		fmt.Errorf("%w: x", ErrAudit):           "audit",
		fmt.Errorf("%w: x", ErrTransport):       "transport",
		errors.New("something else"):            "internal",
		fmt.Errorf("%w: %v", ErrCanceled, "io"): "canceled",
	} {
		if got := errCode(err); got != want {
			t.Errorf("errCode(%v) = %q, want %q", err, got, want)
		}
	}
}

// TestAuditLog checks the exact line format and the delivered count.
func TestAuditLog(t *testing.T) {
	p := filepath.Join(t.TempDir(), "audit")
	fd, err := unix.Open(p, unix.O_CREAT|unix.O_WRONLY|unix.O_APPEND|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	n := 0
	a := &auditLog{fd: fd, Session: "s-1", Alias: "svc", delivered: func() { n++ }}
	for _, st := range []string{StatusDeliveryPending, StatusDelivered, StatusDeliveryFailed} {
		if err := a.Record(Record{Phase: PhaseExchange, Status: st, LatencyMS: 7}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"seq":1,"session":"s-1","alias":"svc","phase":"exchange","status":"delivery_pending","latency_ms":7}
{"seq":2,"session":"s-1","alias":"svc","phase":"exchange","status":"delivered","latency_ms":7}
{"seq":3,"session":"s-1","alias":"svc","phase":"exchange","status":"delivery_failed","latency_ms":7}
`
	if string(got) != want {
		t.Errorf("audit file:\n%s\nwant:\n%s", got, want)
	}
	if n != 1 {
		t.Errorf("delivered counted %d times, want 1", n)
	}
	// A failing append is an error, not a silent loss.
	bad := &auditLog{fd: -1, delivered: func() {}}
	if err := bad.Record(Record{Phase: PhaseExchange, Status: StatusDelivered}); err == nil {
		t.Error("Record on a bad descriptor succeeded")
	}
}

// TestAuditLogDeferred: a deferred record is appended without fdatasync,
// every other record is synced, and close syncs a deferred last record
// but never retries a failed fdatasync. A pipe takes the appends but
// fails fdatasync (EINVAL), which shows which calls synced.
func TestAuditLogDeferred(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	w2, err := dupCloexec(p[1])
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	a := &auditLog{fd: p[1], Session: "s-1", Alias: "svc", delivered: func() { n++ }}
	if err := a.Record(Record{Phase: PhaseExchange, Status: StatusDelivered, Deferred: true}); err != nil || n != 1 {
		t.Fatalf("deferred delivered: %v, counted %d", err, n)
	}
	if err := a.close(); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("close after a deferred record: %v, want its fdatasync to fail", err)
	}
	b := &auditLog{fd: w2, Session: "s-1", Alias: "svc", delivered: func() { n++ }}
	if err := b.Record(Record{Phase: PhaseExchange, Status: StatusDeliveryPending}); !errors.Is(err, unix.EINVAL) {
		t.Fatalf("pending on a pipe: %v, want its fdatasync to fail", err)
	}
	if err := b.close(); err != nil {
		t.Fatalf("close after a failed fdatasync: %v, want no second fdatasync", err)
	}
	buf := make([]byte, 1024)
	if k, err := unix.Read(p[0], buf); err != nil || bytes.Count(buf[:k], []byte("\n")) != 2 {
		t.Fatalf("pipe holds %q, %v: want both lines", buf[:k], err)
	}
	// Nothing deferred, nothing to sync: close only closes.
	fd, err := unix.Open(filepath.Join(t.TempDir(), "audit"), unix.O_CREAT|unix.O_WRONLY|unix.O_APPEND|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	c := &auditLog{fd: fd, delivered: func() {}}
	if err := c.Record(Record{Phase: PhaseExchange, Status: StatusDeliveryFailed}); err != nil {
		t.Fatal(err)
	}
	if err := c.close(); err != nil || c.unsynced {
		t.Fatalf("close: %v (unsynced %v)", err, c.unsynced)
	}
}
