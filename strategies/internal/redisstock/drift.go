package redisstock

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// CorrectSold repairs sku's Redis sold count (and available with it) from
// MySQL's committed sales, for a strategy whose MySQL inventory row counts
// every confirmed unit in sold, in the transaction that confirms the order
// (lua-tcc). It returns the units moved from available to sold (negative:
// back).
//
// The drift it repairs comes from a Redis that lost writes: a confirm
// whose reservation lived only in the lost window, whose MySQL decision
// committed after a rebuild read MySQL, finds no reservation to move in
// Redis, so Redis offers the unit MySQL sold (available over, sold short)
// for good. MySQL's guard refuses to oversell it, but every sell-out then
// gives an acknowledged reserve that its confirm refuses.
//
// It reads Redis first, at one instant (Snapshot: the counts, the hash's
// generation and the live reservations), then MySQL at one instant after
// it (a read-only repeatable-read transaction): the row's sold and which
// of those live reservations MySQL holds as confirmed (a confirm between
// its MySQL commit and its Redis write). Every unit Redis counts as sold
// was committed in MySQL before Redis counted it, so Redis sold must be
// MySQL's sold less those in-flight confirms; the difference is units no
// Redis write will ever count. Trys, decisions and restocks move units but
// never change that difference, so the correction (sold.lua) needs no
// quiet instant: it applies at once on a hot SKU, unless the hash was built
// again or corrected since the snapshot (its generation changed), and never
// takes available below 0. A correction applied to a server that restarted
// meanwhile is harmless: the fence rebuilds that hash before any Try sells
// from it. Safe for concurrent use and from several instances.
func (s Store) CorrectSold(ctx context.Context, db *sql.DB, sku string) (int64, error) {
	snap, err := s.Snapshot(ctx, sku)
	if err != nil || snap.Missing {
		return 0, err
	}
	ids := make([]string, 0, len(snap.Live))
	for id := range snap.Live {
		ids = append(ids, id)
	}
	var sold int64
	var confirmed []string
	err = readOnly(ctx, db, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, "SELECT sold FROM inventory WHERE sku=?", sku).Scan(&sold); err != nil {
			return err
		}
		var err error
		confirmed, err = confirmedAmong(ctx, tx, ids)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("correct sold %s: %w", sku, err)
	}
	for _, id := range confirmed {
		sold -= snap.Live[id]
	}
	d := sold - snap.Stock.Sold
	if d == 0 {
		return 0, nil
	}
	n, err := soldScript.Run(ctx, s.R, []string{inventory.RedisStockKey(sku)}, snap.Gen, d).Int64()
	if err != nil {
		return 0, fmt.Errorf("correct sold %s: %w", sku, err)
	}
	return n, nil
}

// readOnly runs fn in a read-only repeatable-read transaction: every read
// in it sees one instant of MySQL.
func readOnly(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// confirmedAmong says which of ids tx holds as confirmed.
func confirmedAmong(ctx context.Context, tx *sql.Tx, ids []string) ([]string, error) {
	states, err := sqlstore.OrderStates(ctx, tx, ids)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range ids {
		if states[id] == inventory.StateConfirmed {
			out = append(out, id)
		}
	}
	return out, nil
}
