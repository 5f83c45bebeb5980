package runner

import (
	"context"
	"errors"
	"sync"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
)

// ledger stands between the driver and the strategy and keeps the harness's
// own account of the run, which the auditor grades the stores against: the
// initial stock per SKU, every restock it issued and every acknowledgement
// a client got. It never changes what the strategy does or
// returns. Safe for concurrent use.
type ledger struct {
	strategies.Strategy
	mu       sync.Mutex
	stock    map[string]int64
	acks     []inventory.Ack
	reserved map[string]bool // orders whose reserve was acknowledged
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

// Restock records the restock the harness issued, as an ack the auditor
// matches against the stores' restock journal: AckRestocked when the call
// returned nil, AckRestockUnknown when it failed (its reply may have been
// lost after the commit; the journal says whether it applied). The stock
// put in is the initial stock plus the journal rows so matched, so no
// restock is guessed at, whether or not the harness knew of a fault.
func (l *ledger) Restock(ctx context.Context, r inventory.Restock) error {
	err := l.Strategy.Restock(ctx, r)
	st := inventory.AckRestocked
	if err != nil {
		st = inventory.AckRestockUnknown
	}
	l.mu.Lock()
	l.acks = append(l.acks, inventory.Ack{OrderID: r.ID, SKU: r.SKU, State: st, Qty: r.Qty})
	l.mu.Unlock()
	return err
}

// snapshot returns copies of the stock ledger and the acks.
func (l *ledger) snapshot() (map[string]int64, []inventory.Ack) {
	l.mu.Lock()
	defer l.mu.Unlock()
	stock := make(map[string]int64, len(l.stock))
	for k, v := range l.stock {
		stock[k] = v
	}
	return stock, append([]inventory.Ack(nil), l.acks...)
}
