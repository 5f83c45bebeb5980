package analysis

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/servers/netpath"
)

// Deploy is a deployment a run's costs are carried to (`stockbench
// project --deploy 'mysql=16,redis=1,service=8x4,rtt=same-zone'`).
type Deploy struct {
	// MySQLCores are MySQL's cores; RedisCores Redis's (its commands run on
	// one thread whatever the cores: more than 1 counts as 1).
	MySQLCores, RedisCores float64
	// ServiceInstances × ServiceCores run the strategy's service code.
	ServiceInstances int
	ServiceCores     float64
	// MySQLRTT and RedisRTT are the round trips between service and
	// stores (a netpath profile: same-zone, cross-zone…, or a duration).
	MySQLRTT, RedisRTT time.Duration
	// Buyers is the closed loop's concurrency in all (0: the run's).
	Buyers int
	// Shared are tiers that run on the same cores (a --cpuset that pins
	// two tiers to one core): their CPU per flow adds up on those cores.
	Shared []SharedCores
	// GeneratorOnService says the load generator runs on the service's
	// cores (a budgeted run on one machine: the harness is both), so the
	// service tier pays the harness's whole CPU per flow.
	GeneratorOnService bool
	// MachineCores, when > 0, are the cores the three tiers get in all on
	// a machine they share with other work: a budget is a ceiling, not a
	// promise, and on a crowded box no tier reaches its own. 0: no cap.
	MachineCores float64
}

// SharedCores are tiers (TierMySQLCPU, TierRedisCPU, TierHarnessCPU)
// sharing Cores cores.
type SharedCores struct {
	Tiers []Tier
	Cores float64
}

// ParseDeploy reads "mysql=16,redis=1,service=8x4,rtt=same-zone[,buyers=N]".
func ParseDeploy(s string) (Deploy, error) {
	d := Deploy{MySQLCores: 1, RedisCores: 1, ServiceInstances: 1, ServiceCores: 1}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return d, fmt.Errorf("deploy %q: %q is not key=value", s, part)
		}
		var err error
		switch k {
		case "mysql":
			d.MySQLCores, err = positive(v)
		case "redis":
			d.RedisCores, err = positive(v)
		case "service":
			n, c, found := strings.Cut(v, "x")
			if !found {
				c = "1"
			}
			var inst float64
			if inst, err = positive(n); err == nil {
				d.ServiceInstances = int(inst)
				d.ServiceCores, err = positive(c)
			}
		case "rtt":
			var p netpath.Profile
			if p, err = netpath.Parse(v); err == nil {
				d.MySQLRTT, d.RedisRTT = p.MySQL.RTT, p.Redis.RTT
			}
		case "buyers":
			var b float64
			b, err = positive(v)
			d.Buyers = int(b)
		default:
			err = fmt.Errorf("unknown key %q (mysql, redis, service, rtt, buyers)", k)
		}
		if err != nil {
			return d, fmt.Errorf("deploy %q: %s: %w", s, k, err)
		}
	}
	return d, nil
}

func positive(v string) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		return 0, fmt.Errorf("%q is not a number > 0", v)
	}
	return f, nil
}

// Projection is one run's throughput carried to a deployment: the
// capacity of each tier in flows/s (+Inf where the tier has no limit the
// run measured), the smallest of them, and the tier it is.
type Projection struct {
	Strategy, Scenario string
	TPS                float64
	Bound              Tier
	// Capacities in flows/s by tier: mysql-cpu, redis-cpu, harness-cpu
	// (the service code), machine (the cores a crowded box gives the
	// tiers, with Deploy.MachineCores), row-lock (the hot row,
	// serialised), concurrency (the buyers over one flow's unqueued time).
	Capacity map[Tier]float64
	// MeasuredTPS is the run's own.
	MeasuredTPS float64
}

// ProjectionAssumptions says what Project assumes, for its readers.
const ProjectionAssumptions = "each tier's CPU per flow is as measured here and scales with its cores (Redis: one thread); the service code's CPU is the harness's less the generator's (the null probe's, when the file has one); a hot row (a run bound by row-lock) is held for its measured time per flow plus each MySQL round trip's change of RTT, one flow at a time; the closed loop's buyers each wait one flow's round trips and CPU with no queueing; on a machine shared with other work (a validation against budgeted runs whose unconstrained run was bound by machine) the tiers get no more cores in all than they got unconstrained; nothing else (disk, replication, lock waits of other kinds) is modelled"

// Project carries run's measured costs to d. generatorUS is the load
// generator's own CPU per flow (the null probe's; 0 when unknown: then
// the whole harness CPU is taken for the service's). ok is false without
// cost figures.
func Project(run results.Run, d Deploy, buyers int, generatorUS float64) (Projection, bool) {
	c := run.Cost
	if c == nil || c.Flows <= 0 || run.TPS <= 0 {
		return Projection{}, false
	}
	p := Projection{Strategy: run.Strategy, Scenario: run.Scenario, MeasuredTPS: run.TPS, Capacity: map[Tier]float64{}}
	capacity := func(t Tier, cores, us float64) {
		if us > 0 {
			p.Capacity[t] = cores * 1e6 / us
		} else {
			p.Capacity[t] = math.Inf(1)
		}
	}
	val := func(x *float64) float64 {
		if x == nil {
			return 0
		}
		return *x
	}
	mysqlUS, redisUS := val(c.MySQLCPUUSPerFlow), val(c.RedisCPUUSPerFlow)
	serviceUS := max(0, val(c.HarnessCPUUSPerFlow)-generatorUS)
	if d.GeneratorOnService {
		serviceUS = val(c.HarnessCPUUSPerFlow)
	}
	capacity(TierMySQLCPU, d.MySQLCores, mysqlUS)
	capacity(TierRedisCPU, min(1, d.RedisCores), redisUS)
	capacity(TierHarnessCPU, float64(d.ServiceInstances)*d.ServiceCores, serviceUS)
	usOf := map[Tier]float64{TierMySQLCPU: mysqlUS, TierRedisCPU: redisUS, TierHarnessCPU: serviceUS}
	for _, g := range d.Shared {
		var sum float64
		for _, t := range g.Tiers {
			sum += usOf[t]
		}
		if sum <= 0 {
			continue
		}
		for _, t := range g.Tiers {
			p.Capacity[t] = min(p.Capacity[t], g.Cores*1e6/sum)
		}
	}
	mTrips, rTrips := val(c.MySQLTripsPerFlow), val(c.RedisTripsPerFlow)
	runMySQLRTT := val(run.Harness.MySQLRTTMS) // ms
	newM, newR := float64(d.MySQLRTT)/1e6, float64(d.RedisRTT)/1e6
	if d.MachineCores > 0 && mysqlUS+redisUS+serviceUS > 0 {
		p.Capacity[TierMachine] = d.MachineCores * 1e6 / (mysqlUS + redisUS + serviceUS)
	}
	p.Capacity[TierRowLock] = math.Inf(1)
	if BoundByOf(run).Tier == TierRowLock {
		hold := 1000/run.TPS + mTrips*(newM-runMySQLRTT) // ms per flow on the row
		if hold > 0 {
			p.Capacity[TierRowLock] = 1000 / hold
		}
	}
	n := d.Buyers
	if n <= 0 {
		n = buyers
	}
	flowMS := mTrips*newM + rTrips*newR + (mysqlUS+redisUS+serviceUS)/1e3
	p.Capacity[TierConcurrency] = math.Inf(1)
	if n > 0 && flowMS > 0 {
		p.Capacity[TierConcurrency] = float64(n) * 1000 / flowMS
	}
	p.TPS = math.Inf(1)
	for _, t := range []Tier{TierMySQLCPU, TierRedisCPU, TierHarnessCPU, TierMachine, TierRowLock, TierConcurrency} {
		if v, ok := p.Capacity[t]; ok && v < p.TPS {
			p.TPS, p.Bound = v, t
		}
	}
	return p, true
}

// ProjectAll projects every run of r (the null probe's runs give the
// generator's cost and are not projected themselves), medians of repeats
// left to the reader: one projection per run, in run order.
func ProjectAll(r *results.Results, d Deploy) []Projection {
	var gen float64
	for _, run := range r.Runs {
		if run.Cost != nil && run.Cost.Probe && run.Cost.GeneratorCPUUSPerFlow != nil {
			gen = *run.Cost.GeneratorCPUUSPerFlow
		}
	}
	var out []Projection
	for _, run := range r.Runs {
		if run.Cost != nil && run.Cost.Probe {
			continue
		}
		if p, ok := Project(run, d, r.Config.Buyers, gen); ok {
			out = append(out, p)
		}
	}
	return out
}
