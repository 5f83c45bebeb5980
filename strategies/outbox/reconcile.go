package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	wallclock "github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies/internal/redisstock"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// The reconciler (对账) compares each SKU's Redis stock with what Redis
// should hold according to MySQL, and repairs a lasting difference.
//
// What Redis should hold is the projection: the inventory row plus the
// outbox events the relay has not applied yet, read in one consistent MySQL
// snapshot, adjusted for the reservations in flight between the stores —
// one Redis reserved but MySQL does not know yet (a reserve between its Lua
// Try and its commit), and one MySQL decided but Redis has not applied yet
// (a confirm or cancel between its commit and its Redis script). The Redis
// side is read atomically by one script, and the MySQL snapshot is taken
// between two reads of the SKU's version in Redis: if Redis changed in
// between the pass says nothing about that SKU. So a difference left is not
// an operation in flight, except a restock between its MySQL and its Redis
// write. The reconciler acts only on a difference seen unchanged on two
// passes further apart than the operation timeout (with the same MySQL
// total), and repairs it with a guarded delta that applies only if the
// Redis hash still holds the observed values; the repair also records the
// MySQL row version it includes, so the Redis write of a restock it already
// counted is skipped when it lands (restock.lua). It never overwrites Redis
// from a snapshot.
//
// The same pass applies MySQL's decisions to Redis reservations that missed
// them (a Redis write that failed after the MySQL commit), and resolves
// orphans — Redis reservations with no MySQL order, seen on two passes
// further apart than the operation timeout — through the order-row barrier
// (see settleOrphan), which is safe whatever the reserve is doing.
type reconciler struct {
	mu      sync.Mutex // one pass at a time; guards the maps
	pending map[string]observation
	orphans map[string]time.Time // order id → first seen without a MySQL order

	// now is the clock (clock.Now unless a test sets it); beforeAdjust, when
	// set by a test, runs between the observation and the guarded repair.
	now          func() time.Time
	beforeAdjust func()
}

// forget drops the differences and orphans the reconciler was watching
// (after a rebuild of Redis from MySQL: they were seen on a Redis that is
// gone). The next pass starts afresh.
func (r *reconciler) forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending, r.orphans = map[string]observation{}, map[string]time.Time{}
}

// observation is a difference seen on one pass.
type observation struct {
	at         time.Time
	diff       inventory.Stock // expected − Redis, per field
	mysqlTotal int64
}

// projection is one SKU as MySQL says Redis should hold it.
type projection struct {
	stock   inventory.Stock
	version int64                           // the row's version: restocks it includes
	states  map[string]inventory.OrderState // states of Redis's live orders known to MySQL
}

// ReconcileReport says what one reconciler pass did.
type ReconcileReport struct {
	// Decisions applied to Redis reservations that had missed them.
	Decisions int
	// Orphans released (their order was refused by the barrier).
	Orphans int
	// Repairs are guarded deltas applied to a SKU's stock hash.
	Repairs int
	// Differences still waiting to be confirmed by a later pass.
	Pending int
}

// reconcileBatch is how many SKUs a pass reads at once: one Redis
// pipeline of snapshots, one MySQL snapshot of their rows, events and
// orders, one pipeline of versions — a pass costs round trips per batch,
// not per SKU, so a catalog of a million SKUs is a few thousand of them.
const reconcileBatch = 500

// reconcile runs one pass over every SKU of the catalog (MySQL's inventory
// table, the system of record), a batch at a time. Orphans and differences
// are acted on only when first seen more than the operation timeout
// earlier — except that force resolves orphans at once (Settle, when no
// reserve is in flight; the barrier keeps even that safe).
func (s *Strategy) reconcile(ctx context.Context, force bool) (ReconcileReport, error) {
	r := &s.rec
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil {
		r.pending, r.orphans = map[string]observation{}, map[string]time.Time{}
	}
	var rep ReconcileReport
	now := wallclock.Now()
	if r.now != nil {
		now = r.now()
	}
	seenOrphan := map[string]bool{}
	after := ""
	for {
		skus, err := s.catalogPage(ctx, after, reconcileBatch)
		if err != nil {
			return rep, err
		}
		if len(skus) == 0 {
			break
		}
		after = skus[len(skus)-1]
		// A SKU under load may change while MySQL is read; look again a
		// few times before leaving it to the next pass.
		for attempt := 0; attempt < 3 && len(skus) > 0; attempt++ {
			if skus, err = s.reconcileSKUs(ctx, skus, now, force, seenOrphan, &rep); err != nil {
				return rep, err
			}
		}
	}
	for id := range r.orphans {
		if !seenOrphan[id] {
			delete(r.orphans, id)
		}
	}
	rep.Pending = len(r.pending)
	return rep, nil
}

// reconcileSKUs is one batch's part of a pass. It returns the SKUs whose
// Redis changed while MySQL was read: the pass says nothing of their stock
// yet.
func (s *Strategy) reconcileSKUs(ctx context.Context, skus []string, now time.Time, force bool, seenOrphan map[string]bool, rep *ReconcileReport) (again []string, err error) {
	snaps, err := s.rs.Snapshots(ctx, skus)
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	var ids []string
	for _, sn := range snaps {
		for id := range sn.Live {
			ids = append(ids, id)
		}
	}
	ps, err := s.project(ctx, skus, ids)
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	vers, err := s.rs.Versions(ctx, skus)
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	for i, sku := range skus {
		p, ok := ps[sku]
		if !ok {
			return nil, fmt.Errorf("reconcile: projection %s: no inventory row", sku)
		}
		done, err := s.reconcileSKU(ctx, sku, snaps[i], p, vers[i], now, force, seenOrphan, rep)
		if err != nil {
			return nil, err
		}
		if !done {
			again = append(again, sku)
		}
	}
	return again, nil
}

// reconcileSKU judges one SKU from its Redis snapshot, its projection and
// its Redis version read after the projection. done is false when Redis
// changed while MySQL was read, so the pass says nothing about its stock.
func (s *Strategy) reconcileSKU(ctx context.Context, sku string, snap redisstock.Snapshot, p projection, ver string, now time.Time, force bool, seenOrphan map[string]bool, rep *ReconcileReport) (done bool, err error) {
	r := &s.rec
	want := p.stock
	for id, qty := range snap.Live {
		ref := inventory.OrderRef{OrderID: id, SKU: sku}
		st, known := p.states[id]
		switch {
		case !known:
			// Reserved in Redis, unknown to MySQL: in flight, or an orphan.
			want.Available -= qty
			want.Occupied += qty
			if seenOrphan[id] {
				continue // looked at on an earlier attempt of this pass
			}
			seenOrphan[id] = true
			first, ok := r.orphans[id]
			if !ok {
				r.orphans[id] = now
			}
			if force || ok && now.Sub(first) > s.cfg.OpTimeout {
				released, err := s.settleOrphan(ctx, ref)
				if err != nil {
					return false, err
				}
				if released {
					rep.Orphans++
					s.orphansReleased.Add(1)
				}
				delete(r.orphans, id)
			}
		case st.Final():
			// Decided in MySQL, not yet in Redis: what Redis has still
			// counts it as occupied.
			want.Occupied += qty
			if st == inventory.StateConfirmed {
				want.Sold -= qty
			} else {
				want.Available -= qty
			}
			prev, err := s.rs.Finish(ctx, ref, st, false)
			if err != nil {
				return false, fmt.Errorf("reconcile: %w", err)
			}
			if prev == inventory.StateReserved {
				rep.Decisions++
				s.decisionsApplied.Add(1)
			}
		}
	}
	if ver != snap.Ver || snap.Missing != (ver == "") {
		return false, nil // Redis changed while MySQL was read: no verdict
	}
	var diff inventory.Stock
	if !snap.Missing {
		diff = inventory.Stock{Total: want.Total - snap.Stock.Total, Available: want.Available - snap.Stock.Available,
			Occupied: want.Occupied - snap.Stock.Occupied, Sold: want.Sold - snap.Stock.Sold}
	}
	if !snap.Missing && diff == (inventory.Stock{}) {
		delete(r.pending, sku)
		return true, nil
	}
	if snap.Missing {
		diff = want // what a reload writes
	}
	prev, ok := r.pending[sku]
	if !ok || prev.diff != diff || prev.mysqlTotal != p.stock.Total {
		r.pending[sku] = observation{at: now, diff: diff, mysqlTotal: p.stock.Total}
		return true, nil
	}
	if now.Sub(prev.at) <= s.cfg.OpTimeout {
		return true, nil
	}
	if r.beforeAdjust != nil {
		r.beforeAdjust()
	}
	// The repair records the row version it took the restocks from, so a
	// restock whose Redis write is still on its way is not counted twice.
	applied, err := s.rs.Adjust(ctx, sku, snap, diff, p.version)
	if err != nil {
		return false, fmt.Errorf("reconcile: %w", err)
	}
	if applied {
		rep.Repairs++
		s.repairs.Add(1)
		delete(r.pending, sku)
	}
	return true, nil
}

// catalogPage lists up to n SKUs of the inventory table after the SKU
// after, in order (keyset pages: a pass never holds the whole catalog).
func (s *Strategy) catalogPage(ctx context.Context, after string, n int) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT sku FROM inventory WHERE sku > ? ORDER BY sku LIMIT ?", after, n)
	if err != nil {
		return nil, fmt.Errorf("reconcile: catalog: %w", err)
	}
	defer rows.Close()
	skus := make([]string, 0, n)
	for rows.Next() {
		var sku string
		if err := rows.Scan(&sku); err != nil {
			return nil, fmt.Errorf("reconcile: catalog: %w", err)
		}
		skus = append(skus, sku)
	}
	return skus, rows.Err()
}

// project reads, in one consistent snapshot, the SKUs' inventory rows plus
// their unapplied outbox events, and the states of the given orders (one
// map, shared by the projections).
func (s *Strategy) project(ctx context.Context, skus []string, ids []string) (map[string]projection, error) {
	var out map[string]projection
	args := make([]any, len(skus))
	for i, sku := range skus {
		args[i] = sku
	}
	in := "(" + sqlstore.Placeholders(len(skus)) + ")"
	err := sqlstore.InTxWith(ctx, s.db, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}, func(tx *sql.Tx) error {
		out = make(map[string]projection, len(skus))
		states, err := sqlstore.OrderStates(ctx, tx, ids)
		if err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, "SELECT sku, total, available, occupied, sold, version FROM inventory WHERE sku IN "+in, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
			p := projection{states: states}
			st := &p.stock
			if err := rows.Scan(&st.SKU, &st.Total, &st.Available, &st.Occupied, &st.Sold, &p.version); err != nil {
				rows.Close()
				return err
			}
			out[st.SKU] = p
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.QueryContext(ctx, "SELECT sku, kind, SUM(qty) FROM outbox WHERE applied=0 AND sku IN "+in+" GROUP BY sku, kind", args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var sku, kind string
			var q int64
			if err := rows.Scan(&sku, &kind, &q); err != nil {
				return err
			}
			if p, ok := out[sku]; ok {
				p.stock = applyKind(p.stock, kind, q)
				out[sku] = p
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("projection: %w", err)
	}
	return out, nil
}

// applyKind applies q units of one event kind to a stock.
func applyKind(st inventory.Stock, kind string, q int64) inventory.Stock {
	switch kind {
	case KindReserve:
		st.Available -= q
		st.Occupied += q
	case KindConfirm:
		st.Occupied -= q
		st.Sold += q
	case KindRelease:
		st.Occupied -= q
		st.Available += q
	case KindRefund:
		st.Sold -= q
		st.Available += q
	}
	return st
}

// barrier settles the fate of an order whose reserve may or may not have
// committed: it inserts a cancelled marker row (qty 0) for it. If the insert
// succeeds, the reserve's own INSERT can never commit (same primary key), so
// the order is refused for good; if the order row exists, the insert waits
// for the reserve's transaction to end and then finds it. It returns the
// order's state. Idempotent; safe against a racing reserve, cancel or
// another replica's barrier.
func (s *Strategy) barrier(ctx context.Context, ref inventory.OrderRef) (inventory.OrderState, error) {
	err := sqlstore.InsertOrder(ctx, s.db, inventory.Reservation{OrderID: ref.OrderID, SKU: ref.SKU}, inventory.StateCancelled)
	if err == nil {
		return inventory.StateCancelled, nil
	}
	if !sqlstore.IsDuplicate(err) {
		return "", fmt.Errorf("order barrier %s: %w", ref.OrderID, err)
	}
	st, err := sqlstore.StateOf(ctx, s.db, ref.OrderID)
	if err != nil {
		return "", fmt.Errorf("order barrier %s: %w", ref.OrderID, err)
	}
	return st, nil
}

// settleOrphan resolves a Redis reservation that MySQL did not know: through
// the barrier, then applies the outcome to Redis. It reports whether the
// Redis reservation was released.
func (s *Strategy) settleOrphan(ctx context.Context, ref inventory.OrderRef) (bool, error) {
	st, err := s.barrier(ctx, ref)
	if err != nil {
		return false, err
	}
	if !st.Final() {
		return false, nil // the reserve committed after all: nothing to repair
	}
	prev, err := s.rs.Finish(ctx, ref, st, false)
	if err != nil {
		return false, fmt.Errorf("orphan %s: %w", ref.OrderID, err)
	}
	return prev == inventory.StateReserved, nil
}
