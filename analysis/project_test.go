package analysis

import (
	"math"
	"testing"
	"time"

	"github.com/stockbench/stockbench/results"
)

// TestParseDeploy reads the deployment forms and refuses the others.
func TestParseDeploy(t *testing.T) {
	d, err := ParseDeploy("mysql=16,redis=1,service=8x4,rtt=1ms,buyers=256")
	if err != nil {
		t.Fatal(err)
	}
	if d.MySQLCores != 16 || d.RedisCores != 1 || d.ServiceInstances != 8 || d.ServiceCores != 4 ||
		d.MySQLRTT != time.Millisecond || d.RedisRTT != time.Millisecond || d.Buyers != 256 {
		t.Errorf("parsed %+v", d)
	}
	if d, err := ParseDeploy("rtt=same-zone"); err != nil || d.MySQLRTT <= 0 {
		t.Errorf("same-zone: %+v, %v", d, err)
	}
	for _, bad := range []string{"mysql=0", "disk=1", "service=x4", "rtt=fast", "mysql"} {
		if _, err := ParseDeploy(bad); err == nil {
			t.Errorf("ParseDeploy(%q) accepted", bad)
		}
	}
}

// TestProject: each tier's capacity from known per-flow costs, the
// smallest binding, and a hot row's hold time moved by the RTT change.
func TestProject(t *testing.T) {
	rtt0 := 0.05
	cpuRun := results.Run{Strategy: "lua-tcc", TPS: 1000, Harness: results.Harness{MySQLRTTMS: &rtt0},
		Cost: &results.Cost{Flows: 1000, Cores: 2, StrategyTimeMS: 1000, MySQLCPUUSPerFlow: pf(100), RedisCPUUSPerFlow: pf(50),
			HarnessCPUUSPerFlow: pf(210), MySQLTripsPerFlow: pf(1), RedisTripsPerFlow: pf(3)}}
	lockRun := results.Run{Strategy: "rowlock", TPS: 500, Harness: results.Harness{MySQLRTTMS: &rtt0},
		Cost: &results.Cost{Flows: 500, Cores: 2, StrategyTimeMS: 1000, RowLockTimeMS: pf(900), MySQLCPUUSPerFlow: pf(1000),
			HarnessCPUUSPerFlow: pf(500), MySQLTripsPerFlow: pf(10)}}
	d := Deploy{MySQLCores: 16, RedisCores: 4, ServiceInstances: 8, ServiceCores: 4, MySQLRTT: 550 * time.Microsecond, RedisRTT: 550 * time.Microsecond}
	cases := []struct {
		name  string
		run   results.Run
		n     int
		bound Tier
		tps   float64
	}{
		// Redis: one thread, 1e6/50 = 20000; MySQL 16e6/100 = 160000;
		// service 32e6/(210-10) = 160000; buyers 1000 / (1×0.55 + 3×0.55 + 0.35 ms) = 400000.
		{"redis's one thread", cpuRun, 1000, TierRedisCPU, 20000},
		// Ten buyers: 10 000 / 2.55 ms = 3921.6 flows/s.
		{"too few buyers", cpuRun, 10, TierConcurrency, 10 * 1000 / 2.55},
		// The row held 2 ms a flow, plus 10 trips × 0.5 ms more: 7 ms → 142.9.
		{"hot row", lockRun, 1000, TierRowLock, 1000.0 / 7},
	}
	for _, tc := range cases {
		p, ok := Project(tc.run, d, tc.n, 10)
		if !ok || p.Bound != tc.bound || math.Abs(p.TPS-tc.tps) > 1e-6*tc.tps {
			t.Errorf("%s: %.1f flows/s bound by %s, want %.1f by %s (%v)", tc.name, p.TPS, p.Bound, tc.tps, tc.bound, p.Capacity)
		}
	}
	if _, ok := Project(results.Run{TPS: 1}, d, 1, 0); ok {
		t.Error("a run without cost was projected")
	}
}
