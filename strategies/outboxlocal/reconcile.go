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

// reconcile rebuilds a Redis that restarted (redisstock.Store.Ready) and
// repairs what a crash between the two halves of an operation left behind:
//   - a restock MySQL committed but Redis never counted is caught up
//     (redisstock.CatchUpRestocks);
//   - an order MySQL holds as reserved whose Redis reservation is already
//     decided — the decision's event was lost (a crash after the Redis
//     script, before the local append) — gets the decision appended again.
//     Only orders unchanged for longer than an operation and two relay
//     periods are looked at, so a decision whose event is merely on its way
//     (in this or another process's local table) is not appended twice
//     (it would be harmless: the relay is idempotent).
func (s *Strategy) reconcile(ctx context.Context) error {
	// A Redis that restarted with no Try to notice is rebuilt first.
	if err := s.rs.Ready(ctx); err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	rows, err := redisstock.ListRows(ctx, s.db)
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	for _, row := range rows {
		if _, err := s.rs.CatchUpRestocks(ctx, row); err != nil {
			return fmt.Errorf("reconcile: %w", err)
		}
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
	for _, ref := range refs {
		res, err := s.rs.Get(ctx, ref)
		if err != nil || !res.State.Final() {
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
