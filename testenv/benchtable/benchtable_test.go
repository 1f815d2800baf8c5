// SPDX-License-Identifier: Apache-2.0

package benchtable

import (
	"math"
	"strings"
	"testing"
)

const sample = `goos: linux
BenchmarkStartTrue/plain-2         	     100	    900000 ns/op	         0.90 p50-ms	         1.10 p95-ms
BenchmarkStartTrue/glove-shim-2    	     100	  21000000 ns/op	        21.0 p50-ms	        25.0 p95-ms	         1.00 x-glove
BenchmarkStartTrue/bwrap-2         	     100	   4700000 ns/op	         4.70 p50-ms	         6.00 p95-ms	         0.22 x-glove
BenchmarkStartTrue/crun-2          	     100	  12000000 ns/op	        12.0 p50-ms	        14.0 p95-ms	         0.57 x-glove
BenchmarkStreamproxyExchange1KiB	     300	    500000 ns/op	    450000 p50-ns	     20000 direct-p50-ns	    300000 fdatasync-p50-ns
    bench_test.go:80: BenchmarkStartTrue/glove-shim summary
PASS
`

func TestParse(t *testing.T) {
	res, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	for m, want := range map[Metric]float64{
		{"BenchmarkStartTrue/glove-shim", "p50-ms"}:              21,
		{"BenchmarkStartTrue/bwrap", "p95-ms"}:                   6,
		{"BenchmarkStartTrue/plain", "ns/op"}:                    900000,
		{"BenchmarkStreamproxyExchange1KiB", "fdatasync-p50-ns"}: 300000,
	} {
		if got, ok := res[m]; !ok || got != want {
			t.Errorf("%v: got %v (present %v), want %v", m, got, ok, want)
		}
	}
}

// TestParseRefuses: a figure is never misread; a line that is not a
// benchmark's result is passed over.
func TestParseRefuses(t *testing.T) {
	for _, bad := range []string{
		"BenchmarkX-2  100  5 ns/op 3\n",       // a value without its unit
		"BenchmarkX-2  100  five ns/op\n",      // not a number
		"BenchmarkX-2  100  1e999999 p50-ms\n", // out of range
	} {
		if _, err := Parse(strings.NewReader(bad)); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	res, err := Parse(strings.NewReader("BenchmarkX is slow today\n"))
	if err != nil || len(res) != 0 {
		t.Errorf("a log line: %v, %v", res, err)
	}
}

func TestEvaluate(t *testing.T) {
	res, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	byWhat := func(i int) Outcome { return Evaluate(Table[i], res) }
	if o := byWhat(0); o.Met() || o.Ratio < 4.46 || o.Ratio > 4.47 { // 21 / 4.7
		t.Errorf("shim vs bwrap: ratio %.3f met %v", o.Ratio, o.Met())
	}
	stream := Row{Value: Metric{"BenchmarkStreamproxyExchange1KiB", "p50-ns"}, Goal: 1,
		Anchor: []Term{{1, Metric{"BenchmarkStreamproxyExchange1KiB", "direct-p50-ns"}}, {1.2, Metric{"BenchmarkStreamproxyExchange1KiB", "fdatasync-p50-ns"}}}}
	if o := Evaluate(stream, res); o.Met() || math.Abs(o.Against-0.38) > 1e-9 || o.Glove != 0.45 {
		t.Errorf("stream: %+v", o) // 0.45 ms against 0.02 + 1.2 x 0.3 = 0.38 ms: 1.18 > 1
	}
	// A figure the run did not report is "not measured", never met.
	o := Evaluate(Row{Value: Metric{"BenchmarkNone", "p50-ms"}, Anchor: []Term{{1, Metric{"BenchmarkStartTrue/crun", "p50-ms"}}}, Goal: 9}, res)
	if o.Met() || len(o.Missing) != 1 || !strings.Contains(Markdown([]Outcome{o}), "not measured (BenchmarkNone p50-ms)") {
		t.Errorf("missing figure: %+v", o)
	}
	// A benchmark's own paired ratio is the row's, not the ratio of medians.
	paired := Row{Value: Metric{"BenchmarkStartTrue/crun", "p50-ms"}, Anchor: []Term{{1, Metric{"BenchmarkStartTrue/bwrap", "p50-ms"}}},
		Goal: 1, Ratio: &Metric{"BenchmarkStartTrue/bwrap", "x-glove"}}
	if o := Evaluate(paired, res); o.Ratio != 0.22 || !o.Met() {
		t.Errorf("paired ratio: %+v", o)
	}
	strict := Row{Value: Metric{"BenchmarkStartTrue/crun", "p50-ms"}, Anchor: []Term{{1, Metric{"BenchmarkStartTrue/crun", "p50-ms"}}}, Goal: 1, Strict: true}
	if Evaluate(strict, res).Met() {
		t.Error("a strict goal of 1 met by a ratio of exactly 1")
	}
}
