package runner

import (
	"container/heap"
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/scenarios"
)

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
		if sc.Sale() {
			r.sale = newSale(d.o.Stock)
		}
	}
	d.recs.Store(&recs)
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
			if !d.o.Segment.Owns(a.i) {
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
				d.shed(ctx, a, rec, b.early, opResult{op: first.Ops[0], err: err, start: a.due, lat: time.Since(a.due)}, &later)
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

// shed is a buyer shed before it started (r, the busy answer, recorded):
// it comes back after a backoff (into later), or leaves having heard
// "busy".
func (d *driver) shed(ctx context.Context, a arrival, rec *recorder, early bool, r opResult, later *retryHeap) {
	d.record(ctx, a.j, rec, r)
	if a.first.IsZero() {
		a.first = a.due
	}
	if a.tries++; a.tries <= d.o.ClientRetry {
		d.retries.Add(1)
		a.due = time.Now().Add(d.backoff(a.tries))
		heap.Push(later, a)
		return
	}
	var seen outcomes
	seen.add(r)
	rec.mu.Lock()
	rec.sale.end(seen.end(false, false, a.j.Kind), early && a.j.Kind == "buy")
	rec.mu.Unlock()
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
