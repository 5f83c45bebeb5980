package runner

import (
	"runtime"
	"time"

	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/strategies/registry"
)

// figures puts what the steps returned into the run: the checks' audits,
// then what the load measured — rates, latencies, counts, series, drift,
// the harness's and the servers' figures, the flash and service figures.
func figures(run results.Run, e registry.Entry, o Options, b built, sv served, ld loaded, ck checked) (results.Run, error) {
	run.Faults = ld.faults
	run.Incomplete, run.AuditEndOfLoad, run.SettleRepaired = ck.incomplete, ck.endOfLoad, ck.repaired
	if ck.settled != nil {
		run.Audit = *ck.settled
	}
	run.ShardAcks, run.Shard = ck.shardAcks, ck.shard
	run.Phases = append(append(append([]results.Phase{}, b.phases...), ld.phase), ck.phases...)
	total := newRecorder(time.Time{}, time.Time{})
	for _, r := range ld.recs {
		total.merge(r)
	}
	if err := loadFigures(&run, total, ld); err != nil {
		return run, err
	}
	if ck.err != nil {
		run.Errors = append(run.Errors, ck.err.Error())
	}
	if ld.drift != nil {
		run.Drift = driftOf(ld.drift.every, ld.drift.points, total.series, total.latencies(), ld.window)
	}
	run.Counters = countersOf(sv.strat)
	harnessOf(&run.Harness, b, sv, ld, total)
	d := ld.d
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
	run.CoreLines = e.CoreLinesFor(o.Strategy)
	run.Cost = costOf(ld.costFrom, ld.costTo, costInputs{flows: total.flows, window: ld.window, cores: runtime.NumCPU(),
		cpu: ld.cpuPct, opTimeMS: opTimeMS(run.LatencyMS), probe: e.Probe})
	run.Cost.Budget = o.CPUBudget.Results()
	if len(run.Faults) > 0 {
		run.FaultImpact = impact(total.series, total.failedAt, run.Faults, run)
	}
	ld.w.figures(&run, ld.storeSecs, ld.window)
	return run, nil
}

// loadFigures are the load's rates, latencies, histograms, counts and
// series, from the recorders merged into total.
func loadFigures(run *results.Run, total *recorder, ld loaded) error {
	window := ld.window
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
	if !ld.d.from.IsZero() {
		run.MeasuredFrom = ld.d.from.UTC().Format(time.RFC3339Nano)
	}
	run.Counts, run.Journeys, run.Errors = total.counts, total.journeys, total.errs
	if len(total.units) > 0 {
		run.Units = total.units
	}
	run.Series = total.seriesPoints()
	return nil
}

// harnessOf fills the harness's and the servers' figures: setup's rate
// and memory, CPU by process, the pools, Galera, the driver's own.
func harnessOf(h *results.Harness, b built, sv served, ld loaded, total *recorder) {
	h.SetupSKUsPerSec, h.RedisBytesPerSKU = b.skusPerSec, b.redisPerSKU
	h.HarnessHeapBytesPerSKU, h.RedisUsedMemoryBytes = sv.heapPerSKU, ld.redisUsed
	var ops int64
	for _, op := range []string{"reserve", "confirm", "cancel"} {
		for _, n := range total.counts[op] {
			ops += n
		}
	}
	h.ServerCPUPct, h.MySQLCPUPct = ld.cpuPct.of("server"), ld.cpuPct.of("mysql")
	h.RedisCPUPct, h.HarnessCPUPct = ld.cpuPct.of("redis"), ld.cpuPct.of("harness")
	// How long this process's strategy instance ran its background loop
	// (sweeper, recovery, relay, reconciler): through the whole load
	// unless the loop gave up.
	h.BackgroundLoopSec = ld.bgRan.Seconds()
	if v, ok := harnessPerKFlows(deref(h.HarnessCPUPct), ld.window, total.flows); ok {
		h.HarnessCPUMSPer1kFlows = &v
	}
	ld.d.harness(h)
	harnessFigures(h, ld.peakReset, ld.harnessCPU, ld.d.begun.Load())
	h.AppCrashes = b.svc.crashes.Load()
	poolFigures(h, ld.pool[0], ld.pool[1], ops)
	h.GaleraCertFailures, h.GaleraBFAborts = galeraFigures(ld.galera[0], ld.galera[1])
}
