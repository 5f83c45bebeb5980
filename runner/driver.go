package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/scenarios"
	"github.com/stockbench/stockbench/strategies"
)

// driver plays journeys against one strategy.
type driver struct {
	s       strategies.Strategy
	o       Options
	sc      scenarios.Scenario
	restock *restocker
	live    *live // nil unless progress is shown
	// onStart, when set, is told when the measured phase starts (from),
	// as soon as load begins: the fault injector's origin.
	onStart func(from time.Time)
	// from is the wall-clock start of the measured phase.
	from time.Time
	// open loop
	late, dropped atomic.Int64
}

// harness records the driver's own figures: restocks issued, open-loop
// arrivals that started late or were dropped.
func (d *driver) harness(h *results.Harness) {
	if d.restock != nil {
		h.Restocks = d.restock.n.Load()
	}
	if d.sc.Timed() && d.o.Rate > 0 {
		h.OpenLateStarts, h.OpenDropped = d.late.Load(), d.dropped.Load()
	}
}

func (d *driver) started(from time.Time) {
	d.from = from
	if d.onStart != nil {
		d.onStart(from)
	}
}

type opResult struct {
	op    scenarios.Op
	err   error
	start time.Time
	lat   time.Duration
}

// lateThreshold is how far behind its intended start an open-loop arrival
// may begin before it counts as late.
const lateThreshold = 10 * time.Millisecond

// journey plays one buyer's journey. Think time is slept, never timed. With
// intended set (open loop), the first operation's latency runs from the
// intended start, so queueing behind a stalled server shows in the tail. A
// journey whose next think time would end past the window stops there.
func (d *driver) journey(ctx context.Context, j scenarios.Journey, rec *recorder, intended time.Time) {
	var reserveLat time.Duration
	reserved, flowDone, first := false, false, true
	for _, ph := range j.Phases {
		if ph.IfReserved && !reserved {
			continue
		}
		if ph.Think > 0 {
			if !rec.to.IsZero() && time.Now().Add(ph.Think).After(rec.to) {
				return
			}
			if !clock.Sleep(ctx, ph.Think) {
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		results := make([]opResult, len(ph.Ops))
		if len(ph.Ops) == 1 {
			results[0] = d.op(ctx, j, ph.Ops[0])
		} else {
			var wg sync.WaitGroup
			for i, op := range ph.Ops {
				wg.Add(1)
				go func() { defer wg.Done(); results[i] = d.op(ctx, j, op) }()
			}
			wg.Wait()
		}
		if first && !intended.IsZero() {
			for i := range results {
				results[i].lat += results[i].start.Sub(intended)
				results[i].start = intended
			}
		}
		first = false
		for _, r := range results {
			d.record(ctx, j, rec, r)
			if r.err != nil {
				continue
			}
			switch r.op {
			case scenarios.Reserve:
				reserved, reserveLat = true, r.lat
			case scenarios.Confirm:
				if reserved && !flowDone {
					flowDone = true
					rec.flow(r.start, reserveLat+r.lat)
					d.live.flow(reserveLat + r.lat)
				}
			}
		}
	}
}

// record counts one operation's outcome and keeps its ack.
func (d *driver) record(ctx context.Context, j scenarios.Journey, rec *recorder, r opResult) {
	if r.err == nil {
		switch r.op {
		case scenarios.Confirm:
			rec.ack(inventory.Ack{OrderID: j.OrderID, State: inventory.StateConfirmed})
		case scenarios.Cancel:
			rec.ack(inventory.Ack{OrderID: j.OrderID, State: inventory.StateCancelled})
		}
	}
	if r.op == scenarios.Reserve && errors.Is(r.err, inventory.ErrOutOfStock) && d.restock != nil {
		d.restock.trigger(ctx, j.SKU)
	}
	if rec.op(r.op.String(), r.op == scenarios.Reserve, r.start, r.lat, r.err) {
		d.live.errorSeen()
	}
}

func (d *driver) op(ctx context.Context, j scenarios.Journey, op scenarios.Op) opResult {
	ctx, cancel := context.WithTimeout(ctx, d.o.OpTimeout)
	defer cancel()
	ref := inventory.OrderRef{OrderID: j.OrderID, SKU: j.SKU}
	t0 := time.Now()
	var err error
	switch op {
	case scenarios.Reserve:
		err = d.s.Reserve(ctx, inventory.Reservation{OrderID: j.OrderID, SKU: j.SKU, Qty: j.Qty, Deadline: t0.Add(j.TTL)})
	case scenarios.Confirm:
		err = d.s.Confirm(ctx, ref)
	case scenarios.Cancel:
		err = d.s.Cancel(ctx, ref)
	}
	return opResult{op: op, err: err, start: t0, lat: time.Since(t0)}
}

// closedLoop runs Buyers workers, each starting its next journey as soon as
// the last ends, for Warmup + Duration; only the Duration after the warm-up
// is measured.
func (d *driver) closedLoop(ctx context.Context, cpu *cpuSampler) ([]*recorder, time.Duration) {
	t0 := time.Now()
	from := t0.Add(d.o.Warmup)
	to := from.Add(d.o.Duration)
	d.started(from)
	var recs []*recorder
	var wg sync.WaitGroup
	for w := range d.o.Buyers {
		if !d.o.mine(w) {
			// Another generator's worker: same seed, same stream there.
			continue
		}
		rec := newRecorder(from, to)
		recs = append(recs, rec)
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := d.sc.Source(d.o.Params, w)
			for ctx.Err() == nil && time.Now().Before(to) {
				j := src.Next(d.o.TTL)
				if time.Now().After(from) {
					rec.journey(j.Kind)
				}
				d.journey(ctx, j, rec, time.Time{})
			}
		}()
	}
	stopCPU := cpu.window(from, to)
	wg.Wait()
	stopCPU()
	return recs, measured(from, to)
}

// openLoop starts journeys at Rate per second on a fixed schedule, whatever
// the servers do; Buyers workers serve them. An arrival that finds every
// worker busy and the queue full is dropped and counted; one that starts
// more than lateThreshold after its intended time is counted late, and its
// latency includes the wait.
func (d *driver) openLoop(ctx context.Context, cpu *cpuSampler) ([]*recorder, time.Duration) {
	t0 := time.Now()
	from := t0.Add(d.o.Warmup)
	to := from.Add(d.o.Duration)
	d.started(from)
	type arrival struct {
		j        scenarios.Journey
		intended time.Time
	}
	// A generator of several serves every Shards-th arrival with its
	// share of the workers.
	workers := d.o.Buyers
	if d.o.sharded() {
		workers = 0
		for w := range d.o.Buyers {
			if d.o.mine(w) {
				workers++
			}
		}
	}
	queue := make(chan arrival, max(1, workers))
	recs := make([]*recorder, workers)
	var wg sync.WaitGroup
	for w := range recs {
		recs[w] = newRecorder(from, to)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range queue {
				if time.Since(a.intended) > lateThreshold && recs[w].in(a.intended) {
					d.late.Add(1)
				}
				if recs[w].in(a.intended) {
					recs[w].journey(a.j.Kind)
				}
				d.journey(ctx, a.j, recs[w], a.intended)
			}
		}()
	}
	stopCPU := cpu.window(from, to)
	src := d.sc.Source(d.o.Params, 0)
	interval := time.Duration(float64(time.Second) / d.o.Rate)
	for i := 0; ; i++ {
		at := t0.Add(time.Duration(i) * interval)
		if !at.Before(to) {
			break
		}
		j := src.Next(d.o.TTL)
		if !d.o.mine(i) {
			continue
		}
		if !clock.Sleep(ctx, time.Until(at)) {
			break
		}
		select {
		case queue <- arrival{j: j, intended: at}:
		default:
			if !at.Before(from) {
				d.dropped.Add(1)
			}
		}
	}
	close(queue)
	wg.Wait()
	stopCPU()
	return recs, measured(from, to)
}

// measured is the part of the window that really elapsed (all of it unless
// the run was interrupted).
func measured(from, to time.Time) time.Duration {
	end := to
	if now := time.Now(); now.Before(to) {
		end = now
	}
	if end.Before(from) {
		return 0
	}
	return end.Sub(from)
}

// restocker refills a SKU that ran out, so the sustained scenario keeps
// selling unless --no-restock. One refill per SKU runs at a time; buyers who
// find the SKU sold out meanwhile wait for that refill instead of hammering
// the store with reserves that must fail.
type restocker struct {
	s      strategies.Strategy
	qty    int64
	mu     sync.Mutex
	active map[string]chan struct{}
	n      atomic.Int64
	shard  int          // the generator's index, in every restock id
	seq    atomic.Int64 // restocks issued
}

func newRestocker(s strategies.Strategy, sc scenarios.Scenario, o Options) *restocker {
	if !sc.Timed() || o.NoRestock {
		return nil
	}
	return &restocker{s: s, qty: o.Stock, shard: o.Shard, active: map[string]chan struct{}{}}
}

func (r *restocker) trigger(ctx context.Context, sku string) {
	r.mu.Lock()
	if done, ok := r.active[sku]; ok {
		r.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
		}
		return
	}
	done := make(chan struct{})
	r.active[sku] = done
	r.mu.Unlock()
	// The id is unique in the run: the generator's index and a count.
	id := fmt.Sprintf("restock-%d-%d", r.shard, r.seq.Add(1))
	if err := r.s.Restock(ctx, inventory.Restock{ID: id, SKU: sku, Qty: r.qty}); err == nil {
		r.n.Add(1)
	}
	r.mu.Lock()
	delete(r.active, sku)
	r.mu.Unlock()
	close(done)
}
