// Package rowlock is the pessimistic strategy: every stock movement happens in
// a MySQL transaction that first locks the SKU's inventory row with
// SELECT … FOR UPDATE. Correct and simple; every buyer of a hot SKU queues on
// one row lock.
package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// Strategy implements strategies.Strategy with row locks. Safe for concurrent use.
type Strategy struct {
	sqlstore.Base
}

var _ strategies.Strategy = (*Strategy)(nil)

// New builds the strategy on cfg.DB.
func New(cfg strategies.Config) *Strategy {
	return &Strategy{Base: sqlstore.NewBase(cfg, move)}
}

// Name is "rowlock".
func (s *Strategy) Name() string { return "rowlock" }

// Reserve inserts the order row, locks the inventory row, checks and moves
// the stock, all in one transaction.
func (s *Strategy) Reserve(ctx context.Context, r inventory.Reservation) error {
	err := sqlstore.InTx(ctx, s.DB, func(tx *sql.Tx) error {
		if err := sqlstore.InsertOrder(ctx, tx, r, inventory.StateReserved); err != nil {
			return err
		}
		if err := sqlstore.HoldForBuyer(ctx, tx, r); err != nil {
			return err
		}
		var avail int64
		err := tx.QueryRowContext(ctx, "SELECT available FROM inventory WHERE sku=? FOR UPDATE", r.SKU).Scan(&avail)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("reserve: unknown sku %q", r.SKU)
		}
		if err != nil {
			return fmt.Errorf("reserve: lock inventory: %w", err)
		}
		if avail < r.Qty {
			return inventory.ErrOutOfStock
		}
		_, err = tx.ExecContext(ctx, "UPDATE inventory SET available=available-?, occupied=occupied+? WHERE sku=?", r.Qty, r.Qty, r.SKU)
		return err
	})
	if sqlstore.IsDuplicate(err) {
		return sqlstore.ReserveRepeat(ctx, s.DB, r.OrderID)
	}
	return err
}

// move locks the inventory row, then moves the units out of occupied (or,
// for a refund, out of sold).
func move(ctx context.Context, tx *sql.Tx, ord sqlstore.Order, m sqlstore.Movement) error {
	sku, qty := ord.SKU, ord.Qty
	from := "occupied"
	q := "UPDATE inventory SET occupied=occupied-?, sold=sold+? WHERE sku=?"
	switch m {
	case sqlstore.ToAvailable:
		q = "UPDATE inventory SET occupied=occupied-?, available=available+? WHERE sku=?"
	case sqlstore.Refunded:
		from, q = "sold", "UPDATE inventory SET sold=sold-?, available=available+? WHERE sku=?"
	}
	var have int64
	if err := tx.QueryRowContext(ctx, "SELECT "+from+" FROM inventory WHERE sku=? FOR UPDATE", sku).Scan(&have); err != nil {
		return fmt.Errorf("lock inventory: %w", err)
	}
	if have < qty {
		return fmt.Errorf("inventory %s: %s %d < %d", sku, from, have, qty)
	}
	_, err := tx.ExecContext(ctx, q, qty, qty, sku)
	return err
}
