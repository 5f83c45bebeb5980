package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
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
	b.WriteString("INSERT INTO orders (order_id, sku, qty, state, created_at, expires_at, updated_at, buyer) VALUES ")
	args := make([]any, 0, 8*len(rs))
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?,?)")
		var exp any
		if !r.Deadline.IsZero() {
			exp = inventory.StoredDeadline(r.Deadline)
		}
		args = append(args, r.OrderID, r.SKU, r.Qty, string(st), now, exp, now, BuyerArg(r.Buyer))
	}
	_, err := q.ExecContext(ctx, b.String(), args...)
	return err
}

// Placeholders returns "?,?,…" with n marks, for an IN list.
func Placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// LockOrders reads the order rows ids FOR UPDATE (the batched form of
// LockOrder); ids missing from the result have no row.
func LockOrders(ctx context.Context, tx *sql.Tx, ids []any) (map[string]Order, error) {
	rows, err := tx.QueryContext(ctx,
		"SELECT order_id, sku, qty, state, expires_at, buyer FROM orders WHERE order_id IN ("+Placeholders(len(ids))+") FOR UPDATE", ids...)
	if err != nil {
		return nil, fmt.Errorf("lock orders: %w", err)
	}
	defer rows.Close()
	out := make(map[string]Order, len(ids))
	for rows.Next() {
		var o Order
		var buyer sql.NullString
		if err := rows.Scan(&o.ID, &o.SKU, &o.Qty, &o.State, &o.ExpiresAt, &buyer); err != nil {
			return nil, fmt.Errorf("lock orders: %w", err)
		}
		o.Buyer = buyer.String
		out[o.ID] = o
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock orders: %w", err)
	}
	return out, nil
}
