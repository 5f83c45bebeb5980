// Package naive is the article's experiment without atomicity (预占与实占
// 没有原子化): the reserve (预占) checks that a unit is available but holds
// nothing; the stock is taken at confirm (实占), after the pay delay, with
// no guard. Every buyer whose check ran before the stock was taken passes,
// so the unguarded window is the pay delay itself and the oversell comes
// from the scheme, not from the machine's speed: 120 buyers arriving
// together on 100 units, all paying 200–500 ms later, all pass the check
// and all are sold — 20 oversold, 16.7 % of the confirmed units (the
// article reports 13.5 % on average). Cancel and expiry release nothing
// (nothing was held). It exists so the auditor can prove it catches that.
package naive

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// Strategy implements strategies.Strategy with unguarded read-modify-write.
// It is "safe" for concurrent use only in the sense that it does not crash.
type Strategy struct {
	db       *sql.DB
	cfg      strategies.Config
	bgErrors atomic.Int64
}

var _ strategies.Strategy = (*Strategy)(nil)

// New builds the strategy on cfg.DB.
func New(cfg strategies.Config) *Strategy {
	cfg = cfg.WithDefaults()
	return &Strategy{db: cfg.DB, cfg: cfg}
}

// Name is "naive".
func (s *Strategy) Name() string { return "naive" }

// Setup has nothing to add.
func (s *Strategy) Setup(ctx context.Context, stock []inventory.Stock) error { return nil }

// Reserve checks the available stock and records the order as reserved;
// it holds no unit: the check and the act (at confirm) are apart.
func (s *Strategy) Reserve(ctx context.Context, r inventory.Reservation) error {
	var avail int64
	err := s.db.QueryRowContext(ctx, "SELECT available FROM inventory WHERE sku=?", r.SKU).Scan(&avail)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("reserve: unknown sku %q", r.SKU)
	}
	if err != nil {
		return fmt.Errorf("reserve: %w", err)
	}
	if avail < r.Qty {
		return inventory.ErrOutOfStock
	}
	// The per-buyer limit the same way: checked on what the buyer's orders
	// hold now, with nothing guarding the check until the order is written,
	// so two clicks of one buyer can both pass it.
	if r.Buyer != "" && r.Limit > 0 {
		var held int64
		err := s.db.QueryRowContext(ctx,
			"SELECT COALESCE(SUM(qty),0) FROM orders WHERE sku=? AND buyer=? AND state IN ('reserved','confirmed')", r.SKU, r.Buyer).Scan(&held)
		if err != nil {
			return fmt.Errorf("reserve: %w", err)
		}
		if held+r.Qty > r.Limit {
			return fmt.Errorf("reserve %s: buyer %s holds %d: %w", r.OrderID, r.Buyer, held, inventory.ErrLimitExceeded)
		}
	}
	if err := sqlstore.InsertOrder(ctx, s.db, r, inventory.StateReserved); err != nil {
		if sqlstore.IsDuplicate(err) {
			return sqlstore.ReserveRepeat(ctx, s.db, r.OrderID)
		}
		return fmt.Errorf("reserve: %w", err)
	}
	return nil
}

// Confirm takes the stock the reserve checked, with no guard: available
// goes down and sold up whether or not a unit is left.
func (s *Strategy) Confirm(ctx context.Context, ref inventory.OrderRef) error {
	return s.finish(ctx, ref, inventory.StateConfirmed)
}

// Cancel marks the order cancelled; the reserve held nothing to release.
func (s *Strategy) Cancel(ctx context.Context, ref inventory.OrderRef) error {
	return s.finish(ctx, ref, inventory.StateCancelled)
}

func (s *Strategy) finish(ctx context.Context, ref inventory.OrderRef, to inventory.OrderState) error {
	var sku string
	var qty int64
	var st inventory.OrderState
	err := s.db.QueryRowContext(ctx, "SELECT sku, qty, state FROM orders WHERE order_id=?", ref.OrderID).Scan(&sku, &qty, &st)
	if errors.Is(err, sql.ErrNoRows) {
		if to == inventory.StateCancelled {
			return nil
		}
		return inventory.ErrUnknownOrder
	}
	if err != nil {
		return fmt.Errorf("%s: %w", to, err)
	}
	if st == to {
		return nil
	}
	if st != inventory.StateReserved {
		return inventory.ErrAlreadyFinal
	}
	if to == inventory.StateConfirmed {
		if _, err := s.db.ExecContext(ctx, "UPDATE inventory SET available=available-?, sold=sold+? WHERE sku=?", qty, qty, sku); err != nil {
			return fmt.Errorf("%s: %w", to, err)
		}
	}
	return sqlstore.SetState(ctx, s.db, ref.OrderID, to)
}

// Refund gives a confirmed order's units back the naive way: it reads the
// order's state with no lock and, if it says confirmed, adds the units to
// available and takes them off sold, then marks the order refunded — the
// check and the act apart, so a refund arriving twice at once (or a
// client's retry racing the first) can pass the check twice and release
// the units twice: the article's double release (多释放). A reserved order
// is ErrNotConfirmed, a cancelled or expired one ErrAlreadyFinal, an
// unknown one ErrUnknownOrder; a repeat after the first has finished
// returns nil.
func (s *Strategy) Refund(ctx context.Context, ref inventory.OrderRef) error {
	var sku string
	var qty int64
	var st inventory.OrderState
	err := s.db.QueryRowContext(ctx, "SELECT sku, qty, state FROM orders WHERE order_id=?", ref.OrderID).Scan(&sku, &qty, &st)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("refund %s: %w", ref.OrderID, inventory.ErrUnknownOrder)
	case err != nil:
		return fmt.Errorf("refund: %w", err)
	}
	switch st {
	case inventory.StateRefunded:
		return nil
	case inventory.StateReserved:
		return fmt.Errorf("refund %s: %w", ref.OrderID, inventory.ErrNotConfirmed)
	case inventory.StateConfirmed:
	default:
		return fmt.Errorf("refund %s: order is %s: %w", ref.OrderID, st, inventory.ErrAlreadyFinal)
	}
	if _, err := s.db.ExecContext(ctx, "UPDATE inventory SET available=available+?, sold=sold-? WHERE sku=?", qty, qty, sku); err != nil {
		return fmt.Errorf("refund: %w", err)
	}
	return sqlstore.SetState(ctx, s.db, ref.OrderID, inventory.StateRefunded)
}

// Run marks expired reservations expired (they held nothing).
func (s *Strategy) Run(ctx context.Context) error {
	sqlstore.Every(ctx, s.cfg.SweepPeriod, s.expire, func(error) { s.bgErrors.Add(1) })
	return nil
}

func (s *Strategy) expire(ctx context.Context) error {
	ids, err := sqlstore.DueOrders(ctx, s.db, 500)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := sqlstore.SetState(ctx, s.db, id, inventory.StateExpired); err != nil {
			return err
		}
	}
	return nil
}

// Settle runs one expiry pass.
func (s *Strategy) Settle(ctx context.Context) error { return s.expire(ctx) }

// Restock adds stock by read-modify-write (read outside the transaction,
// as naive does everything), journalling the restock in the transaction
// that writes the row: a repeated id changes nothing.
func (s *Strategy) Restock(ctx context.Context, r inventory.Restock) error {
	var total, avail int64
	if err := s.db.QueryRowContext(ctx, "SELECT total, available FROM inventory WHERE sku=?", r.SKU).Scan(&total, &avail); err != nil {
		return fmt.Errorf("restock: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("restock: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	_, err = tx.ExecContext(ctx, "INSERT INTO restocks (restock_id, sku, qty, created_at) VALUES (?,?,?,?)", r.ID, r.SKU, r.Qty, clock.Now().UTC())
	if sqlstore.IsDuplicate(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("restock: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE inventory SET total=?, available=? WHERE sku=?", total+r.Qty, avail+r.Qty, r.SKU); err != nil {
		return fmt.Errorf("restock: %w", err)
	}
	return tx.Commit()
}

// Close has nothing to release.
func (s *Strategy) Close() error { return nil }

// Counters reports background errors.
func (s *Strategy) Counters() map[string]float64 {
	return map[string]float64{"background_errors": float64(s.bgErrors.Load())}
}
