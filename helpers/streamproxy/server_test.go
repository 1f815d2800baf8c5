package streamproxy

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/glove-sandbox/glove/helpers/streamproxy/relay"
	"golang.org/x/sys/unix"
)

// TestErrCode maps each way relay.Serve ends to its stable code.
func TestErrCode(t *testing.T) {
	for err, want := range map[error]string{
		io.EOF:                                        CodeEOF,
		fmt.Errorf("%w: x", relay.ErrFraming):         CodeFraming,
		fmt.Errorf("%w: x", relay.ErrPipelined):       CodePipelined,
		fmt.Errorf("%w: x", relay.ErrUpstreamDrift):   CodeDrift,
		fmt.Errorf("%w: x", relay.ErrTimeout):         CodeTimeout,
		fmt.Errorf("%w: x", relay.ErrCanceled):        CodeCanceled,
		fmt.Errorf("%w: x", relay.ErrAudit):           CodeAudit,
		fmt.Errorf("%w: x", relay.ErrTransport):       CodeTransport,
		errors.New("something else"):                  CodeInternal,
		fmt.Errorf("%w: %v", relay.ErrCanceled, "io"): CodeCanceled,
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
	a := &auditLog{fd: fd, session: "s-1", alias: "svc", delivered: func() { n++ }}
	for _, st := range []string{relay.StatusDeliveryPending, relay.StatusDelivered, relay.StatusDeliveryFailed} {
		if err := a.Record(relay.Record{Phase: relay.PhaseExchange, Status: st, LatencyMS: 7}); err != nil {
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
	if err := bad.Record(relay.Record{Phase: relay.PhaseExchange, Status: relay.StatusDelivered}); err == nil {
		t.Error("Record on a bad descriptor succeeded")
	}
}
