package runner_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/runner"
	"github.com/stockbench/stockbench/scenarios"
	"github.com/stockbench/stockbench/servers/servertest"
	"github.com/stockbench/stockbench/strategies/registry"
)

var env servertest.Env

// The server-free tests of the package, run by the -short tier.
var pure = []string{"TestParseBudgets", "TestApplyCPUBudget", "TestCPUProfile", "TestCostOf", "TestCostOfPartial", "TestCostNetwork", "TestRedisMainThreadSec", "TestResolvedGrid", "TestHarnessPerKFlows", "TestRecorderOp", "TestRecorderMerge"}

func TestMain(m *testing.M) { os.Exit(servertest.Main(m, &env, pure...)) }

func flashOptions(seed uint64) runner.Options {
	return runner.Options{Queue: runner.DefaultQueue, Scenarios: []string{"flash"}, Params: scenarios.Params{Stock: 100, Buyers: 120,
		PayDelay: scenarios.Range{Min: 300 * time.Millisecond, Max: 350 * time.Millisecond},
		TTL:      10 * time.Minute, ShortTTL: 200 * time.Millisecond, Seed: seed},
		OpTimeout: 10 * time.Second, SettleTimeout: time.Minute}
}

// TestFlashAuditMatchesSQL runs the flash scenario against naive and rowlock
// and checks the reported figures against a direct SQL count; naive must
// oversell for most seeds, rowlock never.
func TestFlashAuditMatchesSQL(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"naive", "rowlock"} {
		e, err := registry.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		oversold := 0
		for seed := uint64(1); seed <= 3; seed++ {
			run, err := runner.RunStrategy(ctx, env.Conns, e, "flash", flashOptions(seed))
			if err != nil {
				t.Fatalf("%s seed %d: %v", name, seed, err)
			}
			// Oversold against the stock the test put in, not a row the
			// strategy can write.
			var confirmed, total int64 = 0, 100
			if err := env.DB.QueryRow("SELECT COALESCE(SUM(qty),0) FROM orders WHERE state='confirmed'").Scan(&confirmed); err != nil {
				t.Fatal(err)
			}
			if run.Audit.ConfirmedUnits != confirmed || run.Audit.OversoldUnits != max(0, confirmed-total) {
				t.Fatalf("%s seed %d: audit says %d confirmed / %d oversold, SQL says %d / %d",
					name, seed, run.Audit.ConfirmedUnits, run.Audit.OversoldUnits, confirmed, max(0, confirmed-total))
			}
			if run.LatencyMS["reserve"].Count != 120 || run.Counts["reserve"]["ok"]+run.Counts["reserve"]["out_of_stock"] != 120 {
				t.Fatalf("%s seed %d: reserve counts %+v, latency %+v", name, seed, run.Counts, run.LatencyMS["reserve"])
			}
			if run.Counts["confirm"]["unknown_order"] != 0 {
				t.Fatalf("%s: buyers without a unit paid: %+v", name, run.Counts)
			}
			// Pay delay is think time, not latency. Structurally: a flow's
			// latency is its reserve's plus its confirm's, so no flow can
			// exceed the slowest reserve plus the slowest confirm (0.2 %
			// allows for the histograms' 3 significant digits). A flow
			// timed across the 300-350 ms pay delay would break this bound
			// whatever the machine's load.
			lat := run.LatencyMS
			if bound := (lat["reserve"].Max + lat["confirm"].Max) * 1.002; lat["flow"].Max > bound {
				t.Fatalf("%s: flow max %.2f ms > reserve max %.2f + confirm max %.2f: the pay delay is in the flow latency",
					name, lat["flow"].Max, lat["reserve"].Max, lat["confirm"].Max)
			}
			if lat["flow"].Count == 0 || lat["flow"].Count > lat["confirm"].Count {
				t.Fatalf("%s: %d flows timed, %d confirms", name, lat["flow"].Count, lat["confirm"].Count)
			}
			if run.Audit.OversoldUnits > 0 {
				oversold++
			}
			if name == "rowlock" && (run.Audit.OversoldUnits != 0 || run.Audit.LostAcks != 0 || run.Audit.InvariantViolations != 0) {
				t.Fatalf("rowlock seed %d: %+v", seed, run.Audit)
			}
		}
		if name == "naive" && oversold < 2 {
			t.Fatalf("naive oversold in only %d of 3 seeds", oversold)
		}
	}
}

// TestRaceScenarioSafeStrategies: the race scenario breaks no safe strategy.
func TestRaceScenarioSafeStrategies(t *testing.T) {
	o := flashOptions(1)
	o.Scenarios, o.Buyers, o.Stock = []string{"race"}, 150, 60
	o.PayDelay = scenarios.Range{Max: 20 * time.Millisecond}
	o.Strategy.SweepPeriod = 50 * time.Millisecond
	for _, e := range registry.All {
		if !e.Safe {
			continue
		}
		t.Run(e.Name, func(t *testing.T) {
			run, err := runner.RunStrategy(context.Background(), env.Conns, e, o.Scenarios[0], o)
			if err != nil {
				t.Fatal(err)
			}
			if a := run.AuditEndOfLoad; a == nil || a.Anomalies != 0 {
				t.Fatalf("audit at the end of load %+v; counts %+v", a, run.Counts)
			}
			if a := run.Audit; a.Anomalies != 0 {
				t.Fatalf("audit after settle %+v; counts %+v", a, run.Counts)
			}
			if run.Counts["confirm"]["already_final"] == 0 || run.Journeys["pay-after-expiry"] == 0 {
				t.Fatalf("race scenario exercised nothing: %+v %+v", run.Counts, run.Journeys)
			}
		})
	}
}

// TestInterruptMidFlow: cancelling while buyers sit between reserve and
// confirm (Ctrl-C) still settles and audits; the run comes back with a
// clean audit for rowlock. The cancel waits for the event — reservations
// in the orders table — not for a guessed time.
func TestInterruptMidFlow(t *testing.T) {
	e, err := registry.Lookup("rowlock")
	if err != nil {
		t.Fatal(err)
	}
	o := flashOptions(1)
	o.PayDelay = scenarios.Range{Min: 2 * time.Second, Max: 3 * time.Second}
	// Clear earlier tests' orders so only this run's reservations count.
	if err := inventory.ResetMySQL(context.Background(), env.DB); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			var n int
			if env.DB.QueryRow("SELECT COUNT(*) FROM orders WHERE state='reserved'").Scan(&n) == nil && n > 0 {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	run, err := runner.RunStrategy(ctx, env.Conns, e, o.Scenarios[0], o)
	if err != nil {
		t.Fatalf("interrupted run: %v", err)
	}
	if ctx.Err() == nil {
		t.Fatal("the run ended before any reservation was seen")
	}
	a := run.Audit
	if run.Counts["reserve"]["ok"] == 0 || a.OversoldUnits != 0 || a.LostAcks != 0 || a.InvariantViolations != 0 || a.CancelAckViolations != 0 {
		t.Fatalf("after the interrupt: counts %+v, audit %+v", run.Counts, a)
	}
}
