// Package runner executes scenarios against strategies on real servers:
// workers, start barrier, think time, recording, settle and audit. It
// returns a reports.Results; rendering is the reports package's job.
package runner

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/reports"
	"github.com/stockbench/stockbench/scenarios"
	"github.com/stockbench/stockbench/servers"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/registry"
)

// Scenarios lists the accepted scenario names.
var Scenarios = []string{"flash", "race"}

// Options are the resolved settings of a run.
type Options struct {
	Strategies []registry.Entry
	Scenario   string
	Stock      int64
	Buyers     int
	PayDelay   scenarios.Range
	Abandon    float64
	TTL        time.Duration
	// ShortTTL is the reservation lifetime of the race scenario's
	// pay-after-expiry buyers.
	ShortTTL time.Duration
	Seed     uint64
	// OpTimeout bounds each operation.
	OpTimeout time.Duration
	// SettleTimeout bounds settling and auditing after the measured phase.
	SettleTimeout time.Duration
	// Strategy carries the strategy knobs; DB and Redis are filled in.
	Strategy strategies.Config
	// Log receives one line per strategy as it starts and ends; may be nil.
	Log io.Writer
}

// Journeys builds the scenario's buyer journeys.
func (o Options) Journeys() ([]scenarios.Journey, error) {
	switch o.Scenario {
	case "flash":
		return scenarios.Flash(scenarios.FlashParams{Stock: o.Stock, Buyers: o.Buyers, PayDelay: o.PayDelay,
			Abandon: o.Abandon, TTL: o.TTL, Seed: o.Seed}), nil
	case "race":
		return scenarios.Race(scenarios.RaceParams{Stock: o.Stock, Buyers: o.Buyers, PayDelay: o.PayDelay,
			TTL: o.TTL, ShortTTL: o.ShortTTL, Seed: o.Seed}), nil
	}
	return nil, fmt.Errorf("unknown scenario %q", o.Scenario)
}

// Resolved is the configuration as recorded in results.json.
func (o Options) Resolved() map[string]any {
	names := make([]string, len(o.Strategies))
	for i, e := range o.Strategies {
		names[i] = e.Name
	}
	c := o.Strategy.WithDefaults()
	return map[string]any{
		"strategies": names, "scenario": o.Scenario, "stock": o.Stock, "buyers": o.Buyers,
		"pay_delay": o.PayDelay.String(), "abandon": o.Abandon, "ttl": o.TTL.String(), "short_ttl": o.ShortTTL.String(),
		"seed": o.Seed, "op_timeout": o.OpTimeout.String(), "cas_retry": c.CASRetry, "cas_max_attempts": c.CASMaxAttempts,
		"outbox_period": c.OutboxPeriod.String(), "reconcile_period": c.ReconcilePeriod.String(),
		"sweep_period": c.SweepPeriod.String(),
	}
}

func (o Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// Execute starts the servers through p, runs every strategy in turn and
// stops the servers. When ctx ends (Ctrl-C) the strategy under way is
// settled and audited, the rest are skipped, and the results say
// Interrupted. The returned results are non-nil whenever any run finished.
func Execute(ctx context.Context, p servers.Provider, o Options) (*reports.Results, error) {
	res := &reports.Results{Format: reports.Format, Config: o.Resolved()}
	ep, err := p.Start(ctx)
	if err != nil {
		return nil, err
	}
	defer p.Stop()
	conns, err := servers.Open(ep, o.Buyers*2)
	if err != nil {
		return nil, err
	}
	defer conns.Close()
	res.Env = collectEnv(ctx, ep, conns)
	cpu := newCPUSampler(ep)
	for _, e := range o.Strategies {
		if ctx.Err() != nil {
			break
		}
		o.logf("running %s on %s…", e.Name, o.Scenario)
		run, err := RunStrategy(ctx, conns, e, o, cpu)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return res, fmt.Errorf("%s: %w", e.Name, err)
		}
		res.Runs = append(res.Runs, run)
		o.logf("  %s: %.1f flows/s, %d confirmed, %d oversold", e.Name, run.TPS, run.Audit.ConfirmedUnits, run.Audit.OversoldUnits)
	}
	res.Interrupted = ctx.Err() != nil
	return res, nil
}

// RunStrategy runs the scenario once against one strategy on a freshly
// reset schema and audits the result.
func RunStrategy(ctx context.Context, conns servers.Conns, e registry.Entry, o Options, cpu *cpuSampler) (reports.Run, error) {
	run := reports.Run{Strategy: e.Name, Scenario: o.Scenario, Seed: o.Seed}
	journeys, err := o.Journeys()
	if err != nil {
		return run, err
	}
	stock := []inventory.Stock{{SKU: scenarios.FlashSKU, Total: o.Stock, Available: o.Stock}}
	if err := inventory.ResetMySQL(ctx, conns.DB); err != nil {
		return run, err
	}
	if err := inventory.ResetRedis(ctx, conns.Redis); err != nil {
		return run, err
	}
	if err := inventory.LoadStock(ctx, conns.DB, stock); err != nil {
		return run, err
	}
	cfg := o.Strategy
	cfg.DB, cfg.Redis = conns.DB, conns.Redis
	s, err := e.New(cfg)
	if err != nil {
		return run, err
	}
	defer s.Close()
	if err := s.Setup(ctx, stock); err != nil {
		return run, err
	}

	bgCtx, bgStop := context.WithCancel(context.Background())
	bgDone := make(chan struct{})
	go func() { defer close(bgDone); _ = s.Run(bgCtx) }()

	recs := make([]*recorder, len(journeys))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, j := range journeys {
		recs[i] = newRecorder()
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			execJourney(ctx, s, j, o.OpTimeout, recs[i])
		}()
	}
	cpu.begin()
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	cpuPct := cpu.end()
	bgStop()
	<-bgDone

	// Settle and audit even after Ctrl-C: what was measured is reported.
	sctx, cancel := context.WithTimeout(context.Background(), o.SettleTimeout)
	defer cancel()
	if err := s.Settle(sctx); err != nil {
		return run, fmt.Errorf("settle: %w", err)
	}
	total := newRecorder()
	for _, r := range recs {
		total.merge(r)
	}
	audit, err := inventory.Auditor{DB: conns.DB, Redis: conns.Redis}.Audit(sctx, total.acks)
	if err != nil {
		return run, err
	}

	run.DurationSec = elapsed.Seconds()
	run.Flows = total.flows
	if secs := elapsed.Seconds(); secs > 0 {
		run.TPS = float64(total.flows) / secs
		run.AttemptsPerSec = float64(total.attempts) / secs
	}
	run.LatencyMS = map[string]reports.Percentiles{}
	for _, name := range []string{"reserve", "confirm", "cancel", "flow"} {
		run.LatencyMS[name] = percentiles(total.hist[name])
	}
	run.Counts, run.Journeys, run.Errors, run.Audit = total.counts, total.journeys, total.errs, audit
	if c, ok := s.(inventory.Counters); ok {
		run.Counters = c.Counters()
	}
	if run.Counters == nil {
		run.Counters = map[string]float64{}
	}
	for k, v := range cpuPct {
		run.Counters[k] = v
	}
	run.CoreLines = CoreLines(e.Dirs)
	return run, nil
}

type opResult struct {
	op  scenarios.Op
	err error
	lat time.Duration
}

// execJourney plays one buyer's journey. Think time is slept, never timed.
func execJourney(ctx context.Context, s inventory.Strategy, j scenarios.Journey, opTimeout time.Duration, rec *recorder) {
	rec.journeys[j.Kind]++
	var reserveLat time.Duration
	reserved, flowDone := false, false
	for _, ph := range j.Phases {
		if ph.IfReserved && !reserved {
			continue
		}
		if ph.Think > 0 && !sleep(ctx, ph.Think) {
			return
		}
		if ctx.Err() != nil {
			return
		}
		results := make([]opResult, len(ph.Ops))
		if len(ph.Ops) == 1 {
			results[0] = doOp(ctx, s, j, ph.Ops[0], opTimeout)
		} else {
			var wg sync.WaitGroup
			for i, op := range ph.Ops {
				wg.Add(1)
				go func() { defer wg.Done(); results[i] = doOp(ctx, s, j, op, opTimeout) }()
			}
			wg.Wait()
		}
		for _, r := range results {
			name := r.op.String()
			if r.op == scenarios.Reserve {
				rec.attempts++
			}
			rec.latency(name, r.lat)
			cls := Classify(r.err)
			rec.outcome(name, cls)
			if cls == "error" && len(rec.errs) < maxErrorTexts {
				rec.errs = append(rec.errs, r.err.Error())
			}
			if r.err != nil {
				continue
			}
			switch r.op {
			case scenarios.Reserve:
				reserved, reserveLat = true, r.lat
			case scenarios.Confirm:
				rec.acks = append(rec.acks, inventory.Ack{OrderID: j.OrderID, State: inventory.StateConfirmed})
				if reserved && !flowDone {
					flowDone = true
					rec.flows++
					rec.latency("flow", reserveLat+r.lat)
				}
			case scenarios.Cancel:
				rec.acks = append(rec.acks, inventory.Ack{OrderID: j.OrderID, State: inventory.StateCancelled})
			}
		}
	}
}

func doOp(ctx context.Context, s inventory.Strategy, j scenarios.Journey, op scenarios.Op, timeout time.Duration) opResult {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ref := inventory.OrderRef{OrderID: j.OrderID, SKU: j.SKU}
	t0 := time.Now()
	var err error
	switch op {
	case scenarios.Reserve:
		err = s.Reserve(ctx, inventory.Reservation{OrderID: j.OrderID, SKU: j.SKU, Qty: j.Qty, Deadline: t0.Add(j.TTL)})
	case scenarios.Confirm:
		err = s.Confirm(ctx, ref)
	case scenarios.Cancel:
		err = s.Cancel(ctx, ref)
	}
	return opResult{op: op, err: err, lat: time.Since(t0)}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
