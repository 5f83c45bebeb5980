package outboxlocal

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"time"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// relayBatch bounds the events of one MySQL transaction.
const relayBatch = 1000

// readCommitted: the relay's locking read takes the order rows' locks only,
// no gap locks that would stall other relays' inserts.
var readCommitted = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// relay first appends the events failed appends kept (flushUnsent: a
// pass fails while it cannot), then moves the local events into MySQL, a
// batch per transaction (refused with redisstock.ErrLate while this
// instance is a late member of the fence: see catchUp), and
// deletes each batch locally after its commit, until fewer than a batch
// remain. It returns how many events it relayed. One pass at a time per
// instance; passes of several processes may run together (their order
// rows' locks serialise them; two inserting the same new order row make
// one fail with a duplicate key, which the next pass settles).
func (s *Strategy) relay(ctx context.Context) (int, error) {
	s.relayMu.Lock()
	defer s.relayMu.Unlock()
	if err := s.flushUnsent(ctx); err != nil {
		return 0, fmt.Errorf("relay: %w", err)
	}
	total := 0
	for {
		evs, err := s.readEvents(ctx, relayBatch)
		if err != nil {
			return total, err
		}
		if len(evs) == 0 {
			return total, nil
		}
		if total == 0 {
			if n, err := s.backlog(ctx); err == nil {
				noteMax(&s.backlogMax, n)
			}
		}
		err = sqlstore.InTxWith(ctx, s.db, readCommitted, func(tx *sql.Tx) error {
			if err := applyEvents(ctx, tx, evs); err != nil {
				return err
			}
			// Last, before the commit: a member a rebuild round went on
			// without relays nothing as it is (catchUp replays it first).
			return s.rs.Fence.CheckTx(ctx, tx)
		})
		if sqlstore.IsDuplicate(err) {
			s.relayConflicts.Add(1)
		}
		if err != nil {
			return total, fmt.Errorf("relay: %w", err)
		}
		if err := s.deleteRelayed(ctx, evs[len(evs)-1].id); err != nil {
			// MySQL has them: the next pass relays them again, harmlessly.
			return total, fmt.Errorf("relay: delete relayed events: %w", err)
		}
		now := clock.Now().UnixNano()
		s.mu.Lock()
		for _, e := range evs {
			_ = s.lag.RecordValue(max(1, (now-e.created)/1000))
		}
		s.mu.Unlock()
		s.relayed.Add(int64(len(evs)))
		total += len(evs)
		if len(evs) < relayBatch {
			return total, nil
		}
	}
}

// deleteRelayed deletes the relayed events up to id, within OpTimeout.
func (s *Strategy) deleteRelayed(ctx context.Context, id int64) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.OpTimeout)
	defer cancel()
	if err := s.localStall(ctx); err != nil {
		return err
	}
	_, err := s.local.ExecContext(ctx, "DELETE FROM events WHERE id <= ?", id)
	return err
}

func noteMax(v interface {
	Load() int64
	CompareAndSwap(old, new int64) bool
}, n int64) {
	for {
		cur := v.Load()
		if n <= cur || v.CompareAndSwap(cur, n) {
			return
		}
	}
}

// readEvents reads up to limit local events, oldest first.
func (s *Strategy) readEvents(ctx context.Context, limit int) ([]event, error) {
	rows, err := s.local.QueryContext(ctx, "SELECT id, order_id, sku, qty, kind, deadline, created, buyer FROM events ORDER BY id LIMIT ?", limit)
	if err != nil {
		return nil, fmt.Errorf("relay: read local events: %w", err)
	}
	defer rows.Close()
	var out []event
	for rows.Next() {
		var e event
		if err := rows.Scan(&e.id, &e.orderID, &e.sku, &e.qty, &e.kind, &e.deadline, &e.created, &e.buyer); err != nil {
			return nil, fmt.Errorf("relay: read local events: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("relay: read local events: %w", err)
	}
	return out, nil
}

type delta struct{ avail, occ, sold int64 }

// orderRow is an order row as the batch leaves it.
type orderRow struct {
	ord     sqlstore.Order
	isNew   bool
	changed bool
}

// applyEvents applies a batch of events to MySQL in tx, idempotently: it
// locks the batch's existing order rows, plays the events in order against
// them (a reserve of a known order and a decision of a decided one change
// nothing; a decision whose reserve MySQL never saw lands as a row in its
// final state, with the stock it moved), then writes the new rows, the
// changed states and one inventory update per SKU.
func applyEvents(ctx context.Context, tx *sql.Tx, evs []event) error {
	ids := orderIDs(evs)
	sort.Strings(ids)
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	existing, err := sqlstore.LockOrders(ctx, tx, args)
	if err != nil {
		return err
	}
	rows := make(map[string]*orderRow, len(ids))
	for id, o := range existing {
		rows[id] = &orderRow{ord: o}
	}
	deltas := map[string]*delta{}
	d := func(sku string) *delta {
		x := deltas[sku]
		if x == nil {
			x = &delta{}
			deltas[sku] = x
		}
		return x
	}
	var fresh []*orderRow
	for _, e := range evs {
		r := rows[e.orderID]
		if r == nil {
			o := sqlstore.Order{ID: e.orderID, SKU: e.sku, Qty: e.qty, State: inventory.OrderState(e.kind), Buyer: e.buyer}
			if e.kind == kindReserve {
				o.State = inventory.StateReserved
			}
			if e.deadline > 0 {
				o.ExpiresAt = sql.NullTime{Time: time.UnixMilli(e.deadline).UTC(), Valid: true}
			}
			r = &orderRow{ord: o, isNew: true}
			rows[e.orderID] = r
			fresh = append(fresh, r)
			switch o.State {
			case inventory.StateReserved:
				d(e.sku).avail -= e.qty
				d(e.sku).occ += e.qty
			case inventory.StateConfirmed:
				d(e.sku).avail -= e.qty
				d(e.sku).sold += e.qty
			}
			continue
		}
		if e.kind == string(inventory.StateRefunded) {
			// A refund moves a confirmed order's units back, once: an
			// order already refunded (a repeat) or never confirmed
			// changes nothing.
			if r.ord.State == inventory.StateConfirmed {
				x := d(r.ord.SKU)
				x.sold -= r.ord.Qty
				x.avail += r.ord.Qty
				r.ord.State, r.changed = inventory.StateRefunded, true
			}
			continue
		}
		if e.kind == kindReserve || r.ord.State != inventory.StateReserved {
			continue // known order, or already decided: a repeat
		}
		to := inventory.OrderState(e.kind)
		x := d(r.ord.SKU)
		x.occ -= r.ord.Qty
		if to == inventory.StateConfirmed {
			x.sold += r.ord.Qty
		} else {
			x.avail += r.ord.Qty
		}
		r.ord.State, r.changed = to, true
	}
	if err := insertRows(ctx, tx, fresh); err != nil {
		return err
	}
	byState := map[inventory.OrderState][]any{}
	for _, r := range rows {
		if r.changed && !r.isNew {
			byState[r.ord.State] = append(byState[r.ord.State], r.ord.ID)
		}
	}
	now := clock.Now().UTC()
	for st, ids := range byState {
		a := append([]any{string(st), now}, ids...)
		if _, err := tx.ExecContext(ctx, "UPDATE orders SET state=?, updated_at=? WHERE order_id IN ("+sqlstore.Placeholders(len(ids))+")", a...); err != nil {
			return fmt.Errorf("relay: order states: %w", err)
		}
	}
	skus := make([]string, 0, len(deltas))
	for sku := range deltas {
		skus = append(skus, sku)
	}
	sort.Strings(skus)
	for _, sku := range skus {
		x := deltas[sku]
		if *x == (delta{}) {
			continue
		}
		if _, err := tx.ExecContext(ctx, "UPDATE inventory SET available=available+?, occupied=occupied+?, sold=sold+? WHERE sku=?",
			x.avail, x.occ, x.sold, sku); err != nil {
			return fmt.Errorf("relay: inventory %s: %w", sku, err)
		}
	}
	return nil
}

// insertRows writes new order rows, each in its own state, with one
// multi-row INSERT.
func insertRows(ctx context.Context, tx *sql.Tx, rs []*orderRow) error {
	os := make([]sqlstore.Order, len(rs))
	for i, r := range rs {
		os[i] = r.ord
	}
	if err := sqlstore.InsertOrderRows(ctx, tx, os); err != nil {
		return fmt.Errorf("relay: insert orders: %w", err)
	}
	return nil
}

// orderIDs are the distinct order ids of evs, in their first order.
func orderIDs(evs []event) []string {
	seen := map[string]bool{}
	var ids []string
	for _, e := range evs {
		if !seen[e.orderID] {
			seen[e.orderID] = true
			ids = append(ids, e.orderID)
		}
	}
	return ids
}
