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
// Every unit Redis counts as sold was committed in MySQL before Redis
// counted it, so Redis sold, read at one instant, must be MySQL's sold,
// read at one instant after it, less the confirms MySQL holds whose Redis
// write had not happened at the first instant; the difference is units no
// Redis write will ever count. It reads Redis first (Snapshot: the counts,
// the hash's generation and the live reservations), then MySQL in a
// read-only repeatable-read transaction (the row's sold and which of those
// live reservations MySQL holds as confirmed). That alone misses one kind
// of in-flight confirm: an order reserved after the snapshot whose confirm
// committed in MySQL before MySQL was read — a whole flow inside the gap,
// which a hot SKU under load runs — and would count it as drift, moving a
// unit that the order's own Redis write then moves again (Redis sold one
// over, available one short, until the next pass). So a difference is
// checked before it is applied (see exactDrift): Redis is read again
// inside MySQL's instant, and the reservations that appeared meanwhile
// are asked of MySQL too. The correction (sold.lua) then applies on a hot
// SKU, unless the hash was built again or corrected since the snapshot
// (its generation changed), and never takes available below 0. A
// correction applied to a server that restarted meanwhile is harmless:
// the fence rebuilds that hash before any Try sells from it. Safe for
// concurrent use and from several instances.
//
// unchecked says a difference was found but could not be checked in
// correctAttempts tries (an order reserved after the snapshot was also
// counted by Redis before the second read, every time): nothing was
// moved, and the next pass tries again.
func (s Store) CorrectSold(ctx context.Context, db *sql.DB, sku string) (moved int64, unchecked bool, err error) {
	return s.CorrectSoldQuiet(ctx, db, sku, nil)
}

// Quiet tells CorrectSold whether a SKU is free of a second kind of
// in-flight change it cannot see: units MySQL took back out of sold (a
// refund) that Redis has not moved yet. It is asked before the first Redis
// read, on the pool, and again inside MySQL's instant, on its transaction;
// mark names the state of those changes (a count of them, say), and ok
// says none is in flight. A correction is computed only when both answers
// are ok with the same mark: every such change committed before the first
// read was already in Redis then, and none committed between.
type Quiet func(ctx context.Context, q sqlstore.Rows, sku string) (mark int64, ok bool, err error)

// CorrectSoldQuiet is CorrectSold for a strategy whose MySQL sold also
// goes down (ensure's refunds, decided in MySQL first and moved in Redis
// after): quiet, when not nil, must say the SKU is quiet (see Quiet), or
// nothing is computed or moved (as when there is no difference): a later
// pass, on a quiet SKU, finds the difference again.
func (s Store) CorrectSoldQuiet(ctx context.Context, db *sql.DB, sku string, quiet Quiet) (moved int64, unchecked bool, err error) {
	for range correctAttempts {
		d, checked, err := s.exactDrift(ctx, db, sku, quiet)
		switch {
		case err != nil || d.units == 0:
			return 0, false, err
		case !checked:
			continue
		}
		n, err := soldScript.Run(ctx, s.R, []string{inventory.RedisStockKey(sku)}, d.gen, d.units).Int64()
		if err != nil {
			return 0, false, fmt.Errorf("correct sold %s: %w", sku, err)
		}
		return n, false, nil
	}
	return 0, true, nil
}

// correctAttempts bounds how often one CorrectSold computes a difference
// it could not check.
const correctAttempts = 3

// betweenReads runs between CorrectSold's first Redis read and its MySQL
// read; tests put a whole order flow there.
var betweenReads = func() {}

// soldDrift is a difference exactDrift computed: the units Redis's sold
// is short of MySQL's, and the hash generation it was read under.
type soldDrift struct {
	units int64
	gen   string
}

// exactDrift computes sku's sold difference (see CorrectSold); zero when
// the hash is missing. A non-zero one is checked unless Redis counted,
// between its two reads, a confirm of an order it had not seen live at the
// first: that order may be one reserved after it and committed in MySQL
// before MySQL was read, which nothing then tells from drift.
func (s Store) exactDrift(ctx context.Context, db *sql.DB, sku string, quiet Quiet) (d soldDrift, checked bool, err error) {
	var mark int64
	if quiet != nil {
		m, ok, err := quiet(ctx, db, sku)
		if err != nil || !ok {
			return d, false, err
		}
		mark = m
	}
	snap, err := s.Snapshot(ctx, sku)
	if err != nil || snap.Missing {
		return d, false, err
	}
	betweenReads()
	var sold int64
	err = readOnly(ctx, db, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, "SELECT sold FROM inventory WHERE sku=?", sku).Scan(&sold); err != nil {
			return err
		}
		if quiet != nil {
			m, ok, err := quiet(ctx, tx, sku)
			if err != nil {
				return err
			}
			if !ok || m != mark {
				sold = snap.Stock.Sold // not quiet: nothing to compute
				return nil
			}
		}
		inflight, err := confirmedUnits(ctx, tx, snap.Live)
		if err != nil {
			return err
		}
		sold -= inflight
		if sold == snap.Stock.Sold {
			return nil
		}
		// A difference: Redis again, MySQL's instant fixed. An order
		// MySQL holds as confirmed was reserved before that instant, so
		// now it is live, or Redis has counted its confirm; and the
		// confirms Redis counted since the snapshot are all of orders it
		// saw live then exactly when sold grew by theirs alone.
		again, err := s.snapshotSince(ctx, sku, snap.Live)
		if err != nil {
			return err
		}
		if again.Missing || again.Gen != snap.Gen || again.Stock.Sold-snap.Stock.Sold != again.Confirmed {
			return nil
		}
		// A refund decided in MySQL whose Redis write has not landed yet
		// is a difference its own write will remove: correcting it too
		// would release its units twice (refund.go). Checked after the
		// second read: a refund applied since moved the generation.
		if busy, err := s.refundsInFlight(ctx, sku); err != nil || busy {
			return err
		}
		checked = true
		since := map[string]int64{}
		for id, q := range again.Live {
			if _, seen := snap.Live[id]; !seen {
				since[id] = q
			}
		}
		late, err := confirmedUnits(ctx, tx, since)
		if err != nil {
			return err
		}
		sold -= late
		return nil
	})
	if err != nil {
		return d, false, fmt.Errorf("correct sold %s: %w", sku, err)
	}
	return soldDrift{units: sold - snap.Stock.Sold, gen: snap.Gen}, checked, nil
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

// confirmedUnits is the units of the given reservations (order id → qty)
// that tx holds as confirmed.
func confirmedUnits(ctx context.Context, tx *sql.Tx, live map[string]int64) (int64, error) {
	if len(live) == 0 {
		return 0, nil
	}
	ids := make([]string, 0, len(live))
	for id := range live {
		ids = append(ids, id)
	}
	states, err := sqlstore.OrderStates(ctx, tx, ids)
	if err != nil {
		return 0, err
	}
	var n int64
	for id, q := range live {
		if states[id] == inventory.StateConfirmed {
			n += q
		}
	}
	return n, nil
}
