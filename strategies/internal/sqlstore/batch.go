package sqlstore

import (
	"context"
	"strings"
	"time"

	"github.com/stockbench/stockbench/inventory"
)

// InsertOrders writes the order rows rs, all in state st, with one
// multi-row INSERT (the batched form of InsertOrder). A duplicate order id
// fails the whole statement with an error for which IsDuplicate is true.
func InsertOrders(ctx context.Context, q Execer, rs []inventory.Reservation, st inventory.OrderState) error {
	if len(rs) == 0 {
		return nil
	}
	now := time.Now().UTC()
	var b strings.Builder
	b.WriteString("INSERT INTO orders (order_id, sku, qty, state, created_at, expires_at, updated_at) VALUES ")
	args := make([]any, 0, 7*len(rs))
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?)")
		var exp any
		if !r.Deadline.IsZero() {
			exp = r.Deadline.UTC()
		}
		args = append(args, r.OrderID, r.SKU, r.Qty, string(st), now, exp, now)
	}
	_, err := q.ExecContext(ctx, b.String(), args...)
	return err
}

// Placeholders returns "?,?,…" with n marks, for an IN list.
func Placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}
