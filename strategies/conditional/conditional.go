// Package conditional is the single-statement baseline: one conditional
// UPDATE … WHERE available >= ? moves the stock, with no read first, plus the
// order row, in one short transaction.
package conditional

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// Strategy implements strategies.Strategy with conditional updates. Safe for
// concurrent use.
type Strategy struct {
	sqlstore.Base
}

var _ strategies.Strategy = (*Strategy)(nil)

// New builds the strategy on cfg.DB.
func New(cfg strategies.Config) *Strategy {
	return &Strategy{Base: sqlstore.NewBase(cfg, sqlstore.GuardedMove)}
}

// Name is "conditional".
func (s *Strategy) Name() string { return "conditional" }

// Reserve inserts the order row, then moves the stock with one conditional
// UPDATE, the hot row's lock held only from that statement to the commit.
func (s *Strategy) Reserve(ctx context.Context, r inventory.Reservation) error {
	err := sqlstore.InTx(ctx, s.DB, func(tx *sql.Tx) error {
		if err := sqlstore.InsertOrder(ctx, tx, r, inventory.StateReserved); err != nil {
			return err
		}
		if err := sqlstore.HoldForBuyer(ctx, tx, r); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx,
			"UPDATE inventory SET available=available-?, occupied=occupied+? WHERE sku=? AND available>=?",
			r.Qty, r.Qty, r.SKU, r.Qty)
		if err != nil {
			return fmt.Errorf("reserve: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return inventory.ErrOutOfStock
		}
		return nil
	})
	if sqlstore.IsDuplicate(err) {
		return sqlstore.ReserveRepeat(ctx, s.DB, r.OrderID)
	}
	return err
}
