package integration

import (
	"bytes"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/testenv"
)

// BenchmarkStreamproxyExchange1KiB measures a 1 KiB request / 1 KiB
// response round trip made by the sandboxed program's end through a real
// glove-streamproxy (started as the service user, restricted, with its
// durable audit: a JSON line and an fdatasync per record, two records per
// exchange) to a real upstream echo service and back, beside its anchor:
// the same round trip made directly over a unix socket to the same kind of
// upstream (the test's echo server, listening as the service user), with
// no helper. Each sub-benchmark reports exchanges/s and p50/p99 latency
// of the round trip; proxy also reports its ratios to direct in the same
// run (run them together: -bench StreamproxyExchange).
//
// The relay refuses a request sent before it recorded the previous
// exchange delivered (its post-send rule), so after each response the
// proxy run polls streamwire Status, without sleeping, until the exchange is
// counted. That wait is left out of the round trip and of ns/op and
// exchanges/s, and reported on its own as settle-p50-us / settle-p99-us
// (it holds the delivered record's fdatasync and at least one streamwire Status
// call) and settle-polls/op. Root only (testenv skips otherwise); `make
// bench` runs it.
func BenchmarkStreamproxyExchange1KiB(b *testing.B) {
	env := testenv.Get(b)
	testenv.CheckLeaks(b, env.UID)
	payload := bytes.Repeat([]byte{'q'}, 1024)
	frame := spEncode(payload)
	const warmup = 5
	var direct spBenchStats

	roundTrip := func(b *testing.B, c net.Conn) time.Duration {
		t0 := time.Now()
		if _, err := c.Write(frame); err != nil {
			b.Fatal(err)
		}
		got, err := spReadFrame(c)
		d := time.Since(t0)
		if err != nil {
			b.Fatalf("read response: %v", err)
		}
		if !bytes.Equal(got, payload) {
			b.Fatalf("response of %d bytes is not the request", len(got))
		}
		return d
	}

	b.Run("direct", func(b *testing.B) {
		dir := spDir(b, env)
		up := spListen(b, env, dir, true)
		up.discard = true
		f := up.connect(b)
		c, err := net.FileConn(f)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		f.Close()
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		for range warmup {
			roundTrip(b, c)
		}
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			lat = append(lat, roundTrip(b, c))
		}
		b.StopTimer()
		direct = spBenchReport(b, lat)
	})

	b.Run("proxy", func(b *testing.B) {
		s := spOpenWith(b, env, func(u *spUpstream) { u.discard = true })
		_ = s.client.SetDeadline(time.Now().Add(time.Minute))
		var polls int
		settle := func() time.Duration {
			t0 := time.Now()
			s.exchanges++
			for {
				polls++
				st := s.status()
				if st.Exchanges == s.exchanges {
					return time.Since(t0)
				}
				if !st.Open || time.Since(t0) > 10*time.Second {
					b.Fatalf("exchange %d not counted: %+v\nhelper log: %s", s.exchanges, st, s.log)
				}
			}
		}
		for range warmup {
			roundTrip(b, s.client)
			settle()
		}
		polls = 0
		lat := make([]time.Duration, 0, b.N)
		settles := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for range b.N {
			lat = append(lat, roundTrip(b, s.client))
			b.StopTimer()
			settles = append(settles, settle())
			b.StartTimer()
		}
		b.StopTimer()
		st := spBenchReport(b, lat)
		slices.Sort(settles)
		b.ReportMetric(spPercentile(settles, 50), "settle-p50-us")
		b.ReportMetric(spPercentile(settles, 99), "settle-p99-us")
		b.ReportMetric(float64(polls)/float64(b.N), "settle-polls/op")
		if direct.n > 0 {
			b.ReportMetric(st.mean/direct.mean, "x-direct-time")
			b.ReportMetric(st.p50/direct.p50, "x-direct-p50")
			b.ReportMetric(st.p99/direct.p99, "x-direct-p99")
			b.ReportMetric(st.rate/direct.rate, "x-direct-exchanges/s")
		}
		// Every exchange, warm-up included, is durably pending then
		// delivered, in order.
		got := s.auditStatuses()
		if want := 2 * (warmup + b.N); len(got) != want {
			b.Fatalf("audit has %d records, want %d", len(got), want)
		}
		for i, status := range got {
			if want := [2]string{"delivery_pending", "delivered"}[i%2]; status != want {
				b.Fatalf("audit record %d is %s, want %s", i+1, status, want)
			}
		}
	})
}

// spBenchStats are one sub-benchmark's round-trip figures: mean, p50 and
// p99 in microseconds, and round trips per second of round-trip time.
type spBenchStats struct {
	n                    int
	mean, p50, p99, rate float64
}

// spBenchReport reports exchanges/s, p50-us and p99-us of the round trips
// in lat (sorting it) and returns them.
func spBenchReport(b *testing.B, lat []time.Duration) spBenchStats {
	b.Helper()
	if len(lat) == 0 {
		return spBenchStats{}
	}
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	slices.Sort(lat)
	st := spBenchStats{
		n:    len(lat),
		mean: float64(sum.Nanoseconds()) / 1e3 / float64(len(lat)),
		p50:  spPercentile(lat, 50),
		p99:  spPercentile(lat, 99),
		rate: float64(len(lat)) / sum.Seconds(),
	}
	b.ReportMetric(st.rate, "exchanges/s")
	b.ReportMetric(st.p50, "p50-us")
	b.ReportMetric(st.p99, "p99-us")
	return st
}

// spPercentile is the pth percentile of the sorted durations, in
// microseconds.
func spPercentile(sorted []time.Duration, p int) float64 {
	return float64(sorted[len(sorted)*p/100].Nanoseconds()) / 1e3
}
