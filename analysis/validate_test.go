package analysis

import (
	"math"
	"testing"

	"github.com/stockbench/stockbench/results"
)

// TestDeployOfBudget: the deployment each kind of budget gives, from the
// cores of each tier to the tiers that share a core.
func TestDeployOfBudget(t *testing.T) {
	one, half := 1.0, 0.5
	cases := []struct {
		name           string
		b              *results.CPUBudget
		mysql, svc     float64
		shared         [][]Tier
		sharedCores    []float64
		generatorOnSvc bool
	}{
		// No budget: every tier shares both cores.
		{"none", nil, 2, 2, [][]Tier{{TierMySQLCPU, TierRedisCPU, TierHarnessCPU}}, []float64{2}, true},
		// Quotas: each tier alone, nothing shared.
		{"quotas", &results.CPUBudget{MySQL: &one, Redis: &half, Harness: &half}, 1, 0.5, nil, nil, true},
		// MySQL on core 0, Redis and the harness sharing core 1.
		{"cpuset", &results.CPUBudget{MySQL: &one, Redis: &one, Harness: &one, CPUSet: map[string]string{"mysql": "0", "redis": "1", "harness": "1"}},
			1, 1, [][]Tier{{TierRedisCPU, TierHarnessCPU}}, []float64{1}, true},
		// MySQL pinned to both cores, the others unbudgeted share them all.
		{"one tier pinned", &results.CPUBudget{MySQL: func() *float64 { v := 2.0; return &v }(), CPUSet: map[string]string{"mysql": "0-1"}},
			2, 2, [][]Tier{{TierRedisCPU, TierHarnessCPU}}, []float64{2}, true},
	}
	for _, c := range cases {
		d := DeployOfBudget(c.b, 2, 0, 0)
		if d.MySQLCores != c.mysql || d.ServiceCores != c.svc || d.GeneratorOnService != c.generatorOnSvc || len(d.Shared) != len(c.shared) {
			t.Errorf("%s: %+v", c.name, d)
			continue
		}
		for i, g := range d.Shared {
			if len(g.Tiers) != len(c.shared[i]) || g.Cores != c.sharedCores[i] {
				t.Errorf("%s: shared %+v, want %v on %v", c.name, g, c.shared[i], c.sharedCores[i])
			}
			for j := range g.Tiers {
				if g.Tiers[j] != c.shared[i][j] {
					t.Errorf("%s: shared %+v, want %v", c.name, g, c.shared[i])
				}
			}
		}
	}
}

// TestCheckProjections projects an unconstrained run onto two budgets and
// sets each beside a measured figure: the shared core adds Redis's and
// the harness's CPU per flow; the quota takes the service's alone; the
// error is (projected − measured) / measured.
func TestCheckProjections(t *testing.T) {
	one, half := 1.0, 0.5
	free := &results.Results{Env: results.Env{Cores: 2}, Config: results.Config{Buyers: 1000}}
	for range 3 {
		free.Runs = append(free.Runs, results.Run{Strategy: "lua-tcc", Scenario: "sustained", TPS: 3000,
			Cost: &results.Cost{Flows: 1000, Cores: 2, StrategyTimeMS: 1, MySQLCPUUSPerFlow: pf(100), RedisCPUUSPerFlow: pf(150), HarnessCPUUSPerFlow: pf(250)}})
	}
	free.Runs = append(free.Runs, results.Run{Strategy: "null", Scenario: "sustained", TPS: 9e4, Cost: &results.Cost{Flows: 1, Probe: true, HarnessCPUUSPerFlow: pf(20), GeneratorCPUUSPerFlow: pf(20)}})
	pinned := &results.CPUBudget{MySQL: &one, Redis: &one, Harness: &one, CPUSet: map[string]string{"mysql": "0", "redis": "1", "harness": "1"}}
	quotas := &results.CPUBudget{MySQL: &one, Redis: &half, Harness: &half}
	budgeted := func(b *results.CPUBudget, tps ...float64) *results.Results {
		r := &results.Results{Env: results.Env{Cores: 2}, Config: results.Config{Buyers: 1000}}
		for _, x := range tps {
			r.Runs = append(r.Runs, results.Run{Strategy: "lua-tcc", Scenario: "sustained", TPS: x, Cost: &results.Cost{Flows: 1, Budget: b}})
		}
		return r
	}
	got := CheckProjections(free, budgeted(pinned, 2400, 2600, 2000), budgeted(quotas, 1900, 2100, 2000))
	cases := []struct {
		budget              string
		projected, measured float64
		bound               Tier
	}{
		// Core 1: 1e6 / (150 + 250) = 2500; MySQL alone 1e6/100 = 10000.
		{"--cpuset mysql=0,redis=1,harness=1", 2500, 2400, TierRedisCPU},
		// Harness: 0.5e6 / 250 = 2000 (the generator counts: it runs there);
		// Redis 0.5e6 / 150 = 3333.
		{"--cpus mysql=1,redis=0.5,harness=0.5", 2000, 2000, TierHarnessCPU},
	}
	if len(got) != len(cases) {
		t.Fatalf("%d checks, want %d: %+v", len(got), len(cases), got)
	}
	for i, c := range cases {
		g := got[i]
		wantErr := (c.projected - c.measured) / c.measured * 100
		if g.Budget != c.budget || math.Abs(g.Projected-c.projected) > 1e-6 || g.Measured != c.measured || g.Runs != 3 || g.FreeRuns != 3 ||
			math.Abs(g.ErrPct-wantErr) > 1e-9 {
			t.Errorf("check %d: %+v, want %s projected %.0f measured %.0f err %.1f", i, g, c.budget, c.projected, c.measured, wantErr)
		}
		// (Under the cpuset Redis and the harness tie on core 1.)
		if i == 1 && g.Bound != c.bound {
			t.Errorf("check %d bound by %s, want %s", i, g.Bound, c.bound)
		}
	}
}

// TestCheckProjectionsCrowded: an unconstrained run bound by the
// machine's other work (its tiers used 0.5 of 2 busy cores) is projected
// onto a budget with no more than those 0.5 cores in all — the budgets
// (1 core each) are ceilings the crowded box never let them reach.
func TestCheckProjectionsCrowded(t *testing.T) {
	one := 1.0
	free := &results.Results{Env: results.Env{Cores: 2}, Config: results.Config{Buyers: 1000}, Runs: []results.Run{{Strategy: "batched", Scenario: "sustained", TPS: 1000,
		Cost: &results.Cost{Flows: 1000, Cores: 2, StrategyTimeMS: 1, MachineBusyPct: pf(100), MySQLCPUPct: pf(20), RedisCPUPct: pf(5), HarnessCPUPct: pf(25),
			MySQLCPUUSPerFlow: pf(200), RedisCPUUSPerFlow: pf(50), HarnessCPUUSPerFlow: pf(250)}}}}
	if b := BoundByOf(free.Runs[0]).Tier; b != TierMachine {
		t.Fatalf("the free run is bound by %s, want machine", b)
	}
	split := &results.Results{Env: results.Env{Cores: 2}, Config: results.Config{Buyers: 1000}, Runs: []results.Run{{Strategy: "batched", Scenario: "sustained", TPS: 900,
		Cost: &results.Cost{Flows: 1, Budget: &results.CPUBudget{MySQL: &one, Redis: &one, Harness: &one}}}}}
	got := CheckProjections(free, split)
	// 0.5 cores / 500 µs a flow = 1000 flows/s; uncapped, MySQL's core
	// would allow 5000.
	if len(got) != 1 || math.Abs(got[0].Projected-1000) > 1e-6 || got[0].Bound != TierMachine {
		t.Errorf("%+v, want 1000 flows/s bound by machine", got)
	}
}
