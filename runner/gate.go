package runner

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"

	"github.com/stockbench/stockbench/inventory"
)

// gate is the service model in front of one strategy instance: what a real
// order service does with more requests than it can serve. At most limit
// requests are in the strategy at once; a new request (a reserve) beyond
// that waits in a FIFO queue of at most queue requests, and one that finds
// the queue full is shed at once with inventory.ErrBusy (it never reaches
// the store). Follow-ups of an order already reserved (confirm, cancel —
// the payment callback) are never shed: they wait, and they go before new
// requests when a slot frees, so a flood of new buyers cannot starve the
// winners' payments (they are bounded by the reservations held). A waiter
// whose context ends leaves the queue with the context's error. Safe for
// concurrent use; a nil *gate admits everything.
type gate struct {
	limit, queue int
	mu           sync.Mutex
	inUse        int
	fresh        list.List // *waiter, new requests
	follow       list.List // *waiter, follow-ups
	shed         atomic.Int64
	peakQueue    int
}

type waiter struct {
	ready   chan struct{}
	granted bool
	el      *list.Element
	follow  bool
}

// newGate is a gate of limit requests in flight and queue waiting; limit
// <= 0 means no service model (nil).
func newGate(limit, queue int) *gate {
	if limit <= 0 {
		return nil
	}
	return &gate{limit: limit, queue: max(0, queue)}
}

// ticket is a place taken in the gate: a slot (w nil) or a place in the
// queue. The zero ticket has taken nothing.
type ticket struct {
	taken bool
	w     *waiter
}

// try takes a slot or a place in the queue without waiting, or sheds the
// request (ErrBusy). follow marks a follow-up (never shed).
func (g *gate) try(follow bool) (ticket, error) {
	if g == nil {
		return ticket{taken: true}, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inUse < g.limit {
		g.inUse++
		return ticket{taken: true}, nil
	}
	q := &g.fresh
	if follow {
		q = &g.follow
	} else if g.fresh.Len() >= g.queue {
		g.shed.Add(1)
		return ticket{}, inventory.ErrBusy
	}
	w := &waiter{ready: make(chan struct{}), follow: follow}
	w.el = q.PushBack(w)
	g.peakQueue = max(g.peakQueue, g.fresh.Len())
	return ticket{taken: true, w: w}, nil
}

// wait holds until t's slot is granted or ctx ends; on an error the ticket
// holds nothing.
func (g *gate) wait(ctx context.Context, t ticket) error {
	if t.w == nil {
		return nil
	}
	select {
	case <-t.w.ready:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	if t.w.granted {
		// Granted as the context ended: give the slot on.
		g.mu.Unlock()
		g.leave()
		return ctx.Err()
	}
	if t.w.follow {
		g.follow.Remove(t.w.el)
	} else {
		g.fresh.Remove(t.w.el)
	}
	g.mu.Unlock()
	return ctx.Err()
}

// drop gives back what t took without using it.
func (g *gate) drop(t ticket) {
	if g == nil || !t.taken {
		return
	}
	if t.w == nil {
		g.leave()
		return
	}
	// Not through wait with an ended context: when the slot was already
	// granted, its select may pick the grant and return nil, and the slot
	// would never be given on (issue 42, finding 12).
	g.mu.Lock()
	if t.w.granted {
		g.mu.Unlock()
		g.leave()
		return
	}
	if t.w.follow {
		g.follow.Remove(t.w.el)
	} else {
		g.fresh.Remove(t.w.el)
	}
	g.mu.Unlock()
}

// enter is try then wait.
func (g *gate) enter(ctx context.Context, follow bool) error {
	t, err := g.try(follow)
	if err != nil {
		return err
	}
	return g.wait(ctx, t)
}

// leave frees a slot: to the oldest follow-up waiting, else to the oldest
// new request, else back to the pool.
func (g *gate) leave() {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, q := range []*list.List{&g.follow, &g.fresh} {
		if e := q.Front(); e != nil {
			w := q.Remove(e).(*waiter)
			w.granted = true
			close(w.ready)
			return
		}
	}
	g.inUse--
}

// stats are the gate's figures: requests shed and the deepest queue of new
// requests seen.
func (g *gate) stats() (shed int64, peakQueue int) {
	if g == nil {
		return 0, 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.shed.Load(), g.peakQueue
}
