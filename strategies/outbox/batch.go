package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	wallclock "github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/internal/groupcommit"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// Group commit of the outbox's MySQL writes. Every flow makes two local
// transactions — the reserve (order row + reserve event) and the decision
// (order state + confirm or release event) — and with durable commits each
// is a log flush of its own. Concurrent writes of one SKU share one
// transaction instead (cfg.BatchMax, cfg.BatchWait; BatchMax 1 is off: each
// write is its own transaction, as the per-order paths below).
//
// Nothing about what is written changes: a batch writes exactly the rows the
// per-order transactions would have, each order's row and event together,
// so the relay, the reconciler's projection and the order-row barrier see
// the same states. Each caller gets its own outcome after the commit that
// holds its write. A batch that fails as a whole is run again order by order
// through the per-order paths, which find what a batch with a lost commit
// answer did (the reserve through the barrier in undo, the decision through
// the order row's state). A decision the batch cannot take the usual way —
// an unknown order, one already final, a confirm past its deadline, a
// second decision of one order — is left out of the batch and runs
// through Orders.Finish after the commit, so the state machine has one
// implementation.

// decision is one confirm or cancel waiting for its batch.
type decision struct {
	ref inventory.OrderRef
	to  inventory.OrderState
}

func newGroups(s *Strategy, cfg strategies.Config) {
	s.reserves = &groupcommit.Group[inventory.Reservation]{Max: cfg.BatchMax, Wait: cfg.BatchWait,
		Batch: s.reserveBatch,
		One:   func(ctx context.Context, _ string, r inventory.Reservation) error { return s.reserveOne(ctx, r) }}
	s.decisions = &groupcommit.Group[*decision]{Max: cfg.BatchMax, Wait: cfg.BatchWait,
		Batch: s.decisionBatch,
		One: func(ctx context.Context, _ string, d *decision) error {
			return s.orders.Finish(ctx, d.ref, d.to)
		},
		After: s.finishBatch}
}

// finishBatch brings Redis in line with the orders a committed decision
// batch moved, one round trip per target state, once the SKU's next batch
// may run, as applyToRedis does per order; a failure is left to the
// reconciler. Decisions the batch left alone are applied by Orders.Finish.
func (s *Strategy) finishBatch(ctx context.Context, _ string, ds []*decision, results []error) {
	refs := map[inventory.OrderState][]inventory.OrderRef{}
	for i, d := range ds {
		if results[i] == nil {
			refs[d.to] = append(refs[d.to], d.ref)
		}
	}
	for to, rs := range refs {
		s.deferred.Add(s.rs.FinishAfterCommit(ctx, s.cfg.OpTimeout, rs, to))
	}
}

// reserveOne writes one reserve's order row and event in one transaction.
func (s *Strategy) reserveOne(ctx context.Context, r inventory.Reservation) error {
	return sqlstore.InTx(ctx, s.db, func(tx *sql.Tx) error {
		if err := sqlstore.InsertOrder(ctx, tx, r, inventory.StateReserved); err != nil {
			return err
		}
		return insertEvent(ctx, tx, r.OrderID, r.SKU, r.Qty, KindReserve)
	})
}

// reserveBatch writes the order rows of rs with one INSERT and their reserve
// events with another, in one transaction. An order id twice in the batch
// (a repeated reserve) is left to its own transaction; an order row that
// already exists (a barrier got there first) fails the batch, and every
// reserve is then written on its own.
func (s *Strategy) reserveBatch(ctx context.Context, sku string, rs []inventory.Reservation) ([]error, error) {
	out := make([]error, len(rs))
	in := make([]inventory.Reservation, 0, len(rs))
	evs := make([]eventRow, 0, len(rs))
	seen := make(map[string]bool, len(rs))
	for i, r := range rs {
		if seen[r.OrderID] {
			out[i] = groupcommit.ErrAlone
			continue
		}
		seen[r.OrderID] = true
		in = append(in, r)
		evs = append(evs, eventRow{orderID: r.OrderID, sku: r.SKU, qty: r.Qty, kind: KindReserve})
	}
	err := sqlstore.InTx(ctx, s.db, func(tx *sql.Tx) error {
		if err := sqlstore.InsertOrders(ctx, tx, in, inventory.StateReserved); err != nil {
			return err
		}
		return insertEvents(ctx, tx, evs)
	})
	if err != nil {
		return nil, fmt.Errorf("reserve batch %s: %w", sku, err)
	}
	return out, nil
}

// decisionBatch confirms or cancels ds (all of one SKU) in one transaction:
// it locks their order rows, and for each order still reserved (and, for a
// confirm, within its deadline) writes its event and its new state. Every
// other decision is left Alone, for Orders.Finish once the batch has
// committed; only the first decision of an order is taken, so a confirm and
// a cancel of one order in one batch still have exactly one winner.
func (s *Strategy) decisionBatch(ctx context.Context, sku string, ds []*decision) ([]error, error) {
	ids := make([]any, 0, len(ds))
	seen := make(map[string]bool, len(ds))
	for _, d := range ds {
		if !seen[d.ref.OrderID] {
			seen[d.ref.OrderID] = true
			ids = append(ids, d.ref.OrderID)
		}
	}
	out := make([]error, len(ds))
	// READ COMMITTED: the locking read of an order id with no row (a cancel
	// of an unknown order) takes no gap lock that would hold up reserves.
	// The rows are read under their locks, so they are the latest versions.
	err := sqlstore.InTxWith(ctx, s.db, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, func(tx *sql.Tx) error {
		orders, err := sqlstore.LockOrders(ctx, tx, ids)
		if err != nil {
			return err
		}
		now := wallclock.Now()
		evs := make([]eventRow, 0, len(ds))
		moved := map[inventory.OrderState][]any{}
		taken := make(map[string]bool, len(ds))
		for i, d := range ds {
			out[i] = groupcommit.ErrAlone
			ord, found := orders[d.ref.OrderID]
			switch {
			case !found, taken[ord.ID], ord.SKU != d.ref.SKU, ord.State != inventory.StateReserved:
				continue
			case d.to == inventory.StateConfirmed && ord.ExpiresAt.Valid && !now.Before(ord.ExpiresAt.Time):
				continue // Finish expires it and says so
			}
			taken[ord.ID] = true
			out[i] = nil
			kind := KindConfirm
			if d.to != inventory.StateConfirmed {
				kind = KindRelease
			}
			evs = append(evs, eventRow{orderID: ord.ID, sku: ord.SKU, qty: ord.Qty, kind: kind})
			moved[d.to] = append(moved[d.to], ord.ID)
		}
		if len(evs) == 0 {
			return nil
		}
		if err := insertEvents(ctx, tx, evs); err != nil {
			return err
		}
		for st, ids := range moved {
			args := append([]any{string(st), wallclock.Now().UTC()}, ids...)
			if _, err := tx.ExecContext(ctx,
				"UPDATE orders SET state=?, updated_at=? WHERE order_id IN ("+sqlstore.Placeholders(len(ids))+")", args...); err != nil {
				return fmt.Errorf("decision batch: set states: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("decision batch %s: %w", sku, err)
	}
	return out, nil
}

// finish confirms or cancels ref through the SKU's decision batch, whose
// finishBatch brings Redis in line for the orders it moved (see
// Orders.Finish for the outcomes; the per-order path applies Redis itself).
func (s *Strategy) finish(ctx context.Context, ref inventory.OrderRef, to inventory.OrderState) error {
	return s.decisions.Do(ctx, ref.SKU, &decision{ref: ref, to: to})
}

// eventRow is an outbox event to insert.
type eventRow struct {
	orderID, sku string
	qty          int64
	kind         string
}

// insertEvents writes evs with one multi-row INSERT (the batched form of
// insertEvent).
func insertEvents(ctx context.Context, tx *sql.Tx, evs []eventRow) error {
	if len(evs) == 0 {
		return nil
	}
	now := wallclock.Now().UTC()
	var b strings.Builder
	b.WriteString("INSERT INTO outbox (order_id, sku, qty, kind, created_at) VALUES ")
	args := make([]any, 0, 5*len(evs))
	for i, e := range evs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?)")
		args = append(args, e.orderID, e.sku, e.qty, e.kind, now)
	}
	if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("outbox events: %w", err)
	}
	return nil
}

// withBatchCounters adds the batch sizes of reserves (reserve_batch_size_*)
// and of confirms and cancels (finish_batch_size_*).
func (s *Strategy) withBatchCounters(m map[string]float64) map[string]float64 {
	for k, v := range s.reserves.Stats().Counters("reserve") {
		m[k] = v
	}
	for k, v := range s.decisions.Stats().Counters("finish") {
		m[k] = v
	}
	return m
}
