// SPDX-License-Identifier: Apache-2.0

package benchtable

// Table is issue 19's acceptance, one row a figure: each benchmark
// measures Glove and its anchor in the same run, at 30 iterations or
// more, and reports the figures read here.
var Table = []Row{
	{What: "glove-shim `/bin/true`, p50", Run: shimRun, Value: Metric{"BenchmarkStartTrue/glove-shim", "p50-ms"},
		Anchor: []Term{{1, Metric{"BenchmarkStartTrue/bwrap", "p50-ms"}}}, Goal: 2},
	{What: "glove-shim `/bin/true`, p95", Run: shimRun, Value: Metric{"BenchmarkStartTrue/glove-shim", "p95-ms"},
		Anchor: []Term{{1, Metric{"BenchmarkStartTrue/bwrap", "p95-ms"}}}, Goal: 2},
	{What: "glove-shim `/bin/true`, p50", Run: shimRun, Value: Metric{"BenchmarkStartTrue/glove-shim", "p50-ms"},
		Anchor: []Term{{1, Metric{"BenchmarkStartTrue/crun", "p50-ms"}}}, Goal: 1, Strict: true},
	{What: "glove-shim `/bin/true`, p95", Run: shimRun, Value: Metric{"BenchmarkStartTrue/glove-shim", "p95-ms"},
		Anchor: []Term{{1, Metric{"BenchmarkStartTrue/crun", "p95-ms"}}}, Goal: 1, Strict: true},
	{What: "start_session → first output byte, p50", Run: startRun, Value: Metric{"BenchmarkStartToFirstByte/glove", "p50-ms"},
		Anchor: []Term{{1, Metric{"BenchmarkStartToFirstByte/crun", "p50-ms"}}}, Goal: 1},
	{What: "glove-mounter Bind round trip, p50", Run: mounterRun, Value: Metric{"BenchmarkMounterBind/helper", "p50-ns"},
		Anchor: []Term{{1, Metric{"BenchmarkMounterBind/helper", "direct-p50-ns"}}, {1, Metric{"BenchmarkMounterBind/helper", "raw-p50-ns"}}}, Goal: 2},
	{What: "journal durable append, p50", Run: journalRun, Value: Metric{"BenchmarkAppend", "p50-ns"},
		Anchor: []Term{{1, Metric{"BenchmarkAppend", "anchor-p50-ns"}}}, Goal: 1.2},
	{What: "stream proxy 1 KiB exchange, p50", Run: streamRun, Value: Metric{"BenchmarkStreamproxyExchange1KiB", "p50-ns"},
		Anchor: []Term{{1, Metric{"BenchmarkStreamproxyExchange1KiB", "direct-p50-ns"}}, {1.2, Metric{"BenchmarkStreamproxyExchange1KiB", "fdatasync-p50-ns"}}}, Goal: 1},
	{What: "egress endpoint: new connection, 1 KiB each way, p50", Run: egressRun, Value: Metric{"BenchmarkEgressConnect1KiB", "p50-ns"},
		Anchor: []Term{{1, Metric{"BenchmarkEgressConnect1KiB", "socat-p50-ns"}}}, Goal: 1},
	{What: "egress endpoint: new connection, 4 MiB each way, p50", Run: egressRun, Value: Metric{"BenchmarkEgressStream4MiB", "p50-ns"},
		Anchor: []Term{{1, Metric{"BenchmarkEgressStream4MiB", "socat-p50-ns"}}}, Goal: 1},
	{What: "memory a running session adds (PSS, KiB; 16 sessions of `sleep`)", Run: pssRun, Value: Metric{"BenchmarkSessionPSS", "glove-kib"},
		Anchor: []Term{{1, Metric{"BenchmarkSessionPSS", "bwrap-kib"}}}, Goal: 2},
	{What: "200 sessions of `/bin/true`, concurrency 8, wall time (median of 3 batches)", Run: throughputRun, Value: Metric{"BenchmarkStartThroughput", "glove-s"},
		Anchor: []Term{{1, Metric{"BenchmarkStartThroughput", "crun-s"}}}, Goal: 1.5,
		Ratio: &Metric{"BenchmarkStartThroughput", "goal-ratio"}}, // the median of each batch's glove/crun
}

var (
	shimRun       = Run{Pkg: "./shim/", Bench: "^BenchmarkStartTrue$", Benchtime: "100x"}
	startRun      = Run{Pkg: "./supervisor/service/daemon/", Bench: "^BenchmarkStartToFirstByte$", Benchtime: "30x"}
	throughputRun = Run{Pkg: "./supervisor/service/daemon/", Bench: "^BenchmarkStartThroughput$", Benchtime: "3x"} // 3 batches of 200 each
	mounterRun    = Run{Pkg: "./helpers/integration/", Bench: "^BenchmarkMounterBind$/^helper$", Benchtime: "2000x"}
	journalRun    = Run{Pkg: "./supervisor/state/journal/", Bench: "^BenchmarkAppend$", Benchtime: "300x"}
	pssRun        = Run{Pkg: "./supervisor/service/daemon/", Bench: "^BenchmarkSessionPSS$", Benchtime: "1x"}
	egressRun     = Run{Pkg: "./supervisor/engine/egress/", Bench: "^BenchmarkEgress(Connect1KiB|Stream4MiB)$", Benchtime: "100x"}
	streamRun     = Run{Pkg: "./helpers/integration/", Bench: "^BenchmarkStreamproxyExchange1KiB$", Benchtime: "300x"}
)

// Runs are the distinct runs of Table, in its order.
func Runs(rows []Row) []Run {
	var out []Run
	seen := map[Run]bool{}
	for _, r := range rows {
		if !seen[r.Run] {
			seen[r.Run] = true
			out = append(out, r.Run)
		}
	}
	return out
}
