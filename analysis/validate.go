package analysis

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stockbench/stockbench/results"
)

// DeployOfBudget is the deployment a run under CPU budget b had on this
// machine of cores cores: each tier's budget in cores (a tier without
// one: every core), tiers pinned to the same cores sharing them, the
// load generator on the harness's cores, and the given round trips.
func DeployOfBudget(b *results.CPUBudget, cores int, mysqlRTT, redisRTT time.Duration) Deploy {
	d := Deploy{MySQLCores: float64(cores), RedisCores: float64(cores), ServiceInstances: 1, ServiceCores: float64(cores),
		MySQLRTT: mysqlRTT, RedisRTT: redisRTT, GeneratorOnService: true}
	if b == nil {
		d.Shared = []SharedCores{{Tiers: []Tier{TierMySQLCPU, TierRedisCPU, TierHarnessCPU}, Cores: float64(cores)}}
		return d
	}
	if b.MySQL != nil {
		d.MySQLCores = *b.MySQL
	}
	if b.Redis != nil {
		d.RedisCores = *b.Redis
	}
	if b.Harness != nil {
		d.ServiceCores = *b.Harness
	}
	// Tiers pinned to one set share it; a tier without a budget shares
	// every core with the others.
	sets := map[string][]Tier{}
	var order []string
	for _, t := range []struct {
		key  string
		tier Tier
		b    *float64
	}{{"mysql", TierMySQLCPU, b.MySQL}, {"redis", TierRedisCPU, b.Redis}, {"harness", TierHarnessCPU, b.Harness}} {
		set, ok := b.CPUSet[t.key]
		if !ok && t.b == nil {
			set = "*"
		} else if !ok {
			continue
		}
		if _, seen := sets[set]; !seen {
			order = append(order, set)
		}
		sets[set] = append(sets[set], t.tier)
	}
	for _, set := range order {
		if ts := sets[set]; len(ts) > 1 {
			n := float64(cores)
			if set != "*" {
				n = float64(cpuListCount(set))
			}
			d.Shared = append(d.Shared, SharedCores{Tiers: ts, Cores: n})
		}
	}
	return d
}

// cpuListCount counts the cores of a cpuset list ("0,2-3" is 3); a part
// it cannot read counts as one core.
func cpuListCount(list string) int {
	n := 0
	for _, r := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(r), "-")
		a, errA := strconv.Atoi(lo)
		b, errB := strconv.Atoi(hi)
		if isRange && errA == nil && errB == nil && b >= a {
			n += b - a + 1
		} else {
			n++
		}
	}
	return n
}

// BudgetLabel names budget b as the flags that set it: --cpuset for the
// tiers pinned, --cpus for the quotas; "none" without one.
func BudgetLabel(b *results.CPUBudget) string {
	if b == nil {
		return "none"
	}
	var sets, quotas []string
	for _, t := range []struct {
		key string
		v   *float64
	}{{"mysql", b.MySQL}, {"redis", b.Redis}, {"harness", b.Harness}} {
		if set, ok := b.CPUSet[t.key]; ok {
			sets = append(sets, t.key+"="+strings.ReplaceAll(set, ",", ";"))
		} else if t.v != nil {
			quotas = append(quotas, fmt.Sprintf("%s=%g", t.key, *t.v))
		}
	}
	var parts []string
	if len(sets) > 0 {
		parts = append(parts, "--cpuset "+strings.Join(sets, ","))
	}
	if len(quotas) > 0 {
		parts = append(parts, "--cpus "+strings.Join(quotas, ","))
	}
	return strings.Join(parts, " ")
}

// ProjectionCheck is one strategy's projection from an unconstrained run
// checked against the same strategy measured under a CPU budget.
type ProjectionCheck struct {
	Strategy, Scenario string
	// Budget is the budgeted file's, as BudgetLabel names it.
	Budget string
	// Projected is the median of the projections of the unconstrained
	// runs (FreeRuns of them), Bound the tier most of them were bound by.
	Projected float64
	Bound     Tier
	FreeRuns  int
	// Measured is the median throughput of the budgeted runs (Runs of
	// them), MeasuredBound what most of them were bound by (BoundByOf).
	Measured      float64
	MeasuredBound Tier
	Runs          int
	// ErrPct is (Projected − Measured) / Measured × 100.
	ErrPct float64
}

// CheckProjections projects every strategy of free (runs with the tiers
// sharing the machine: its null probe, when present, is not projected)
// onto the budget of each file of budgeted, and sets the projection
// beside what that file measured: one check per budgeted strategy and
// scenario that free also ran, in budgeted's order.
func CheckProjections(free *results.Results, budgeted ...*results.Results) []ProjectionCheck {
	var out []ProjectionCheck
	for _, bf := range budgeted {
		var b *results.CPUBudget
		for _, run := range bf.Runs {
			if run.Cost != nil && run.Cost.Budget != nil {
				b = run.Cost.Budget
				break
			}
		}
		cores := bf.Env.Cores
		if cores <= 0 {
			cores = free.Env.Cores
		}
		type key struct{ strategy, scenario string }
		var order []key
		measured := map[key][]results.Run{}
		for _, run := range bf.Runs {
			if run.Cost != nil && run.Cost.Probe {
				continue
			}
			k := key{run.Strategy, run.Scenario}
			if _, seen := measured[k]; !seen {
				order = append(order, k)
			}
			measured[k] = append(measured[k], run)
		}
		for _, k := range order {
			c := ProjectionCheck{Strategy: k.strategy, Scenario: k.scenario, Budget: BudgetLabel(b)}
			var proj []float64
			var bounds []Tier
			for _, run := range free.Runs {
				if run.Strategy != k.strategy || run.Scenario != k.scenario || (run.Cost != nil && run.Cost.Probe) {
					continue
				}
				d := DeployOfBudget(b, cores, msDuration(run.Harness.MySQLRTTMS), msDuration(run.Harness.RedisRTTMS))
				d.MachineCores = crowdedCores(run)
				if p, ok := Project(run, d, bf.Config.Buyers, 0); ok && !math.IsInf(p.TPS, 1) {
					proj = append(proj, p.TPS)
					bounds = append(bounds, p.Bound)
				}
			}
			var tps []float64
			var mb []Tier
			for _, run := range measured[k] {
				tps = append(tps, run.TPS)
				mb = append(mb, BoundByOf(run).Tier)
			}
			c.Runs, c.FreeRuns = len(tps), len(proj)
			c.Measured, c.MeasuredBound = median(tps), mostTier(mb)
			if len(proj) > 0 {
				c.Projected, c.Bound = median(proj), mostTier(bounds)
				if c.Measured > 0 {
					c.ErrPct = (c.Projected - c.Measured) / c.Measured * 100
				}
			}
			out = append(out, c)
		}
	}
	return out
}

// crowdedCores are the cores run's three tiers used in all when the
// machine's other work bound it (BoundByOf says machine): a budgeted run
// on the same box gets no more, whatever its budgets allow. 0 otherwise.
func crowdedCores(run results.Run) float64 {
	if BoundByOf(run).Tier != TierMachine || run.Cost == nil {
		return 0
	}
	c := run.Cost
	var pct float64
	for _, x := range []*float64{c.MySQLCPUPct, c.RedisCPUPct, c.HarnessCPUPct} {
		if x != nil {
			pct += *x
		}
	}
	return pct / 100
}

func msDuration(ms *float64) time.Duration {
	if ms == nil {
		return 0
	}
	return time.Duration(*ms * float64(time.Millisecond))
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// mostTier is the tier most often in ts (the first of a tie).
func mostTier(ts []Tier) Tier {
	best, n := Tier(""), 0
	count := map[Tier]int{}
	for _, t := range ts {
		count[t]++
		if count[t] > n {
			best, n = t, count[t]
		}
	}
	return best
}
