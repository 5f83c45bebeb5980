package runner

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/observe"
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
	// gate is the service model in front of the strategy (nil: none).
	gate *gate
	// open loop and scheduled arrivals
	late, dropped atomic.Int64
	// started counts journeys begun (buyers, for the harness's cost).
	begun atomic.Int64
	// retries counts the client's retries (ClientRetry).
	retries atomic.Int64
	// inStrategy is the calls' time inside the strategy, in ns: from
	// the service model's admission to the answer (the cost meter's
	// denominator of the wait shares).
	inStrategy atomic.Int64
	// recs are the load's recorders once it started (the metrics
	// endpoint reads their counts at scrape time); obs, when set, takes
	// each measured latency for the endpoint's histograms.
	recs atomic.Pointer[stripes]
	obs  *observe.Run
}

// buyer is a journey's place in a fixed scenario: its arrival order, whether
// it is one of the first Stock arrivals, and the gate place its first call
// already took (the dispatcher sheds before starting a goroutine).
type buyer struct {
	early bool
	t     ticket
	// tries and first: attempts of the first call already made (shed at
	// dispatch) and when the first was due.
	tries int
	first time.Time
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
func (d *driver) journey(ctx context.Context, j scenarios.Journey, rec *recorder, intended time.Time, b buyer) {
	var reserveLat time.Duration
	reserved, flowDone, first := false, false, true
	var seen outcomes
	defer func() {
		d.gate.drop(b.t) // a first call never made (the run was stopped)
		if rec.sale != nil {
			e := seen.end(reserved, flowDone, j.Kind)
			rec.mu.Lock()
			rec.sale.end(e, b.early && j.Kind == "buy")
			rec.mu.Unlock()
		}
	}()
	for _, ph := range j.Phases {
		if ph.IfReserved && !reserved || ph.IfConfirmed && !flowDone {
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
			at := time.Time{}
			if first {
				at = intended
			}
			results[0] = d.call(ctx, j, rec, ph.Ops[0], b.t, at, b.tries, b.first)
		} else {
			var wg sync.WaitGroup
			for i, op := range ph.Ops {
				wg.Add(1)
				go func() {
					defer wg.Done()
					at := time.Time{}
					if first {
						at = intended
					}
					results[i] = d.call(ctx, j, rec, op, ticket{}, at, 0, time.Time{})
				}()
			}
			wg.Wait()
		}
		b.t = ticket{}
		first = false
		for _, r := range results {
			seen.add(r)
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
					if d.obs != nil && rec.in(r.start) {
						d.obs.Observe("flow", reserveLat+r.lat)
					}
				}
			}
		}
	}
}

// call makes one call of a journey with the client's retries: an attempt
// shed as busy, timed out or with an unknown outcome is made again with the
// same order id (the idempotency key) after a backoff, up to ClientRetry
// times in all (tries were already made, the first of them at first). Every
// attempt is recorded; the answer returned is the last one, its start the
// first attempt's and its latency the buyer's whole wait, backoffs
// included. t is the gate place already taken for the first attempt; with
// intended set, the first attempt's latency runs from it (open loop).
func (d *driver) call(ctx context.Context, j scenarios.Journey, rec *recorder, op scenarios.Op, t ticket, intended time.Time, tries int, first time.Time) opResult {
	for {
		r := d.op(ctx, j, op, t)
		t = ticket{}
		if !intended.IsZero() {
			r.lat += r.start.Sub(intended)
			r.start, intended = intended, time.Time{}
		}
		d.record(ctx, j, rec, r)
		if first.IsZero() {
			first = r.start
		}
		tries++
		if !retryable(r.err) || tries > d.o.ClientRetry || ctx.Err() != nil || !clock.Sleep(ctx, d.backoff(tries)) {
			r.lat = r.start.Add(r.lat).Sub(first)
			r.start = first
			return r
		}
		d.retries.Add(1)
	}
}

// retryable says whether a client retries a call that ended with err: the
// service was busy, or the call timed out or its outcome is unknown (it may
// have happened: the retry carries the same order id).
func retryable(err error) bool {
	switch inventory.Classify(err) {
	case inventory.Busy, inventory.Timeout, inventory.OutcomeUnknown:
		return true
	}
	return false
}

// backoff is the wait before retry n (from 1): a draw from RetryBackoff,
// doubled at each retry (full jitter inside the range).
func (d *driver) backoff(n int) time.Duration {
	b := d.o.RetryBackoff
	return b.Draw(rand.New(rand.NewPCG(rand.Uint64(), 0))) << min(n-1, 10)
}

// record counts one operation's outcome (its ack is kept by the ledger).
func (d *driver) record(ctx context.Context, j scenarios.Journey, rec *recorder, r opResult) {
	if r.op == scenarios.Reserve && errors.Is(r.err, inventory.ErrOutOfStock) && d.restock != nil {
		d.restock.trigger(ctx, j.SKU)
	}
	if rec.op(r.op.String(), r.op == scenarios.Reserve, int64(j.Qty), r.start, r.lat, r.err) {
		d.live.errorSeen()
	}
	if d.obs != nil && rec.in(r.start) {
		d.obs.Observe(r.op.String(), r.lat)
	}
}

// op makes one call through the service model: t is the gate place the
// dispatcher already took for it (the zero ticket: take one now). The
// latency includes the wait in the service's queue.
func (d *driver) op(ctx context.Context, j scenarios.Journey, op scenarios.Op, t ticket) opResult {
	ctx, cancel := context.WithTimeout(ctx, d.o.OpTimeout)
	defer cancel()
	ref := inventory.OrderRef{OrderID: j.OrderID, SKU: j.SKU}
	t0 := time.Now()
	var err error
	if !t.taken {
		t, err = d.gate.try(op != scenarios.Reserve)
	}
	if err == nil {
		err = d.gate.wait(ctx, t)
	}
	if err != nil {
		return opResult{op: op, err: err, start: t0, lat: time.Since(t0)}
	}
	defer d.gate.leave()
	admitted := t0
	if t.w != nil {
		admitted = time.Now() // it waited in the service's queue
	}
	switch op {
	case scenarios.Reserve:
		err = d.s.Reserve(ctx, inventory.Reservation{OrderID: j.OrderID, SKU: j.SKU, Qty: j.Qty, Deadline: t0.Add(j.TTL), Buyer: j.Buyer, Limit: j.Limit})
	case scenarios.Confirm:
		err = d.s.Confirm(ctx, ref)
	case scenarios.Cancel:
		err = d.s.Cancel(ctx, ref)
	case scenarios.Refund:
		err = d.s.Refund(ctx, ref)
	}
	end := time.Now()
	d.inStrategy.Add(int64(end.Sub(admitted)))
	return opResult{op: op, err: err, start: t0, lat: end.Sub(t0)}
}

// closedLoop runs Buyers workers, each starting its next journey as soon as
// the last ends, for Warmup + Duration; only the Duration after the warm-up
// is measured.
func (d *driver) closedLoop(ctx context.Context, cpu *cpuSampler) (stripes, time.Duration) {
	t0 := time.Now()
	from := t0.Add(d.o.Warmup)
	to := from.Add(d.o.Duration)
	d.started(from)
	recs := newStripes(stripeCount(d.o.Buyers, runtime.GOMAXPROCS(0)), from, to)
	d.recs.Store(&recs)
	var wg sync.WaitGroup
	for w := range d.o.Buyers {
		if !d.o.Segment.Owns(w) {
			// Another generator's worker: same seed, same stream there.
			continue
		}
		rec := recs.at(w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := d.sc.Source(d.o.Params, w)
			for ctx.Err() == nil && time.Now().Before(to) {
				j := src.Next(d.o.TTL)
				d.begun.Add(1)
				if time.Now().After(from) {
					rec.journey(j.Kind)
				}
				d.journey(ctx, j, rec, time.Time{}, buyer{})
			}
		}()
	}
	stopCPU := cpu.window(from, to)
	wg.Wait()
	stopCPU()
	return recs, measured(from, to)
}

// openLoop starts journeys at Rate per second on a fixed schedule (or on
// the arrival profile's curve when it is one), whatever the servers do; Buyers workers serve them. An arrival that finds every
// worker busy and the queue full is dropped and counted; one that starts
// more than lateThreshold after its intended time is counted late, and its
// latency includes the wait.
func (d *driver) openLoop(ctx context.Context, cpu *cpuSampler) (stripes, time.Duration) {
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
	if d.o.Segment.Partial() {
		workers = 0
		for w := range d.o.Buyers {
			if d.o.Segment.Owns(w) {
				workers++
			}
		}
	}
	queue := make(chan arrival, max(1, workers))
	recs := newStripes(stripeCount(workers, runtime.GOMAXPROCS(0)), from, to)
	d.recs.Store(&recs)
	var wg sync.WaitGroup
	for w := range workers {
		rec := recs.at(w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range queue {
				d.begun.Add(1)
				if time.Since(a.intended) > lateThreshold && rec.in(a.intended) {
					d.late.Add(1)
				}
				if rec.in(a.intended) {
					rec.journey(a.j.Kind)
				}
				d.journey(ctx, a.j, rec, a.intended, buyer{})
			}
		}()
	}
	stopCPU := cpu.window(from, to)
	src := d.sc.Source(d.o.Params, 0)
	next := func(i int) (time.Time, bool) {
		return t0.Add(time.Duration(float64(i) * float64(time.Second) / d.o.Rate)), true
	}
	if prof := d.sc.Arrivals(d.o.Params); prof.Rated() {
		// The arrival profile's curve, from the start of the warm-up.
		sched := scenarios.NewSchedule(prof, math.MaxInt, d.o.Seed)
		next = func(int) (time.Time, bool) {
			off, ok := sched.Next()
			return t0.Add(off), ok
		}
	}
	for i := 0; ; i++ {
		at, ok := next(i)
		if !ok || !at.Before(to) {
			break
		}
		j := src.Next(d.o.TTL)
		if !d.o.Segment.Owns(i) {
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
// the store with reserves that must fail. Of several generators, one owns
// each SKU's refills (restockOwner), as one supplier restocks a SKU in
// production: two generators refilling one SKU at once would test the
// strategies' Restock under a race no deployment has, and naive's
// read-modify-write restock would lose one refill, which the audit then
// counts as leaked stock and which hides naive's oversell behind it.
type restocker struct {
	s      strategies.Strategy
	qty    int64
	mu     sync.Mutex
	active map[string]chan struct{}
	n      atomic.Int64
	shard  int          // the generator's index, in every restock id
	of     int          // generators in the run (0 or 1: this one alone)
	seq    atomic.Int64 // restocks issued
}

func newRestocker(s strategies.Strategy, sc scenarios.Scenario, o Options) *restocker {
	if !sc.Timed() || o.NoRestock {
		return nil
	}
	return &restocker{s: s, qty: o.Stock, shard: o.Segment.Index, of: o.Segment.Of, active: map[string]chan struct{}{}}
}

// restockOwner is the generator (of of) that refills sku.
func restockOwner(sku string, of int) int {
	if of <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(sku))
	return int(h.Sum32() % uint32(of))
}

func (r *restocker) trigger(ctx context.Context, sku string) {
	if restockOwner(sku, r.of) != r.shard {
		// Another generator refills it when its buyers find it sold out.
		return
	}
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
