package analysis

import (
	"testing"

	"github.com/stockbench/stockbench/results"
)

func pf(v float64) *float64 { return &v }

// TestBoundByOf has one case per rule, each just past its threshold, and
// cases just short of it that must fall through to the next rule.
func TestBoundByOf(t *testing.T) {
	// base: nothing saturated, on 2 cores; 1000 ms inside the strategy.
	base := func() *results.Cost {
		return &results.Cost{Flows: 100, Cores: 2, StrategyTimeMS: 1000,
			MySQLCPUPct: pf(40), RedisCPUPct: pf(10), HarnessCPUPct: pf(30),
			RedisMainThreadPct: pf(9), MachineBusyPct: pf(50), RowLockTimeMS: pf(100), NetworkMSPerFlow: pf(1)}
	}
	with := func(f func(c *results.Cost)) *results.Cost { c := base(); f(c); return c }
	cases := []struct {
		name   string
		cost   *results.Cost
		tier   Tier
		figure Figure
		pct    float64
	}{
		{"no cost", nil, TierUnknown, FigureNone, 0},
		{"nothing saturated", base(), TierConcurrency, FigureNone, 0},
		{"mysql at 90% of its one-core budget", with(func(c *results.Cost) {
			c.MySQLCPUPct = pf(90)
			c.Budget = &results.CPUBudget{MySQL: pf(1), Redis: pf(0.5)}
		}), TierMySQLCPU, FigureBudgetPct, 90},
		{"harness at 95% of half a core beats mysql at 90% of one", with(func(c *results.Cost) {
			c.MySQLCPUPct, c.HarnessCPUPct = pf(90), pf(47.5)
			c.Budget = &results.CPUBudget{MySQL: pf(1), Harness: pf(0.5)}
		}), TierHarnessCPU, FigureBudgetPct, 95},
		{"budgets under 90%: no shared-machine rule either", with(func(c *results.Cost) {
			c.MySQLCPUPct, c.RedisCPUPct, c.HarnessCPUPct = pf(89), pf(80), pf(80)
			c.Budget = &results.CPUBudget{MySQL: pf(1)}
		}), TierConcurrency, FigureNone, 0},
		{"redis main thread at 90% of a core", with(func(c *results.Cost) { c.RedisMainThreadPct = pf(90) }), TierRedisCPU, FigureRedisThreadPct, 90},
		{"redis main thread at 89.9%", with(func(c *results.Cost) { c.RedisMainThreadPct = pf(89.9) }), TierConcurrency, FigureNone, 0},
		{"row lock half the strategy time", with(func(c *results.Cost) { c.RowLockTimeMS = pf(500) }), TierRowLock, FigureRowLockPct, 50},
		{"row lock before a saturated machine", with(func(c *results.Cost) {
			c.RowLockTimeMS = pf(900)
			c.MySQLCPUPct, c.HarnessCPUPct = pf(120), pf(70)
		}), TierRowLock, FigureRowLockPct, 90},
		{"tiers at 90% of the machine: the largest binds", with(func(c *results.Cost) {
			c.MySQLCPUPct, c.RedisCPUPct, c.HarnessCPUPct = pf(60), pf(20), pf(100)
		}), TierHarnessCPU, FigureTiersOfMachinePct, 90},
		{"tiers at 89%: machine busy by others", with(func(c *results.Cost) {
			c.MySQLCPUPct, c.RedisCPUPct, c.HarnessCPUPct = pf(60), pf(18), pf(100)
			c.MachineBusyPct = pf(97)
		}), TierMachine, FigureMachineBusyPct, 97},
		{"pool half the strategy time", with(func(c *results.Cost) { c.MySQLPoolWaitMS, c.RedisPoolWaitMS = 300, 200 }), TierPool, FigurePoolPct, 50},
		{"pool 49.9%", with(func(c *results.Cost) { c.MySQLPoolWaitMS = 499 }), TierConcurrency, FigureNone, 0},
		{"network: 5 ms a flow of 10", with(func(c *results.Cost) { c.NetworkMSPerFlow = pf(5) }), TierNetwork, FigureNetworkPct, 50},
		{"no strategy time: no wait shares", with(func(c *results.Cost) {
			c.StrategyTimeMS, c.RowLockTimeMS = 0, pf(1e9)
		}), TierConcurrency, FigureNone, 0},
	}
	for _, tc := range cases {
		got := BoundByOf(results.Run{Cost: tc.cost})
		if got.Tier != tc.tier || got.Evidence.Figure != tc.figure || !closeTo(got.Evidence.Pct, tc.pct) {
			t.Errorf("%s: %s by %q at %.2f%%, want %s by %q at %.2f%%", tc.name, got.Tier, got.Evidence.Figure, got.Evidence.Pct, tc.tier, tc.figure, tc.pct)
		}
	}
}

func closeTo(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 }

// TestBoundByRow folds repeats: the most common tier wins, a tie goes to
// the earliest, and the label carries the deciding figure.
func TestBoundByRow(t *testing.T) {
	lock := results.Run{Cost: &results.Cost{Cores: 2, StrategyTimeMS: 100, RowLockTimeMS: pf(92)}}
	conc := results.Run{Cost: &results.Cost{Cores: 2, StrategyTimeMS: 100}}
	cases := []struct {
		name  string
		runs  []results.Run
		label string
	}{
		{"none", nil, "n/a"},
		{"no cost", []results.Run{{}}, "n/a"},
		{"majority", []results.Run{conc, lock, lock}, "row-lock 92%"},
		{"tie: earliest", []results.Run{conc, lock}, "concurrency"},
	}
	for _, tc := range cases {
		if got := BoundByRow(tc.runs).Label(); got != tc.label {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.label)
		}
	}
}
