package runner

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/faults"
	"github.com/stockbench/stockbench/internal/sysstat"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/scenarios"
	"github.com/stockbench/stockbench/servers"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/registry"
)

// liveStockMax is the largest catalog whose available stock the progress
// line sums every second.
const liveStockMax = 10_000

// runStrategy is one run of one strategy on one scenario in this process:
// a list of steps, each handing the next what it built (trial's fields).
// A step that fails ends the run with what the run holds so far; the
// checks (audits and settle) never fail it: a phase that overruns is
// named in Run.Incomplete and the load figures are kept.
func runStrategy(ctx context.Context, st Stores, e registry.Entry, scenario string, o Options, cpu *cpuSampler) (results.Run, error) {
	t := &trial{st: st, e: e, o: o, cpu: cpu,
		run: results.Run{Strategy: e.Name, Scenario: scenario, Seed: o.Seed},
		ps:  &phases{w: o.Progress, name: e.Name}}
	defer t.cleanup()
	steps := []func(context.Context) error{
		t.paths,   // the strategy's pools, through the fault proxy when faults need one
		t.setup,   // reset and load the stores, build the strategy, its Setup
		t.serve,   // the service instance, the ack log and ledger, the driver
		t.inject,  // the fault injector, started with the measured phase
		t.load,    // the measured phase, with the probe, drift and live line
		t.check,   // audit at the end of load, settle, audit again
		t.figures, // what was measured, into the run
	}
	sc, err := scenarios.Lookup(scenario)
	if err != nil {
		return t.run, err
	}
	t.sc = sc
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return t.run, err
		}
	}
	return t.run, nil
}

// trial is what runStrategy's steps build and hand each other.
type trial struct {
	st  Stores
	e   registry.Entry
	o   Options
	sc  scenarios.Scenario
	cpu *cpuSampler
	run results.Run
	ps  *phases
	// undo is run in reverse when the run ends, however it ends.
	undo []func()

	// conns reset, load and audit the stores directly; the strategy's
	// pools (sconns) go through the fault proxy when the plan has network
	// faults.
	conns, sconns servers.Conns
	proxy         *faults.Proxy
	stock         []inventory.Stock
	heap0         uint64
	cfg           strategies.Config

	// strat is what the buyers call: the strategy, or the service that
	// stands for its process when the plan crashes it.
	svc   *service
	strat strategies.Strategy
	// remote are the service processes the buyers call (--service
	// process:N); nil when the strategy runs in this process.
	remote ServiceGroup
	// sep are the endpoints of the strategy's pools (sconns): the
	// session isolation asked in the DSN; service processes get them.
	sep  servers.Endpoints
	acks *ackLog
	book *ledger
	d    *driver

	injStop context.CancelFunc
	// localFail is the local-fail fault's switch, shared by every
	// instance of the service (strategies.Config.LocalFailing).
	localFail atomic.Bool
	injected  struct {
		events []faults.Event
		err    error
		done   chan struct{}
	}

	// What load measured.
	recs        stripes
	window      time.Duration
	cpuPct      cpuFigures
	harnessCPU  time.Duration
	peakReset   bool
	pool        [2]poolMark
	galera      [2]galeraMark
	driftEvery  time.Duration
	driftPoints []results.DriftPoint
	drifted     bool
	bgRan       time.Duration
	probed      *audit.ProbeReport
	// costFrom and costTo are the cost meter's marks around the measured
	// phase (nil when it never began).
	costFrom, costTo *costMark
	// w watches the load live (thresholds, stores' counters, metrics).
	w         *watcher
	storeSecs []*results.StoreSecond
	// phaseErr is why a check phase did not finish.
	phaseErr error
}

// later registers f to run when the run ends.
func (t *trial) later(f func()) { t.undo = append(t.undo, f) }

func (t *trial) cleanup() {
	for i := len(t.undo) - 1; i >= 0; i-- {
		t.undo[i]()
	}
}

// paths opens the strategy's pools: through a fault proxy in front of the
// servers when the plan has network faults, else the run's own.
func (t *trial) paths(ctx context.Context) error {
	t.conns, t.sconns, t.sep = t.st.Conns, t.st.Conns, t.st.Endpoints
	level := t.o.Strategy.Isolation
	if !t.o.Faults.NeedsProxy() && level == servers.IsolationServer {
		return nil
	}
	ep := t.st.Endpoints
	if t.o.Faults.NeedsProxy() {
		pep, p, err := faults.Listen(ep)
		if err != nil {
			return err
		}
		t.later(func() { p.Close() })
		ep, t.proxy = pep, p
	}
	// The strategy's sessions at the level asked (--isolation); the
	// auditor's and the probe's keep the server's default.
	ep, err := servers.WithIsolation(ctx, ep, t.conns.DB, level)
	if err != nil {
		return err
	}
	pc, err := servers.Open(ep, t.o.pool())
	if err != nil {
		return err
	}
	t.later(func() { pc.Close() })
	t.sconns, t.sep = pc, ep
	return nil
}

// prepare resets the schema and Redis and loads the catalog.
// progress, when given, is told the rows loaded so far.
func prepare(ctx context.Context, conns servers.Conns, stock []inventory.Stock, progress ...func(done int)) error {
	if err := inventory.ResetMySQL(ctx, conns.DB); err != nil {
		return err
	}
	if err := inventory.ResetRedis(ctx, conns.Redis); err != nil {
		return err
	}
	return inventory.LoadStock(ctx, conns.DB, stock, progress...)
}

// setup resets and loads the stores (unless another process did), builds
// the strategy and runs its Setup, as one phase with a rate.
func (t *trial) setup(ctx context.Context) error {
	t.heap0 = liveHeap()
	t.stock = catalog(t.sc, t.o.Params)
	// Setup's work: the MySQL rows, then the Redis hashes of a Redis strategy.
	work := int64(len(t.stock))
	if t.e.UsesRedis {
		work *= 2
	}
	ph := t.ps.start(PhaseSetup, "rows", work)
	if !t.o.Segment.NoReset {
		if err := prepare(ctx, t.conns, t.stock, func(n int) { ph.set(int64(n), 0) }); err != nil {
			ph.end(true)
			return err
		}
	}
	var redis0 int64
	if t.e.UsesRedis {
		redis0, _ = sysstat.RedisUsedMemory(ctx, t.conns.Redis)
	}
	cfg := t.o.Strategy
	cfg.DB, cfg.Redis = t.sconns.DB, t.sconns.Redis
	if cfg.LocalDir == "" {
		// The service's own disk (outbox-local's message database): one
		// directory per run, kept across an app crash, removed after.
		dir, err := servers.MkdirTemp("stockbench-local-*")
		if err != nil {
			return fmt.Errorf("local dir: %w", err)
		}
		t.later(func() { os.RemoveAll(dir) })
		cfg.LocalDir = dir
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = t.o.OpTimeout
	}
	if cfg.LocalFailing == nil {
		cfg.LocalFailing = t.localFail.Load
	}
	t.cfg = cfg
	var s strategies.Strategy
	var err error
	if t.o.Service.Remote() {
		// The strategy runs in service processes; s is their client, whose
		// Setup waits until every instance is healthy.
		s, err = t.startRemote(ctx, t.e, cfg)
	} else {
		s, err = t.e.New(cfg)
	}
	if err != nil {
		ph.end(true)
		return err
	}
	if err := s.Setup(strategies.WithProgress(ctx, func(n int) { ph.add(int64(n)) }), t.stock); err != nil {
		ph.end(true)
		_ = s.Close()
		return err
	}
	// From here the service owns the instance (and closes it).
	t.svc = newService(t.e, cfg, t.stock, s)
	t.later(func() { t.svc.Close() })
	t.strat = s
	if sp := ph.end(false); sp.Sec > 0 {
		t.run.Harness.SetupSKUsPerSec = float64(len(t.stock)) / sp.Sec
	}
	if t.e.UsesRedis && len(t.stock) > 0 {
		if redis1, err := sysstat.RedisUsedMemory(ctx, t.conns.Redis); err == nil && redis0 > 0 {
			t.run.Harness.RedisBytesPerSKU = float64(redis1-redis0) / float64(len(t.stock))
		}
	}
	return nil
}

// serve puts the service in front of the strategy (when the plan crashes
// the app), the ack log and ledger in front of that, and the driver that
// plays the buyers.
func (t *trial) serve(context.Context) error {
	if hasAppCrash(t.o.Faults) {
		t.strat = t.svc
	}
	acks, err := newAckLog()
	if err != nil {
		return err
	}
	t.later(func() { acks.Close() })
	t.acks = acks
	t.book = newLedger(t.strat, t.stock, acks, ledgerKeep(t.o))
	if len(t.stock) > 0 {
		// What the catalog, the ledger and the strategy's setup hold.
		t.run.Harness.HarnessHeapBytesPerSKU = float64(int64(liveHeap())-int64(t.heap0)) / float64(len(t.stock))
	}
	t.d = &driver{s: t.book, o: t.o, sc: t.sc, restock: newRestocker(t.book, t.sc, t.o), gate: newGate(t.o.inflight(), t.o.queue())}
	return nil
}

// inject arms the plan's faults: the injector starts with the measured
// phase (the driver's onStart) and is undone when load ends.
func (t *trial) inject(ctx context.Context) error {
	injCtx, stop := context.WithCancel(ctx)
	t.injStop = stop
	t.later(stop)
	if len(t.o.Faults) == 0 {
		return nil
	}
	in := &faults.Injector{Plan: t.o.Faults, Faulter: t.st.Faulter, Proxy: t.proxy,
		OnAppCrash:  func(ctx context.Context, f faults.Fault) error { return t.svc.crash(ctx) },
		OnLocalFail: func(_ context.Context, on bool) error { t.localFail.Store(on); return nil }}
	if t.remote != nil {
		in.Services = t.remote
	}
	if err := in.Check(); err != nil {
		return err
	}
	t.injected.done = make(chan struct{})
	t.d.onStart = func(from time.Time) {
		go func() {
			defer close(t.injected.done)
			t.injected.events, t.injected.err = in.Run(injCtx, from)
		}()
	}
	return nil
}

// load is the measured phase: the buyers on the scenario's schedule, with
// the mid-run probe, the drift sampler and the live line beside them.
func (t *trial) load(ctx context.Context) error {
	o, d := t.o, t.d
	lctx, w := t.startWatch(ctx)
	t.w = w
	probe := startProbe(ctx, d, t.e, t.conns, t.stock, o, w.violation)
	if len(o.AbortOn) > 0 && !probe.runs {
		o.logf("  %s: no mid-run probe on this run (a generator of several, or over %d SKUs): --abort-on anomaly cannot fire", t.e.Name, probeMaxSKUs)
	}
	if o.Segment.StartBarrier != "" {
		if err := meet(ctx, t.conns.Redis, o.Segment.StartBarrier, o.Segment.Of); err != nil {
			return err
		}
	}
	stopLive := func() {}
	if o.Progress != nil || w.live() {
		d.live = newLive(&d.begun)
		lc := t.conns
		if len(t.stock) > liveStockMax || o.Progress == nil {
			lc = servers.Conns{}
		}
		l, prev := d.live, d.onStart
		d.onStart = func(from time.Time) {
			if prev != nil {
				prev(from)
			}
			l.measuredFrom(from)
		}
		stopLive = d.live.report(o.Progress, t.e.Name, lc, o.Warmup+o.Duration, w.second)
		t.later(stopLive)
	}
	ph := (&phases{name: t.e.Name}).start(PhaseLoad, "", 0) // the live line draws it
	t.pool[0], t.galera[0] = markPools(t.sconns), markGalera(ctx, t.conns)
	var drift *driftSampler
	if t.sc.Timed() && !o.Segment.Partial() {
		pid := t.st.Endpoints.MySQLPID
		if pid == 0 {
			pid = o.Segment.ServerPIDs[servers.TargetMySQL]
		}
		_, relay := countersOf(t.strat)["outbox_relayed"]
		drift = startDrift(t.conns, pid, relay, driftEvery(o.Duration), t.cpu.seconds)
	}
	if t.cpu == nil {
		// A run outside Execute (RunStrategy) still measures its cost.
		t.cpu = newCPUSampler(t.st.Endpoints, t.st.Faulter)
	}
	meter := &costMeter{pools: t.sconns, status: t.conns, inStrategy: d.inStrategy.Load}
	t.cpu.setMeter(meter)
	t.peakReset = sysstat.ResetPeak()
	stopProfile := startCPUProfile(t.e.Name)
	cpuFrom := selfCPU()
	switch {
	case !t.sc.Timed():
		t.recs, t.window = d.fixed(lctx, t.sc, t.cpu)
	case o.Rate > 0 || t.sc.Arrivals(o.Params).Rated():
		t.recs, t.window = d.openLoop(lctx, t.cpu)
	default:
		t.recs, t.window = d.closedLoop(lctx, t.cpu)
	}
	stopProfile()
	t.costFrom, t.costTo = meter.marks()
	t.cpu.setMeter(nil)
	stopLive()
	t.storeSecs = w.loadEnded(time.Now())
	t.cpuPct = t.cpu.end()
	t.ps.list = append(t.ps.list, ph.end(false))
	if drift != nil {
		t.drifted = true
		t.driftEvery, t.driftPoints = drift.end(d.from)
	}
	t.harnessCPU = selfCPU() - cpuFrom
	t.pool[1], t.galera[1] = markPools(t.sconns), markGalera(context.Background(), t.conns)
	if t.e.UsesRedis {
		t.run.Harness.RedisUsedMemoryBytes, _ = sysstat.RedisUsedMemory(context.Background(), t.conns.Redis)
	}
	if t.injected.done != nil {
		// Load is over: whatever fault is still on is undone now (a restart
		// is seen through), so settle and audit find the servers up.
		t.injStop()
		<-t.injected.done
		t.run.Faults = timeline(t.injected.events)
		if t.injected.err != nil {
			o.logf("  faults: %v", t.injected.err)
		}
	}
	t.bgRan = t.svc.stopBackground()
	t.probed = probe.stop()
	return nil
}

// check audits at the end of load, settles, and audits again — even after
// Ctrl-C: what was measured is reported. A phase that overruns its
// deadline (or fails) ends the chain: the run keeps its load figures and
// names the phase in Incomplete. A generator of several settles only and
// hands its acks to the parent, which audits once.
func (t *trial) check(context.Context) error {
	run, conns := &t.run, t.conns
	auditor := audit.Auditor{DB: conns.DB, LimitPerBuyer: t.o.Params.LimitPerBuyer}
	if t.e.UsesRedis {
		auditor.Redis, auditor.RedisReservations = conns.Redis, t.e.RedisReservations
	}
	auditor.Ledger = t.book.snapshot()
	settleTO, auditTO := t.o.deadlines(len(t.stock), t.acks.len(), pendingOf(t.strat))
	settle := func() bool {
		ph := t.ps.start(PhaseSettle, "", 0)
		sctx, cancel := context.WithTimeout(context.Background(), settleTO)
		defer cancel()
		if err := t.strat.Settle(sctx); err != nil {
			ph.end(true)
			// The pool's state says whether settle waited for a connection
			// (held by something that never gave it back) or for the store.
			ps := t.sconns.DB.Stats()
			run.Incomplete, t.phaseErr = PhaseSettle, fmt.Errorf("settle (deadline %s; MySQL pool %d open, %d in use): %w",
				settleTO, ps.OpenConnections, ps.InUse, err)
			return false
		}
		ph.end(false)
		return true
	}
	auditNow := func(name string, check func(ctx context.Context, a *audit.Audit) error) (audit.Audit, bool) {
		res, err := auditWithin(t.ps, name, auditor, t.acks, auditTO, check)
		if err != nil {
			run.Incomplete, t.phaseErr = name, err
			return res, false
		}
		return res, true
	}
	if t.o.Segment.Partial() {
		// The parent audits once, after every generator settled.
		settleFrom := time.Now()
		settle()
		actx, cancel := context.WithTimeout(context.Background(), auditTO)
		acks, err := t.acks.all(actx)
		cancel()
		if err != nil {
			return err
		}
		run.ShardAcks = acks
		host, _ := os.Hostname()
		run.Shard = &results.ShardInfo{Index: t.o.Segment.Index, Of: t.o.Segment.Of, Host: host, PID: os.Getpid(),
			HarnessCPUPct: t.cpuPct["harness"], Cores: runtime.NumCPU(), SettleFrom: settleFrom}
		return nil
	}
	endOfLoad, ok := auditNow(PhaseAuditEndOfLoad, nil)
	if !ok {
		return nil
	}
	attachProbe(t.probed, &endOfLoad)
	run.AuditEndOfLoad = &endOfLoad
	auditor.StaleBefore = time.Now()
	if !settle() {
		return nil
	}
	// What settle repaired compares like with like: the node-agreement
	// check runs only after settle, so it stays out of the difference.
	var repaired map[string]int64
	settled, ok := auditNow(PhaseAudit, func(ctx context.Context, a *audit.Audit) error {
		attachProbe(t.probed, a)
		repaired = audit.Repaired(endOfLoad, *a)
		return checkNodes(ctx, conns, a)
	})
	if ok {
		run.Audit, run.SettleRepaired = settled, repaired
	}
	return nil
}

// figures puts what the load measured into the run: rates, latencies,
// counts, series, drift, the harness's and the servers' figures, the
// flash and service figures.
func (t *trial) figures(context.Context) error {
	run, o, d := &t.run, t.o, t.d
	run.Phases = t.ps.list
	total := newRecorder(time.Time{}, time.Time{})
	for _, r := range t.recs {
		total.merge(r)
	}
	window := t.window
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
			enc, err := results.EncodeHistogram(h)
			if err != nil {
				return err
			}
			run.Histograms[name] = enc
		}
	}
	run.Spectrum = results.SpectrumOf(total.hist["flow"])
	if !d.from.IsZero() {
		run.MeasuredFrom = d.from.UTC().Format(time.RFC3339Nano)
	}
	run.Counts, run.Journeys, run.Errors = total.counts, total.journeys, total.errs
	if t.phaseErr != nil {
		run.Errors = append(run.Errors, t.phaseErr.Error())
	}
	run.Series = total.seriesPoints()
	if t.drifted {
		run.Drift = driftOf(t.driftEvery, t.driftPoints, total.series, total.latencies(), window)
	}
	run.Counters = countersOf(t.strat)
	var ops int64
	for _, op := range []string{"reserve", "confirm", "cancel"} {
		for _, n := range total.counts[op] {
			ops += n
		}
	}
	h := &run.Harness
	h.ServerCPUPct, h.MySQLCPUPct = t.cpuPct.of("server"), t.cpuPct.of("mysql")
	h.RedisCPUPct, h.HarnessCPUPct = t.cpuPct.of("redis"), t.cpuPct.of("harness")
	// How long this process's strategy instance ran its background loop
	// (sweeper, recovery, relay, reconciler): through the whole load
	// unless the loop gave up.
	h.BackgroundLoopSec = t.bgRan.Seconds()
	if v, ok := harnessPerKFlows(deref(h.HarnessCPUPct), window, total.flows); ok {
		h.HarnessCPUMSPer1kFlows = &v
	}
	d.harness(h)
	harnessFigures(h, t.peakReset, t.harnessCPU, d.begun.Load())
	h.AppCrashes = t.svc.crashes.Load()
	poolFigures(h, t.pool[0], t.pool[1], ops)
	h.GaleraCertFailures, h.GaleraBFAborts = galeraFigures(t.galera[0], t.galera[1])
	if total.sale != nil {
		run.Flash = total.sale.figures(d.from, d.late.Load())
		if !o.Segment.Partial() {
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
	run.CoreLines = t.e.CoreLines()
	run.Cost = costOf(t.costFrom, t.costTo, costInputs{flows: total.flows, window: window, cores: runtime.NumCPU(),
		cpu: t.cpuPct, opTimeMS: opTimeMS(run.LatencyMS), probe: t.e.Probe})
	run.Cost.Budget = o.CPUBudget.Results()
	if len(run.Faults) > 0 {
		run.FaultImpact = impact(total.series, total.failedAt, run.Faults, *run)
	}
	t.w.figures(run, t.storeSecs, window)
	return nil
}
