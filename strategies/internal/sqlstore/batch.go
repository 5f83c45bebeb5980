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
	b.WriteString("INSERT INTO orders (order_id, sku, qty, state, created_at, expires_at, updated_at) VALUES ")
	args := make([]any, 0, 7*len(rs))
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?)")
		var exp any
		if !r.Deadline.IsZero() {
			exp = inventory.StoredDeadline(r.Deadline)
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

// LockOrders reads the order rows ids FOR UPDATE (the batched form of
// LockOrder); ids missing from the result have no row.
func LockOrders(ctx context.Context, tx *sql.Tx, ids []any) (map[string]Order, error) {
	rows, err := tx.QueryContext(ctx,
		"SELECT order_id, sku, qty, state, expires_at FROM orders WHERE order_id IN ("+Placeholders(len(ids))+") FOR UPDATE", ids...)
	if err != nil {
		return nil, fmt.Errorf("lock orders: %w", err)
	}
	defer rows.Close()
	out := make(map[string]Order, len(ids))
	for rows.Next() {
		var o Order
		if err := rows.Scan(&o.ID, &o.SKU, &o.Qty, &o.State, &o.ExpiresAt); err != nil {
			return nil, fmt.Errorf("lock orders: %w", err)
		}
		out[o.ID] = o
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock orders: %w", err)
	}
	return out, nil
}

// Rows is a *sql.DB or a *sql.Tx, for queries that return rows.
type Rows interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// statesChunk bounds the IN list of one OrderStates query.
const statesChunk = 500

// OrderStates reads the states of the orders ids, statesChunk at a time;
// ids with no order row are absent from the map.
func OrderStates(ctx context.Context, q Rows, ids []string) (map[string]inventory.OrderState, error) {
	out := make(map[string]inventory.OrderState, len(ids))
	for start := 0; start < len(ids); start += statesChunk {
		part := ids[start:min(start+statesChunk, len(ids))]
		args := make([]any, len(part))
		for i, id := range part {
			args[i] = id
		}
		rows, err := q.QueryContext(ctx, "SELECT order_id, state FROM orders WHERE order_id IN ("+Placeholders(len(part))+")", args...)
		if err != nil {
			return nil, fmt.Errorf("order states: %w", err)
		}
		for rows.Next() {
			var id string
			var st inventory.OrderState
			if err := rows.Scan(&id, &st); err != nil {
				rows.Close()
				return nil, fmt.Errorf("order states: %w", err)
			}
			out[id] = st
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("order states: %w", err)
		}
	}
	return out, nil
}
