package analysis

import (
	"fmt"

	"github.com/stockbench/stockbench/results"
)

// Tier names what limited a run (BoundBy).
type Tier string

// The tiers a run can be bound by.
const (
	// TierMySQLCPU, TierRedisCPU, TierHarnessCPU: that tier's CPU was
	// saturated. TierHarnessCPU means the figure is the harness's (the
	// strategy's service code and the load generator), not the stores'.
	TierMySQLCPU   Tier = "mysql-cpu"
	TierRedisCPU   Tier = "redis-cpu"
	TierHarnessCPU Tier = "harness-cpu"
	// TierRowLock: the calls spent most of their time waiting for InnoDB
	// row locks — a hot row serialises them.
	TierRowLock Tier = "row-lock"
	// TierPool: the calls spent most of their time waiting for a pooled
	// connection.
	TierPool Tier = "pool"
	// TierNetwork: most of the calls' time was round trips × RTT.
	TierNetwork Tier = "network"
	// TierMachine: the machine's cores were busy, mostly with processes
	// other than this run's servers and harness: the run measured the box,
	// not the strategy.
	TierMachine Tier = "machine"
	// TierConcurrency: nothing above saturated — the closed loop's own
	// concurrency (buyers, in-flight limit) bounded it, or time went where
	// no counter looks (a CAS strategy's backoff sleeps among it).
	TierConcurrency Tier = "concurrency"
	// TierUnknown: the run has no cost figures (runs[].cost absent).
	TierUnknown Tier = "unknown"
)

// Figure names the measured figure that decided a BoundBy.
type Figure string

// The deciding figures.
const (
	// FigureBudgetPct: the tier's CPU as a percent of its budget (cores).
	FigureBudgetPct Figure = "cpu_of_budget_pct"
	// FigureRedisThreadPct: Redis's main thread, percent of one core.
	FigureRedisThreadPct Figure = "redis_main_thread_pct"
	// FigureTiersOfMachinePct: MySQL + Redis + harness CPU as a percent of
	// all the machine's cores (no budgets: the tiers share them).
	FigureTiersOfMachinePct Figure = "tiers_of_machine_pct"
	// FigureMachineBusyPct: the machine's cores busy, any process.
	FigureMachineBusyPct Figure = "machine_busy_pct"
	// FigureRowLockPct, FigurePoolPct, FigureNetworkPct: a wait as a
	// percent of the calls' time inside the strategy.
	FigureRowLockPct Figure = "row_lock_pct"
	FigurePoolPct    Figure = "pool_wait_pct"
	FigureNetworkPct Figure = "network_pct"
	// FigureNone: no rule fired (TierConcurrency, TierUnknown).
	FigureNone Figure = ""
)

// Thresholds of BoundBy's rules, in percent.
const (
	// CPUBoundPct: a tier's CPU at or past this share of its budget (or,
	// without budgets, the tiers' CPU at or past this share of the
	// machine's cores; Redis's main thread at or past this share of one
	// core) binds the run.
	CPUBoundPct = 90.0
	// WaitBoundPct: a wait (row lock, pool, network) at or past this share
	// of the calls' time inside the strategy binds the run.
	WaitBoundPct = 50.0
)

// BoundBy is what limited one run, and the figures that say so.
type BoundBy struct {
	Tier     Tier     `json:"tier"`
	Evidence Evidence `json:"evidence"`
}

// Evidence is the figure that decided (Figure, its Pct and the Threshold
// it reached) and every figure the rules looked at, absent where the run
// did not measure it. Percentages of one core for the CPU figures;
// percent of the calls' time inside the strategy for the waits.
type Evidence struct {
	Figure       Figure  `json:"figure,omitempty"`
	Pct          float64 `json:"pct,omitempty"`
	ThresholdPct float64 `json:"threshold_pct,omitempty"`

	MySQLCPUPct        *float64 `json:"mysql_cpu_pct,omitempty"`
	RedisCPUPct        *float64 `json:"redis_cpu_pct,omitempty"`
	HarnessCPUPct      *float64 `json:"harness_cpu_pct,omitempty"`
	RedisMainThreadPct *float64 `json:"redis_main_thread_pct,omitempty"`
	// TiersOfMachinePct is MySQL + Redis + harness over all cores.
	TiersOfMachinePct *float64 `json:"tiers_of_machine_pct,omitempty"`
	MachineBusyPct    *float64 `json:"machine_busy_pct,omitempty"`
	RowLockPct        *float64 `json:"row_lock_pct,omitempty"`
	PoolWaitPct       *float64 `json:"pool_wait_pct,omitempty"`
	NetworkPct        *float64 `json:"network_pct,omitempty"`
}

// BoundByOf names what limited run, from its cost (runs[].cost). The
// rules, first match wins:
//
//  1. A tier with a CPU budget (--cpus, --cpuset) used ≥ CPUBoundPct of
//     it: that tier's CPU (the highest share if several).
//  2. Redis's main thread ≥ CPUBoundPct of one core: redis-cpu (Redis runs
//     every command on that one thread, whatever the cores).
//  3. InnoDB row-lock wait ≥ WaitBoundPct of the calls' time inside the
//     strategy: row-lock. It comes before the shared-CPU rule because a
//     serialised hot row bounds throughput at 1 / lock-hold time however
//     many cores are free.
//  4. No budgets, and MySQL + Redis + harness CPU ≥ CPUBoundPct of all the
//     machine's cores: the largest of the three tiers' CPU.
//  5. The machine's cores ≥ CPUBoundPct busy, mostly by other processes
//     (rule 4 did not fire): machine.
//  6. Pool wait ≥ WaitBoundPct of the calls' time inside the strategy: pool.
//  7. Round trips × RTT ≥ WaitBoundPct of it: network.
//  8. Otherwise concurrency.
//
// A run without cost figures is TierUnknown.
func BoundByOf(run results.Run) BoundBy {
	c := run.Cost
	if c == nil {
		return BoundBy{Tier: TierUnknown}
	}
	ev := Evidence{MySQLCPUPct: c.MySQLCPUPct, RedisCPUPct: c.RedisCPUPct, HarnessCPUPct: c.HarnessCPUPct,
		RedisMainThreadPct: c.RedisMainThreadPct, MachineBusyPct: c.MachineBusyPct}
	share := func(ms float64) *float64 {
		if c.StrategyTimeMS <= 0 {
			return nil
		}
		v := 100 * ms / c.StrategyTimeMS
		return &v
	}
	if c.RowLockTimeMS != nil {
		ev.RowLockPct = share(*c.RowLockTimeMS)
	}
	ev.PoolWaitPct = share(c.MySQLPoolWaitMS + c.RedisPoolWaitMS)
	if c.NetworkMSPerFlow != nil {
		ev.NetworkPct = share(*c.NetworkMSPerFlow * float64(c.Flows))
	}
	tiers := []struct {
		tier   Tier
		pct    *float64
		budget *float64
	}{{TierMySQLCPU, c.MySQLCPUPct, nil}, {TierRedisCPU, c.RedisCPUPct, nil}, {TierHarnessCPU, c.HarnessCPUPct, nil}}
	if b := c.Budget; b != nil {
		tiers[0].budget, tiers[1].budget, tiers[2].budget = b.MySQL, b.Redis, b.Harness
	}
	decide := func(t Tier, f Figure, pct, threshold float64) BoundBy {
		ev.Figure, ev.Pct, ev.ThresholdPct = f, pct, threshold
		return BoundBy{Tier: t, Evidence: ev}
	}
	past := func(p *float64, threshold float64) bool { return p != nil && *p >= threshold }

	// 1. Budgets.
	best, bestPct, budgeted := Tier(""), 0.0, false
	for _, t := range tiers {
		if t.budget == nil || *t.budget <= 0 {
			continue
		}
		budgeted = true
		if t.pct == nil {
			continue
		}
		if p := *t.pct / *t.budget; p >= CPUBoundPct && p > bestPct {
			best, bestPct = t.tier, p
		}
	}
	if best != "" {
		return decide(best, FigureBudgetPct, bestPct, CPUBoundPct)
	}
	// 2. Redis's one thread.
	if past(c.RedisMainThreadPct, CPUBoundPct) {
		return decide(TierRedisCPU, FigureRedisThreadPct, *c.RedisMainThreadPct, CPUBoundPct)
	}
	// 3. A hot row.
	if past(ev.RowLockPct, WaitBoundPct) {
		return decide(TierRowLock, FigureRowLockPct, *ev.RowLockPct, WaitBoundPct)
	}
	// 4. The tiers share the machine's cores.
	if c.Cores > 0 {
		sum, seen, top, topPct := 0.0, false, Tier(""), -1.0
		for _, t := range tiers {
			if t.pct == nil {
				continue
			}
			sum, seen = sum+*t.pct, true
			if *t.pct > topPct {
				top, topPct = t.tier, *t.pct
			}
		}
		if seen {
			v := sum / float64(c.Cores)
			ev.TiersOfMachinePct = &v
			if !budgeted && v >= CPUBoundPct {
				return decide(top, FigureTiersOfMachinePct, v, CPUBoundPct)
			}
		}
	}
	// 5. Someone else's work.
	if past(c.MachineBusyPct, CPUBoundPct) {
		return decide(TierMachine, FigureMachineBusyPct, *c.MachineBusyPct, CPUBoundPct)
	}
	// 6, 7. Waits.
	if past(ev.PoolWaitPct, WaitBoundPct) {
		return decide(TierPool, FigurePoolPct, *ev.PoolWaitPct, WaitBoundPct)
	}
	if past(ev.NetworkPct, WaitBoundPct) {
		return decide(TierNetwork, FigureNetworkPct, *ev.NetworkPct, WaitBoundPct)
	}
	return BoundBy{Tier: TierConcurrency, Evidence: ev}
}

// BoundByRow folds the repeats of one row: the tier most of its runs were
// bound by (a tie goes to the tier of the earliest run among the tied),
// with the evidence of the first run bound by it. No runs: TierUnknown.
func BoundByRow(runs []results.Run) BoundBy {
	var out BoundBy
	best := 0
	count := map[Tier]int{}
	first := map[Tier]BoundBy{}
	var order []Tier
	for _, run := range runs {
		b := BoundByOf(run)
		if _, ok := first[b.Tier]; !ok {
			first[b.Tier] = b
			order = append(order, b.Tier)
		}
		count[b.Tier]++
	}
	for _, t := range order {
		if count[t] > best {
			out, best = first[t], count[t]
		}
	}
	if best == 0 {
		return BoundBy{Tier: TierUnknown}
	}
	return out
}

// Label is the verdict in a table cell: the tier and, when a rule fired,
// the deciding figure ("row-lock 92%", "redis-cpu 97%", "concurrency");
// "n/a" without cost figures.
func (b BoundBy) Label() string {
	switch {
	case b.Tier == TierUnknown || b.Tier == "":
		return "n/a"
	case b.Evidence.Figure == FigureNone:
		return string(b.Tier)
	}
	return fmt.Sprintf("%s %.0f%%", b.Tier, b.Evidence.Pct)
}
