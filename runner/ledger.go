package runner

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
)

// ledger stands between the driver and the strategy and keeps the harness's
// own account of the run, which the auditor grades the stores against: the
// stock put in per SKU (initial + every restock that succeeded) and every
// acknowledgement a client got. It never changes what the strategy does or
// returns. Safe for concurrent use.
//
// Its memory does not grow with the length of the run: the acks go to disk
// as they are given (ackLog), and the orders whose reserve was acknowledged
// are kept only while a confirm may still come for them — dropped at the
// confirm's answer, and otherwise (abandoned, cancelled or timed-out
// journeys) once they are older than keep, a bound past any journey's pay
// delay and operation timeouts (two generations of the set, rotated every
// keep).
type ledger struct {
	strategies.Strategy
	mu    sync.Mutex
	stock map[string]int64
	acks  *ackLog
	// reserved holds the orders whose reserve was acknowledged since the
	// last rotation, reservedOld those of the generation before.
	reserved, reservedOld map[string]struct{}
	rotated               time.Time
	keep                  time.Duration
	// totalOf, when set, reads a SKU's total from MySQL (runs with faults).
	totalOf func(ctx context.Context, sku string) (int64, error)
}

// newLedger keeps the account of a run of s from the initial stock; acks
// go to acks, and an acknowledged reserve is remembered for at least keep.
func newLedger(s strategies.Strategy, initial []inventory.Stock, acks *ackLog, keep time.Duration) *ledger {
	l := &ledger{Strategy: s, stock: map[string]int64{}, acks: acks, keep: keep,
		reserved: map[string]struct{}{}, reservedOld: map[string]struct{}{}, rotated: time.Now()}
	for _, st := range initial {
		l.stock[st.SKU] += st.Total
	}
	return l
}

// ledgerKeep is how long the ledger remembers an acknowledged reserve that
// no confirm answered: a minute beyond the longest a journey can take from
// its reserve's answer to its confirm's (pay delay, then the confirm's
// operation timeout, with another timeout's slack).
func ledgerKeep(o Options) time.Duration {
	return time.Minute + max(o.PayDelay.Max, o.SustainedPayDelay.Max) + 2*o.OpTimeout
}

// remember notes an acknowledged reserve; l.mu held.
func (l *ledger) remember(id string, now time.Time) {
	if now.Sub(l.rotated) >= l.keep {
		l.reservedOld, l.reserved = l.reserved, make(map[string]struct{}, len(l.reserved))
		l.rotated = now
	}
	l.reserved[id] = struct{}{}
}

// wasReserved reports whether the order's reserve was acknowledged (within
// keep) and forgets it; l.mu held.
func (l *ledger) wasReserved(id string) bool {
	_, a := l.reserved[id]
	_, b := l.reservedOld[id]
	delete(l.reserved, id)
	delete(l.reservedOld, id)
	return a || b
}

// Reserve records a reserve acknowledgement.
func (l *ledger) Reserve(ctx context.Context, r inventory.Reservation) error {
	err := l.Strategy.Reserve(ctx, r)
	if err == nil {
		l.mu.Lock()
		l.remember(r.OrderID, time.Now())
		l.mu.Unlock()
		l.acks.add(inventory.Ack{OrderID: r.OrderID, SKU: r.SKU, State: inventory.StateReserved})
	}
	return err
}

// Confirm records a confirm acknowledgement, or a refusal for lack of
// stock after an acknowledged reserve. Either answer is final, so the
// order's reserve is forgotten then.
func (l *ledger) Confirm(ctx context.Context, o inventory.OrderRef) error {
	err := l.Strategy.Confirm(ctx, o)
	switch {
	case err == nil:
		l.mu.Lock()
		l.wasReserved(o.OrderID)
		l.mu.Unlock()
		l.acks.add(inventory.Ack{OrderID: o.OrderID, SKU: o.SKU, State: inventory.StateConfirmed})
	case errors.Is(err, inventory.ErrOutOfStock):
		l.mu.Lock()
		was := l.wasReserved(o.OrderID)
		l.mu.Unlock()
		if was {
			l.acks.add(inventory.Ack{OrderID: o.OrderID, SKU: o.SKU, State: inventory.AckRefused})
		}
	}
	return err
}

// Cancel records a cancel acknowledgement.
func (l *ledger) Cancel(ctx context.Context, o inventory.OrderRef) error {
	err := l.Strategy.Cancel(ctx, o)
	if err == nil {
		l.acks.add(inventory.Ack{OrderID: o.OrderID, SKU: o.SKU, State: inventory.StateCancelled})
	}
	return err
}

// Restock adds a successful restock to the stock put in. A restock that
// failed is not counted: if it took effect anyway, the audit shows the
// units as phantom, which is what they are to the harness — unless the
// ledger can tell (totalOf set): a restock whose answer was lost (its
// call cut by a fault after the commit) is looked up the way an operator
// would, by the SKU's MySQL total before and after (restocks of one SKU
// never overlap, and sales do not change the total).
func (l *ledger) Restock(ctx context.Context, sku string, qty int64) error {
	var before int64 = -1
	if l.totalOf != nil {
		if t, err := l.totalOf(ctx, sku); err == nil {
			before = t
		}
	}
	err := l.Strategy.Restock(ctx, sku, qty)
	applied := err == nil
	if err != nil && before >= 0 {
		// On a context of its own: the call's may be what ended.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		after, lerr := l.totalOf(lctx, sku)
		cancel()
		applied = lerr == nil && after == before+qty
	}
	if applied {
		l.mu.Lock()
		l.stock[sku] += qty
		l.mu.Unlock()
	}
	return err
}

// snapshot returns the stock ledger, for the audit once the load is over:
// the map itself, not a copy (a copy of a million SKUs' ledger would double
// the catalog's memory), which nothing writes to any more (the restocker
// and every buyer have returned). The acks stream from the ack log.
func (l *ledger) snapshot() map[string]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stock
}
