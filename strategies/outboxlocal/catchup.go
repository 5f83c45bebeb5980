package outboxlocal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies/internal/redisstock"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// errRestartedDuringCatchUp: Redis lost its data while a catch-up
// replayed; its results are thrown away and it runs again.
var errRestartedDuringCatchUp = errors.New("redis restarted during the catch-up")

// catchUp is the fence's CatchUp: this instance is a late member (a
// rebuild round went on without it — presumed dead, or stopped — so the
// decisions in its table were made on a Redis that is gone and neither
// MySQL nor the rebuilt Redis counts them). It runs in a round of its
// own, gate closed, on the rebuilt Redis, with relayMu held, and replays
// each event there in the table's order, so that Redis — which sells —
// decides again whether it still fits:
//
//   - a reserve of an order MySQL already holds stands (the rebuild
//     counted it); any other is the Try again (idempotent): taken, it
//     stands; out of stock, over the buyer's limit or met by a cancelled
//     marker, it is refused, and so are the decisions of that order; met
//     by a final record with units (the current Redis counted the order's
//     reserve — this member's Try before it caught up, or a client's
//     repeat through another member — and decided it since) it stands;
//   - a decision is the Finish (or refund) again under the owner check:
//     it stands when Redis moved the order now or had decided the same;
//     a different decision Redis holds wins; an order Redis does not know
//     stands only if MySQL holds it (the relay applies a decision once)
//     or the event moves nothing (a cancelled marker).
//
// The table is then rewritten with the events that stand, in one local
// transaction. Each acknowledged event refused (a reserve, confirm,
// refund or cancel the stores now contradict; not an expiry, nor the
// release of an order refused before) is counted in outbox_local_late_refused; the auditor
// sees each as a lost acknowledgement. A Redis restart during the replay
// throws its results away (the catch-up runs again).
func (s *Strategy) catchUp(ctx context.Context) error {
	s.relayMu.Lock()
	defer s.relayMu.Unlock()
	if err := s.flushUnsent(ctx); err != nil {
		return err
	}
	evs, err := s.readAll(ctx)
	if err != nil || len(evs) == 0 {
		return err
	}
	keep, refused, err := s.replay(ctx, evs)
	if err != nil {
		return err
	}
	if ok, err := s.rs.Loaded(ctx); err != nil || !ok {
		return errors.Join(err, errRestartedDuringCatchUp)
	}
	if err := s.rewrite(ctx, evs[len(evs)-1].id, keep); err != nil {
		return err
	}
	s.lateRefused.Add(refused)
	return nil
}

// readAll reads every local event, oldest first.
func (s *Strategy) readAll(ctx context.Context) ([]event, error) {
	var all []event
	last := int64(0)
	for {
		rows, err := s.local.QueryContext(ctx, "SELECT id, order_id, sku, qty, kind, deadline, created, buyer FROM events WHERE id > ? ORDER BY id LIMIT ?", last, relayBatch)
		if err != nil {
			return nil, fmt.Errorf("catch up: read local events: %w", err)
		}
		n := 0
		for rows.Next() {
			var e event
			if err := rows.Scan(&e.id, &e.orderID, &e.sku, &e.qty, &e.kind, &e.deadline, &e.created, &e.buyer); err != nil {
				rows.Close()
				return nil, fmt.Errorf("catch up: read local events: %w", err)
			}
			all = append(all, e)
			last = e.id
			n++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("catch up: read local events: %w", err)
		}
		if n < relayBatch {
			return all, nil
		}
	}
}

// replay decides evs again on the current Redis (see catchUp): it
// returns the events that stand and how many acknowledged ones were
// refused.
func (s *Strategy) replay(ctx context.Context, evs []event) (keep []event, refused int64, err error) {
	inMySQL, err := sqlstore.OrderStates(ctx, s.db, orderIDs(evs))
	if err != nil {
		return nil, 0, fmt.Errorf("catch up: %w", err)
	}
	gone := map[string]bool{} // orders whose reserve was refused
	for _, e := range evs {
		_, known := inMySQL[e.orderID]
		if gone[e.orderID] {
			if e.kind == string(inventory.StateConfirmed) || e.kind == string(inventory.StateRefunded) {
				refused++ // an acknowledged sale of a refused reserve
			}
			continue
		}
		stands, err := s.replayOne(ctx, e, known)
		if err != nil {
			return nil, 0, err
		}
		if stands {
			keep = append(keep, e)
			continue
		}
		if e.kind != string(inventory.StateExpired) { // an expiry was nobody's ack
			refused++
		}
		if e.kind == kindReserve {
			gone[e.orderID] = true
		}
	}
	return keep, refused, nil
}

// replayOne decides one event again on the current Redis; known says
// MySQL holds its order. It reports whether the event stands.
func (s *Strategy) replayOne(ctx context.Context, e event, known bool) (bool, error) {
	ref := inventory.OrderRef{OrderID: e.orderID, SKU: e.sku}
	switch e.kind {
	case kindReserve:
		if known {
			return true, nil
		}
		r := inventory.Reservation{OrderID: e.orderID, SKU: e.sku, Qty: e.qty, Buyer: e.buyer}
		if e.deadline > 0 {
			r.Deadline = time.UnixMilli(e.deadline)
		}
		_, err := s.rs.Try(ctx, r)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, inventory.ErrAlreadyFinal):
			// A final record with units: this Redis counted the order's
			// reserve (a Try this member ran on it before catching up, or
			// a client's repeat through another member) and decided it
			// since. The event stands (the relay applies a reserve once);
			// only a marker (no units) refuses it.
			cur, err := s.rs.Get(ctx, ref)
			switch {
			case errors.Is(err, redisstock.ErrNoReservation):
				return false, nil
			case err != nil:
				return false, fmt.Errorf("catch up: %w", err)
			}
			return cur.Qty > 0, nil
		case errors.Is(err, inventory.ErrOutOfStock), errors.Is(err, inventory.ErrLimitExceeded):
			return false, nil
		}
		return false, fmt.Errorf("catch up: %w", err)
	case string(inventory.StateRefunded):
		prev, err := s.rs.Refund(ctx, ref, true)
		if err != nil {
			return false, fmt.Errorf("catch up: %w", err)
		}
		switch prev {
		case inventory.StateConfirmed, inventory.StateRefunded:
			return true, nil
		case "":
			return known, nil
		}
		return false, nil
	}
	prev, err := s.rs.Finish(ctx, ref, inventory.OrderState(e.kind), false)
	if err != nil {
		return false, fmt.Errorf("catch up: %w", err)
	}
	switch prev {
	case inventory.StateReserved, inventory.OrderState(e.kind):
		return true, nil
	case "":
		return known || e.qty == 0, nil
	}
	return false, nil
}

// rewrite replaces the local events up to last by keep, in one local
// transaction (events appended after last stay).
func (s *Strategy) rewrite(ctx context.Context, last int64, keep []event) error {
	actx, cancel := context.WithTimeout(ctx, s.cfg.OpTimeout)
	defer cancel()
	if err := s.localStall(actx); err != nil {
		return err
	}
	tx, err := s.local.BeginTx(actx, nil)
	if err != nil {
		return fmt.Errorf("catch up: rewrite: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(actx, "DELETE FROM events WHERE id <= ?", last); err != nil {
		return fmt.Errorf("catch up: rewrite: %w", err)
	}
	for _, e := range keep {
		if _, err := tx.ExecContext(actx, "INSERT INTO events (order_id, sku, qty, kind, deadline, created, buyer) VALUES (?,?,?,?,?,?,?)",
			e.orderID, e.sku, e.qty, e.kind, e.deadline, e.created, e.buyer); err != nil {
			return fmt.Errorf("catch up: rewrite: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("catch up: rewrite: %w", err)
	}
	return nil
}
