// SPDX-License-Identifier: Apache-2.0

// Package benchtable runs the project's benchmarks and prints the one
// table `make bench` shows: each figure of Glove's, the anchor it is
// measured against in the same run (bubblewrap, crun, an in-process call,
// one write + fdatasync), the ratio, and the goal the ratio is held to
// (issue 19). The figures come from the benchmarks' own reported metrics
// (b.ReportMetric): this package computes nothing but the ratios, so a
// figure in the table is always one a benchmark measured.
package benchtable

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Run is one `go test -bench` invocation.
type Run struct {
	Pkg       string // ./shim/
	Bench     string // the -bench pattern
	Benchtime string // e.g. 100x: at least 30 iterations, so a p50 is a median of 30 runs or more
}

// Args are the go command's arguments for r.
func (r Run) Args() []string {
	return []string{"test", "-run=NONE", "-bench=" + r.Bench, "-benchtime=" + r.Benchtime, "-count=1", r.Pkg}
}

// Metric names one figure: a benchmark's name (without the -GOMAXPROCS
// suffix) and the unit it reported the figure under.
type Metric struct {
	Bench, Unit string
}

// Term is Coef times a metric; an anchor is a sum of terms (the stream
// proxy's goal is direct + 1.2 x one fdatasync).
type Term struct {
	Coef float64
	Metric
}

// Row is one line of the table: Value / sum(Anchor) held to Goal.
type Row struct {
	What   string
	Run    Run
	Value  Metric
	Anchor []Term
	Goal   float64
	Strict bool // the ratio must be below Goal, not at most Goal
	// Ratio, if set, is the benchmark's own ratio, computed from paired
	// samples (each batch against the anchor's batch of the same run),
	// which the ratio of two medians is not; the row shows it.
	Ratio *Metric
}

// Results are the figures of a run: benchmark name, unit, value.
type Results map[Metric]float64

var procSuffix = regexp.MustCompile(`-[0-9]+$`)

// Parse reads `go test -bench` output and returns every figure of every
// benchmark line; other lines are ignored. A benchmark line is its name,
// its iteration count, then value-unit pairs; an odd pair or a value that
// is not a number is an error, so a figure is never misread.
func Parse(r io.Reader) (Results, error) {
	res := Results{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.ParseUint(f[1], 10, 64); err != nil {
			continue // a log line that starts with a benchmark's name
		}
		if len(f)%2 != 0 {
			return nil, fmt.Errorf("benchmark output line %d: %q: a value without its unit", line, sc.Text())
		}
		name := procSuffix.ReplaceAllString(f[0], "")
		for i := 2; i < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchmark output line %d: value %q of %s: %w", line, f[i], f[i+1], err)
			}
			res[Metric{name, f[i+1]}] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read benchmark output: %w", err)
	}
	return res, nil
}

// Outcome is a row evaluated against the figures of a run.
type Outcome struct {
	Row
	Glove, Against, Ratio float64  // in ms where a time; Against is the anchor's sum
	Missing               []Metric // figures the run did not report
}

// Met says whether the ratio meets the goal.
func (o Outcome) Met() bool {
	if len(o.Missing) > 0 {
		return false
	}
	if o.Strict {
		return o.Ratio < o.Goal
	}
	return o.Ratio <= o.Goal
}

// Evaluate computes row's ratio from res.
func Evaluate(row Row, res Results) Outcome {
	o := Outcome{Row: row}
	get := func(m Metric) float64 {
		v, ok := res[m]
		if !ok {
			o.Missing = append(o.Missing, m)
		}
		return toMillis(v, m.Unit)
	}
	o.Glove = get(row.Value)
	for _, t := range row.Anchor {
		o.Against += t.Coef * get(t.Metric)
	}
	switch {
	case row.Ratio != nil:
		o.Ratio = get(*row.Ratio)
	case o.Against > 0:
		o.Ratio = o.Glove / o.Against
	case len(o.Missing) == 0:
		o.Missing = append(o.Missing, row.Anchor[0].Metric) // an anchor of 0 measured nothing
	}
	return o
}

// toMillis converts a time figure to milliseconds by its unit's suffix;
// other figures (a ratio, a count) are returned as they are.
func toMillis(v float64, unit string) float64 {
	switch {
	case unit == "ns/op" || strings.HasSuffix(unit, "-ns"):
		return v / 1e6
	case strings.HasSuffix(unit, "-us"):
		return v / 1e3
	case strings.HasSuffix(unit, "-s"):
		return v * 1e3
	}
	return v
}

// Markdown renders outcomes as the table `make bench` prints.
func Markdown(outs []Outcome) string {
	var b strings.Builder
	b.WriteString("| what | Glove (ms) | anchor (ms) | anchor is | ratio | goal | met |\n")
	b.WriteString("| --- | ---: | ---: | --- | ---: | --- | --- |\n")
	for _, o := range outs {
		var names []string
		for _, t := range o.Anchor {
			n := shortName(t.Metric, o.Value.Bench)
			if t.Coef != 1 {
				n = fmt.Sprintf("%g × %s", t.Coef, n)
			}
			names = append(names, n)
		}
		op := "≤"
		if o.Strict {
			op = "<"
		}
		if len(o.Missing) > 0 {
			var miss []string
			for _, m := range o.Missing {
				miss = append(miss, m.Bench+" "+m.Unit)
			}
			fmt.Fprintf(&b, "| %s | - | - | %s | - | %s %g | not measured (%s) |\n",
				o.What, strings.Join(names, " + "), op, o.Goal, strings.Join(miss, ", "))
			continue
		}
		met := "no"
		if o.Met() {
			met = "yes"
		}
		fmt.Fprintf(&b, "| %s | %.3f | %.3f | %s | %.2f | %s %g | %s |\n",
			o.What, o.Glove, o.Against, strings.Join(names, " + "), o.Ratio, op, o.Goal, met)
	}
	return b.String()
}

// shortName is a metric's sub-benchmark name and unit, for the anchor
// column: its unit alone when it is a figure of the row's own benchmark.
func shortName(m Metric, own string) string {
	if m.Bench == own {
		return m.Unit
	}
	name := m.Bench
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	return name + " " + m.Unit
}
