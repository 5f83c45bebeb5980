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
type ledger struct {
	strategies.Strategy
	mu       sync.Mutex
	stock    map[string]int64
	acks     []inventory.Ack
	reserved map[string]bool // orders whose reserve was acknowledged
	// totalOf, when set, reads a SKU's total from MySQL (runs with faults).
	totalOf func(ctx context.Context, sku string) (int64, error)
}

func newLedger(s strategies.Strategy, initial []inventory.Stock) *ledger {
	l := &ledger{Strategy: s, stock: map[string]int64{}, reserved: map[string]bool{}}
	for _, st := range initial {
		l.stock[st.SKU] += st.Total
	}
	return l
}

// Reserve records a reserve acknowledgement.
func (l *ledger) Reserve(ctx context.Context, r inventory.Reservation) error {
	err := l.Strategy.Reserve(ctx, r)
	if err == nil {
		l.mu.Lock()
		l.reserved[r.OrderID] = true
		l.acks = append(l.acks, inventory.Ack{OrderID: r.OrderID, SKU: r.SKU, State: inventory.StateReserved})
		l.mu.Unlock()
	}
	return err
}

// Confirm records a confirm acknowledgement, or a refusal for lack of
// stock after an acknowledged reserve.
func (l *ledger) Confirm(ctx context.Context, o inventory.OrderRef) error {
	err := l.Strategy.Confirm(ctx, o)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.acks = append(l.acks, inventory.Ack{OrderID: o.OrderID, SKU: o.SKU, State: inventory.StateConfirmed})
	case errors.Is(err, inventory.ErrOutOfStock) && l.reserved[o.OrderID]:
		l.acks = append(l.acks, inventory.Ack{OrderID: o.OrderID, SKU: o.SKU, State: inventory.AckRefused})
	}
	return err
}

// Cancel records a cancel acknowledgement.
func (l *ledger) Cancel(ctx context.Context, o inventory.OrderRef) error {
	err := l.Strategy.Cancel(ctx, o)
	if err == nil {
		l.mu.Lock()
		l.acks = append(l.acks, inventory.Ack{OrderID: o.OrderID, SKU: o.SKU, State: inventory.StateCancelled})
		l.mu.Unlock()
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

// snapshot returns the stock ledger and the acks, for the audit once the
// load is over: the map itself, not a copy (a copy of a million SKUs'
// ledger would double the catalog's memory), which nothing writes to any
// more (the restocker and every buyer have returned).
func (l *ledger) snapshot() (map[string]int64, []inventory.Ack) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stock, l.acks
}
