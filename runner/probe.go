package runner

import (
	"context"
	"sync"
	"time"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/servers"
	"github.com/stockbench/stockbench/strategies/registry"
)

// probeRun is the mid-run invariant probe (audit.Probe) of one run: it
// starts with the driver's measured phase and stops when the load ends.
type probeRun struct {
	cancel context.CancelFunc
	// start starts it with the measured phase (a no-op when it does not run).
	start func(from time.Time)
	// runs is whether this run has a probe at all.
	runs bool
	mu   sync.Mutex
	done chan audit.ProbeReport // set once started
}

// probeMaxSKUs is the largest catalog the probe snapshots: it reads every
// SKU a few times a second, which a larger catalog would turn into load of
// its own (a million SKUs are graded by the audits, not the probe).
const probeMaxSKUs = 10_000

// startProbe readies the probe, to be started with the measured phase
// (its start); onViolation (nil: none) is told of each violation as it is
// seen. A generator of several (sharded) runs none: the parent audits
// once, and the probe's report belongs to an audit. Nor does a catalog
// above probeMaxSKUs.
func startProbe(ctx context.Context, e registry.Entry, conns servers.Conns, stock []inventory.Stock, o Options, onViolation func(audit.ProbeInstant)) *probeRun {
	pctx, cancel := context.WithCancel(ctx)
	pr := &probeRun{cancel: cancel, start: func(time.Time) {}}
	if o.Segment.Partial() || len(stock) > probeMaxSKUs {
		return pr
	}
	pr.runs = true
	p := audit.Probe{DB: conns.DB, Initial: map[string]int64{}, OnViolation: onViolation}
	for _, s := range stock {
		p.Initial[s.SKU] += s.Total
	}
	if e.UsesRedis {
		p.Redis = conns.Redis
	}
	pr.start = func(from time.Time) {
		done := make(chan audit.ProbeReport, 1)
		pr.mu.Lock()
		pr.done = done
		pr.mu.Unlock()
		go func() { done <- p.Run(pctx, from) }()
	}
	return pr
}

// stop ends the probe and returns its report (nil if it never started).
func (pr *probeRun) stop() *audit.ProbeReport {
	pr.cancel()
	pr.mu.Lock()
	done := pr.done
	pr.mu.Unlock()
	if done == nil {
		return nil
	}
	rep := <-done
	return &rep
}

// attach puts the probe's report into an audit as its mid-run class.
func attachProbe(rep *audit.ProbeReport, a *audit.Audit) {
	if rep == nil {
		return
	}
	a.Probe, a.ProbeViolations = rep, rep.Violations
	a.Recount()
}
