// SPDX-License-Identifier: Apache-2.0

package streamproxy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

type nopAudit struct{}

func (nopAudit) Record(Record) error { return nil }

// syncAudit appends a fixed-size line per record and, as the audit file
// does, fdatasyncs it unless the record is deferred.
type syncAudit struct{ f *os.File }

func (a syncAudit) Record(r Record) error {
	if _, err := fmt.Fprintf(a.f, "s1 alias %s %s %d\n", r.Phase, r.Status, r.LatencyMS); err != nil {
		return err
	}
	if r.Deferred {
		return nil
	}
	return unix.Fdatasync(int(a.f.Fd()))
}

// benchEcho serves frames on c until it fails.
func benchEcho(c Conn) {
	buf := make([]byte, 0, HeaderSize+HardMaxFrameBytes)
	for {
		req, err := ReadFrame(c, HardMaxFrameBytes, time.Time{})
		if err != nil {
			return
		}
		buf, _ = AppendFrame(buf[:0], req, HardMaxFrameBytes)
		if _, err := c.Write(buf); err != nil {
			return
		}
	}
}

// BenchmarkExchange1KiB compares a 1 KiB request/response round trip made
// directly over a unix socketpair with the same round trip through the
// relay, with a no-op audit and with an audit that fdatasyncs a file per
// durable record (one per exchange), and measures one append+fdatasync on
// the same file system (fdatasync). Each sub-benchmark reports
// exchanges/s and p50/p99 latency; the relay ones also report their ratio
// to the direct run of the same invocation, and relay-fdatasync-audit its
// goal-ratio, p50 / (direct p50 + 1.2 x fdatasync p50), the goal of issue
// 19 (run them together: -bench 'Exchange1KiB').
func BenchmarkExchange1KiB(b *testing.B) {
	payload := filled(1024, 'q')
	frame := mustAppend(b, payload, HardMaxFrameBytes)
	var directNS, directP50, directP99, syncP50 float64

	report := func(b *testing.B, lat []time.Duration, elapsed time.Duration, unit string) (float64, float64, float64) {
		slices.Sort(lat)
		p50 := float64(lat[len(lat)/2].Nanoseconds())
		p99 := float64(lat[len(lat)*99/100].Nanoseconds())
		ops := float64(len(lat)) / elapsed.Seconds()
		b.ReportMetric(ops, unit)
		b.ReportMetric(p50/1e3, "p50-µs")
		b.ReportMetric(p99/1e3, "p99-µs")
		return float64(elapsed.Nanoseconds()) / float64(len(lat)), p50, p99
	}

	b.Run("direct", func(b *testing.B) {
		client, server := pair(b)
		defer client.Close()
		done := make(chan struct{})
		go func() { defer close(done); benchEcho(server) }()
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		start := time.Now()
		for range b.N {
			t0 := time.Now()
			if _, err := client.Write(frame); err != nil {
				b.Fatal(err)
			}
			if _, err := ReadFrame(client, HardMaxFrameBytes, time.Time{}); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		elapsed := time.Since(start)
		b.StopTimer()
		directNS, directP50, directP99 = report(b, lat, elapsed, "exchanges/s")
		_ = server.Close()
		<-done
	})

	b.Run("fdatasync", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "audit"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		a := syncAudit{f}
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		start := time.Now()
		for range b.N {
			t0 := time.Now()
			if err := a.Record(Record{Phase: PhaseExchange, Status: StatusDeliveryPending}); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		_, syncP50, _ = report(b, lat, time.Since(start), "records/s")
	})

	for _, tc := range []struct {
		name  string
		audit func(b *testing.B) (Audit, func())
	}{
		{"relay-nop-audit", func(*testing.B) (Audit, func()) { return nopAudit{}, func() {} }},
		{"relay-fdatasync-audit", func(b *testing.B) (Audit, func()) {
			f, err := os.Create(filepath.Join(b.TempDir(), "audit"))
			if err != nil {
				b.Fatal(err)
			}
			return syncAudit{f}, func() { _ = f.Close() }
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			audit, closeAudit := tc.audit(b)
			defer closeAudit()
			g0, guest := pair(b)
			defer guest.Close()
			u0, up := pair(b)
			r, err := NewRelay(RelayConfig{Guest: g0, Upstream: u0, MaxFrame: HardMaxFrameBytes, MaxExchange: 10 * time.Second, Audit: audit})
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan struct{})
			go func() { defer close(done); benchEcho(up) }()
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				// Sequential guest: the next request is sent only
				// after Exchange returned, so it never races the
				// post-send peek.
				t0 := time.Now()
				if _, err := guest.Write(frame); err != nil {
					b.Fatal(err)
				}
				if err := r.Exchange(ctx); err != nil {
					b.Fatal(err)
				}
				if _, err := ReadFrame(guest, HardMaxFrameBytes, time.Time{}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			elapsed := time.Since(start)
			b.StopTimer()
			ns, p50, p99 := report(b, lat, elapsed, "exchanges/s")
			if directNS > 0 {
				b.ReportMetric(ns/directNS, "x-direct-time")
				b.ReportMetric(p50/directP50, "x-direct-p50")
				b.ReportMetric(p99/directP99, "x-direct-p99")
			}
			if _, ok := audit.(syncAudit); ok && directNS > 0 && syncP50 > 0 {
				b.ReportMetric(p50/(directP50+1.2*syncP50), "goal-ratio")
			}
			_ = r.Close()
			_ = up.Close()
			<-done
		})
	}
}
