// Package buckets is stock bucketing (库存分桶, a sharded counter): a SKU's
// stock is spread over N rows of stock_buckets so that N buyers lock
// different rows instead of queueing on one. A reserve starts at a random
// bucket and moves on to the next one when its bucket cannot cover the
// quantity; restock spreads over every bucket.
//
// The inventory row keeps the SKU's total only (its available, occupied and
// sold are moved into the buckets by Setup and stay 0): updating it in every
// transaction would make it the hot row again and undo the buckets. The
// auditor therefore sums the bucket rows (audit/layout.go), reading the
// shared layout, not asking the strategy.
//
// The known cost is false sold-outs: a buyer refused although the SKU still
// held stock — a bucket it had already passed got units back from a
// concurrent cancel, or (quantities above 1) the stock was split so that no
// single bucket covered it. Every refusal is checked afterwards against the
// sum of the buckets, and the units refused while the SKU held enough are
// counted (false_sold_out_units).
package buckets

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"sync/atomic"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// Strategy implements strategies.Strategy with stock buckets. Safe for
// concurrent use.
type Strategy struct {
	sqlstore.Base
	n int

	falseSoldOut, falseSoldOutUnits, refusals, hops atomic.Int64
}

var _ strategies.Strategy = (*Strategy)(nil)

// New builds the strategy on cfg.DB with cfg.Buckets buckets per SKU.
func New(cfg strategies.Config) *Strategy {
	cfg = cfg.WithDefaults()
	s := &Strategy{n: cfg.Buckets}
	s.Base = sqlstore.NewBase(cfg, s.move)
	s.Base.Orders.TxOpts = readCommitted
	return s
}

// Name is "buckets".
func (s *Strategy) Name() string { return "buckets" }

// Setup gives every SKU its N bucket rows (if it has none) and moves what
// the inventory row holds as available into them, spread evenly, in one
// transaction. Run again on live stores (a service restart) it moves
// nothing twice: the rows hold 0 available once moved.
func (s *Strategy) Setup(ctx context.Context, stock []inventory.Stock) error {
	var seq strings.Builder
	for b := 0; b < s.n; b++ {
		if b > 0 {
			seq.WriteString(" UNION ALL ")
		}
		fmt.Fprintf(&seq, "SELECT %d AS b", b)
	}
	err := sqlstore.InTx(ctx, s.DB, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, "SELECT sku FROM inventory WHERE available<>0 OR occupied<>0 OR sold<>0 FOR UPDATE"); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT IGNORE INTO stock_buckets (sku, bucket) SELECT i.sku, n.b FROM inventory i CROSS JOIN ("+seq.String()+") n"); err != nil {
			return err
		}
		// Bucket b gets available/N, plus one of the remainder's units
		// when b < available mod N; occupied and sold go to bucket 0.
		if _, err := tx.ExecContext(ctx, `UPDATE stock_buckets b JOIN inventory i ON i.sku=b.sku
			SET b.available = b.available + i.available DIV ? + (b.bucket < i.available MOD ?),
			    b.occupied = b.occupied + IF(b.bucket=0, i.occupied, 0),
			    b.sold = b.sold + IF(b.bucket=0, i.sold, 0)
			WHERE i.available<>0 OR i.occupied<>0 OR i.sold<>0`, s.n, s.n); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, "UPDATE inventory SET available=0, occupied=0, sold=0 WHERE available<>0 OR occupied<>0 OR sold<>0")
		return err
	})
	if err != nil {
		return fmt.Errorf("buckets setup: %w", err)
	}
	return nil
}

// readCommitted: a conditional UPDATE on a bucket that does not match
// releases that row at once (and skips a locked row whose last committed
// version does not match, semi-consistent read) instead of holding it to
// the commit as REPEATABLE READ would: a buyer holds one bucket, not every
// bucket it passed.
var readCommitted = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// Reserve inserts the order row and takes the units from one bucket, in
// one transaction: first any bucket that holds enough and that no other
// buyer has locked (FOR UPDATE SKIP LOCKED, nearest after a random start),
// and when every such bucket is locked or dry, each bucket in turn from the
// start with a conditional UPDATE that waits for its lock — so a refusal
// means every bucket was short when this buyer looked at it.
func (s *Strategy) Reserve(ctx context.Context, r inventory.Reservation) error {
	start := rand.IntN(s.n)
	hops := 0
	err := sqlstore.InTxWith(ctx, s.DB, readCommitted, func(tx *sql.Tx) error {
		hops = 0
		if err := sqlstore.InsertOrder(ctx, tx, r, inventory.StateReserved); err != nil {
			return err
		}
		if err := sqlstore.HoldForBuyer(ctx, tx, r); err != nil {
			return err
		}
		b, err := pickBucket(ctx, tx, "available", r.SKU, r.Qty, start)
		switch {
		case err == nil:
			_, err := tx.ExecContext(ctx, "UPDATE stock_buckets SET available=available-?, occupied=occupied+? WHERE sku=? AND bucket=?",
				r.Qty, r.Qty, r.SKU, b)
			return err
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("reserve: %w", err)
		}
		// Every bucket that holds enough is locked, or none holds enough.
		// A plain read of what is committed tells which: at a sell-out,
		// refuse at once instead of queueing on every bucket's lock.
		var sum int64
		if err := tx.QueryRowContext(ctx, "SELECT COALESCE(SUM(available),0) FROM stock_buckets WHERE sku=?", r.SKU).Scan(&sum); err != nil {
			return fmt.Errorf("reserve: sum buckets: %w", err)
		}
		if sum < r.Qty {
			return inventory.ErrOutOfStock
		}
		for i := 0; i < s.n; i++ {
			res, err := tx.ExecContext(ctx,
				"UPDATE stock_buckets SET available=available-?, occupied=occupied+? WHERE sku=? AND bucket=? AND available>=?",
				r.Qty, r.Qty, r.SKU, (start+i)%s.n, r.Qty)
			if err != nil {
				return fmt.Errorf("reserve: bucket: %w", err)
			}
			if n, _ := res.RowsAffected(); n == 1 {
				return nil
			}
			hops++
		}
		return inventory.ErrOutOfStock
	})
	s.hops.Add(int64(hops))
	switch {
	case sqlstore.IsDuplicate(err):
		return sqlstore.ReserveRepeat(ctx, s.DB, r.OrderID)
	case errors.Is(err, inventory.ErrOutOfStock):
		s.noteRefusal(ctx, r)
	}
	return err
}

// pickQueries are pickBucket's two statements (from start, then below it)
// for each column, built once rather than on every reserve and confirm.
var pickQueries = func() map[string][2]string {
	m := map[string][2]string{}
	for _, col := range []string{"available", "occupied", "sold"} {
		q := "SELECT bucket FROM stock_buckets WHERE sku=? AND bucket%s? AND " + col + ">=? ORDER BY bucket LIMIT 1 FOR UPDATE SKIP LOCKED"
		m[col] = [2]string{fmt.Sprintf(q, ">="), fmt.Sprintf(q, "<")}
	}
	return m
}()

// pickBucket locks the first bucket of sku, in primary-key order from
// start and then from bucket 0, whose column col holds at least qty and that
// no other transaction has locked (FOR UPDATE SKIP LOCKED), and returns its
// number; sql.ErrNoRows when every such bucket is locked or none holds qty.
// The scan stops at the first match: an ORDER BY on an expression (the
// wrap-around in one statement) would read, and lock, every matching
// bucket before sorting.
func pickBucket(ctx context.Context, tx *sql.Tx, col, sku string, qty int64, start int) (int, error) {
	q := pickQueries[col]
	var b int
	err := tx.QueryRowContext(ctx, q[0], sku, start, qty).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) && start > 0 {
		err = tx.QueryRowContext(ctx, q[1], sku, start, qty).Scan(&b)
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("pick bucket: %w", err)
	}
	return b, err
}

// noteRefusal counts a refusal, and a false sold-out when the buckets held
// at least the quantity in sum just after it (a plain read: a moment later
// than the refusal, never a lock).
func (s *Strategy) noteRefusal(ctx context.Context, r inventory.Reservation) {
	s.refusals.Add(1)
	var sum int64
	err := s.DB.QueryRowContext(ctx, "SELECT COALESCE(SUM(available),0) FROM stock_buckets WHERE sku=?", r.SKU).Scan(&sum)
	if err == nil && sum >= r.Qty {
		s.falseSoldOut.Add(1)
		s.falseSoldOutUnits.Add(r.Qty)
	}
}

// move is the MoveFunc: the order's units leave occupied (or, for a
// refund, sold) in any bucket holding enough of them — a bucket's count is
// only a share of the SKU's, so any bucket may give them up. First a
// bucket no other transaction holds (SKIP LOCKED, from the one the order id
// hashes to), so that confirms spread over the buckets as reserves do
// instead of queueing on the one the id names; when every such bucket is
// locked, each bucket in turn with a conditional UPDATE that waits for its
// lock. If no single bucket holds the quantity (possible above 1 unit), the
// units are taken from several, under their row locks. The transaction
// runs at READ COMMITTED (New sets the Orders' TxOpts): a bucket passed
// over is released at once, not held to the commit.
func (s *Strategy) move(ctx context.Context, tx *sql.Tx, ord sqlstore.Order, m sqlstore.Movement) error {
	from := "occupied"
	q := "UPDATE stock_buckets SET occupied=occupied-?, sold=sold+? WHERE sku=? AND bucket=? AND occupied>=?"
	switch m {
	case sqlstore.ToAvailable:
		q = "UPDATE stock_buckets SET occupied=occupied-?, available=available+? WHERE sku=? AND bucket=? AND occupied>=?"
	case sqlstore.Refunded:
		from, q = "sold", "UPDATE stock_buckets SET sold=sold-?, available=available+? WHERE sku=? AND bucket=? AND sold>=?"
	}
	start := bucketOf(ord.ID, s.n)
	b, err := pickBucket(ctx, tx, from, ord.SKU, ord.Qty, start)
	switch {
	case err == nil:
		_, err := tx.ExecContext(ctx, q, ord.Qty, ord.Qty, ord.SKU, b, ord.Qty)
		return err
	case !errors.Is(err, sql.ErrNoRows):
		return err
	}
	for i := 0; i < s.n; i++ {
		res, err := tx.ExecContext(ctx, q, ord.Qty, ord.Qty, ord.SKU, (start+i)%s.n, ord.Qty)
		if err != nil {
			return fmt.Errorf("bucket: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return nil
		}
	}
	return s.moveSplit(ctx, tx, ord, from, q)
}

// moveSplit moves the order's units out of column from (occupied or sold)
// over several buckets.
func (s *Strategy) moveSplit(ctx context.Context, tx *sql.Tx, ord sqlstore.Order, from, q string) error {
	rows, err := tx.QueryContext(ctx, "SELECT bucket, "+from+" FROM stock_buckets WHERE sku=? AND "+from+">0 ORDER BY bucket FOR UPDATE", ord.SKU)
	if err != nil {
		return fmt.Errorf("bucket split: %w", err)
	}
	type part struct{ b, n int64 }
	var parts []part
	left := ord.Qty
	for rows.Next() && left > 0 {
		var p part
		if err := rows.Scan(&p.b, &p.n); err != nil {
			rows.Close()
			return fmt.Errorf("bucket split: %w", err)
		}
		p.n = min(p.n, left)
		left -= p.n
		parts = append(parts, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("bucket split: %w", err)
	}
	if left > 0 {
		return fmt.Errorf("buckets %s: %s short of %d units", ord.SKU, from, ord.Qty)
	}
	for _, p := range parts {
		if _, err := tx.ExecContext(ctx, q, p.n, p.n, ord.SKU, p.b, p.n); err != nil {
			return fmt.Errorf("bucket split: %w", err)
		}
	}
	return nil
}

func bucketOf(id string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % uint32(n))
}

// Restock journals r (a repeated id changes nothing) and adds its qty to the SKU's total (the inventory row) and spreads it
// over the buckets, in one transaction.
func (s *Strategy) Restock(ctx context.Context, r inventory.Restock) error {
	sku, qty := r.SKU, r.Qty
	err := sqlstore.InTx(ctx, s.DB, func(tx *sql.Tx) error {
		if applied, err := sqlstore.JournalTotal(ctx, tx, r); err != nil || !applied {
			return err // a repeated restock id changes nothing
		}
		_, err := tx.ExecContext(ctx, "UPDATE stock_buckets SET available = available + ? DIV ? + (bucket < ? MOD ?) WHERE sku=?",
			qty, s.n, qty, s.n, sku)
		return err
	})
	if err != nil {
		return fmt.Errorf("restock %s: %w", sku, err)
	}
	return nil
}

// Counters adds the refusals, the false sold-outs among them (count and
// units) and the bucket hops (buckets a reserve found short after the
// SKIP LOCKED pick found none) to the base's counters.
func (s *Strategy) Counters() map[string]float64 {
	m := s.Base.Counters()
	m["buckets"] = float64(s.n)
	m["bucket_refusals"] = float64(s.refusals.Load())
	m["false_sold_out"] = float64(s.falseSoldOut.Load())
	m["false_sold_out_units"] = float64(s.falseSoldOutUnits.Load())
	m["bucket_hops"] = float64(s.hops.Load())
	return m
}
