package outboxlocal

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies/internal/redisstock"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// reconcileBatch bounds the reserved orders one reconciler pass looks at.
const reconcileBatch = 1000

// catalogBatch is how many SKUs a pass over the catalog (the reconciler's,
// the sweeper's) reads per round trip: one MySQL page of inventory rows
// (redisstock.RowsPage), one Redis pipeline glancing at their hashes
// (redisstock.Store.Glances); only the SKUs the glance shows work for are
// visited one by one, so an idle catalog of a million SKUs costs a few
// thousand round trips a pass, not a million.
const catalogBatch = 500

// catalog calls visit for every page of MySQL's inventory table (the
// system of record, in SKU order) with the glance at each row's Redis
// side, taken after the page was read.
func (s *Strategy) catalog(ctx context.Context, visit func([]redisstock.SKURow, []redisstock.Glance) error) error {
	after := ""
	for {
		rows, err := redisstock.RowsPage(ctx, s.db, after, catalogBatch)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		after = rows[len(rows)-1].SKU
		gl, err := s.rs.Glances(ctx, rows)
		if err != nil {
			return err
		}
		if err := visit(rows, gl); err != nil {
			return err
		}
	}
}

// reconcile rebuilds a Redis that restarted (redisstock.Store.Ready) and
// repairs what a crash between the two halves of an operation left behind:
//   - a restock MySQL committed but Redis never counted is caught up
//     (redisstock.CatchUpRestocks) — on the SKUs whose glance shows a
//     Redis total below MySQL's, a page of the catalog at a time;
//   - an order MySQL holds as reserved whose Redis reservation is already
//     decided — the decision's event was lost (a crash after the Redis
//     script, before the local append) — gets the decision appended again
//     (repairDecisions, over the orders unchanged for longer than an
//     operation and two relay periods).
func (s *Strategy) reconcile(ctx context.Context) error {
	// A Redis that restarted with no Try to notice is rebuilt first.
	if err := s.rs.Ready(ctx); err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	err := s.catalog(ctx, func(rows []redisstock.SKURow, gl []redisstock.Glance) error {
		for i, row := range rows {
			if gl[i].Missing || gl[i].Total >= row.Total {
				continue // no restock to catch up (a missing hash is the fence's)
			}
			if _, err := s.rs.CatchUpRestocks(ctx, row); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	return s.repairDecisions(ctx, false)
}

// repairDecisions appends the decision of every order MySQL holds as
// reserved that Redis has already decided, when no event of that decision
// is on its way from this instance (in its local table or kept for a
// retry): a repair, counted in outbox_local_reconciled. Unforced, it looks
// at up to reconcileBatch orders unchanged for longer than an operation
// and two relay periods (a decision of another instance's on its way is
// then appended twice at worst: harmless, the relay applies it once);
// forced (Settle, a rebuild), at every reserved order, a page at a time,
// whatever its age. The check of the local table and of MySQL runs with
// relayMu held, so no relay pass of this instance moves an event between
// them. Safe for concurrent use.
func (s *Strategy) repairDecisions(ctx context.Context, force bool) error {
	before := clock.Now().Add(-s.cfg.OpTimeout - 2*s.cfg.OutboxPeriod).UTC()
	after := ""
	for {
		var q *sql.Rows
		var err error
		if force {
			q, err = s.db.QueryContext(ctx,
				"SELECT order_id, sku FROM orders WHERE state='reserved' AND order_id > ? ORDER BY order_id LIMIT ?", after, reconcileBatch)
		} else {
			q, err = s.db.QueryContext(ctx,
				"SELECT order_id, sku FROM orders WHERE state='reserved' AND updated_at < ? ORDER BY updated_at LIMIT ?", before, reconcileBatch)
		}
		if err != nil {
			return fmt.Errorf("reconcile: reserved orders: %w", err)
		}
		var refs []inventory.OrderRef
		for q.Next() {
			var r inventory.OrderRef
			if err := q.Scan(&r.OrderID, &r.SKU); err != nil {
				q.Close()
				return fmt.Errorf("reconcile: reserved orders: %w", err)
			}
			refs = append(refs, r)
		}
		q.Close()
		if err := q.Err(); err != nil {
			return fmt.Errorf("reconcile: reserved orders: %w", err)
		}
		if err := s.repairPage(ctx, refs); err != nil {
			return err
		}
		if !force || len(refs) < reconcileBatch {
			return nil
		}
		after = refs[len(refs)-1].OrderID
	}
}

// repairPage is repairDecisions for one page of MySQL's reserved orders.
func (s *Strategy) repairPage(ctx context.Context, refs []inventory.OrderRef) error {
	if len(refs) == 0 {
		return nil
	}
	recs, found, err := s.rs.GetAll(ctx, refs)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	var cand []event
	var ids []string
	for i, ref := range refs {
		res := recs[i]
		if !found[i] || !res.State.Final() {
			continue // no record (Redis lost it): nothing to learn from Redis
		}
		cand = append(cand, event{orderID: ref.OrderID, sku: ref.SKU, qty: res.Qty, kind: string(res.State), deadline: deadlineMS(res.Deadline), buyer: res.Buyer})
		ids = append(ids, ref.OrderID)
	}
	if len(cand) == 0 {
		return nil
	}
	s.relayMu.Lock()
	defer s.relayMu.Unlock()
	pending, err := s.pendingDecisions(ctx, ids)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	for id := range s.unsentDecisions() {
		pending[id] = true
	}
	states, err := sqlstore.OrderStates(ctx, s.db, ids)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	var repairs []event
	for _, e := range cand {
		if pending[e.orderID] || states[e.orderID] != inventory.StateReserved {
			continue // on its way, or relayed since the read
		}
		repairs = append(repairs, e)
	}
	if len(repairs) == 0 {
		return nil
	}
	actx, cancel := context.WithTimeout(ctx, s.cfg.OpTimeout)
	defer cancel()
	if err := s.insertEvents(actx, repairs); err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	s.reconciled.Add(int64(len(repairs)))
	return nil
}

// pendingDecisions is the set of ids with a decision event in the local
// table.
func (s *Strategy) pendingDecisions(ctx context.Context, ids []string) (map[string]bool, error) {
	out := map[string]bool{}
	for start := 0; start < len(ids); start += 500 {
		part := ids[start:min(start+500, len(ids))]
		args := make([]any, 0, len(part)+1)
		args = append(args, kindReserve)
		for _, id := range part {
			args = append(args, id)
		}
		rows, err := s.local.QueryContext(ctx, "SELECT DISTINCT order_id FROM events WHERE kind <> ? AND order_id IN ("+sqlstore.Placeholders(len(part))+")", args...)
		if err != nil {
			return nil, fmt.Errorf("pending decisions: %w", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("pending decisions: %w", err)
			}
			out[id] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("pending decisions: %w", err)
		}
	}
	return out, nil
}
