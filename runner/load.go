package runner

import (
	"context"
	"time"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/internal/sysstat"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/scenarios"
	"github.com/stockbench/stockbench/servers"
	"github.com/stockbench/stockbench/strategies/registry"
)

// loadInputs is what the load step needs of the run and of the steps
// before it.
type loadInputs struct {
	st    Stores
	p     paths
	e     registry.Entry
	sc    scenarios.Scenario
	o     Options
	b     built
	sv    served
	inj   injection
	cpu   *cpuSampler // nil: a run outside Execute, which makes its own
	later func(func())
}

// loaded is what the measured phase measured.
type loaded struct {
	// d is the driver that played the buyers (its counters and gate).
	d          *driver
	recs       stripes
	window     time.Duration
	phase      results.Phase
	cpuPct     cpuFigures
	harnessCPU time.Duration
	peakReset  bool
	pool       [2]poolMark
	galera     [2]galeraMark
	drift      *driftSamples // nil: not sampled
	bgRan      time.Duration
	probed     *audit.ProbeReport
	redisUsed  int64
	faults     []results.FaultEvent
	// costFrom and costTo are the cost meter's marks around the measured
	// phase (nil when it never began).
	costFrom, costTo *costMark
	// w watched the load live (thresholds, stores' counters, metrics).
	w         *watcher
	storeSecs []*results.StoreSecond
}

// driftSamples are the drift sampler's points and their period.
type driftSamples struct {
	every  time.Duration
	points []results.DriftPoint
}

// load is the measured phase: the buyers on the scenario's schedule, with
// the fault injector, the mid-run probe, the drift sampler and the live
// line beside them, each told when the measured phase starts.
func load(ctx context.Context, in loadInputs) (loaded, error) {
	o, e := in.o, in.e
	d := &driver{s: in.sv.book, o: o, sc: in.sc, restock: newRestocker(in.sv.book, in.sc, o), gate: newGate(o.inflight(), o.queue())}
	var hooks []func(time.Time)
	if in.inj.start != nil {
		hooks = append(hooks, in.inj.start)
	}
	if in.cpu == nil {
		// A run outside Execute (RunStrategy) still measures its cost.
		in.cpu = newCPUSampler(in.st.Endpoints, in.st.Faulter)
	}
	lctx, w := startWatch(ctx, d, o, e, in.sc, in.p.conns, in.sv.strat, in.cpu, in.later)
	probe := startProbe(ctx, e, in.p.conns, in.b.stock, o, w.violation)
	hooks = append(hooks, w.start, probe.start)
	if len(o.AbortOn) > 0 && !probe.runs {
		o.logf("  %s: no mid-run probe on this run (a generator of several, or over %d SKUs): --abort-on anomaly cannot fire", e.Name, probeMaxSKUs)
	}
	if o.Segment.StartBarrier != "" {
		if err := meet(ctx, in.p.conns.Redis, o.Segment.StartBarrier, o.Segment.Of); err != nil {
			return loaded{}, err
		}
	}
	stopLive := func() {}
	if o.Progress != nil || w.live() {
		d.live = newLive(&d.begun)
		hooks = append(hooks, d.live.measuredFrom)
		lc := in.p.conns
		if len(in.b.stock) > liveStockMax || o.Progress == nil {
			lc = servers.Conns{}
		}
		stopLive = d.live.report(o.Progress, e.Name, lc, o.Warmup+o.Duration, w.second)
		in.later(stopLive)
	}
	d.onStart = func(from time.Time) {
		for _, h := range hooks {
			h(from)
		}
	}
	ld := measure(ctx, lctx, in, d, w, stopLive)
	ld.probed = probe.stop()
	return ld, nil
}

// measure drives the buyers and reads, around them, what the load costs:
// the pools, the CPU, the drift, the stores' counters.
// The buyers run under lctx (cut by an --abort-on breach).
func measure(ctx, lctx context.Context, in loadInputs, d *driver, w *watcher, stopLive func()) loaded {
	o, e := in.o, in.e
	ld := loaded{d: d, w: w}
	ph := (&phases{name: e.Name}).start(PhaseLoad, "", 0) // the live line draws it
	ld.pool[0], ld.galera[0] = markPools(in.p.sconns), markGalera(ctx, in.p.conns)
	var drift *driftSampler
	if in.sc.Timed() && !o.Segment.Partial() {
		pid := in.st.Endpoints.MySQLPID
		if pid == 0 {
			pid = o.Segment.ServerPIDs[servers.TargetMySQL]
		}
		_, relay := countersOf(in.sv.strat)["outbox_relayed"]
		drift = startDrift(in.p.conns, pid, relay, driftEvery(o.Duration), in.cpu.seconds)
	}
	meter := &costMeter{pools: in.p.sconns, status: in.p.conns, inStrategy: d.inStrategy.Load}
	cpu := in.cpu
	if in.b.remote != nil {
		// The service processes' CPU (runs[].cost service_cpu_*), for
		// this run's measurement only.
		cpu.setSource(serviceCPU, procSource(in.b.remote.PIDs))
		defer cpu.setSource(serviceCPU, nil)
	}
	cpu.setMeter(meter)
	ld.peakReset = sysstat.ResetPeak()
	stopProfile := startCPUProfile(e.Name)
	cpuFrom := selfCPU()
	switch {
	case !in.sc.Timed():
		ld.recs, ld.window = d.fixed(lctx, in.sc, cpu)
	case o.Rate > 0 || in.sc.Arrivals(o.Params).Rated():
		ld.recs, ld.window = d.openLoop(lctx, cpu)
	default:
		ld.recs, ld.window = d.closedLoop(lctx, cpu)
	}
	stopProfile()
	ld.costFrom, ld.costTo = meter.marks()
	cpu.setMeter(nil)
	stopLive()
	ld.storeSecs = w.loadEnded(time.Now())
	ld.cpuPct = cpu.end()
	ld.phase = ph.end(false)
	if drift != nil {
		every, points := drift.end(d.from)
		ld.drift = &driftSamples{every: every, points: points}
	}
	ld.harnessCPU = selfCPU() - cpuFrom
	ld.pool[1], ld.galera[1] = markPools(in.p.sconns), markGalera(context.Background(), in.p.conns)
	if e.UsesRedis {
		ld.redisUsed, _ = sysstat.RedisUsedMemory(context.Background(), in.p.conns.Redis)
	}
	ld.faults = in.inj.end(o)
	ld.bgRan = in.b.svc.stopBackground()
	return ld
}
