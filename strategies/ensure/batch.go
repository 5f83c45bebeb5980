package ensure

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/internal/groupcommit"
	"github.com/stockbench/stockbench/strategies/internal/redisstock"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// confirmItem is one confirm waiting for its MySQL transaction.
type confirmItem struct {
	s   *Strategy
	ref inventory.OrderRef
	res redisstock.Reservation
	got inventory.OrderState // the decision that stands, set by the group
}

// confirmGroup coalesces the confirms of one SKU into one transaction —
// their order rows in one INSERT, their units in one guarded UPDATE, their
// log rows in one INSERT — instead of one hot-row transaction each
// (cfg.BatchMax 1: off), as lua-tcc's confirm does. cfg has its defaults.
func confirmGroup(cfg strategies.Config) *groupcommit.Group[*confirmItem] {
	return &groupcommit.Group[*confirmItem]{Max: cfg.BatchMax, Wait: cfg.BatchWait, Batch: confirmBatch,
		One: func(ctx context.Context, _ string, it *confirmItem) error {
			got, err := it.s.confirmOne(ctx, it.ref, it.res)
			it.got = got
			return err
		}}
}

// confirmBatch decides the confirms of its (distinct) orders in one
// transaction. Anything unusual — an order that already has a decision
// (duplicate key), MySQL short of stock — fails the batch, and each confirm
// then takes the per-order path that handles it.
func confirmBatch(ctx context.Context, sku string, its []*confirmItem) ([]error, error) {
	s := its[0].s
	now := clock.Now().UTC()
	rs := make([]inventory.Reservation, len(its))
	rows := make([]logRow, len(its))
	seen := make(map[string]bool, len(its))
	for i, it := range its {
		if seen[it.ref.OrderID] {
			return nil, fmt.Errorf("confirm batch: order %s twice", it.ref.OrderID)
		}
		seen[it.ref.OrderID] = true
		rs[i] = inventory.Reservation{OrderID: it.ref.OrderID, SKU: sku, Qty: it.res.Qty, Deadline: it.res.Deadline, Buyer: it.res.Buyer}
		rows[i] = logRow{order: it.ref.OrderID, kind: kindConfirm, sku: sku, qty: it.res.Qty}
	}
	err := sqlstore.InTx(ctx, s.db, func(tx *sql.Tx) error {
		if ok, err := sqlstore.ConfirmOrders(ctx, tx, sku, rs); err != nil {
			return err
		} else if !ok {
			return errNoMySQLStock
		}
		return insertLog(ctx, tx, now, rows...)
	})
	if err != nil {
		return nil, fmt.Errorf("confirm batch %s: %w", sku, err)
	}
	s.c.logged.Add(int64(len(its)))
	for _, it := range its {
		it.got = inventory.StateConfirmed
	}
	return make([]error, len(its)), nil
}

// logRow is one row of the stock-change log to write.
type logRow struct {
	order, kind, sku string
	qty              int64
}

// insertLog writes log rows inside tx, created at now (the worker's lag
// is measured from it). A duplicate (order, kind) fails the insert: the
// change is logged once.
func insertLog(ctx context.Context, tx *sql.Tx, now time.Time, rows ...logRow) error {
	var q strings.Builder
	q.WriteString("INSERT INTO stock_log (order_id, kind, sku, qty, created_at) VALUES ")
	args := make([]any, 0, 5*len(rows))
	for i, r := range rows {
		if i > 0 {
			q.WriteString(",")
		}
		q.WriteString("(?,?,?,?,?)")
		args = append(args, r.order, r.kind, r.sku, r.qty, now)
	}
	if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
		return fmt.Errorf("stock log: %w", err)
	}
	return nil
}
