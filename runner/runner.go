// Package runner executes scenarios against strategies on real servers:
// workers, start barrier, think time, pacing, warm-up, recording, settle and
// audit. It returns a results.Results; rendering is the reports package's job.
package runner

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/calibrate"
	"github.com/stockbench/stockbench/faults"
	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
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
	// means DefaultQueue, negative no queue.
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
	// Enough, when set, is asked after each run; when it says true, that
	// strategy is not run in the later plans (stockbench curve stops a
	// strategy at the first rate past its latency bound).
	Enough func(results.Run) bool

	// Procs > 1 runs each strategy as that many generator processes
	// started through Spawn, against these servers: the stores are reset
	// and loaded here, the shards' results merged and audited here, once.
	Procs int
	Spawn Spawn
	// Shard (from 0) of Shards > 1: this process is one generator of a
	// run; it plays its slice of the buyers (journeys or workers with
	// index % Shards == Shard), does not take the run lock (its parent
	// holds it), settles its strategy instance and leaves the audit to the
	// parent: its run carries its acks, its restocks among them.
	Shard, Shards int
	// NoReset leaves the stores as they are (prepared by another process).
	NoReset bool
	// StartBarrier, when set, names a Redis key the Shards generators meet
	// at after their setup: load starts when the last one arrives.
	StartBarrier string
	// ServerPIDs ("mysql", "redis") are the servers' processes when this
	// process did not start them but runs on their host: a shard samples
	// its parent's servers' CPU over its own measured phase.
	ServerPIDs map[string]int
}

// sharded reports whether this process is one of several generators.
func (o Options) sharded() bool { return o.Shards > 1 }

// mine reports whether buyer (journey or worker) i is this generator's.
func (o Options) mine(i int) bool { return !o.sharded() || i%o.Shards == o.Shard }

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
		ClientRetry: o.ClientRetry, RetryBackoff: o.RetryBackoff.String(),
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

// DefaultQueue is the service model's queue of new requests unless set.
const DefaultQueue = 256

// queue is the service model's queue bound.
func (o Options) queue() int {
	switch {
	case o.Queue < 0:
		return 0
	case o.Queue == 0:
		return DefaultQueue
	}
	return o.Queue
}

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
	ep, err := p.Start(ctx)
	if err != nil {
		return nil, err
	}
	defer p.Stop()
	pool := 0
	for _, pl := range plans {
		pool = max(pool, pl.pool())
	}
	conns, err := servers.Open(ep, pool)
	if err != nil {
		return nil, err
	}
	defer func() { conns.Close() }()
	// The faulter is nil on the external backend (its servers are not
	// ours): CheckFor refuses process faults there.
	faulter, _ := servers.FaulterOf(p)
	for _, pl := range plans {
		if err := pl.Faults.CheckFor(ep); err != nil {
			return nil, refuse(err)
		}
	}
	if !first.sharded() {
		// A shard's parent holds the run lock and guarded the stores.
		release, err := Guard(ctx, ep, conns, pool)
		if err != nil {
			return nil, err
		}
		defer release()
	}
	res.Env = collectEnv(ctx, ep, conns)
	if len(ep.MySQLCluster) > 1 {
		first.logf("%s", ep.MySQLDescription())
	}
	if first.CalibrateDuration > 0 {
		// The ceilings are what the stores give through the run's pool.
		conc := min(first.Buyers, first.pool())
		first.logf("calibrating the stores (%s per probe, concurrency %d)…", first.CalibrateDuration, conc)
		cal, err := calibrate.Run(ctx, ep, conns, conc, first.CalibrateDuration)
		if err != nil {
			if ctx.Err() != nil {
				res.Interrupted = true
				return res, nil
			}
			return res, err
		}
		res.Calibration = &cal
	}
	cep := ep
	if pid := first.ServerPIDs[servers.TargetMySQL]; pid > 0 && cep.MySQLPID == 0 {
		cep.MySQLPID = pid
	}
	if pid := first.ServerPIDs[servers.TargetRedis]; pid > 0 && cep.RedisPID == 0 {
		cep.RedisPID = pid
	}
	cpu := newCPUSampler(cep, faulter)
	enough := map[string]bool{}
	var network netpath.Profile
	if ep.Netns != "" {
		network = first.Network
	}
	for _, pl := range plans {
		// A shard's servers sit behind its parent's path: nothing to set.
		if ep.Netns != "" && pl.Network != network {
			if err := setNetwork(ctx, p, pl.Network); err != nil {
				return res, err
			}
			network = pl.Network
		}
		for _, sc := range pl.Scenarios {
			o := pl.Options
			for _, e := range o.Strategies {
				if enough[e.Name] {
					continue
				}
				for rep := 1; rep <= max(1, o.Repeat) && ctx.Err() == nil; rep++ {
					what := e.Name + " on " + sc
					if pl.Param != "" {
						what += " with " + pl.Param + "=" + pl.Value
					}
					o.logf("running %s…", what)
					nc, err := reopen(conns, ep, o.pool())
					if err != nil {
						return res, err
					}
					conns = nc
					st := Stores{Endpoints: ep, Conns: conns, Faulter: faulter}
					rtt, rerr := probeRTT(ctx, conns)
					if rerr != nil && ctx.Err() == nil {
						return res, fmt.Errorf("%s: %w", what, rerr)
					}
					var run results.Run
					if o.Procs > 1 {
						run, err = runShards(ctx, st, e, sc, o, rep)
					} else {
						run, err = runStrategy(ctx, st, e, sc, o, cpu)
					}
					if err != nil {
						if ctx.Err() != nil {
							break
						}
						return res, fmt.Errorf("%s: %w", what, err)
					}
					run.Interrupted = ctx.Err() != nil
					if o.Repeat > 1 {
						run.Repeat = rep
					}
					run.Param, run.Value = pl.Param, pl.Value
					rtt(&run.Harness)
					run.CeilingPct = ceilingPct(run, e, res.Calibration)
					res.Runs = append(res.Runs, run)
					if o.Enough != nil && o.Enough(run) {
						enough[e.Name] = true
					}
					o.logf("  %s: %.1f flows/s, P99 %.2f ms, %d flows measured, %d oversold%s", e.Name, run.TPS,
						run.LatencyMS["flow"].P99, run.Flows, run.Audit.OversoldUnits, rttNote(run.Harness))
					if run.Incomplete != "" {
						o.logf("  %s: the %s phase did not finish: %s", e.Name, run.Incomplete, run.Errors[len(run.Errors)-1])
					}
				}
			}
		}
	}
	res.Interrupted = ctx.Err() != nil
	if first.Repeat > 1 {
		res.Aggregates = results.Aggregates(res)
	}
	return res, nil
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

// liveStockMax is the largest catalog whose available stock the progress
// line sums every second.
const liveStockMax = 10_000

func runStrategy(ctx context.Context, st Stores, e registry.Entry, scenario string, o Options, cpu *cpuSampler) (results.Run, error) {
	run := results.Run{Strategy: e.Name, Scenario: scenario, Seed: o.Seed}
	ps := &phases{w: o.Progress, name: e.Name}
	sc, err := scenarios.Lookup(scenario)
	if err != nil {
		return run, err
	}
	// conns reset, load and audit the stores directly; the strategy's
	// pools (sconns) go through the fault proxy when the plan has network
	// faults.
	conns, sconns := st.Conns, st.Conns
	var proxy *faults.Proxy
	if o.Faults.NeedsProxy() {
		pep, p, err := faults.Listen(st.Endpoints)
		if err != nil {
			return run, err
		}
		defer p.Close()
		pc, err := servers.Open(pep, o.pool())
		if err != nil {
			return run, err
		}
		defer pc.Close()
		proxy, sconns = p, pc
	}
	heap0 := liveHeap()
	stock := catalog(sc, o.Params)
	// Setup's work: the MySQL rows, then the Redis hashes of a Redis strategy.
	work := int64(len(stock))
	if e.UsesRedis {
		work *= 2
	}
	setup := ps.start(PhaseSetup, "rows", work)
	if !o.NoReset {
		if err := prepare(ctx, conns, stock, func(n int) { setup.set(int64(n), 0) }); err != nil {
			setup.end(true)
			return run, err
		}
	}
	var redis0 int64
	if e.UsesRedis {
		redis0, _ = redisUsedMemory(ctx, conns.Redis)
	}
	cfg := o.Strategy
	cfg.DB, cfg.Redis = sconns.DB, sconns.Redis
	if cfg.LocalDir == "" {
		// The service's own disk (outbox-local's message database): one
		// directory per run, kept across an app crash, removed after.
		dir, err := os.MkdirTemp("", "stockbench-local-*")
		if err != nil {
			return run, fmt.Errorf("local dir: %w", err)
		}
		defer os.RemoveAll(dir)
		cfg.LocalDir = dir
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = o.OpTimeout
	}
	s, err := e.New(cfg)
	if err != nil {
		return run, err
	}
	if err := s.Setup(strategies.WithProgress(ctx, func(n int) { setup.add(int64(n)) }), stock); err != nil {
		setup.end(true)
		_ = s.Close()
		return run, err
	}
	if sp := setup.end(false); sp.Sec > 0 {
		run.Harness.SetupSKUsPerSec = float64(len(stock)) / sp.Sec
	}
	if e.UsesRedis && len(stock) > 0 {
		if redis1, err := redisUsedMemory(ctx, conns.Redis); err == nil && redis0 > 0 {
			run.Harness.RedisBytesPerSKU = float64(redis1-redis0) / float64(len(stock))
		}
	}

	// The service holds the strategy instance and its background loop; an
	// app-crash replaces the instance.
	svc := newService(e, cfg, stock, s)
	defer svc.Close()
	var strat strategies.Strategy = s
	if hasAppCrash(o.Faults) {
		strat = svc
	}

	acks, err := newAckLog()
	if err != nil {
		return run, err
	}
	defer acks.Close()
	book := newLedger(strat, stock, acks, ledgerKeep(o))
	if len(stock) > 0 {
		// What the catalog, the ledger and the strategy's setup hold.
		run.Harness.HarnessHeapBytesPerSKU = float64(int64(liveHeap())-int64(heap0)) / float64(len(stock))
	}
	d := &driver{s: book, o: o, sc: sc, restock: newRestocker(book, sc, o), gate: newGate(o.inflight(), o.queue())}
	var injected struct {
		events []faults.Event
		err    error
		done   chan struct{}
	}
	injCtx, injStop := context.WithCancel(ctx)
	defer injStop()
	if len(o.Faults) > 0 {
		in := &faults.Injector{Plan: o.Faults, Faulter: st.Faulter, Proxy: proxy,
			OnAppCrash: func(ctx context.Context, f faults.Fault) error { return svc.crash(ctx) }}
		if err := in.Check(); err != nil {
			return run, err
		}
		injected.done = make(chan struct{})
		d.onStart = func(from time.Time) {
			go func() {
				defer close(injected.done)
				injected.events, injected.err = in.Run(injCtx, from)
			}()
		}
	}
	probe := startProbe(ctx, d, e, conns, stock, o)
	if o.StartBarrier != "" {
		if err := meet(ctx, conns.Redis, o.StartBarrier, o.Shards); err != nil {
			return run, err
		}
	}
	if o.Progress != nil {
		d.live = newLive(&d.begun)
		lc := conns
		if len(stock) > liveStockMax {
			lc = servers.Conns{}
		}
		stopProgress := d.live.report(o.Progress, e.Name, lc, o.Warmup+o.Duration)
		defer stopProgress()
	}
	var recs stripes
	var window time.Duration
	load := (&phases{name: e.Name}).start(PhaseLoad, "", 0) // the live line draws it
	poolFrom, galeraFrom := markPools(sconns), markGalera(ctx, conns)
	var drift *driftSampler
	if sc.Timed() && !o.sharded() {
		pid := st.Endpoints.MySQLPID
		if pid == 0 {
			pid = o.ServerPIDs[servers.TargetMySQL]
		}
		_, relay := countersOf(strat)["outbox_relayed"]
		drift = startDrift(conns, pid, relay, driftEvery(o.Duration))
	}
	peakReset := resetPeakRSS()
	cpuFrom := selfCPU()
	switch {
	case !sc.Timed():
		recs, window = d.fixed(ctx, sc, cpu)
	case o.Rate > 0 || sc.Arrivals(o.Params).Rated():
		recs, window = d.openLoop(ctx, cpu)
	default:
		recs, window = d.closedLoop(ctx, cpu)
	}
	cpuPct := cpu.end()
	ps.list = append(ps.list, load.end(false))
	var driftEveryPeriod time.Duration
	var driftPoints []results.DriftPoint
	if drift != nil {
		driftEveryPeriod, driftPoints = drift.end(d.from)
	}
	harnessCPU := selfCPU() - cpuFrom
	poolTo, galeraTo := markPools(sconns), markGalera(context.Background(), conns)
	if e.UsesRedis {
		run.Harness.RedisUsedMemoryBytes, _ = redisUsedMemory(context.Background(), conns.Redis)
	}
	if injected.done != nil {
		// Load is over: whatever fault is still on is undone now (a restart
		// is seen through), so settle and audit find the servers up.
		injStop()
		<-injected.done
		run.Faults = timeline(injected.events)
		if injected.err != nil {
			o.logf("  faults: %v", injected.err)
		}
	}
	bgRan := svc.stopBackground()
	probed := probe.stop()

	// Audit at the end of load, settle, audit again — even after Ctrl-C:
	// what was measured is reported. A phase that overruns its deadline
	// (or fails) ends the chain: the run keeps its load figures and names
	// the phase in Incomplete.
	auditor := audit.Auditor{DB: conns.DB, LimitPerBuyer: o.Params.LimitPerBuyer}
	if e.UsesRedis {
		auditor.Redis, auditor.RedisReservations = conns.Redis, e.RedisReservations
	}
	auditor.Ledger = book.snapshot()
	settleTO, auditTO := o.deadlines(len(stock), acks.len(), pendingOf(strat))
	var phaseErr error
	settle := func() bool {
		ph := ps.start(PhaseSettle, "", 0)
		sctx, cancel := context.WithTimeout(context.Background(), settleTO)
		defer cancel()
		if err := strat.Settle(sctx); err != nil {
			ph.end(true)
			run.Incomplete, phaseErr = PhaseSettle, fmt.Errorf("settle (deadline %s): %w", settleTO, err)
			return false
		}
		ph.end(false)
		return true
	}
	auditNow := func(name string, check func(ctx context.Context, a *audit.Audit) error) (audit.Audit, bool) {
		ph := ps.start(name, "SKUs+acks", 0)
		a := auditor
		a.Progress = func(done, total int64) { ph.set(done, total) }
		actx, cancel := context.WithTimeout(context.Background(), auditTO)
		defer cancel()
		res, err := a.AuditFrom(actx, acks)
		if err == nil && check != nil {
			err = check(actx, &res)
		}
		if err != nil {
			ph.end(true)
			run.Incomplete, phaseErr = name, fmt.Errorf("%s (deadline %s): %w", name, auditTO, err)
			return res, false
		}
		ph.end(false)
		return res, true
	}
	var settleFrom time.Time
	if o.sharded() {
		// The parent audits once, after every generator settled.
		settleFrom = time.Now()
		settle()
		actx, cancel := context.WithTimeout(context.Background(), auditTO)
		run.ShardAcks, err = acks.all(actx)
		cancel()
		if err != nil {
			return run, err
		}
		host, _ := os.Hostname()
		run.Shard = &results.ShardInfo{Index: o.Shard, Of: o.Shards, Host: host, PID: os.Getpid(),
			HarnessCPUPct: cpuPct["harness"], Cores: runtime.NumCPU(), SettleFrom: settleFrom}
	}
	total := newRecorder(time.Time{}, time.Time{})
	for _, r := range recs {
		total.merge(r)
	}
	if !o.sharded() {
		func() {
			endOfLoad, ok := auditNow(PhaseAuditEndOfLoad, nil)
			if !ok {
				return
			}
			attachProbe(probed, &endOfLoad)
			run.AuditEndOfLoad = &endOfLoad
			auditor.StaleBefore = time.Now()
			if !settle() {
				return
			}
			// What settle repaired compares like with like: the node-agreement
			// check runs only after settle, so it stays out of the difference.
			var repaired map[string]int64
			settled, ok := auditNow(PhaseAudit, func(ctx context.Context, a *audit.Audit) error {
				attachProbe(probed, a)
				repaired = audit.Repaired(endOfLoad, *a)
				return checkNodes(ctx, conns, a)
			})
			if ok {
				run.Audit, run.SettleRepaired = settled, repaired
			}
		}()
	}
	run.Phases = ps.list

	run.DurationSec = window.Seconds()
	run.Flows = total.flows
	if secs := window.Seconds(); secs > 0 {
		run.TPS = float64(total.flows) / secs
		run.AttemptsPerSec = float64(total.attempts) / secs
	}
	run.LatencyMS = map[string]results.Percentiles{}
	run.Histograms = map[string]string{}
	for _, name := range results.HistogramNames {
		run.LatencyMS[name] = percentiles(total.hist[name])
		if h := total.hist[name]; h != nil {
			if run.Histograms[name], err = results.EncodeHistogram(h); err != nil {
				return run, err
			}
		}
	}
	run.Spectrum = results.SpectrumOf(total.hist["flow"])
	if !d.from.IsZero() {
		run.MeasuredFrom = d.from.UTC().Format(time.RFC3339Nano)
	}
	run.Counts, run.Journeys, run.Errors = total.counts, total.journeys, total.errs
	if phaseErr != nil {
		run.Errors = append(run.Errors, phaseErr.Error())
	}
	run.Series = total.seriesPoints()
	if drift != nil {
		run.Drift = driftOf(driftEveryPeriod, driftPoints, total.series, window)
	}
	if c, ok := strat.(strategies.Counters); ok {
		run.Counters = c.Counters()
	}
	var ops int64
	for _, op := range []string{"reserve", "confirm", "cancel"} {
		for _, n := range total.counts[op] {
			ops += n
		}
	}
	h := &run.Harness
	h.ServerCPUPct, h.MySQLCPUPct = cpuPct.of("server"), cpuPct.of("mysql")
	h.RedisCPUPct, h.HarnessCPUPct = cpuPct.of("redis"), cpuPct.of("harness")
	// How long this process's strategy instance ran its background loop
	// (sweeper, recovery, relay, reconciler): through the whole load
	// unless the loop gave up.
	h.BackgroundLoopSec = bgRan.Seconds()
	if v, ok := harnessPerKFlows(deref(h.HarnessCPUPct), window, total.flows); ok {
		h.HarnessCPUMSPer1kFlows = &v
	}
	d.harness(h)
	harnessFigures(h, peakReset, harnessCPU, d.begun.Load())
	h.AppCrashes = svc.crashes.Load()
	poolFigures(h, poolFrom, poolTo, ops)
	h.GaleraCertFailures, h.GaleraBFAborts = galeraFigures(galeraFrom, galeraTo)
	if total.sale != nil {
		run.Flash = total.sale.figures(d.from, d.late.Load())
		if !o.sharded() {
			run.Audit.UnsoldUnits = run.Flash.UnsoldUnits
		}
	}
	if d.gate != nil || o.ClientRetry > 0 {
		run.Service = &results.Service{ClientRetries: d.retries.Load()}
		if d.gate != nil {
			run.Service.Inflight, run.Service.Queue = d.gate.limit, d.gate.queue
			run.Service.Shed, run.Service.PeakQueue = d.gate.stats()
		}
	}
	run.CoreLines = e.CoreLines()
	if len(run.Faults) > 0 {
		run.FaultImpact = impact(total.series, total.failedAt, run.Faults, run)
	}
	return run, nil
}

// countersOf is the strategy's own counters (nil when it keeps none).
func countersOf(s strategies.Strategy) map[string]float64 {
	if c, ok := s.(strategies.Counters); ok {
		return c.Counters()
	}
	return nil
}

// fixed plays the flash and race scenarios: buyers arrive on the arrival
// profile's schedule, generated lazily; a dispatcher starts each at its
// time, taking its first call's place in the service model first, so a
// buyer shed as busy costs no goroutine: the dispatcher keeps it (its
// journey and when to come back) in a heap until its retry is due, or it
// leaves. The window runs until the last buyer ends. Memory is bounded by
// the stripes, the buyers in the service, paying or waiting to retry, and
// the timeline — not by the buyers.
func (d *driver) fixed(ctx context.Context, sc scenarios.Scenario, cpu *cpuSampler) (stripes, time.Duration) {
	gen := sc.Fixed(d.o.Params)
	sched := scenarios.NewSchedule(sc.Arrivals(d.o.Params), d.o.Buyers, d.o.Seed)
	recs := newStripes(stripeCount(d.o.Buyers, runtime.GOMAXPROCS(0)), time.Time{}, time.Time{})
	t0 := time.Now()
	for _, r := range recs {
		r.from = t0
		r.sale = newSale(d.o.Stock)
	}
	d.started(t0)
	cpu.begin()
	var wg sync.WaitGroup
	var later retryHeap
	i := 0
	next, more := sched.Next()
	for ctx.Err() == nil {
		var a arrival
		switch {
		// New arrivals wait while the room for buyers waiting to retry is
		// full (they start late, and are counted so).
		case more && (later.Len() == 0 || !t0.Add(next).After(later[0].due)) && later.Len() < maxWaitingRetries:
			a = arrival{j: gen.Next(), i: i, due: t0.Add(next)}
			i++
			next, more = sched.Next()
			if !d.o.mine(a.i) {
				continue
			}
		case later.Len() > 0:
			a = heap.Pop(&later).(arrival)
		default:
			more = false
		}
		if a.due.IsZero() {
			break
		}
		if wait := time.Until(a.due); wait > 0 && !clock.Sleep(ctx, wait) {
			break
		}
		rec := recs.at(a.i)
		b := buyer{early: int64(a.i) < d.o.Stock, tries: a.tries, first: a.first}
		if a.tries == 0 {
			d.begun.Add(1)
			if time.Since(a.due) > lateThreshold {
				d.late.Add(1)
			}
			rec.journey(a.j.Kind)
		}
		if first := a.j.Phases[0]; first.Think == 0 && len(first.Ops) == 1 {
			t, err := d.gate.try(first.Ops[0] != scenarios.Reserve)
			if err != nil {
				// Shed before it started: the buyer comes back after a
				// backoff, or leaves having heard "busy".
				r := opResult{op: first.Ops[0], err: err, start: a.due, lat: time.Since(a.due)}
				d.record(ctx, a.j, rec, r)
				if a.first.IsZero() {
					a.first = a.due
				}
				if a.tries++; a.tries <= d.o.ClientRetry {
					d.retries.Add(1)
					a.due = time.Now().Add(d.backoff(a.tries))
					heap.Push(&later, a)
					continue
				}
				var seen outcomes
				seen.add(r)
				rec.mu.Lock()
				rec.sale.end(seen.end(false, false, a.j.Kind), b.early && a.j.Kind == "buy")
				rec.mu.Unlock()
				continue
			}
			b.t = t
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.journey(ctx, a.j, rec, a.due, b)
		}()
	}
	wg.Wait()
	return recs, time.Since(t0)
}

// arrival is a buyer the dispatcher starts at due: its journey, its index
// in arrival order, and for a retry the attempts already made and when the
// first was due.
type arrival struct {
	j          scenarios.Journey
	i, tries   int
	due, first time.Time
}

// maxWaitingRetries bounds the buyers the dispatcher keeps waiting to
// retry (about 250 bytes each, journey included): while it is full, new
// arrivals wait for retries to come due. It fills only when the harness
// falls far behind its schedule, which the late starts show.
const maxWaitingRetries = 1 << 17

// retryHeap orders buyers waiting to retry by when they are due.
type retryHeap []arrival

func (h retryHeap) Len() int           { return len(h) }
func (h retryHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h retryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *retryHeap) Push(x any)        { *h = append(*h, x.(arrival)) }
func (h *retryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
