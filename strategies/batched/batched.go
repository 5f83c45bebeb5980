// Package batched is the conditional UPDATE with request coalescing in the
// application — the hot-row merge production uses on hot SKUs (the idea
// behind AliSQL's inventory hint), with MySQL alone and no Redis.
//
// Concurrent reserves of one SKU join a batch (strategies/internal/
// groupcommit): one transaction runs
//
//	UPDATE inventory SET available=available-N, occupied=occupied+N WHERE sku=? AND available>=N
//
// plus the batch's order rows in one INSERT. When stock runs short the batch
// falls back to smaller grants: it locks the row, grants orders in arrival
// order while the stock lasts and refuses the rest. Confirms and cancels of
// one SKU coalesce the same way: the batch locks its order rows, decides each
// order by the usual state machine (in arrival order, so a confirm and a
// cancel of one order in one batch still have exactly one winner), moves the
// summed units in one UPDATE and writes the new states.
//
// Every caller gets its own outcome after the commit that decided it. A
// batch that fails as a whole (a duplicate order id, a deadlock beyond
// retries, a lost commit) is retried order by order through the unbatched
// paths (the conditional strategy's reserve, the shared order state
// machine), so no order gets another's error; both are idempotent, so a
// batch whose commit answer was lost is found, not repeated.
package batched

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/conditional"
	"github.com/stockbench/stockbench/strategies/internal/groupcommit"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// Strategy implements strategies.Strategy with coalesced conditional updates.
// Safe for concurrent use; Reserve, Confirm and Cancel are idempotent as the
// contract requires.
type Strategy struct {
	sqlstore.Base
	one      *conditional.Strategy
	reserves groupcommit.Group[inventory.Reservation]
	finishes groupcommit.Group[finish]
}

var _ strategies.Strategy = (*Strategy)(nil)

type finish struct {
	ref inventory.OrderRef
	to  inventory.OrderState
}

// New builds the strategy on cfg.DB; cfg.BatchMax and cfg.BatchWait shape
// the batches (BatchMax 1: every order in its own transaction).
func New(cfg strategies.Config) *Strategy {
	cfg = cfg.WithDefaults()
	s := &Strategy{Base: sqlstore.NewBase(cfg, sqlstore.GuardedMove), one: conditional.New(cfg)}
	s.reserves = groupcommit.Group[inventory.Reservation]{Max: cfg.BatchMax, Wait: cfg.BatchWait,
		Batch: s.reserveBatch,
		One:   func(ctx context.Context, _ string, r inventory.Reservation) error { return s.one.Reserve(ctx, r) }}
	s.finishes = groupcommit.Group[finish]{Max: cfg.BatchMax, Wait: cfg.BatchWait,
		Batch: s.finishBatch,
		One:   func(ctx context.Context, _ string, f finish) error { return s.Finish(ctx, f.ref, f.to) }}
	return s
}

// Name is "batched".
func (s *Strategy) Name() string { return "batched" }

// Reserve joins the SKU's reserve batch and returns this order's outcome.
func (s *Strategy) Reserve(ctx context.Context, r inventory.Reservation) error {
	return s.reserves.Do(ctx, r.SKU, r)
}

// Confirm joins the SKU's confirm/cancel batch (see Orders.Finish for the
// outcomes).
func (s *Strategy) Confirm(ctx context.Context, ref inventory.OrderRef) error {
	return s.finishes.Do(ctx, ref.SKU, finish{ref, inventory.StateConfirmed})
}

// Cancel joins the SKU's confirm/cancel batch (see Orders.Finish).
func (s *Strategy) Cancel(ctx context.Context, ref inventory.OrderRef) error {
	return s.finishes.Do(ctx, ref.SKU, finish{ref, inventory.StateCancelled})
}

// errUnbatchable sends a batch back to be run order by order: it holds a
// case the batched path does not decide itself.
var errUnbatchable = errors.New("batch needs the per-order path")

// reserveBatch reserves rs (all of one SKU) in one transaction.
func (s *Strategy) reserveBatch(ctx context.Context, sku string, rs []inventory.Reservation) ([]error, error) {
	seen := make(map[string]bool, len(rs))
	for _, r := range rs {
		if seen[r.OrderID] {
			return nil, errUnbatchable // a repeat within the batch
		}
		seen[r.OrderID] = true
	}
	out := make([]error, len(rs))
	err := sqlstore.InTx(ctx, s.DB, func(tx *sql.Tx) error {
		clear(out)
		// Buyers' holds first (the buyer rows before the inventory row,
		// as in every transaction that takes both): an order past its
		// buyer's limit leaves the batch with ErrLimitExceeded.
		cand, at, err := s.holdBuyers(ctx, tx, rs, out)
		if err != nil {
			return err
		}
		var want int64
		for _, r := range cand {
			want += r.Qty
		}
		granted := cand
		if want > 0 {
			res, err := tx.ExecContext(ctx,
				"UPDATE inventory SET available=available-?, occupied=occupied+? WHERE sku=? AND available>=?", want, want, sku, want)
			if err != nil {
				return fmt.Errorf("reserve batch: %w", err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				sub := make([]error, len(cand))
				if granted, err = s.smallerGrants(ctx, tx, sku, cand, sub); err != nil {
					return err
				}
				for j, e := range sub {
					if e == nil {
						continue
					}
					out[at[j]] = e
					// Refused for stock: its buyer's hold goes back.
					if err := sqlstore.ReleaseBuyer(ctx, tx, sku, cand[j].Buyer, cand[j].Qty); err != nil {
						return err
					}
				}
			}
		}
		return sqlstore.InsertOrders(ctx, tx, granted, inventory.StateReserved)
	})
	if err != nil {
		return nil, fmt.Errorf("reserve batch %s: %w", sku, err)
	}
	return out, nil
}

// holdBuyers counts each order of rs that names a buyer against its
// holds (sqlstore.HoldForBuyer), in arrival order inside tx; an order past
// its buyer's limit gets ErrLimitExceeded in out and is left out. It
// returns the orders left and their indexes in rs. A refused order that
// already has a row (a repeat, or a cancel marker) is not a plain refusal:
// the batch then goes the per-order way.
func (s *Strategy) holdBuyers(ctx context.Context, tx *sql.Tx, rs []inventory.Reservation, out []error) ([]inventory.Reservation, []int, error) {
	cand := make([]inventory.Reservation, 0, len(rs))
	at := make([]int, 0, len(rs))
	var refused []any
	for i, r := range rs {
		err := sqlstore.HoldForBuyer(ctx, tx, r)
		switch {
		case errors.Is(err, inventory.ErrLimitExceeded):
			out[i] = err
			refused = append(refused, r.OrderID)
			continue
		case err != nil:
			return nil, nil, err
		}
		cand = append(cand, r)
		at = append(at, i)
	}
	if len(refused) > 0 {
		var n int
		err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE order_id IN ("+sqlstore.Placeholders(len(refused))+")", refused...).Scan(&n)
		if err != nil {
			return nil, nil, fmt.Errorf("refused orders: %w", err)
		}
		if n > 0 {
			return nil, nil, errUnbatchable
		}
	}
	return cand, at, nil
}

// smallerGrants is the fallback when the batch wants more than is
// available: under the row lock it grants orders in arrival order while the
// stock lasts, moves those units, and marks the others out of stock in out.
// A refused order that already has a row (a repeat, or a cancel marker) is
// not a plain refusal: the batch then goes the per-order way.
func (s *Strategy) smallerGrants(ctx context.Context, tx *sql.Tx, sku string, rs []inventory.Reservation, out []error) ([]inventory.Reservation, error) {
	var avail int64
	err := tx.QueryRowContext(ctx, "SELECT available FROM inventory WHERE sku=? FOR UPDATE", sku).Scan(&avail)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("lock stock: %w", err)
	}
	var granted []inventory.Reservation
	var refused []any
	var sum int64
	for i, r := range rs {
		if r.Qty <= avail-sum {
			sum += r.Qty
			granted = append(granted, r)
			continue
		}
		out[i] = inventory.ErrOutOfStock
		refused = append(refused, r.OrderID)
	}
	if len(refused) > 0 {
		var n int
		err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE order_id IN ("+sqlstore.Placeholders(len(refused))+")", refused...).Scan(&n)
		if err != nil {
			return nil, fmt.Errorf("refused orders: %w", err)
		}
		if n > 0 {
			return nil, errUnbatchable
		}
	}
	if sum > 0 {
		if _, err := tx.ExecContext(ctx,
			"UPDATE inventory SET available=available-?, occupied=occupied+? WHERE sku=?", sum, sum, sku); err != nil {
			return nil, fmt.Errorf("reserve batch: %w", err)
		}
	}
	return granted, nil
}

// finishBatch confirms or cancels fs (all under one SKU) in one
// transaction, each by the rules of Orders.Finish, in arrival order.
func (s *Strategy) finishBatch(ctx context.Context, sku string, fs []finish) ([]error, error) {
	ids := make([]any, 0, len(fs))
	seen := make(map[string]bool, len(fs))
	for _, f := range fs {
		if !seen[f.ref.OrderID] {
			seen[f.ref.OrderID] = true
			ids = append(ids, f.ref.OrderID)
		}
	}
	out := make([]error, len(fs))
	err := sqlstore.InTx(ctx, s.DB, func(tx *sql.Tx) error {
		clear(out)
		orders, err := sqlstore.LockOrders(ctx, tx, ids)
		if err != nil {
			return err
		}
		now := clock.Now()
		var sold, released int64
		moved := map[inventory.OrderState][]any{}
		for i, f := range fs {
			id := f.ref.OrderID
			ord, found := orders[id]
			switch {
			case !found && f.to == inventory.StateConfirmed:
				out[i] = fmt.Errorf("confirm %s: %w", id, inventory.ErrUnknownOrder)
				continue
			case !found || ord.SKU != sku:
				return errUnbatchable // a cancel marker to write, or another SKU's row to move
			case ord.State == f.to, ord.State == inventory.StateExpired && f.to == inventory.StateCancelled:
				continue
			case ord.State != inventory.StateReserved:
				out[i] = fmt.Errorf("%s %s: order is %s: %w", verb(f.to), id, ord.State, inventory.ErrAlreadyFinal)
				continue
			}
			to := f.to
			if to == inventory.StateConfirmed && ord.ExpiresAt.Valid && !now.Before(ord.ExpiresAt.Time) {
				to = inventory.StateExpired
				out[i] = fmt.Errorf("confirm %s: reservation expired: %w", id, inventory.ErrAlreadyFinal)
			}
			if to == inventory.StateConfirmed {
				sold += ord.Qty
			} else {
				released += ord.Qty
				// The buyer row before the inventory row, as everywhere.
				if err := sqlstore.ReleaseBuyer(ctx, tx, sku, ord.Buyer, ord.Qty); err != nil {
					return err
				}
			}
			moved[to] = append(moved[to], id)
			ord.State = to
			orders[id] = ord
		}
		if sold+released > 0 {
			res, err := tx.ExecContext(ctx,
				"UPDATE inventory SET occupied=occupied-?, sold=sold+?, available=available+? WHERE sku=? AND occupied>=?",
				sold+released, sold, released, sku, sold+released)
			if err != nil {
				return fmt.Errorf("finish batch: %w", err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return fmt.Errorf("inventory %s: occupied < %d", sku, sold+released)
			}
		}
		for st, ids := range moved {
			args := append([]any{string(st), clock.Now().UTC()}, ids...)
			if _, err := tx.ExecContext(ctx,
				"UPDATE orders SET state=?, updated_at=? WHERE order_id IN ("+sqlstore.Placeholders(len(ids))+")", args...); err != nil {
				return fmt.Errorf("finish batch: set states: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("finish batch %s: %w", sku, err)
	}
	return out, nil
}

func verb(to inventory.OrderState) string {
	if to == inventory.StateConfirmed {
		return "confirm"
	}
	return "cancel"
}

// Counters adds the batch sizes of reserves (reserve_batch_size_*) and of
// confirms and cancels (finish_batch_size_*) to the background error count.
func (s *Strategy) Counters() map[string]float64 {
	c := s.Base.Counters()
	for k, v := range s.reserves.Stats().Counters("reserve") {
		c[k] = v
	}
	for k, v := range s.finishes.Stats().Counters("finish") {
		c[k] = v
	}
	return c
}
