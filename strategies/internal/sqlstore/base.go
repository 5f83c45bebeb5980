package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
)

// Base is the part of a MySQL strategy that does not depend on how stock is
// moved: confirm, cancel, refund (Orders.Refund), the expiry sweeper,
// restock and background error counting. A strategy embeds it and adds Name and Reserve.
type Base struct {
	Orders
	Cfg      strategies.Config
	bgErrors atomic.Int64
}

var _ strategies.Pending = (*Base)(nil)

// NewBase builds a Base whose stock movements use move.
func NewBase(cfg strategies.Config, move MoveFunc) Base {
	cfg = cfg.WithDefaults()
	return Base{Orders: Orders{DB: cfg.DB, Move: move}, Cfg: cfg}
}

// Setup has nothing to add: the caller loaded the inventory rows.
func (b *Base) Setup(ctx context.Context, stock []inventory.Stock) error { return nil }

// Confirm moves the order reserved → confirmed (see Orders.Finish).
func (b *Base) Confirm(ctx context.Context, ref inventory.OrderRef) error {
	return b.Finish(ctx, ref, inventory.StateConfirmed)
}

// Cancel moves the order reserved → cancelled (see Orders.Finish).
func (b *Base) Cancel(ctx context.Context, ref inventory.OrderRef) error {
	return b.Finish(ctx, ref, inventory.StateCancelled)
}

// Run sweeps expired reservations every SweepPeriod until ctx ends.
func (b *Base) Run(ctx context.Context) error {
	Every(ctx, b.Cfg.SweepPeriod, func(ctx context.Context) error {
		_, err := b.ExpireDue(ctx)
		return err
	}, b.BackgroundError)
	return nil
}

// Settle runs one sweep so that due reservations are released before an audit.
func (b *Base) Settle(ctx context.Context) error {
	if _, err := b.ExpireDue(ctx); err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	return nil
}

// Pending counts the orders still reserved: what Settle's expiry may have
// to decide, so the harness gives Settle a deadline that grows with the
// backlog. One index count. Safe for concurrent use.
func (b *Base) Pending(ctx context.Context) (int64, error) {
	var n int64
	if err := b.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE state='reserved'").Scan(&n); err != nil {
		return 0, fmt.Errorf("pending orders: %w", err)
	}
	return n, nil
}

// Restock adds r.Qty units to the SKU's total and available stock and
// journals the restock in the same transaction (see JournalRestock): a
// repeat of r.ID changes nothing and returns nil.
func (b *Base) Restock(ctx context.Context, r inventory.Restock) error {
	return InTx(ctx, b.DB, func(tx *sql.Tx) error {
		_, _, err := JournalRestock(ctx, tx, r)
		return err
	})
}

// Close has nothing to release.
func (b *Base) Close() error { return nil }

// BackgroundError counts an error of background work; it is reported in
// Counters as background_errors.
func (b *Base) BackgroundError(err error) { b.bgErrors.Add(1) }

// Counters reports background errors.
func (b *Base) Counters() map[string]float64 {
	return map[string]float64{"background_errors": float64(b.bgErrors.Load())}
}
