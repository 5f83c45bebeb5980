package outboxlocal

import (
	"context"
	"fmt"
	"time"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies/internal/redisstock"
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
//     script, before the local append) — gets the decision appended again.
//     Only orders unchanged for longer than an operation and two relay
//     periods are looked at, so a decision whose event is merely on its way
//     (in this or another process's local table) is not appended twice
//     (it would be harmless: the relay is idempotent). Their reservations
//     are read in one pipeline.
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
	before := time.Now().Add(-s.cfg.OpTimeout - 2*s.cfg.OutboxPeriod).UTC()
	q, err := s.db.QueryContext(ctx,
		"SELECT order_id, sku FROM orders WHERE state='reserved' AND updated_at < ? ORDER BY updated_at LIMIT ?", before, reconcileBatch)
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
	recs, found, err := s.rs.GetAll(ctx, refs)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	for i, ref := range refs {
		res := recs[i]
		if !found[i] || !res.State.Final() {
			continue // no record (Redis lost it): nothing to learn from Redis
		}
		e := event{orderID: ref.OrderID, sku: ref.SKU, qty: res.Qty, kind: string(res.State), deadline: deadlineMS(res.Deadline), buyer: res.Buyer}
		if err := s.appendEvent(ctx, e); err != nil {
			return fmt.Errorf("reconcile: %w", err)
		}
		s.reconciled.Add(1)
	}
	return nil
}
