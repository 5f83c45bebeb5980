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
// initial stock per SKU, every restock it issued and every acknowledgement
// a client got. It never changes what the strategy does or
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
	// last rotation (with their reservation's deadline), reservedOld
	// those of the generation before.
	reserved, reservedOld map[string]time.Time
	// cancelling, cancellingOld hold the orders a client has sent a
	// cancel for (rotated with reserved): a confirm refused as final after
	// (or racing) the client's own cancel is no anomaly.
	cancelling, cancellingOld map[string]struct{}
	rotated                   time.Time
	keep                      time.Duration
}

// newLedger keeps the account of a run of s from the initial stock; acks
// go to acks, and an acknowledged reserve is remembered for at least keep.
func newLedger(s strategies.Strategy, initial []inventory.Stock, acks *ackLog, keep time.Duration) *ledger {
	l := &ledger{Strategy: s, stock: map[string]int64{}, acks: acks, keep: keep,
		reserved: map[string]time.Time{}, reservedOld: map[string]time.Time{},
		cancelling: map[string]struct{}{}, cancellingOld: map[string]struct{}{}, rotated: time.Now()}
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

// remember notes an acknowledged reserve and its deadline; l.mu held.
func (l *ledger) remember(id string, deadline, now time.Time) {
	l.rotate(now)
	l.reserved[id] = deadline
}

// rotate starts a new generation of the remembered orders when keep has
// passed since the last; l.mu held.
func (l *ledger) rotate(now time.Time) {
	if now.Sub(l.rotated) >= l.keep {
		l.reservedOld, l.reserved = l.reserved, make(map[string]time.Time, len(l.reserved))
		l.cancellingOld, l.cancelling = l.cancelling, make(map[string]struct{}, len(l.cancelling))
		l.rotated = now
	}
}

// cancelSent reports whether a client sent a cancel for the order
// (within keep); l.mu held.
func (l *ledger) cancelSent(id string) bool {
	_, a := l.cancelling[id]
	_, b := l.cancellingOld[id]
	return a || b
}

// wasReserved reports whether the order's reserve was acknowledged (within
// keep), with its deadline, and forgets it; l.mu held.
func (l *ledger) wasReserved(id string) (deadline time.Time, ok bool) {
	d, a := l.reserved[id]
	if !a {
		d, a = l.reservedOld[id]
	}
	delete(l.reserved, id)
	delete(l.reservedOld, id)
	return d, a
}

// Reserve records a reserve acknowledgement.
func (l *ledger) Reserve(ctx context.Context, r inventory.Reservation) error {
	err := l.Strategy.Reserve(ctx, r)
	if err == nil {
		l.mu.Lock()
		l.remember(r.OrderID, r.Deadline, time.Now())
		l.mu.Unlock()
		l.acks.add(inventory.Ack{OrderID: r.OrderID, SKU: r.SKU, State: inventory.StateReserved})
	}
	return err
}

// Confirm records a confirm acknowledgement, or a refusal of a confirm
// after an acknowledged reserve that no rule allows (refusedAfterReserve;
// a refusal as unknown or final is allowed once the client sent a cancel
// for the order, whose race with the confirm it may have won).
// Either answer is final, so the order's reserve is forgotten then; an
// answer that is not final (outcome unknown, a conflict, a timeout) keeps
// it for the client's retry.
func (l *ledger) Confirm(ctx context.Context, o inventory.OrderRef) error {
	err := l.Strategy.Confirm(ctx, o)
	switch {
	case err == nil:
		l.mu.Lock()
		l.wasReserved(o.OrderID)
		l.mu.Unlock()
		l.acks.add(inventory.Ack{OrderID: o.OrderID, SKU: o.SKU, State: inventory.StateConfirmed})
	case errors.Is(err, inventory.ErrOutOfStock), errors.Is(err, inventory.ErrUnknownOrder), errors.Is(err, inventory.ErrAlreadyFinal):
		now := time.Now()
		l.mu.Lock()
		deadline, was := l.wasReserved(o.OrderID)
		cancelled := l.cancelSent(o.OrderID) && !errors.Is(err, inventory.ErrOutOfStock)
		l.mu.Unlock()
		if was && !cancelled && refusedAfterReserve(err, deadline, now) {
			l.acks.add(inventory.Ack{OrderID: o.OrderID, SKU: o.SKU, State: inventory.AckRefused})
		}
	}
	return err
}

// refusedAfterReserve says whether a confirm refused with err at now (its
// answer's time), after a reserve acknowledged with deadline, contradicts
// that acknowledgement: refused for lack of stock; the order unknown; or
// the order already final (cancelled, expired) while its deadline had not
// passed when the answer came — the client did not cancel it (the ledger
// forgets an order its cancel answered), so only an expiry past the
// deadline is a rule the stores may invoke. The deadline compared is the
// one every store keeps (inventory.StoredDeadline).
func refusedAfterReserve(err error, deadline, now time.Time) bool {
	switch {
	case errors.Is(err, inventory.ErrOutOfStock), errors.Is(err, inventory.ErrUnknownOrder):
		return true
	case errors.Is(err, inventory.ErrAlreadyFinal):
		return !deadline.IsZero() && now.Before(inventory.StoredDeadline(deadline))
	}
	return false
}

// Cancel records a cancel acknowledgement. The order is noted as one its
// client cancels before the call (a confirm refused as final after, or
// racing, the client's own cancel is no anomaly).
func (l *ledger) Cancel(ctx context.Context, o inventory.OrderRef) error {
	l.mu.Lock()
	l.rotate(time.Now())
	l.cancelling[o.OrderID] = struct{}{}
	l.mu.Unlock()
	err := l.Strategy.Cancel(ctx, o)
	if err == nil {
		l.acks.add(inventory.Ack{OrderID: o.OrderID, SKU: o.SKU, State: inventory.StateCancelled})
	}
	return err
}

// Refund records a refund acknowledgement: the auditor then expects the
// order refunded and its units available again — once.
func (l *ledger) Refund(ctx context.Context, o inventory.OrderRef) error {
	err := l.Strategy.Refund(ctx, o)
	if err == nil {
		l.acks.add(inventory.Ack{OrderID: o.OrderID, SKU: o.SKU, State: inventory.StateRefunded})
	}
	return err
}

// Restock records the restock the harness issued, as an ack the auditor
// matches against the stores' restock journal: AckRestockUnknown as it is
// issued, then AckRestocked when the call returned nil (a failed call
// leaves the first: its reply may have been lost after the commit; the
// journal says whether it applied). The stock
// put in is the initial stock plus the journal rows so matched, so no
// restock is guessed at, whether or not the harness knew of a fault.
//
// Logged before the call, a generator killed during it (its ack log
// survives that: openAckLog) still names the journal row its stores may
// have written, and the audit counts it as for a lost reply.
func (l *ledger) Restock(ctx context.Context, r inventory.Restock) error {
	l.acks.add(inventory.Ack{OrderID: r.ID, SKU: r.SKU, State: inventory.AckRestockUnknown, Qty: r.Qty})
	err := l.Strategy.Restock(ctx, r)
	if err == nil {
		l.acks.add(inventory.Ack{OrderID: r.ID, SKU: r.SKU, State: inventory.AckRestocked, Qty: r.Qty})
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
