package strategies

import (
	"context"

	"github.com/stockbench/stockbench/inventory"
)

// Strategy is one way to keep the reservation rules. Every method must be
// safe for concurrent use by many buyers. Confirm, Cancel and Refund are idempotent:
// a repeat returns the same outcome and changes nothing; when they race on one
// order exactly one of them wins and the other returns ErrAlreadyFinal.
type Strategy interface {
	// Name is the strategy's CLI name.
	Name() string
	// Setup loads the initial stock into the strategy's stores. The schema
	// has already been reset by the caller.
	Setup(ctx context.Context, stock []inventory.Stock) error
	// Reserve moves r.Qty units of r.SKU from available to occupied for
	// order r.OrderID, or fails with ErrOutOfStock. A repeat of a successful
	// reserve succeeds without moving stock again; a reserve whose order was
	// already cancelled fails with ErrAlreadyFinal (anti-hanging).
	Reserve(ctx context.Context, r inventory.Reservation) error
	// Confirm moves the order's units from occupied to sold. It fails with
	// ErrAlreadyFinal after a cancel or expiry and with ErrUnknownOrder for
	// an order never reserved.
	Confirm(ctx context.Context, o inventory.OrderRef) error
	// Cancel releases the order's units back to available. Cancel of an
	// unknown order changes no stock but leaves a marker so that a later
	// reserve with that id is refused; cancel after confirm releases nothing
	// and returns ErrAlreadyFinal.
	Cancel(ctx context.Context, o inventory.OrderRef) error
	// Refund gives a confirmed order's units back: sold −qty, available
	// +qty, total unchanged, and the order becomes refunded. Idempotent by
	// order id: a repeat returns nil and changes nothing. A refund of an
	// order reserved but not confirmed fails with ErrNotConfirmed, of a
	// cancelled or expired order with ErrAlreadyFinal, of an unknown order
	// with ErrUnknownOrder. A confirm or cancel of a refunded order fails
	// with ErrAlreadyFinal. When a refund races a cancel, an expiry or
	// another refund of one order, the units are released exactly once.
	Refund(ctx context.Context, o inventory.OrderRef) error
	// Restock adds r.Qty units to the SKU's total and available stock and
	// writes r's row in the restock journal in the same MySQL transaction
	// as the total. Idempotent per r.ID: a repeat changes nothing and
	// returns nil.
	Restock(ctx context.Context, r inventory.Restock) error
	// Run does background work (expiry sweeper, outbox relay, TCC recovery)
	// until ctx ends. It returns nil when ctx ends.
	Run(ctx context.Context) error
	// Settle drains asynchronous work so that an audit sees the final state.
	Settle(ctx context.Context) error
	// Close releases the strategy's resources (not the shared connections).
	Close() error
}

// Counters is implemented by strategies that keep strategy-specific figures
// (CAS retries, outbox lag…). The map is a snapshot; it is safe to call
// concurrently with the strategy's other methods.
type Counters interface {
	Counters() map[string]float64
}

type progressKey struct{}

// WithProgress returns a context carrying fn, which a Setup given it calls
// with the number of SKUs it has just loaded (n more each call), so a long
// load can be shown as it goes. fn must be safe for concurrent use.
func WithProgress(ctx context.Context, fn func(n int)) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

// ProgressOf returns the progress function ctx carries, or one that does
// nothing.
func ProgressOf(ctx context.Context) func(n int) {
	if fn, ok := ctx.Value(progressKey{}).(func(n int)); ok {
		return fn
	}
	return func(int) {}
}
