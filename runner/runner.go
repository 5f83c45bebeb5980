// Package runner executes scenarios against strategies on real servers:
// workers, start barrier, think time, pacing, warm-up, recording, settle and
// audit. It returns a results.Results; rendering is the reports package's job.
package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/stockbench/stockbench/calibrate"
	"github.com/stockbench/stockbench/faults"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/observe"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/scenarios"
	"github.com/stockbench/stockbench/servers"
	"github.com/stockbench/stockbench/servers/netpath"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/registry"
)

// Options are the resolved settings of a run.
type Options struct {
	Strategies []registry.Entry
	// Scenarios are the names of the scenarios to run, in order, each
	// against every strategy.
	Scenarios []string
	// Params are the scenarios' knobs (stock, buyers, pay delay…).
	scenarios.Params
	// Repeat runs each strategy this many times (at least once).
	Repeat int
	// CalibrateDuration is how long each calibration probe runs; 0 skips
	// calibration.
	CalibrateDuration time.Duration
	// Pool bounds each of the run's connection pools (MySQL and Redis);
	// buyers beyond it wait for a connection. 0 means servers.DefaultPool.
	Pool int
	// OpTimeout bounds each operation (its wait in the service's queue
	// included).
	OpTimeout time.Duration
	// Inflight and Queue are the service model in front of each strategy
	// instance: at most Inflight calls in the strategy at once, at most
	// Queue new requests (reserves) waiting, the rest shed as busy.
	// Inflight 0 means the pool size, negative no service model; Queue 0
	// means no queue (every reserve beyond Inflight is shed at once), as
	// --queue 0 does; the flag's default is DefaultQueue.
	Inflight, Queue int
	// ClientRetry is how many times a buyer retries a call that was shed,
	// timed out or had an unknown outcome, with the same order id, after a
	// backoff drawn from RetryBackoff and doubled at each retry. 0: never.
	ClientRetry  int
	RetryBackoff scenarios.Range
	// SettleTimeout bounds the strategy's Settle after the measured phase,
	// and AuditTimeout each audit; 0 scales each with the catalog (and the
	// acks, for the audit): see deadlines. A phase that overruns does not
	// lose the run: it is written with Run.Incomplete naming the phase.
	SettleTimeout, AuditTimeout time.Duration
	// Strategy carries the strategy knobs; DB and Redis are filled in.
	Strategy strategies.Config
	// Weights are the recommendation weights, recorded in the config.
	Weights string
	// Log receives one line per strategy as it starts and ends; may be nil.
	Log io.Writer
	// Progress, when set, receives a live status line every second
	// (meant for a terminal: the line is redrawn with \r).
	Progress io.Writer
	// Network is the network profile between the service and its stores
	// (--rtt); the provider must have started its servers behind one
	// (servers.Networker) when it is set. The zero profile is loopback.
	Network netpath.Profile
	// Faults is the fault plan of every run (--fault); fault times are
	// offsets from the start of the measured phase.
	Faults faults.Plan
	// CPUBudget is the CPU each tier may use (--cpus, --cpuset; local
	// backend, through cgroups); the zero value shares the machine.
	CPUBudget CPUBudget
	// Enough, when set, is asked after each run; when it says true, that
	// strategy is not run in the later plans (stockbench curve stops a
	// strategy at the first rate past its latency bound).
	Enough func(results.Run) bool

	// Procs > 1 runs each strategy as that many generator processes
	// started through Spawn, against these servers: the stores are reset
	// and loaded here, the shards' results merged and audited here, once.
	Procs int
	Spawn Spawn
	// Segment is this process's part when it is one of several generators
	// of a run (the zero Segment: the whole run).
	Segment Segment
	// Service runs the strategies as service processes (--service
	// process:N); the zero value runs them in this process.
	Service ServiceOptions

	// AbortOn are the thresholds watched live (--abort-on): the first one
	// breached stops the run's load at once; the run is then settled,
	// audited and written as any other, with Run.Aborted saying which
	// and when (the other runs still run). Thresholds (--threshold) are
	// checked on each finished run into Run.Breaches.
	AbortOn, Thresholds []observe.Threshold
	// Metrics, when set, is the OpenMetrics endpoint every run of this
	// process publishes on (--metrics-addr); the caller serves and closes it.
	Metrics *observe.Exporter
	// Dashboard, when set, is the live page every run of this process is
	// drawn on (--dashboard); the caller serves and closes it.
	Dashboard *observe.Dashboard
	// rep is the run's index among Repeat (set by Execute per job).
	rep int
}

// Segment is one generator process's part of a run that several play
// (another process's Options.Procs): which buyers are its own and what its
// parent did for it. The parent holds the run lock, resets and loads the
// stores, and audits once; a generator settles its strategy instance and
// hands back its acks, its restocks among them.
type Segment struct {
	// Index (from 0) of Of > 1: this process plays the buyers (journeys
	// or workers) whose index % Of == Index.
	Index, Of int
	// NoReset leaves the stores as they are (prepared by the parent).
	NoReset bool
	// StartBarrier, when set, names a Redis key the Of generators meet at
	// after their setup: load starts when the last one arrives.
	StartBarrier string
	// ServerPIDs ("mysql", "redis") are the servers' processes when this
	// process did not start them but runs on their host: a generator
	// samples its parent's servers' CPU over its own measured phase.
	ServerPIDs map[string]int
	// StateDir, when set, is this generator's own directory (run
	// --state-dir), kept after it ends however it ends: the strategy's
	// service-local state (outbox-local's message table, in StateLocal)
	// and the ack log (AckFile, one write(2) per ack). A generator started
	// again on it relays what its predecessor left; the parent of one
	// that died drains it (runShards).
	StateDir string
}

// StateLocal is the directory, in a generator's StateDir, of its
// strategy's service-local state (strategies.Config.LocalDir).
const StateLocal = "local"

// Partial reports whether this process is one of several generators.
func (s Segment) Partial() bool { return s.Of > 1 }

// Owns reports whether buyer (journey or worker) i is this generator's.
func (s Segment) Owns(i int) bool { return !s.Partial() || i%s.Of == s.Index }

// catalog is the initial stock of the scenario's SKUs.
func catalog(sc scenarios.Scenario, p scenarios.Params) []inventory.Stock {
	skus := sc.Catalog(p)
	out := make([]inventory.Stock, len(skus))
	for i, sku := range skus {
		out[i] = inventory.Stock{SKU: sku, Total: p.Stock, Available: p.Stock}
	}
	return out
}

// Resolved is the configuration as recorded in results.json.
func (o Options) Resolved() results.Config {
	names := make([]string, len(o.Strategies))
	for i, e := range o.Strategies {
		names[i] = e.Name
	}
	c := o.Strategy.WithDefaults()
	out := results.Config{
		Strategies: names, Scenarios: o.Scenarios, Stock: o.Stock, Buyers: o.Buyers,
		TTL: o.TTL.String(), Seed: o.Seed, Repeat: max(1, o.Repeat),
		OpTimeout: o.OpTimeout.String(), CASRetry: c.CASRetry, CASMaxAttempts: c.CASMaxAttempts, CASMaxWait: c.CASMaxWait.String(),
		OutboxPeriod: c.OutboxPeriod.String(), ReconcilePeriod: c.ReconcilePeriod.String(),
		SweepPeriod: c.SweepPeriod.String(), CalibrateDuration: o.CalibrateDuration.String(),
		Pool: o.pool(), BatchMax: c.BatchMax, BatchWait: c.BatchWait.String(), Buckets: c.Buckets,
		Faults: o.Faults.Strings(), Weights: o.Weights, RTT: o.Network.String(), Inflight: o.inflight(), Queue: o.queue(),
		ClientRetry: o.ClientRetry, RetryBackoff: o.RetryBackoff.String(), Isolation: c.Isolation,
	}
	if c.Degrade != "" {
		out.Degrade, out.DegradeTimeout = c.Degrade, c.DegradeTimeout.String()
	}
	if c.SoldOutFlag > 0 {
		out.SoldOutFlag = c.SoldOutFlag.String()
	}
	for _, name := range o.Scenarios {
		if sc, err := scenarios.Lookup(name); err == nil {
			sc.Config(o.Params, &out.Knobs)
		}
	}
	return out
}

// deref is *p, or 0 when p is nil.
func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// DefaultQueue is the service model's queue of new requests by default
// (the --queue flag's default).
const DefaultQueue = 256

// queue is the service model's queue bound (0: none).
func (o Options) queue() int { return max(o.Queue, 0) }

// inflight is the service model's limit (0: none).
func (o Options) inflight() int {
	switch {
	case o.Inflight < 0:
		return 0
	case o.Inflight == 0:
		return o.pool()
	}
	return o.Inflight
}

// pool is the size of each connection pool.
func (o Options) pool() int {
	if o.Pool > 0 {
		return o.Pool
	}
	return servers.DefaultPool
}

func (o Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// Plan is one set of options to run, labelled with the swept parameter and
// value when it is part of a sweep.
type Plan struct {
	Options
	Param, Value string
}

// Execute starts the servers through p, guards the stores (run lock,
// foreign tables, pool against the servers' connection limits),
// calibrates (with the first plan's settings), runs every plan — each
// scenario against every strategy, Repeat times each — and stops the
// servers. When ctx ends (Ctrl-C) the strategy under way is settled and
// audited, the rest are skipped, and the results say Interrupted. The
// returned results are nil when nothing was measured: the servers did not
// start, or the guard refused the run (the error then wraps ErrRefused).
func Execute(ctx context.Context, p servers.Provider, plans ...Plan) (*results.Results, error) {
	if len(plans) == 0 {
		return nil, fmt.Errorf("nothing to run")
	}
	first := plans[0].Options
	res := &results.Results{Format: results.Format, Config: resolvedGrid(plans)}
	b, err := startBench(ctx, p, plans)
	defer b.undo.run()
	if err != nil {
		return nil, err
	}
	res.Env = collectEnv(ctx, b.ep, b.conns)
	if len(b.ep.MySQLCluster) > 1 {
		first.logf("%s", b.ep.MySQLDescription())
	}
	// One of several generators does not calibrate: its siblings would
	// probe the same stores at once (and the probes' table and scripts
	// collide); the parent, or whoever prepared the run, calibrates.
	if first.CalibrateDuration > 0 && !first.Segment.Partial() {
		// The ceilings are what the stores give through the run's pool.
		conc := min(first.Buyers, first.pool())
		first.logf("calibrating the stores (%s per probe, concurrency %d)…", first.CalibrateDuration, conc)
		cal, err := calibrate.Run(ctx, b.ep, b.conns, conc, first.CalibrateDuration)
		if err != nil {
			if ctx.Err() != nil {
				res.Interrupted = true
				return res, nil
			}
			return res, err
		}
		res.Calibration = &cal
	}
	if err := b.runJobs(ctx, plans, res); err != nil {
		return res, err
	}
	res.Interrupted = ctx.Err() != nil
	if first.Repeat > 1 {
		res.Aggregates = results.Aggregates(res)
	}
	return res, nil
}

// bench is what Execute's runs share: the provider's servers, the run's
// pools (reopened when a plan asks another size), the faulter, and what
// to undo when Execute ends (stop the servers, close the pools, release
// the run lock, lift the CPU budgets), in reverse.
type bench struct {
	p       servers.Provider
	ep      servers.Endpoints
	conns   servers.Conns
	faulter servers.Faulter
	undo    undo
	// faulted: the last run injected faults (revive looks before the next).
	faulted bool
}

// startBench starts the servers through p, opens pools of the plans'
// largest size, checks every plan's faults against the servers, and —
// unless this process is one of several generators, whose parent did —
// guards the stores and applies the CPU budgets, which hold from
// calibration to the last run.
func startBench(ctx context.Context, p servers.Provider, plans []Plan) (*bench, error) {
	b := &bench{p: p}
	first := plans[0].Options
	ep, err := p.Start(ctx)
	if err != nil {
		return b, err
	}
	b.ep = ep
	b.undo.later(func() { p.Stop() })
	pool := 0
	for _, pl := range plans {
		pool = max(pool, pl.pool())
	}
	if b.conns, err = servers.Open(ep, pool); err != nil {
		return b, err
	}
	b.undo.later(func() { b.conns.Close() })
	// The faulter is nil on the external backend (its servers are not
	// ours): CheckFor refuses process faults there.
	b.faulter, _ = servers.FaulterOf(p)
	for _, pl := range plans {
		if err := pl.Faults.CheckFor(ep); err != nil {
			return b, refuse(err)
		}
	}
	if first.Segment.Partial() {
		return b, nil
	}
	release, err := Guard(ctx, ep, b.conns, pool)
	if err != nil {
		return b, err
	}
	b.undo.later(func() { release() })
	lim, _ := p.(servers.CPULimiter)
	budget, err := applyCPUBudget(ctx, first.CPUBudget, ep, lim)
	if err != nil {
		return b, refuse(err)
	}
	b.undo.later(budget)
	return b, nil
}

// runJobs runs every plan's jobs in order into res, each strategy until
// the plan's Enough says it has had enough; when ctx ends, the job under
// way is kept and the rest skipped.
func (b *bench) runJobs(ctx context.Context, plans []Plan, res *results.Results) error {
	first := plans[0].Options
	cep := b.ep
	if pid := first.Segment.ServerPIDs[servers.TargetMySQL]; pid > 0 && cep.MySQLPID == 0 {
		cep.MySQLPID = pid
	}
	if pid := first.Segment.ServerPIDs[servers.TargetRedis]; pid > 0 && cep.RedisPID == 0 {
		cep.RedisPID = pid
	}
	cpu := newCPUSampler(cep, b.faulter)
	enough := map[string]bool{}
	var network netpath.Profile
	if b.ep.Netns != "" {
		network = first.Network
	}
	for _, j := range jobsOf(plans) {
		if ctx.Err() != nil {
			break
		}
		if enough[j.e.Name] {
			continue
		}
		o := j.pl.Options
		o.rep = j.rep
		// A shard's servers sit behind its parent's path: nothing to set.
		if b.ep.Netns != "" && o.Network != network {
			if err := setNetwork(ctx, b.p, o.Network); err != nil {
				return err
			}
			network = o.Network
		}
		run, err := b.runJob(ctx, j, o, cpu, res.Calibration)
		if err != nil || run == nil {
			return err
		}
		res.Runs = append(res.Runs, *run)
		if o.Enough != nil && o.Enough(*run) {
			enough[j.e.Name] = true
		}
	}
	return nil
}

// runJob makes one run on pools of the plan's size, after probing the
// stores' round trip; nil and no error when ctx ended before it could be
// kept.
func (b *bench) runJob(ctx context.Context, j job, o Options, cpu *cpuSampler, cal *results.Calibration) (*results.Run, error) {
	what := j.String()
	o.logf("running %s…", what)
	nc, err := reopen(b.conns, b.ep, o.pool())
	if err != nil {
		return nil, err
	}
	b.conns = nc
	st := Stores{Endpoints: b.ep, Conns: b.conns, Faulter: b.faulter}
	if b.faulted {
		b.revive(ctx, o)
	}
	b.faulted = len(o.Faults) > 0
	rtt, rerr := probeRTT(ctx, b.conns)
	if rerr != nil && ctx.Err() == nil {
		return nil, fmt.Errorf("%s: %w", what, rerr)
	}
	var run results.Run
	if o.Procs > 1 {
		run, err = runShards(ctx, st, j.e, j.sc, o, j.rep)
	} else {
		run, err = runStrategy(ctx, st, j.e, j.sc, o, cpu)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	run.Interrupted = ctx.Err() != nil
	if o.Repeat > 1 {
		run.Repeat = j.rep
	}
	run.Param, run.Value = j.pl.Param, j.pl.Value
	rtt(&run.Harness)
	costNetwork(&run)
	run.CeilingPct = ceilingPct(run, j.e, cal)
	o.logf("  %s: %.1f flows/s, P99 %.2f ms, %d flows measured, %d oversold%s", j.e.Name, run.TPS,
		run.LatencyMS["flow"].P99, run.Flows, run.Audit.OversoldUnits, rttNote(run.Harness))
	if run.Incomplete != "" {
		o.logf("  %s: the %s phase did not finish: %s", j.e.Name, run.Incomplete, run.Errors[len(run.Errors)-1])
	}
	return &run, nil
}

// job is one run Execute makes: a strategy on a scenario under a plan,
// the rep-th of its repeats.
type job struct {
	pl  Plan
	sc  string
	e   registry.Entry
	rep int
}

// jobsOf lists the runs of the plans in the order they are made: plan by
// plan, each scenario against every strategy, Repeat times each.
func jobsOf(plans []Plan) []job {
	var out []job
	for _, pl := range plans {
		for _, sc := range pl.Scenarios {
			for _, e := range pl.Strategies {
				for rep := 1; rep <= max(1, pl.Repeat); rep++ {
					out = append(out, job{pl: pl, sc: sc, e: e, rep: rep})
				}
			}
		}
	}
	return out
}

// String names the job in the run's log.
func (j job) String() string {
	s := j.e.Name + " on " + j.sc
	if j.pl.Param != "" {
		s += " with " + j.pl.Param + "=" + j.pl.Value
	}
	return s
}

// rttNote is the measured RTT for the run's log line.
func rttNote(h results.Harness) string {
	if h.MySQLRTTMS == nil || h.RedisRTTMS == nil {
		return ""
	}
	return fmt.Sprintf(", RTT mysql %.3f ms redis %.3f ms", *h.MySQLRTTMS, *h.RedisRTTMS)
}

// setNetwork gives the provider's servers the plan's network profile
// (a sweep over rtt: the same servers, new delays).
func setNetwork(ctx context.Context, p servers.Provider, pr netpath.Profile) error {
	nw, ok := p.(servers.Networker)
	if !ok {
		return errors.New("network profile: these servers were not started behind one")
	}
	return nw.SetNetwork(ctx, pr)
}

// reviveWithin bounds revive's look at each store.
const reviveWithin = 5 * time.Second

// revive makes sure, after a run that injected faults, that each store
// answers before the next run: a restart the injector could not see
// through in its undo timeout (a container slow to come back on a loaded
// machine, seen under CI with two busy loops) left the store down, and the
// next run failed at its first call. A store that does not answer within
// reviveWithin is restarted through the Faulter (a server is never left
// down between runs); what happened is logged.
func (b *bench) revive(ctx context.Context, o Options) {
	if b.faulter == nil {
		return
	}
	pings := map[string]func(context.Context) error{
		servers.TargetMySQL: b.conns.DB.PingContext,
		servers.TargetRedis: func(ctx context.Context) error { return b.conns.Redis.Ping(ctx).Err() },
	}
	for _, target := range []string{servers.TargetMySQL, servers.TargetRedis} {
		pctx, cancel := context.WithTimeout(ctx, reviveWithin)
		err := pings[target](pctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			continue
		}
		o.logf("  %s does not answer after the last run's faults (%v): restarting it", target, err)
		if rerr := b.faulter.Restart(ctx, target); rerr != nil {
			o.logf("  %s: restart: %v", target, rerr)
		}
	}
}

// probeRTT measures each store's round trip through the run's pool before
// the load, and returns what records it in a run's harness figures.
func probeRTT(ctx context.Context, c servers.Conns) (func(*results.Harness), error) {
	m, r, err := servers.ProbeRTT(ctx, c, servers.ProbeRounds)
	if err != nil {
		return func(*results.Harness) {}, err
	}
	return func(h *results.Harness) {
		h.MySQLRTTMS, h.RedisRTTMS = results.Float(m.MedianMS), results.Float(r.MedianMS)
		h.MySQLRTTP99MS, h.RedisRTTP99MS = results.Float(m.P99MS), results.Float(r.P99MS)
	}, nil
}

// reopen gives pools of the plan's size: a sweep over --pool opens new ones.
func reopen(c servers.Conns, ep servers.Endpoints, pool int) (servers.Conns, error) {
	if c.DB.Stats().MaxOpenConnections == pool {
		return c, nil
	}
	c.Close()
	return servers.Open(ep, pool)
}

// ceilingPct is a run's reserve attempts/s as a share of its store's
// calibrated ceiling.
func ceilingPct(run results.Run, e registry.Entry, cal *results.Calibration) float64 {
	if cal == nil {
		return 0
	}
	var c float64
	switch e.Ceiling {
	case registry.CeilingRedis:
		c = cal.RedisEvalshaOps
	case registry.CeilingMySQLUpdate:
		c = cal.MySQLHotUpdateOps
	case registry.CeilingMySQLTxn:
		c = cal.MySQLHotTxnOps
	}
	if c <= 0 {
		return 0
	}
	return 100 * run.AttemptsPerSec / c
}

// RunStrategy runs the named scenario once against one strategy on a
// freshly reset schema and audits the result (server CPU is not sampled).
func RunStrategy(ctx context.Context, conns servers.Conns, e registry.Entry, scenario string, o Options) (results.Run, error) {
	if len(o.Faults) > 0 {
		return results.Run{}, errors.New("a run with faults needs its stores: use RunWithFaults")
	}
	return runStrategy(ctx, Stores{Conns: conns}, e, scenario, o, nil)
}

// RunWithFaults is RunStrategy with o.Faults injected into st's servers
// (process faults through st.Faulter, network faults through a proxy in
// front of st.Endpoints, app-crash in the harness).
func RunWithFaults(ctx context.Context, st Stores, e registry.Entry, scenario string, o Options) (results.Run, error) {
	if err := o.Faults.CheckFor(st.Endpoints); err != nil {
		return results.Run{}, err
	}
	return runStrategy(ctx, st, e, scenario, o, nil)
}

// deadlines are the settle and audit deadlines of a run over skus SKUs
// that gave acks acknowledgements and left pending items for its Settle
// (strategies.Pending): the options' when set, else scaled with the work
// (settle: 2 min + 1 min per 100,000 SKUs + settlePerPending per pending
// item; each audit: 1 min + 1 min per 100,000 SKUs + auditPerAck per ack).
func (o Options) deadlines(skus int, acks, pending int64) (settle, audit time.Duration) {
	settle, audit = o.SettleTimeout, o.AuditTimeout
	if settle <= 0 {
		settle = 2*time.Minute + time.Duration(skus/100_000)*time.Minute + time.Duration(max(0, pending))*settlePerPending
	}
	if audit <= 0 {
		audit = time.Minute + time.Duration(skus/100_000)*time.Minute + time.Duration(max(0, acks))*auditPerAck
	}
	return settle, audit
}

// countersOf is the strategy's own counters (nil when it keeps none).
func countersOf(s strategies.Strategy) map[string]float64 {
	if c, ok := s.(strategies.Counters); ok {
		return c.Counters()
	}
	return nil
}
