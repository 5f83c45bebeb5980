package runner

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/observe"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/scenarios"
	"github.com/stockbench/stockbench/servers"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/registry"
)

// watcher is what watches one run's load live: the --abort-on
// thresholds (fed each second by the live line and at once by the probe),
// the stores' counters each second, and the run's figures on the metrics
// endpoint. Its methods are safe for concurrent use (the live line's,
// the probe's and the endpoint's goroutines call them).
type watcher struct {
	o     Options
	name  string
	sc    scenarios.Scenario
	conns servers.Conns
	d     *driver
	strat strategies.Strategy
	// cpu reads each tier's CPU time for the endpoint (nil: none).
	cpu      *cpuSampler
	stopLoad context.CancelFunc
	// from is the start of the measured phase (Unix ns; 0 until known).
	from       atomic.Int64
	violations atomic.Int64
	stores     *storeSampler
	metrics    *observe.Run
	dash       *observe.DashRun

	mu      sync.Mutex
	watch   *observe.Watch
	aborted *results.Abort
}

// startWatch returns the context the load runs under (cancelled by the
// first --abort-on threshold breached) and the run's watcher, whose start
// is to be told when the measured phase starts; d's recorders are read
// for the metrics endpoint, which d feeds.
func startWatch(ctx context.Context, d *driver, o Options, e registry.Entry, sc scenarios.Scenario, conns servers.Conns,
	strat strategies.Strategy, cpu *cpuSampler, later func(func())) (context.Context, *watcher) {
	lctx, stop := context.WithCancel(ctx)
	w := &watcher{o: o, name: e.Name, sc: sc, conns: conns, d: d, strat: strat, cpu: cpu, stopLoad: stop, watch: observe.NewWatch(o.AbortOn)}
	later(stop)
	partial := o.Segment.Partial()
	// A generator of several publishes its share on its own endpoint,
	// labelled with its index (observe.ListenAs).
	if m := o.Metrics; m != nil {
		w.metrics = m.Begin(observe.Labels{Strategy: e.Name, Scenario: sc.Name(), Repeat: o.rep}, w.snapshot)
		d.obs = w.metrics
	}
	if db := o.Dashboard; db != nil && !partial {
		w.dash = db.Begin(observe.Labels{Strategy: e.Name, Scenario: sc.Name(), Repeat: o.rep})
	}
	return lctx, w
}

// start is told when the measured phase starts: the stores' sampler
// starts with it.
func (w *watcher) start(from time.Time) {
	w.from.Store(from.UnixNano())
	if !w.o.Segment.Partial() {
		w.mu.Lock()
		w.stores = startStores(w.conns, from)
		w.mu.Unlock()
	}
}

// live reports whether the run needs the per-second live figures even
// without a progress line.
func (w *watcher) live() bool { return len(w.o.AbortOn) > 0 || w.dash != nil }

// second is one second of the measured phase, from the live line.
func (w *watcher) second(s observe.Second) {
	s.Violations = w.violations.Load()
	w.mu.Lock()
	bs := w.watch.Observe(s)
	st := w.stores
	w.mu.Unlock()
	if w.dash != nil {
		var lag *float64
		if v, ok := countersOf(w.strat)["outbox_lag_p99_ms"]; ok {
			lag = &v
		}
		_, latest := st.snapshot()
		w.dash.Second(s, lag, latest)
	}
	for _, b := range bs {
		w.abort(b)
	}
}

// violation is the probe's: counted, and the anomaly threshold's breach.
func (w *watcher) violation(in audit.ProbeInstant) {
	w.violations.Add(1)
	w.mu.Lock()
	b, ok := w.watch.Violation(time.Duration(in.AtSec*float64(time.Second)), in.What)
	w.mu.Unlock()
	if ok {
		w.abort(b)
	}
}

// abort stops the load on the first breach.
func (w *watcher) abort(b observe.Breach) {
	w.mu.Lock()
	first := w.aborted == nil
	if first {
		w.aborted = &results.Abort{Threshold: b.Threshold.Text, Reason: b.Reason, BreachedAtSec: b.At.Seconds()}
		if w.sc.Timed() {
			w.aborted.PlannedSec = w.o.Duration.Seconds()
		}
	}
	w.mu.Unlock()
	if first {
		w.o.logf("  %s: --abort-on %s breached: %s; stopping the load", w.name, b.Threshold.Text, b.Reason)
		w.stopLoad()
	}
}

// loadEnded is called when the last buyer stopped: it stamps the abort's
// stop and stops the stores' sampler.
func (w *watcher) loadEnded(stopped time.Time) []*results.StoreSecond {
	w.mu.Lock()
	if w.aborted != nil {
		if from := w.from.Load(); from != 0 {
			w.aborted.StoppedAtSec = stopped.Sub(time.Unix(0, from)).Seconds()
		}
	}
	st := w.stores
	w.mu.Unlock()
	return st.end(stopped)
}

// snapshot is the run's figures for the metrics endpoint, read from the
// load's recorders (each locked briefly) and the strategy's counters.
func (w *watcher) snapshot() observe.Snapshot {
	s := observe.Snapshot{Outcomes: map[string]map[string]int64{}, Units: map[string]int64{}, Violations: w.violations.Load()}
	if recs := w.d.recs.Load(); recs != nil {
		for _, r := range *recs {
			r.mu.Lock()
			s.Flows += r.flows
			s.Attempts += r.attempts
			for mv, n := range r.units {
				s.Units[mv] += n
			}
			for op, m := range r.counts {
				if s.Outcomes[op] == nil {
					s.Outcomes[op] = map[string]int64{}
				}
				for cls, n := range m {
					s.Outcomes[op][cls] += n
				}
			}
			r.mu.Unlock()
		}
	}
	if st := w.strat; st != nil {
		s.Counters = countersOf(st)
	}
	s.CPUSeconds = w.cpu.seconds()
	w.mu.Lock()
	st := w.stores
	w.mu.Unlock()
	s.Stores, s.Latest = st.snapshot()
	return s
}

// figures records the abort, the stores' seconds and the end-of-run
// thresholds in the run, and freezes its figures on the endpoint.
func (w *watcher) figures(run *results.Run, secs []*results.StoreSecond, measured time.Duration) {
	w.mu.Lock()
	run.Aborted = w.aborted
	w.mu.Unlock()
	run.Series = attachStores(run.Series, secs, measured)
	for _, b := range observe.Check(*run, w.o.Thresholds) {
		run.Breaches = append(run.Breaches, b.Result())
	}
	w.metrics.End()
	w.dash.End(*run)
}

// AbortReason is one line naming an aborted run, or "" when r was not
// aborted.
func AbortReason(r results.Run) string {
	a := r.Aborted
	if a == nil {
		return ""
	}
	return fmt.Sprintf("%s on %s: --abort-on %s at %.2f s (%s), load stopped at %.2f s", r.Strategy, r.Scenario,
		a.Threshold, a.BreachedAtSec, a.Reason, a.StoppedAtSec)
}
