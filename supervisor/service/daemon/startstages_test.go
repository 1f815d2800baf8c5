// SPDX-License-Identifier: Apache-2.0

package daemon_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/glove-sandbox/glove/testenv"
)

// stagePoints are the start path's points in the order a session passes
// them (faults.go's hook in a glove_testfaults build with
// GLOVED_TEST_TRACE): gloved's own, then the engine's (session.Env.Fault).
// A helper's point follows its start and Hello; a point absent from a
// session (glove-loopext4 without a retained copy) is skipped. "cgroup"
// is passed once the cgroups, made while the mounts and the bundle are,
// are done too: its figure is what the start still waits for them.
var stagePoints = []string{"start", "validated", "resolved", "helper:glove-mounter", "helper:glove-cgroup",
	"helper:glove-loopext4", "reserved", "starting", "prepare", "mounts", "bundle", "cgroup", "fork", "exec", "spawned", "recorded", "placed", "released"}

// BenchmarkStartStages breaks the start path of BenchmarkStartToFirstByte
// down, stage by stage: the same session (the harness with "line", the
// workspace copied), through the test-fault build of gloved, which logs
// the wall clock at each start-path point. Each stage's p50 is reported
// as a metric named after the point it ends at ("<point>-ms", the time
// since the point before it); "send" is the request's way to gloved and
// "first-byte" from the release to the first byte of output at the client.
// It is a diagnostic, not a goal: the trace adds a write per point.
func BenchmarkStartStages(b *testing.B) {
	e := testenv.Get(b)
	testenv.CheckLeaks(b, e.UID)
	e.ConfigureForSessions(b)
	f := newFixture(b, e, map[string][]string{"line": {"line"}})
	g := startGlovedAt(b, e, buildFaultyGloved(b, e), []string{"GLOVED_TEST_TRACE=1"}, f.args...)
	c, err := dialRaw(g.socket)
	if err != nil {
		b.Fatal(err)
	}
	type times struct{ sent, first int64 }
	var runs []times
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		id := fmt.Sprintf("stages-%d", i)
		plObj, err := planObject(f.plan("line", "tiny"))
		if err != nil {
			b.Fatal(err)
		}
		var cr struct {
			Token string `json:"start_token"`
		}
		if err := c.call("create_session", createParams(id, plObj), &cr); err != nil {
			b.Fatalf("%v\nlog: %s", err, g.log)
		}
		b.StartTimer()
		var t times
		t.sent = time.Now().UnixMicro()
		if err := c.call("start_session", map[string]any{"session_id": id, "start_token": cr.Token}, nil); err != nil {
			b.Fatalf("%v\nlog: %s", err, g.log)
		}
		end, err := c.attach(id, func() { t.first = time.Now().UnixMicro() })
		b.StopTimer()
		if err != nil || end.State != "exited" || end.Status != 0 || t.first == 0 {
			b.Fatalf("%s: %v, ended %+v, output %q\nlog: %s", id, err, end.End, end.output, g.log)
		}
		runs = append(runs, t)
		if err := c.call("cleanup_session", map[string]any{"session_id": id}, nil); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	c.Close()
	g.stop(b)

	// The trace lines, one session after the other (the sessions ran one
	// at a time): each begins at "start".
	var sessions []map[string]int64
	for _, line := range strings.Split(g.log.String(), "\n") {
		var tr struct {
			Trace string `json:"trace"`
			At    int64  `json:"at_us"`
		}
		if !strings.HasPrefix(line, `{"trace"`) || json.Unmarshal([]byte(line), &tr) != nil {
			continue
		}
		if tr.Trace == "start" {
			sessions = append(sessions, map[string]int64{})
		}
		if len(sessions) > 0 {
			sessions[len(sessions)-1][tr.Trace] = tr.At
		}
	}
	if len(sessions) != len(runs) {
		b.Fatalf("%d traced starts for %d sessions\nlog: %s", len(sessions), len(runs), g.log)
	}
	stages := map[string][]float64{}
	var order []string
	add := func(name string, from, to int64) {
		if !slices.Contains(order, name) {
			order = append(order, name)
		}
		stages[name] = append(stages[name], float64(to-from)/1000)
	}
	for i, s := range sessions {
		prev := runs[i].sent
		add("send", prev, s["start"])
		prev = s["start"]
		for _, p := range stagePoints[1:] {
			at, ok := s[p]
			if !ok {
				continue
			}
			add(p, prev, at)
			prev = at
		}
		add("first-byte", prev, runs[i].first)
		add("total", runs[i].sent, runs[i].first)
	}
	var tab strings.Builder
	fmt.Fprintf(&tab, "start path stages, p50 over %d sessions (ms since the point before):\n", len(runs))
	for _, name := range order {
		v := stages[name]
		slices.Sort(v)
		p50 := v[(len(v)-1)/2]
		b.ReportMetric(p50, name+"-ms")
		fmt.Fprintf(&tab, "  %-22s %7.2f\n", name, p50)
	}
	b.Logf("%s", tab.String())
}
