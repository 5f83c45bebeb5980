package runner_test

import (
	"bytes"
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/reports"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/runner"
	"github.com/stockbench/stockbench/scenarios"
	"github.com/stockbench/stockbench/strategies/registry"
)

// TestFlowAccounting checks the identities the headline figures rest on, in
// every scenario and in both loops: each flow is counted once, in the count,
// in the flow histogram and in the series; TPS is flows per measured second;
// the flows the terminal table shows are those of the measured window.
//
// The sustained cases use a fixed 250 ms pay delay and a 600 ms warm-up:
// some flows complete inside the warm-up (audited, not counted) and some
// reserve in the warm-up and confirm in the measured phase, the case where
// the count and the histogram used to part.
func TestFlowAccounting(t *testing.T) {
	pay := scenarios.Range{Min: 250 * time.Millisecond, Max: 250 * time.Millisecond}
	sustained := func(rate float64) runner.Options {
		o := sustainedOptions()
		o.Warmup, o.Duration, o.Rate = 600*time.Millisecond, time.Second, rate
		o.SustainedPayDelay = pay
		o.Buyers = 32
		// Reservations outlive any pay delay a starved machine stretches:
		// at the default 500 ms TTL a 250 ms pay delay plus a few hundred
		// ms of scheduling let the sweeper expire paid orders (seen at
		// load 33-41), which this test of the counting does not judge.
		o.TTL = time.Minute
		return o
	}
	race := flashOptions(1)
	race.Scenarios, race.Buyers, race.Stock = []string{"race"}, 80, 40
	race.PayDelay = scenarios.Range{Max: 20 * time.Millisecond}
	race.Strategy.SweepPeriod = 50 * time.Millisecond
	flash := flashOptions(1)
	flash.PayDelay = scenarios.Range{Min: 20 * time.Millisecond, Max: 50 * time.Millisecond}
	cases := []struct {
		name     string
		strategy string
		o        runner.Options
	}{
		// Flash sale: the window is the whole run.
		{"flash", "rowlock", flash},
		// Race: duplicate confirms ack twice but are one flow.
		{"race", "lua-tcc", race},
		// Closed loop: flows straddling the warm-up end are counted once.
		{"sustained closed loop", "conditional", sustained(0)},
		// Open loop, every arrival served: latency from the intended start.
		{"sustained open loop", "lua-tcc", sustained(60)},
		// Open loop past capacity (32 buyers × 4 flows/s < 400/s): arrivals
		// queue through the warm-up and complete in the measured phase.
		{"sustained open loop, saturated", "cas", sustained(400)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := registry.Lookup(c.strategy)
			if err != nil {
				t.Fatal(err)
			}
			run, err := runner.RunStrategy(context.Background(), env.Conns, e, c.o.Scenarios[0], c.o)
			if err != nil {
				t.Fatal(err)
			}
			checkFlowCounts(t, run)
			checkFlowAudit(t, run, c.o.Scenarios[0])
		})
	}
}

// checkFlowCounts: every flow counted once — in flows, tps, the series,
// the latency histograms (as results.json carries them) — and reserves
// as many in the latencies as in the outcomes.
func checkFlowCounts(t *testing.T, run results.Run) {
	t.Helper()
	if run.Flows == 0 {
		t.Fatalf("no flow completed: counts %v", run.Counts)
	}
	if got := run.LatencyMS["flow"].Count; got != run.Flows {
		t.Errorf("flows %d, latency_ms.flow.count %d", run.Flows, got)
	}
	if want := float64(run.Flows) / run.DurationSec; math.Abs(run.TPS-want) > 1e-9*want {
		t.Errorf("tps %g, flows / duration_sec = %g", run.TPS, want)
	}
	var seriesFlows int64
	for _, p := range run.Series {
		seriesFlows += p.Flows
	}
	if seriesFlows != run.Flows {
		t.Errorf("series holds %d flows, flows %d", seriesFlows, run.Flows)
	}
	// The histograms travel in results.json: decoded, they give
	// the same figures, and the measured phase has a wall-clock start.
	for _, name := range results.HistogramNames {
		enc, ok := run.Histograms[name]
		if !ok {
			if run.LatencyMS[name].Count > 0 {
				t.Errorf("no %s histogram, %d recorded", name, run.LatencyMS[name].Count)
			}
			continue
		}
		h, err := results.DecodeHistogram(enc)
		if err != nil {
			t.Fatal(err)
		}
		if got := results.PercentilesOf(h); got != run.LatencyMS[name] {
			t.Errorf("decoded %s histogram %+v, latency_ms %+v", name, got, run.LatencyMS[name])
		}
	}
	if from, err := time.Parse(time.RFC3339Nano, run.MeasuredFrom); err != nil || time.Since(from) < time.Duration(run.DurationSec*float64(time.Second)) {
		t.Errorf("measured_from %q (%v): not a start before the measured phase", run.MeasuredFrom, err)
	}
	var reserves int64
	for _, n := range run.Counts["reserve"] {
		reserves += n
	}
	if got := run.LatencyMS["reserve"].Count; got != reserves {
		t.Errorf("reserve latency count %d, reserve outcomes %d", got, reserves)
	}
}

// checkFlowAudit: a safe strategy broke nothing, the audit's confirmed
// units agree with the flows (less the warm-up's in a sustained run),
// and the table shows the measured window's flows.
func checkFlowAudit(t *testing.T, run results.Run, scenario string) {
	t.Helper()
	a := run.Audit
	if a.OversoldUnits != 0 || a.LostAcks != 0 || a.CancelAckViolations != 0 || a.InvariantViolations != 0 {
		t.Fatalf("a safe strategy broke: %+v", a)
	}
	if scenario == "sustained" {
		// One confirm per journey: every confirm ack in the window is a flow.
		if ok := run.Counts["confirm"]["ok"]; ok != run.Flows {
			t.Errorf("confirm ok in the window %d, flows %d", ok, run.Flows)
		}
		// The warm-up's confirmed units are audited but not counted.
		if a.ConfirmedUnits <= run.Flows {
			t.Errorf("confirmed units %d (whole run) ≤ flows %d: warm-up counted", a.ConfirmedUnits, run.Flows)
		}
	} else if a.ConfirmedUnits != run.Flows {
		// The window is the whole run, and the strategy is safe: each
		// confirmed order (one unit) was one flow.
		t.Errorf("audit confirmed %d units, flows %d", a.ConfirmedUnits, run.Flows)
	}
	// The table shows the measured window's flows, not the audit's.
	var buf bytes.Buffer
	reports.Table(&buf, analysis.Analyze(&results.Results{Runs: []results.Run{run}}))
	if got := tableCell(t, buf.String(), "flows"); got != strconv.FormatInt(run.Flows, 10) {
		t.Errorf("table shows flows %q, run has %d:\n%s", got, run.Flows, buf.String())
	}
}

// tableCell returns the cell under header col in the first data row of a
// terminal table whose columns are separated by two or more spaces.
func tableCell(t *testing.T, table, col string) string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) < 2 {
		t.Fatalf("table has no data row:\n%s", table)
	}
	split := func(s string) []string {
		var out []string
		for _, f := range strings.Split(strings.TrimSpace(s), "  ") {
			if f = strings.TrimSpace(f); f != "" {
				out = append(out, f)
			}
		}
		return out
	}
	head, row := split(lines[0]), split(lines[1])
	for i, h := range head {
		if h == col && i < len(row) {
			return row[i]
		}
	}
	t.Fatalf("no column %q in %q", col, lines[0])
	return ""
}
