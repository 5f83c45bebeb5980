// Package outbox is Redis + local message table, eventually consistent.
// Reserve runs the Lua Try in Redis, then records the order and a "reserve"
// event in one local MySQL transaction (compensating Redis if that fails).
// Confirm, cancel and expiry change the order row and record an event in one
// local transaction, then update Redis. A relay applies the events to the
// MySQL inventory row every OutboxPeriod, exactly once per event, and deletes
// each event in the transaction that applies it (as a polling publisher
// deletes what it published): the table holds the backlog only, so neither
// its size nor the relay's scan grows with the length of the run. A
// reconciler (reconcile.go) runs every ReconcilePeriod: it applies MySQL's
// decisions to Redis reservations that missed them, resolves orphan Redis
// reservations through an order-row barrier, and repairs a lasting
// difference between Redis and the MySQL projection (row + unapplied events)
// with a guarded delta — never by overwriting Redis with a lagging row.
// Concurrent MySQL writes of one SKU share a transaction (group commit,
// batch.go); each order still gets its own outcome after its own commit.
package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	wallclock "github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/internal/groupcommit"
	"github.com/stockbench/stockbench/strategies/internal/redisstock"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// Event kinds in the outbox table.
const (
	KindReserve = "reserve"
	KindConfirm = "confirm"
	KindRelease = "release"
	// KindRefund gives a refunded order's units back: sold → available.
	KindRefund = "refund"
)

const relayBatch = 1000

// Strategy implements strategies.Strategy with Redis and an outbox. Safe for
// concurrent use.
type Strategy struct {
	db     *sql.DB
	rs     redisstock.Store
	cfg    strategies.Config
	orders sqlstore.Orders

	skus redisstock.Catalog
	mu   sync.Mutex
	lag  *hdrhistogram.Histogram // relay lag, µs; guarded by mu

	relayMu sync.Mutex // one relay pass at a time
	rec     reconciler

	reserves  *groupcommit.Group[inventory.Reservation] // reserve writes (batch.go)
	decisions *groupcommit.Group[*decision]             // confirm and cancel writes

	bgErrors, relayed, backlogMax, compensations, deferred   atomic.Int64
	settleDrained                                            atomic.Int64
	settling                                                 atomic.Bool // Settle's relay: lag not recorded
	repairs, decisionsApplied, orphansReleased, undoFailures atomic.Int64
}

var _ strategies.Strategy = (*Strategy)(nil)

// New builds the strategy on cfg.DB and cfg.Redis.
func New(cfg strategies.Config) (*Strategy, error) {
	cfg = cfg.WithDefaults()
	if cfg.Redis == nil {
		return nil, errors.New("outbox needs redis")
	}
	fence := &redisstock.Fence{DB: cfg.DB}
	s := &Strategy{db: cfg.DB, rs: redisstock.Store{R: cfg.Redis, Retain: cfg.Retain, Fence: fence}, cfg: cfg,
		lag: hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)}
	s.orders = sqlstore.Orders{DB: cfg.DB, Move: recordEvent, OnFinal: s.applyToRedis}
	// A rebuilt Redis is MySQL's projection: the differences the
	// reconciler was waiting to see twice described the Redis that is gone.
	fence.OnRebuild = s.rec.forget
	newGroups(s, cfg)
	return s, nil
}

// Name is "outbox".
func (s *Strategy) Name() string { return "outbox" }

// Setup loads the stock from MySQL into Redis.
func (s *Strategy) Setup(ctx context.Context, stock []inventory.Stock) error {
	return s.skus.Load(ctx, s.rs, s.db)
}

// Reserve runs the Lua Try, then writes the order and its event in one
// local transaction, shared with the SKU's concurrent reserves (batch.go).
// If that write fails — or never runs, the caller's context ending while it
// was queued — its outcome is settled before Redis is touched (see undo).
func (s *Strategy) Reserve(ctx context.Context, r inventory.Reservation) error {
	gen := s.rs.Fence.Rebuilds()
	fresh, err := s.rs.Try(ctx, r)
	if err != nil {
		return err
	}
	if !fresh {
		return s.repeat(ctx, r)
	}
	if err := s.reserves.Do(ctx, r.SKU, r); err != nil {
		return s.undo(r, err)
	}
	if s.rs.Fence.Rebuilds() != gen {
		return s.recount(ctx, r)
	}
	return nil
}

// recount settles a reserve during which Redis was rebuilt from MySQL. A
// rebuild that read MySQL before this order committed does not count it,
// and Redis lost its Try in the restart: the unit would be sold again.
// So the reservation must be in Redis now: if it is not, it is tried
// again; if the unit went meanwhile, the order is cancelled in MySQL and
// the reserve refused (never acknowledged).
func (s *Strategy) recount(ctx context.Context, r inventory.Reservation) error {
	ref := inventory.OrderRef{OrderID: r.OrderID, SKU: r.SKU}
	_, err := s.rs.Get(ctx, ref)
	if !errors.Is(err, redisstock.ErrNoReservation) {
		return err // held (or decided) in Redis; or Redis did not answer
	}
	if _, err := s.rs.Try(ctx, r); !errors.Is(err, inventory.ErrOutOfStock) {
		return err
	}
	if err := s.orders.Finish(ctx, ref, inventory.StateCancelled); err != nil {
		return fmt.Errorf("reserve %s: lost in a Redis restart, and its cancel failed: %w", r.OrderID, err)
	}
	return fmt.Errorf("reserve %s: lost in a Redis restart, the unit sold meanwhile: %w", r.OrderID, inventory.ErrOutOfStock)
}

// repeat settles a reserve whose Try found the order already held in Redis
// (a client repeating a reserve whose reply it lost, or two calls racing).
// MySQL, not Redis, decides, since a reserve is acknowledged only once its
// order is in MySQL: reserved or confirmed there is a success; cancelled or
// expired is ErrAlreadyFinal, and Redis gets that decision (the unit back);
// no order row means the first call never wrote it, so this one does, as
// the first would have (a racing write of the same order is settled
// through undo's barrier).
func (s *Strategy) repeat(ctx context.Context, r inventory.Reservation) error {
	st, err := sqlstore.StateOf(ctx, s.db, r.OrderID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if err := s.reserves.Do(ctx, r.SKU, r); err != nil {
			return s.undo(r, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reserve %s: repeat: %w", r.OrderID, err)
	case st == inventory.StateReserved || st == inventory.StateConfirmed:
		return nil
	}
	s.applyToRedis(ctx, inventory.OrderRef{OrderID: r.OrderID, SKU: r.SKU}, st, false)
	return fmt.Errorf("reserve %s: order is %s: %w", r.OrderID, st, inventory.ErrAlreadyFinal)
}

// undo handles a reserve whose MySQL write returned err. It runs on its own
// context with its own timeout: the caller's may already have expired, and
// an undo cut short would leave the unit held in Redis with no order behind
// it. A failed write is not proof that nothing committed (a lost commit
// answer), so undo first settles the order through the barrier — which
// refuses the order for good unless its row committed — and gives the unit
// back in Redis only if the order is final. A committed reserve is a
// success. If the barrier cannot run either, Redis is left as it is and the
// reconciler resolves the orphan later.
func (s *Strategy) undo(r inventory.Reservation, err error) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.OpTimeout)
	defer cancel()
	ref := inventory.OrderRef{OrderID: r.OrderID, SKU: r.SKU}
	st, berr := s.barrier(ctx, ref)
	switch {
	case berr != nil:
		s.undoFailures.Add(1)
		return fmt.Errorf("reserve %s: %w (%v; undo: %v)", r.OrderID, inventory.ErrOutcomeUnknown, err, berr)
	case st == inventory.StateReserved || st == inventory.StateConfirmed:
		return nil // the write committed after all
	}
	s.compensations.Add(1)
	if _, cerr := s.rs.Finish(ctx, ref, st, false); cerr != nil {
		s.deferred.Add(1) // the reconciler applies MySQL's decision later
	}
	if sqlstore.IsDuplicate(err) {
		// A cancel got there first and left its marker.
		return fmt.Errorf("reserve %s: order is %s: %w", r.OrderID, st, inventory.ErrAlreadyFinal)
	}
	return fmt.Errorf("reserve %s: %w", r.OrderID, err)
}

// Confirm moves the order to confirmed and records a confirm event in one
// local transaction (shared with the SKU's concurrent decisions), then
// confirms in Redis.
func (s *Strategy) Confirm(ctx context.Context, ref inventory.OrderRef) error {
	return s.finish(ctx, ref, inventory.StateConfirmed)
}

// Cancel moves the order to cancelled and records a release event in one
// local transaction (shared with the SKU's concurrent decisions), then
// releases in Redis under the owner check.
func (s *Strategy) Cancel(ctx context.Context, ref inventory.OrderRef) error {
	return s.finish(ctx, ref, inventory.StateCancelled)
}

// Refund moves a confirmed order to refunded and records a refund event
// in one local transaction under the order row's lock (sqlstore's
// Orders.Refund: the state read under the lock is the "already released"
// check), then gives the units back in Redis under the record's owner
// check (refund.lua); a Redis write that fails is the reconciler's to
// repair, as a guarded delta once the difference lasts. Not batched:
// refunds are rare beside reserves and confirms.
func (s *Strategy) Refund(ctx context.Context, ref inventory.OrderRef) error {
	return s.orders.Refund(ctx, ref)
}

// recordEvent is the MoveFunc: the stock moves in MySQL only when the relay
// applies the event.
func recordEvent(ctx context.Context, tx *sql.Tx, ord sqlstore.Order, m sqlstore.Movement) error {
	kind := KindConfirm
	switch m {
	case sqlstore.ToAvailable:
		kind = KindRelease
	case sqlstore.Refunded:
		kind = KindRefund
	}
	return insertEvent(ctx, tx, ord.ID, ord.SKU, ord.Qty, kind)
}

func insertEvent(ctx context.Context, tx *sql.Tx, orderID, sku string, qty int64, kind string) error {
	_, err := tx.ExecContext(ctx, "INSERT INTO outbox (order_id, sku, qty, kind, created_at) VALUES (?,?,?,?,?)",
		orderID, sku, qty, kind, wallclock.Now().UTC())
	if err != nil {
		return fmt.Errorf("outbox event: %w", err)
	}
	return nil
}

// applyToRedis brings Redis in line after a committed MySQL transition. It
// runs on its own context and timeout: the caller's ending (an operation
// timeout, the background loop stopping) must not cut the second store's
// write once the first has committed.
func (s *Strategy) applyToRedis(ctx context.Context, ref inventory.OrderRef, to inventory.OrderState, marker bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.OpTimeout)
	defer cancel()
	if to == inventory.StateRefunded {
		if _, err := s.rs.Refund(ctx, ref, false); err != nil {
			s.deferred.Add(1)
		}
		return
	}
	if _, err := s.rs.Finish(ctx, ref, to, marker); err != nil {
		s.deferred.Add(1) // the reconciler applies MySQL's decision later
	}
}

// Run runs the expiry sweeper, the relay and the reconciler until ctx ends.
func (s *Strategy) Run(ctx context.Context) error {
	onErr := func(error) { s.bgErrors.Add(1) }
	var wg sync.WaitGroup
	for _, job := range []struct {
		period time.Duration
		fn     func(context.Context) error
	}{
		{s.cfg.SweepPeriod, func(ctx context.Context) error { _, err := s.orders.ExpireDue(ctx); return err }},
		{s.cfg.OutboxPeriod, func(ctx context.Context) error { _, err := s.relay(ctx); return err }},
		{s.cfg.ReconcilePeriod, func(ctx context.Context) error {
			// A Redis that restarted is rebuilt at once, even with no Try
			// to notice it (see redisstock.Fence), not left to a slow repair.
			if err := s.rs.Ready(ctx); err != nil {
				return err
			}
			_, err := s.reconcile(ctx, false)
			return err
		}},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sqlstore.Every(ctx, job.period, job.fn, onErr)
		}()
	}
	wg.Wait()
	return nil
}

type event struct {
	id      int64
	sku     string
	qty     int64
	kind    string
	created time.Time
}

// relay applies every pending event to the inventory rows, batch by batch,
// each batch in one transaction that deletes its events: an event is
// applied exactly once. It returns how many events it applied. The lag of
// each event (commit of the batch minus the event's creation) is recorded,
// except in Settle: the background relay is stopped while the harness
// audits the end of load, and an event drained then waited for the
// harness, not for the relay (those are counted as settle-drained).
func (s *Strategy) relay(ctx context.Context) (int, error) {
	s.relayMu.Lock()
	defer s.relayMu.Unlock()
	total := 0
	for {
		var batch []event
		// READ COMMITTED: the locking read takes the pending rows' locks
		// only, not the gap after them; under REPEATABLE READ it blocked
		// every new event's INSERT until the batch committed, and measured
		// deadlocks and 10 s timeouts on confirm at 1500 buyers.
		err := sqlstore.InTxWith(ctx, s.db, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, func(tx *sql.Tx) error {
			batch = batch[:0]
			rows, err := tx.QueryContext(ctx,
				"SELECT id, sku, qty, kind, created_at FROM outbox WHERE applied=0 ORDER BY id LIMIT ? FOR UPDATE", relayBatch)
			if err != nil {
				return err
			}
			for rows.Next() {
				var e event
				if err := rows.Scan(&e.id, &e.sku, &e.qty, &e.kind, &e.created); err != nil {
					rows.Close()
					return err
				}
				batch = append(batch, e)
			}
			rows.Close()
			if err := rows.Err(); err != nil || len(batch) == 0 {
				return err
			}
			return applyEvents(ctx, tx, batch)
		})
		if err != nil {
			return total, fmt.Errorf("relay: %w", err)
		}
		if total == 0 {
			s.noteBacklog(int64(len(batch)))
		}
		total += len(batch)
		if s.settling.Load() {
			s.settleDrained.Add(int64(len(batch)))
		} else {
			now := wallclock.Now()
			s.mu.Lock()
			for _, e := range batch {
				_ = s.lag.RecordValue(max(1, now.Sub(e.created).Microseconds()))
			}
			s.mu.Unlock()
		}
		s.relayed.Add(int64(len(batch)))
		if len(batch) < relayBatch {
			return total, nil
		}
	}
}

func (s *Strategy) noteBacklog(n int64) {
	for {
		cur := s.backlogMax.Load()
		if n <= cur || s.backlogMax.CompareAndSwap(cur, n) {
			return
		}
	}
}

// applyEvents sums the batch per SKU, updates each inventory row once and
// deletes the events (applied: nothing reads them again).
func applyEvents(ctx context.Context, tx *sql.Tx, batch []event) error {
	type delta struct{ avail, occ, sold int64 }
	deltas := map[string]*delta{}
	var order []string
	ids := make([]string, 0, len(batch))
	for _, e := range batch {
		d := deltas[e.sku]
		if d == nil {
			d = &delta{}
			deltas[e.sku] = d
			order = append(order, e.sku)
		}
		switch e.kind {
		case KindReserve:
			d.avail -= e.qty
			d.occ += e.qty
		case KindConfirm:
			d.occ -= e.qty
			d.sold += e.qty
		case KindRelease:
			d.occ -= e.qty
			d.avail += e.qty
		case KindRefund:
			d.sold -= e.qty
			d.avail += e.qty
		}
		ids = append(ids, strconv.FormatInt(e.id, 10))
	}
	for _, sku := range order {
		d := deltas[sku]
		if _, err := tx.ExecContext(ctx, "UPDATE inventory SET available=available+?, occupied=occupied+?, sold=sold+? WHERE sku=?",
			d.avail, d.occ, d.sold, sku); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, "DELETE FROM outbox WHERE id IN ("+strings.Join(ids, ",")+")")
	return err
}

// Settle expires due reservations, runs a reconciler pass that applies
// MySQL's decisions to Redis and resolves orphans at once (no reserve is in
// flight), and drains the outbox. A stock difference is repaired only once
// it has lasted: if one is pending, Settle waits out the operation timeout
// and runs a second pass. Not to be run concurrently with load if a prompt
// answer matters: orphans are then refused through the barrier.
func (s *Strategy) Settle(ctx context.Context) error {
	s.settling.Store(true)
	defer s.settling.Store(false)
	// A Redis that restarted since the last Try is rebuilt first.
	if err := s.rs.Ready(ctx); err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	if _, err := s.orders.ExpireDue(ctx); err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	rep, err := s.reconcile(ctx, true)
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	if rep.Pending > 0 {
		// A difference is waiting to prove it lasts: with no load left,
		// look again once the operation timeout has passed.
		t := time.NewTimer(s.cfg.OpTimeout + time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("settle: %w", ctx.Err())
		case <-t.C:
		}
		if _, err := s.reconcile(ctx, true); err != nil {
			return fmt.Errorf("settle: %w", err)
		}
	}
	for {
		n, err := s.relay(ctx)
		if err != nil {
			return fmt.Errorf("settle: %w", err)
		}
		if n == 0 {
			return nil
		}
	}
}

// Restock adds stock in MySQL first (journalled), then in Redis; a
// repeated restock id changes nothing (see redisstock.Store.Restock).
func (s *Strategy) Restock(ctx context.Context, r inventory.Restock) error {
	return s.rs.Restock(ctx, s.db, r)
}

// Close has nothing to release.
func (s *Strategy) Close() error { return nil }

// Counters reports relay lag (ms; of the events the background relay
// applied, not those Settle drained), backlog, compensations, the
// reconciler's repairs, background errors and the batch sizes. Safe for concurrent use.
func (s *Strategy) Counters() map[string]float64 {
	s.mu.Lock()
	p50 := float64(s.lag.ValueAtQuantile(50)) / 1000
	p99 := float64(s.lag.ValueAtQuantile(99)) / 1000
	s.mu.Unlock()
	return s.withBatchCounters(map[string]float64{
		"background_errors":     float64(s.bgErrors.Load()),
		"outbox_relayed":        float64(s.relayed.Load()),
		"outbox_settle_drained": float64(s.settleDrained.Load()),
		"outbox_lag_p50_ms":     p50,
		"outbox_lag_p99_ms":     p99,
		"outbox_backlog_max":    float64(s.backlogMax.Load()),
		"outbox_compensations":  float64(s.compensations.Load()),
		"outbox_deferred":       float64(s.deferred.Load()),
		"redis_rebuilds":        float64(s.rs.Fence.Rebuilds()),
		"outbox_undo_failures":  float64(s.undoFailures.Load()),
		"reconcile_repairs":     float64(s.repairs.Load()),
		"reconcile_decisions":   float64(s.decisionsApplied.Load()),
		"reconcile_orphans":     float64(s.orphansReleased.Load()),
	})
}
