package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/stockbench/stockbench/runner"
	"github.com/stockbench/stockbench/scenarios"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/registry"
)

// sustainedOptions: buyers confirm, cancel and abandon; the TTL is shorter
// than the run, so expiry happens under load.
func sustainedOptions() runner.Options {
	return runner.Options{Queue: runner.DefaultQueue, Scenarios: []string{"sustained"}, Params: scenarios.Params{Stock: 50, Buyers: 16, SKUs: 3,
		Skew: scenarios.Skew{Kind: "uniform"}, Mix: scenarios.Mix{Confirm: 0.7, Cancel: 0.2, Abandon: 0.1},
		Duration: 1500 * time.Millisecond, Warmup: 500 * time.Millisecond, TTL: 500 * time.Millisecond,
		Seed: 1}, OpTimeout: 10 * time.Second, SettleTimeout: time.Minute,
		Strategy: strategies.Config{OutboxPeriod: 100 * time.Millisecond, ReconcilePeriod: 100 * time.Millisecond,
			SweepPeriod: 100 * time.Millisecond}}
}

// TestSustained runs the closed and the open loop on a small catalog and
// checks the measured phase, the series, restocks and the audit.
func TestSustained(t *testing.T) {
	cases := []struct {
		name     string
		strategy string
		rate     float64
		mix      scenarios.Mix // zero: sustainedOptions'
	}{
		{"closed loop, MySQL", "conditional", 0, scenarios.Mix{}},
		{"closed loop, Redis", "lua-tcc", 0, scenarios.Mix{}},
		{"closed loop, outbox with its relay and reconciler", "outbox", 0, scenarios.Mix{}},
		{"open loop", "rowlock", 150, scenarios.Mix{}},
		// Buyers who pay and then get a refund: each refund acknowledged,
		// its unit available again once (issue 46).
		{"closed loop with refunds, MySQL", "rowlock", 0, scenarios.Mix{Confirm: 0.5, Cancel: 0.1, Refund: 0.3, Abandon: 0.1}},
		{"closed loop with refunds, Redis", "lua-tcc", 0, scenarios.Mix{Confirm: 0.5, Cancel: 0.1, Refund: 0.3, Abandon: 0.1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, err := registry.Lookup(c.strategy)
			if err != nil {
				t.Fatal(err)
			}
			o := sustainedOptions()
			// 5 units per SKU: any progress sells a SKU out, so the restock
			// path runs however slow a loaded machine makes the buyers.
			o.Rate, o.Stock = c.rate, 5
			if c.mix != (scenarios.Mix{}) {
				o.Mix = c.mix
			}
			run, err := runner.RunStrategy(context.Background(), env.Conns, e, o.Scenarios[0], o)
			if err != nil {
				t.Fatal(err)
			}
			// Nothing wrong at the end of load nor after settle: drift and
			// every ack included.
			if eol := run.AuditEndOfLoad; eol == nil || eol.Anomalies != 0 {
				t.Fatalf("audit at the end of load %+v", eol)
			}
			a := run.Audit
			if a.Anomalies != 0 {
				t.Fatalf("audit after settle %+v", a)
			}
			if run.DurationSec < 1.4 || run.DurationSec > 1.6 {
				t.Fatalf("measured %.2f s, want the 1.5 s after warm-up", run.DurationSec)
			}
			if run.Flows == 0 || len(run.Series) < 1 || len(run.Series) > 2 {
				t.Fatalf("flows %d, series %+v", run.Flows, run.Series)
			}
			var seriesFlows int64
			for _, p := range run.Series {
				seriesFlows += p.Flows
			}
			if seriesFlows != run.Flows {
				t.Fatalf("series holds %d flows, total %d", seriesFlows, run.Flows)
			}
			// Everything confirmed during warm-up is in the audit but not in
			// the count (refunded orders are confirmed no more).
			if c.mix.Refund == 0 && a.ConfirmedUnits <= run.Flows {
				t.Fatalf("confirmed %d units, measured flows %d: warm-up not excluded", a.ConfirmedUnits, run.Flows)
			}
			if c.mix.Refund > 0 && (run.Journeys["refund"] == 0 || run.Counts["refund"]["ok"] == 0) {
				t.Fatalf("refund share %g: journeys %v, refund outcomes %v", c.mix.Refund, run.Journeys, run.Counts["refund"])
			}
			// Refunds are timed like every operation, and the units
			// counted: one a journey here (Qty 1), as many as acknowledged.
			var refunds int64
			for _, n := range run.Counts["refund"] {
				refunds += n
			}
			if got := run.LatencyMS["refund"].Count; got != refunds {
				t.Fatalf("refund latency count %d, refund operations %d", got, refunds)
			}
			if run.Units["refunded"] != run.Counts["refund"]["ok"] || run.Units["sold"] != run.Counts["confirm"]["ok"] {
				t.Fatalf("units %v: refunds ok %d, confirms ok %d (one unit each)", run.Units, run.Counts["refund"]["ok"], run.Counts["confirm"]["ok"])
			}
			if c.strategy != "rowlock" && run.Harness.Restocks == 0 {
				t.Fatalf("5 units per SKU never ran out: harness %+v", run.Harness)
			}
			if c.rate > 0 {
				arrivals := run.Journeys["buy"] + run.Journeys["cancel"] + run.Journeys["abandon"] + run.Harness.OpenDropped
				if arrivals < 200 || arrivals > 250 {
					t.Fatalf("open loop at 150/s for 1.5 s started %d journeys", arrivals)
				}
			}
		})
	}
}
