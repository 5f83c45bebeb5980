package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/stockbench/stockbench/analysis"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/runner"
	"github.com/stockbench/stockbench/scenarios"
	"github.com/stockbench/stockbench/strategies/registry"
)

// TestRaceRecommendation runs every strategy through the race scenario on
// real servers: naive breaks the rules there, so whatever its speed and its
// few lines it must rank last and be marked unsafe, and no strategy the
// auditor found clean may rank below one it did not.
func TestRaceRecommendation(t *testing.T) {
	o := flashOptions(3)
	o.Scenarios, o.Buyers, o.Stock = []string{"race"}, 150, 60
	o.PayDelay = scenarios.Range{Max: 20 * time.Millisecond}
	o.Strategy.SweepPeriod = 50 * time.Millisecond
	res := &results.Results{Format: results.Format}
	for _, e := range registry.All {
		run, err := runner.RunStrategy(context.Background(), env.Conns, e, o.Scenarios[0], o)
		if err != nil {
			t.Fatalf("%s: %v", e.Name, err)
		}
		res.Runs = append(res.Runs, run)
	}
	recs := analysis.Recommend(res, analysis.DefaultWeights)
	if len(recs) != len(registry.All) {
		t.Fatalf("%d recommendations for %d strategies", len(recs), len(registry.All))
	}
	// naive must be unsafe and below every clean strategy: last, unless
	// another strategy also broke a rule in this run (then the unsafe ones
	// share the bottom, ordered by score).
	unsafe := 0
	for _, rec := range recs {
		if rec.Safety.Kind == analysis.Unsafe {
			unsafe++
		}
	}
	for i, rec := range recs {
		if i > 0 && (recs[i-1].Safety.Kind == analysis.Unsafe) && !(rec.Safety.Kind == analysis.Unsafe) {
			t.Errorf("clean %s ranks below unsafe %s", rec.Strategy, recs[i-1].Strategy)
		}
		if rec.Strategy == "naive" && (!(rec.Safety.Kind == analysis.Unsafe) || i < len(recs)-unsafe) {
			t.Errorf("naive ranks %d of %d (unsafe %v): %+v", rec.Rank, len(recs), (rec.Safety.Kind == analysis.Unsafe), recs)
		}
	}
	if unsafe == 1 && recs[len(recs)-1].Strategy != "naive" {
		t.Errorf("naive is the only unsafe strategy but ranks %v", recs)
	}
}
