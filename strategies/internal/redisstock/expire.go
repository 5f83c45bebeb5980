package redisstock

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// DecideExpired writes an expired decision for each of due (res[i] its
// Redis record) that has none, in one transaction on db, and returns the
// decision that stands for each (one already written is left as it is).
// Each row is the one every other decision writes (sqlstore.InsertOrder):
// the buyer column, and the deadline as stored (inventory.StoredDeadline).
// Once begun it runs to its end on a context of its own, bounded by
// timeout: a stop between the commit and the read-back would leave
// decisions in MySQL that Redis never hears of until the next pass.
// Shared by lua-tcc's and ensure's expiry passes.
func DecideExpired(ctx context.Context, db *sql.DB, timeout time.Duration, due []inventory.OrderRef, res []Reservation) (map[string]inventory.OrderState, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	now := clock.Now().UTC()
	var q strings.Builder
	q.WriteString("INSERT INTO orders (order_id, sku, qty, state, created_at, expires_at, updated_at, buyer) VALUES ")
	args := make([]any, 0, 8*len(due))
	ids := make([]string, len(due))
	for i, ref := range due {
		if i > 0 {
			q.WriteString(",")
		}
		q.WriteString("(?,?,?,?,?,?,?,?)")
		var exp any
		if !res[i].Deadline.IsZero() {
			exp = inventory.StoredDeadline(res[i].Deadline)
		}
		args = append(args, ref.OrderID, ref.SKU, res[i].Qty, string(inventory.StateExpired), now, exp, now, sqlstore.BuyerArg(res[i].Buyer))
		ids[i] = ref.OrderID
	}
	// A row that exists is a decision already taken: leave it as it is.
	q.WriteString(" ON DUPLICATE KEY UPDATE order_id=order_id")
	err := sqlstore.InTx(ctx, db, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, q.String(), args...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("expire %d reservations: %w", len(due), err)
	}
	// Decisions never change once written, so reading them after the
	// commit gives the ones that stand.
	out, err := sqlstore.OrderStates(ctx, db, ids)
	if err != nil {
		return nil, fmt.Errorf("expire: %w", err)
	}
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			return nil, fmt.Errorf("expire %s: no decision after the insert", id)
		}
	}
	return out, nil
}
