// Package naive is the way teams get it wrong: check, then act. Reserve
// reads the available stock, checks it in the application, then decrements
// it — separate statements, no lock, no transaction, no guard in the
// UPDATE. Buyers whose check ran before the stock ran out but whose
// decrement ran after it oversell: how many depends on how their reads and
// writes interleave, so the oversell varies from run to run as real traffic
// does (the article's ~13.5 % is such an average). Confirm and cancel
// read-modify-write the row, so updates are also lost. It exists so the
// auditor can prove it catches that.
package naive

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

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

// Reserve reads available, checks it, decrements it and records the order:
// three statements, no lock — the check and the act are apart.
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
	if _, err := s.db.ExecContext(ctx, "UPDATE inventory SET available=available-?, occupied=occupied+? WHERE sku=?", r.Qty, r.Qty, r.SKU); err != nil {
		return fmt.Errorf("reserve: %w", err)
	}
	if err := sqlstore.InsertOrder(ctx, s.db, r, inventory.StateReserved); err != nil {
		if sqlstore.IsDuplicate(err) {
			return sqlstore.ReserveRepeat(ctx, s.db, r.OrderID)
		}
		return fmt.Errorf("reserve: %w", err)
	}
	return nil
}

// Confirm reads the order, then moves occupied → sold by read-modify-write.
func (s *Strategy) Confirm(ctx context.Context, ref inventory.OrderRef) error {
	return s.finish(ctx, ref, inventory.StateConfirmed)
}

// Cancel reads the order, then moves occupied → available by read-modify-write.
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
	var avail, occ, sold int64
	if err := s.db.QueryRowContext(ctx, "SELECT available, occupied, sold FROM inventory WHERE sku=?", sku).Scan(&avail, &occ, &sold); err != nil {
		return fmt.Errorf("%s: %w", to, err)
	}
	occ -= qty
	if to == inventory.StateConfirmed {
		sold += qty
	} else {
		avail += qty
	}
	if _, err := s.db.ExecContext(ctx, "UPDATE inventory SET available=?, occupied=?, sold=? WHERE sku=?", avail, occ, sold, sku); err != nil {
		return fmt.Errorf("%s: %w", to, err)
	}
	return sqlstore.SetState(ctx, s.db, ref.OrderID, to)
}

// Run releases expired reservations, as carelessly as everything else.
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
		var sku string
		var qty int64
		if err := s.db.QueryRowContext(ctx, "SELECT sku, qty FROM orders WHERE order_id=?", id).Scan(&sku, &qty); err != nil {
			return err
		}
		if _, err := s.db.ExecContext(ctx, "UPDATE inventory SET available=available+?, occupied=occupied-? WHERE sku=?", qty, qty, sku); err != nil {
			return err
		}
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
	_, err = tx.ExecContext(ctx, "INSERT INTO restocks (restock_id, sku, qty, created_at) VALUES (?,?,?,?)", r.ID, r.SKU, r.Qty, time.Now().UTC())
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
