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
	// runs is whether this run has a probe at all.
	runs bool
	mu   sync.Mutex
	done chan audit.ProbeReport // set once started
}

// probeMaxSKUs is the largest catalog the probe snapshots: it reads every
// SKU a few times a second, which a larger catalog would turn into load of
// its own (a million SKUs are graded by the audits, not the probe).
const probeMaxSKUs = 10_000

// startProbe hooks the probe to the driver's start (chained after any
// other hook); onViolation (nil: none) is told of each violation as it is
// seen. A generator of several (sharded) runs none: the parent audits
// once, and the probe's report belongs to an audit. Nor does a catalog
// above probeMaxSKUs.
func startProbe(ctx context.Context, d *driver, e registry.Entry, conns servers.Conns, stock []inventory.Stock, o Options, onViolation func(audit.ProbeInstant)) *probeRun {
	pctx, cancel := context.WithCancel(ctx)
	pr := &probeRun{cancel: cancel}
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
	prev := d.onStart
	d.onStart = func(from time.Time) {
		if prev != nil {
			prev(from)
		}
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
