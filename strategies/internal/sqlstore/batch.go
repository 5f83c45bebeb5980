package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
)

// InsertOrders inserts one order row per reservation, all in state st, in
// one multi-row INSERT.
func InsertOrders(ctx context.Context, q Execer, rs []inventory.Reservation, st inventory.OrderState) error {
	os := make([]Order, len(rs))
	for i, r := range rs {
		os[i] = Order{ID: r.OrderID, SKU: r.SKU, Qty: r.Qty, State: st, Buyer: r.Buyer}
		if !r.Deadline.IsZero() {
			os[i].ExpiresAt = sql.NullTime{Time: inventory.StoredDeadline(r.Deadline), Valid: true}
		}
	}
	return InsertOrderRows(ctx, q, os)
}

// InsertOrderRows inserts the order rows, each in its own state, in one
// multi-row INSERT (created and updated now).
func InsertOrderRows(ctx context.Context, q Execer, os []Order) error {
	if len(os) == 0 {
		return nil
	}
	now := clock.Now().UTC()
	var b strings.Builder
	b.WriteString("INSERT INTO orders (order_id, sku, qty, state, created_at, expires_at, updated_at, buyer) VALUES ")
	args := make([]any, 0, 8*len(os))
	for i, o := range os {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?,?,?)")
		var exp any
		if o.ExpiresAt.Valid {
			exp = o.ExpiresAt.Time
		}
		args = append(args, o.ID, o.SKU, o.Qty, string(o.State), now, exp, now, BuyerArg(o.Buyer))
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

// ConfirmOrders writes rs, orders of one SKU, as confirmed and moves their
// units from available to sold, both in tx; ok is false (and nothing is
// moved) when MySQL's available stock is short of their sum — the batched
// confirm of a strategy that reserved elsewhere (Redis) and decides in
// MySQL.
func ConfirmOrders(ctx context.Context, tx *sql.Tx, sku string, rs []inventory.Reservation) (ok bool, err error) {
	if err := InsertOrders(ctx, tx, rs, inventory.StateConfirmed); err != nil {
		return false, err
	}
	var n int64
	for _, r := range rs {
		n += r.Qty
	}
	out, err := tx.ExecContext(ctx,
		"UPDATE inventory SET available=available-?, sold=sold+? WHERE sku=? AND available>=?", n, n, sku, n)
	if err != nil {
		return false, fmt.Errorf("confirm batch: %w", err)
	}
	k, _ := out.RowsAffected()
	return k > 0, nil
}

// ConfirmFromLog answers a confirm of an order Redis holds no record of
// (unknown, the caller's ErrUnknownOrder) from MySQL's orders table, the
// TCC log, for the Redis-first strategies that write an order's row at
// its decision: a Redis that lost its data, or a record past its
// retention, leaves an order decided before in MySQL alone, and a client
// that lost the first confirm's reply asks again. A confirmed order is a
// repeat (nil), another decision is final (ErrAlreadyFinal); an order
// MySQL has no row of, or holds reserved, is unknown. One read, on this
// rare path only.
func ConfirmFromLog(ctx context.Context, q Rows, ref inventory.OrderRef, unknown error) error {
	states, err := OrderStates(ctx, q, []string{ref.OrderID})
	if err != nil {
		return fmt.Errorf("confirm %s: read order in mysql: %w", ref.OrderID, err)
	}
	switch st := states[ref.OrderID]; st {
	case "", inventory.StateReserved:
		// No decision: a row held reserved (lua-tcc's degradation switch
		// holds orders in MySQL) is the switch's to decide, not this
		// answer's.
		return unknown
	case inventory.StateConfirmed:
		return nil
	default:
		return fmt.Errorf("confirm %s: order is %s: %w", ref.OrderID, st, inventory.ErrAlreadyFinal)
	}
}

// ErrNoDecision: MySQL holds no order row (a Redis-first strategy's order
// whose reservation, if any, lives in Redis only).
var ErrNoDecision = errors.New("no decision in mysql")

// RefundSold is a Redis-first strategy's refund decision in MySQL, the TCC
// log (lua-tcc, lua-split): under the order row's lock a confirmed order
// becomes refunded and the inventory row moves its units from sold to
// available, in one transaction — the "already released" check, so a
// refund racing another refund or a cancel releases once. fresh is true
// when this call made the transition; a repeat (already refunded) is nil
// and not fresh. reserved → ErrNotConfirmed; another decision →
// ErrAlreadyFinal; no order row → ErrNoDecision (the caller reads Redis).
func RefundSold(ctx context.Context, db *sql.DB, ref inventory.OrderRef) (fresh bool, err error) {
	err = InTx(ctx, db, func(tx *sql.Tx) error {
		fresh = false
		ord, found, err := LockOrder(ctx, tx, ref.OrderID)
		switch {
		case err != nil:
			return err
		case !found:
			return ErrNoDecision
		}
		if repeat, err := refundable(ref, ord.State); repeat || err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, "UPDATE inventory SET sold=sold-?, available=available+? WHERE sku=? AND sold>=?",
			ord.Qty, ord.Qty, ord.SKU, ord.Qty)
		if err != nil {
			return fmt.Errorf("refund: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("refund %s: inventory %s: sold < %d", ref.OrderID, ord.SKU, ord.Qty)
		}
		fresh = true
		return SetState(ctx, tx, ord.ID, inventory.StateRefunded)
	})
	return fresh, err
}

// ErrNoMySQLStock: Redis promised a unit MySQL does not have (drift); the
// caller refuses the sale rather than oversell.
var ErrNoMySQLStock = errors.New("mysql has no stock for a redis reservation")

// WriteDecision writes decision want as r's order row, a Redis-first
// strategy's TCC log (lua-tcc, lua-split), in one transaction with, for a
// confirm, the move of r's units from available to sold (ErrNoMySQLStock
// when MySQL has not got them). An order that has a row already fails
// with a duplicate key (IsDuplicate): the first decision stands.
func WriteDecision(ctx context.Context, db *sql.DB, r inventory.Reservation, want inventory.OrderState) error {
	return InTx(ctx, db, func(tx *sql.Tx) error {
		if err := InsertOrder(ctx, tx, r, want); err != nil {
			return err
		}
		if want != inventory.StateConfirmed {
			return nil
		}
		out, err := tx.ExecContext(ctx,
			"UPDATE inventory SET available=available-?, sold=sold+? WHERE sku=? AND available>=?", r.Qty, r.Qty, r.SKU, r.Qty)
		if err != nil {
			return fmt.Errorf("confirm: %w", err)
		}
		if n, _ := out.RowsAffected(); n == 0 {
			return ErrNoMySQLStock
		}
		return nil
	})
}

// refundable says whether an order in state st may be refunded now: a
// confirmed one may; an already refunded one is a repeat (nil, nothing to
// do); a reserved one is ErrNotConfirmed; any other is ErrAlreadyFinal.
func refundable(ref inventory.OrderRef, st inventory.OrderState) (repeat bool, err error) {
	switch st {
	case inventory.StateConfirmed:
		return false, nil
	case inventory.StateRefunded:
		return true, nil
	case inventory.StateReserved:
		return false, fmt.Errorf("refund %s: %w", ref.OrderID, inventory.ErrNotConfirmed)
	}
	return false, fmt.Errorf("refund %s: order is %s: %w", ref.OrderID, st, inventory.ErrAlreadyFinal)
}
