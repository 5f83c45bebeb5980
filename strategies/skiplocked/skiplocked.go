// Package skiplocked keeps one row per unit of stock (stock_units) and
// reserves with SELECT … FOR UPDATE SKIP LOCKED (MariaDB ≥ 10.6, MySQL ≥
// 8.0): a buyer locks q free unit rows that no other buyer holds, marks them
// occupied by its order, and never waits on another buyer's rows — the
// contention is spread over the stock itself. Confirm marks the order's
// rows sold, cancel and expiry free them; restock inserts rows.
//
// The inventory row keeps the SKU's total only (Setup turns its available
// units into rows); the auditor counts the unit rows by state
// (audit/layout.go).
//
// Refusals the free rows, counted right after (no lock), would have
// covered are counted (false_sold_out).
package skiplocked

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// insertChunk bounds the rows of one multi-row INSERT of units.
const insertChunk = 1000

// Strategy implements strategies.Strategy with unit rows. Safe for
// concurrent use.
type Strategy struct {
	sqlstore.Base
	falseSoldOut, refusals, waits atomic.Int64
}

var _ strategies.Strategy = (*Strategy)(nil)

// readCommitted: the locking reads take the chosen rows' locks only, no
// gap locks that would stall a restock's INSERT of new rows.
var readCommitted = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// New builds the strategy on cfg.DB.
func New(cfg strategies.Config) *Strategy {
	s := &Strategy{}
	s.Base = sqlstore.NewBase(cfg, move)
	return s
}

// Name is "skiplocked".
func (s *Strategy) Name() string { return "skiplocked" }

// Setup turns what each inventory row holds as available into unit rows
// and sets the row's available to 0, in one transaction per SKU. Run again
// on live stores (a service restart) it finds 0 available and adds nothing.
func (s *Strategy) Setup(ctx context.Context, stock []inventory.Stock) error {
	for _, st := range stock {
		err := sqlstore.InTx(ctx, s.DB, func(tx *sql.Tx) error {
			var avail int64
			err := tx.QueryRowContext(ctx, "SELECT available FROM inventory WHERE sku=? FOR UPDATE", st.SKU).Scan(&avail)
			if err != nil || avail == 0 {
				return err
			}
			if err := insertUnits(ctx, tx, st.SKU, avail); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, "UPDATE inventory SET available=0 WHERE sku=?", st.SKU)
			return err
		})
		if err != nil {
			return fmt.Errorf("skiplocked setup %s: %w", st.SKU, err)
		}
	}
	return nil
}

// insertUnits adds n available unit rows of sku, a chunk per statement.
func insertUnits(ctx context.Context, tx *sql.Tx, sku string, n int64) error {
	for n > 0 {
		k := min(n, insertChunk)
		q := "INSERT INTO stock_units (sku, state) VALUES " + strings.TrimSuffix(strings.Repeat("(?,'available'),", int(k)), ",")
		args := make([]any, k)
		for i := range args {
			args[i] = sku
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("insert units: %w", err)
		}
		n -= k
	}
	return nil
}

// Reserve inserts the order row, locks q free unit rows no one else holds
// (SKIP LOCKED) and marks them occupied by the order, in one transaction.
func (s *Strategy) Reserve(ctx context.Context, r inventory.Reservation) error {
	err := sqlstore.InTxWith(ctx, s.DB, readCommitted, func(tx *sql.Tx) error {
		if err := sqlstore.InsertOrder(ctx, tx, r, inventory.StateReserved); err != nil {
			return err
		}
		if err := sqlstore.HoldForBuyer(ctx, tx, r); err != nil {
			return err
		}
		ids, err := lockUnits(ctx, tx, r, " SKIP LOCKED")
		if err != nil {
			return err
		}
		if int64(len(ids)) < r.Qty {
			// Too few free rows nobody holds. If the SKU's free rows
			// (counted without a lock) would cover q, the others are held
			// by reserves in flight that may roll back: wait for them
			// rather than refuse a buyer while stock is there.
			var free int64
			if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM stock_units WHERE sku=? AND state='available'", r.SKU).Scan(&free); err != nil {
				return fmt.Errorf("reserve: count units: %w", err)
			}
			if free < r.Qty {
				return inventory.ErrOutOfStock
			}
			s.waits.Add(1)
			if ids, err = lockUnits(ctx, tx, r, ""); err != nil {
				return err
			}
			if int64(len(ids)) < r.Qty {
				return inventory.ErrOutOfStock
			}
		}
		args := append([]any{r.OrderID}, ids...)
		_, err = tx.ExecContext(ctx, "UPDATE stock_units SET state='occupied', order_id=? WHERE id IN ("+sqlstore.Placeholders(len(ids))+")", args...)
		return err
	})
	switch {
	case sqlstore.IsDuplicate(err):
		return sqlstore.ReserveRepeat(ctx, s.DB, r.OrderID)
	case errors.Is(err, inventory.ErrOutOfStock):
		s.noteRefusal(ctx, r)
	}
	return err
}

// lockUnits locks up to q free unit rows of the SKU (suffix " SKIP LOCKED"
// skips rows other transactions hold; "" waits for them).
func lockUnits(ctx context.Context, tx *sql.Tx, r inventory.Reservation, suffix string) ([]any, error) {
	rows, err := tx.QueryContext(ctx,
		"SELECT id FROM stock_units WHERE sku=? AND state='available' ORDER BY id LIMIT ? FOR UPDATE"+suffix, r.SKU, r.Qty)
	if err != nil {
		return nil, fmt.Errorf("reserve: lock units: %w", err)
	}
	defer rows.Close()
	ids := make([]any, 0, r.Qty)
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("reserve: lock units: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reserve: lock units: %w", err)
	}
	return ids, nil
}

// noteRefusal counts a refusal, and a false sold-out when the free rows,
// counted just after (a plain read, no lock), would have covered it.
func (s *Strategy) noteRefusal(ctx context.Context, r inventory.Reservation) {
	s.refusals.Add(1)
	var n int64
	err := s.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM stock_units WHERE sku=? AND state='available'", r.SKU).Scan(&n)
	if err == nil && n >= r.Qty {
		s.falseSoldOut.Add(1)
	}
}

// move is the MoveFunc: the order's occupied rows become sold (confirm) or
// free (cancel, expiry), and a refund frees its sold rows. The order row's
// lock, held by the caller, serialises every move of one order.
func move(ctx context.Context, tx *sql.Tx, ord sqlstore.Order, m sqlstore.Movement) error {
	from := "occupied"
	q := "UPDATE stock_units SET state='sold' WHERE order_id=? AND state='occupied'"
	switch m {
	case sqlstore.ToAvailable:
		q = "UPDATE stock_units SET state='available', order_id=NULL WHERE order_id=? AND state='occupied'"
	case sqlstore.Refunded:
		from, q = "sold", "UPDATE stock_units SET state='available', order_id=NULL WHERE order_id=? AND state='sold'"
	}
	res, err := tx.ExecContext(ctx, q, ord.ID)
	if err != nil {
		return fmt.Errorf("units: %w", err)
	}
	if n, _ := res.RowsAffected(); n != ord.Qty {
		return fmt.Errorf("order %s: %d %s unit rows, want %d", ord.ID, n, from, ord.Qty)
	}
	return nil
}

// Restock journals r (a repeated id changes nothing) and adds its qty to the SKU's total and inserts qty free unit rows, in
// one transaction.
func (s *Strategy) Restock(ctx context.Context, r inventory.Restock) error {
	sku, qty := r.SKU, r.Qty
	err := sqlstore.InTxWith(ctx, s.DB, readCommitted, func(tx *sql.Tx) error {
		if applied, err := sqlstore.JournalTotal(ctx, tx, r); err != nil || !applied {
			return err // a repeated restock id changes nothing
		}
		return insertUnits(ctx, tx, sku, qty)
	})
	if err != nil {
		return fmt.Errorf("restock %s: %w", sku, err)
	}
	return nil
}

// Counters adds the refusals, the false sold-outs among them and the
// reserves that waited for held rows.
func (s *Strategy) Counters() map[string]float64 {
	m := s.Base.Counters()
	m["unit_refusals"] = float64(s.refusals.Load())
	m["false_sold_out"] = float64(s.falseSoldOut.Load())
	m["unit_lock_waits"] = float64(s.waits.Load())
	return m
}
