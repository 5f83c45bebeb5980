// Package ensure is the article's DB-first "asynchronous ensure" (异步确保):
// Redis reserves, MySQL decides, and a stock-change log carries every paid
// order's change from MySQL to Redis.
//
//   - Reserve is one Redis Lua script (redisstock.Try, as lua-tcc's Try):
//     until it is decided, a reservation lives in Redis only.
//   - Confirm is DB-first: the order's state (its orders row, first decision
//     wins) and a stock_log row (unique by order id and kind) are written in
//     one MySQL transaction with the sale (available −q, sold +q, guarded),
//     and the confirm returns. Redis is not touched on the request path.
//   - A worker (log.go) applies pending log rows to Redis with one
//     idempotent script keyed by order id (apply.lua) and marks them synced.
//   - A retry job re-applies the rows left unsynced longer than an operation
//     may run (OpTimeout: the article's "older than 5 minutes"), every
//     ReconcilePeriod (its "hourly"), counts the attempts, and raises an
//     alert (counted, once per row) after alertAfter failed retries (its
//     "3 failures").
//   - Refund is DB-first like confirm: the order moves confirmed → refunded,
//     sold −q, available +q, and a refund log row, in one transaction; the
//     same worker applies it to Redis.
//   - Cancel and expiry release what is not sold: their decision is the
//     order's row (the barrier a confirm or refund cannot pass), written
//     first, and the Redis reservation is released at once after the
//     commit (a release is stock back on sale; no reason to wait for a
//     worker); a release whose Redis write failed, and every reservation
//     past its deadline, is handled by the recovery pass (recover.go).
//
// What is authoritative where: MySQL decides every order (orders row) and
// holds the system-of-record counts at all times; Redis is authoritative
// only for undecided reservations and sells from its hash; the log is the
// promise that every paid change reaches Redis. A unit can be sold only by
// MySQL's guarded UPDATE, so Redis lagging behind MySQL (the worker's lag)
// can refuse a buyer but never oversell. Settle drains the log.
package ensure

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/internal/groupcommit"
	"github.com/stockbench/stockbench/strategies/internal/redisstock"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// Name is the strategy's CLI name.
const Name = "ensure"

// stateRefunded is the state of a refunded order, in MySQL's orders row
// and in its Redis record (the word of inventory.StateRefunded, which the
// refund contract adds beside it).
const stateRefunded inventory.OrderState = "refunded"

// Log row kinds.
const (
	kindConfirm = "confirm"
	kindRefund  = "refund"
)

// alertAfter is how many failed retries of one log row raise its alert
// (the article's "重试3次仍失败则发告警").
const alertAfter = 3

// Strategy implements strategies.Strategy with the asynchronous-ensure
// scheme. Safe for concurrent use, and by several instances on the same
// stores (every write is idempotent by order id).
type Strategy struct {
	db   *sql.DB
	rs   redisstock.Store
	cfg  strategies.Config
	skus redisstock.Catalog

	confirms *groupcommit.Group[*confirmItem]
	wake     chan struct{} // nudges the worker after a log row commits

	mu  sync.Mutex
	lag *hdrhistogram.Histogram // log row commit → synced, µs; guarded by mu

	settling atomic.Bool // Settle's drain: lag not recorded
	backlog  atomic.Int64
	c        counters
}

// counters are the strategy's own figures (Counters).
type counters struct {
	logged, applied, marked, lost, conflicts, workerFailures atomic.Int64
	retries, retriedSynced, alerts, backlogMax               atomic.Int64
	bgErrors, deferred, recovered, expired, reloads          atomic.Int64
	restocksCaught, soldCorrected, soldUnchecked             atomic.Int64
}

var _ strategies.Strategy = (*Strategy)(nil)

// New builds the strategy on cfg.DB and cfg.Redis.
func New(cfg strategies.Config) (*Strategy, error) {
	cfg = cfg.WithDefaults()
	if cfg.Redis == nil {
		return nil, errors.New("ensure needs redis")
	}
	s := &Strategy{db: cfg.DB, cfg: cfg,
		rs:   redisstock.Store{R: cfg.Redis, Retain: cfg.Retain, Fence: &redisstock.Fence{DB: cfg.DB}},
		wake: make(chan struct{}, 1),
		lag:  hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)}
	s.confirms = confirmGroup(cfg)
	return s, nil
}

// Name is "ensure".
func (s *Strategy) Name() string { return Name }

// Setup gives each SKU a Redis stock hash if it has none (see
// redisstock.Catalog.Load); live stock is never overwritten, so a restart
// on running stores re-sells nothing, and log rows a previous instance left
// unsynced are applied by this one's worker.
func (s *Strategy) Setup(ctx context.Context, stock []inventory.Stock) error {
	return s.skus.Load(ctx, s.rs, s.db)
}

// Reserve is the Redis Lua reserve, idempotent by order id.
func (s *Strategy) Reserve(ctx context.Context, r inventory.Reservation) error {
	_, err := s.rs.Try(ctx, r)
	return err
}

// Confirm decides the sale in MySQL — the order's row, the units moved to
// sold and the confirm's log row, in one transaction — and returns; the
// worker brings Redis in line. A repeat returns nil; a confirm of a
// cancelled, expired or refunded order ErrAlreadyFinal, of an order past
// its deadline ErrAlreadyFinal (it is expired), of an unknown one
// ErrUnknownOrder.
func (s *Strategy) Confirm(ctx context.Context, ref inventory.OrderRef) error {
	res, err := s.rs.Get(ctx, ref)
	if errors.Is(err, redisstock.ErrNoReservation) {
		// Redis has no record (never reserved, or Redis lost it): MySQL's
		// decision, if any, answers a repeat.
		return s.decided(ctx, ref, "confirm", inventory.StateConfirmed, inventory.ErrUnknownOrder)
	}
	if err != nil {
		return err
	}
	switch res.State {
	case inventory.StateConfirmed:
		return nil
	case inventory.StateReserved:
	default:
		return fmt.Errorf("confirm %s: order is %s: %w", ref.OrderID, res.State, inventory.ErrAlreadyFinal)
	}
	if !clock.Now().Before(res.Deadline) {
		got, err := s.release(ctx, ref, res, inventory.StateExpired)
		if err != nil {
			return err
		}
		if got == inventory.StateConfirmed {
			return nil
		}
		return fmt.Errorf("confirm %s: order is %s: %w", ref.OrderID, got, inventory.ErrAlreadyFinal)
	}
	it := &confirmItem{s: s, ref: ref, res: res}
	if err := s.confirms.Do(ctx, ref.SKU, it); err != nil {
		return err
	}
	s.nudge()
	if it.got != inventory.StateConfirmed {
		return fmt.Errorf("confirm %s: order is %s: %w", ref.OrderID, it.got, inventory.ErrAlreadyFinal)
	}
	return nil
}

// decided answers an operation on an order Redis holds no record of from
// MySQL's decision: nil when it is want, ErrAlreadyFinal for another one,
// none when there is none.
func (s *Strategy) decided(ctx context.Context, ref inventory.OrderRef, op string, want inventory.OrderState, none error) error {
	st, err := sqlstore.StateOf(ctx, s.db, ref.OrderID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%s %s: %w", op, ref.OrderID, none)
	case err != nil:
		return fmt.Errorf("%s %s: %w", op, ref.OrderID, err)
	case st == want:
		return nil
	}
	return fmt.Errorf("%s %s: order is %s: %w", op, ref.OrderID, st, inventory.ErrAlreadyFinal)
}

// errNoMySQLStock: Redis promised a unit MySQL does not have (drift).
var errNoMySQLStock = errors.New("mysql has no stock for a redis reservation")

// confirmOne is one confirm's transaction: the order's row (the first
// decision wins: a duplicate means one exists), the guarded move to sold,
// and the log row. It returns the decision that stands.
func (s *Strategy) confirmOne(ctx context.Context, ref inventory.OrderRef, res redisstock.Reservation) (inventory.OrderState, error) {
	now := clock.Now().UTC()
	err := sqlstore.InTx(ctx, s.db, func(tx *sql.Tx) error {
		r := inventory.Reservation{OrderID: ref.OrderID, SKU: ref.SKU, Qty: res.Qty, Deadline: res.Deadline, Buyer: res.Buyer}
		if err := sqlstore.InsertOrder(ctx, tx, r, inventory.StateConfirmed); err != nil {
			return err
		}
		out, err := tx.ExecContext(ctx,
			"UPDATE inventory SET available=available-?, sold=sold+? WHERE sku=? AND available>=?", res.Qty, res.Qty, ref.SKU, res.Qty)
		if err != nil {
			return fmt.Errorf("confirm: %w", err)
		}
		if n, _ := out.RowsAffected(); n == 0 {
			return errNoMySQLStock
		}
		return insertLog(ctx, tx, now, logRow{order: ref.OrderID, kind: kindConfirm, sku: ref.SKU, qty: res.Qty})
	})
	switch {
	case sqlstore.IsDuplicate(err):
		st, err := sqlstore.StateOf(ctx, s.db, ref.OrderID)
		if err != nil {
			return "", fmt.Errorf("read decision %s: %w", ref.OrderID, err)
		}
		return st, nil
	case errors.Is(err, errNoMySQLStock):
		// Refuse the sale rather than oversell, and give the unit back.
		if _, cerr := s.release(ctx, ref, res, inventory.StateCancelled); cerr != nil {
			return "", errors.Join(err, cerr)
		}
		return "", fmt.Errorf("confirm %s: %w: %w", ref.OrderID, errNoMySQLStock, inventory.ErrOutOfStock)
	case err != nil:
		return "", fmt.Errorf("confirm %s: %w", ref.OrderID, err)
	}
	s.c.logged.Add(1)
	return inventory.StateConfirmed, nil
}

// Cancel decides the cancel in MySQL (unless another decision exists),
// then releases the Redis reservation under the owner check. A cancel of
// an unknown order leaves a cancelled marker in Redis so that a late
// reserve is refused; of a confirmed or refunded order it releases nothing
// and returns ErrAlreadyFinal.
func (s *Strategy) Cancel(ctx context.Context, ref inventory.OrderRef) error {
	res, err := s.rs.Get(ctx, ref)
	switch {
	case errors.Is(err, redisstock.ErrNoReservation):
		res = redisstock.Reservation{}
	case err != nil:
		return err
	case res.State == inventory.StateCancelled || res.State == inventory.StateExpired:
		return nil
	case res.State != inventory.StateReserved:
		return fmt.Errorf("cancel %s: order is %s: %w", ref.OrderID, res.State, inventory.ErrAlreadyFinal)
	}
	got, err := s.release(ctx, ref, res, inventory.StateCancelled)
	if err != nil {
		return err
	}
	if got == inventory.StateConfirmed || got == stateRefunded {
		return fmt.Errorf("cancel %s: order is %s: %w", ref.OrderID, got, inventory.ErrAlreadyFinal)
	}
	return nil
}

// release writes decision `want` (cancelled or expired) as the order's row
// unless one exists, then releases the Redis reservation if the decision
// that stands is a release (a cancel leaves its marker). A paid decision
// that stands (confirmed, refunded) is the log's to apply. It returns the
// decision that stands.
func (s *Strategy) release(ctx context.Context, ref inventory.OrderRef, res redisstock.Reservation, want inventory.OrderState) (inventory.OrderState, error) {
	got := want
	err := sqlstore.InTx(ctx, s.db, func(tx *sql.Tx) error {
		r := inventory.Reservation{OrderID: ref.OrderID, SKU: ref.SKU, Qty: res.Qty, Deadline: res.Deadline, Buyer: res.Buyer}
		return sqlstore.InsertOrder(ctx, tx, r, want)
	})
	switch {
	case sqlstore.IsDuplicate(err):
		if got, err = sqlstore.StateOf(ctx, s.db, ref.OrderID); err != nil {
			return "", fmt.Errorf("read decision %s: %w", ref.OrderID, err)
		}
	case err != nil:
		return "", fmt.Errorf("%s %s: %w", want, ref.OrderID, err)
	}
	if got == inventory.StateCancelled || got == inventory.StateExpired {
		s.finishRedis(ctx, ref, got, got == inventory.StateCancelled)
	}
	return got, nil
}

// finishRedis releases a reservation whose release is already durable in
// MySQL, on a context of its own so the caller's ending cannot cut the
// write off. A failure is left to the recovery pass (and counted).
func (s *Strategy) finishRedis(ctx context.Context, ref inventory.OrderRef, st inventory.OrderState, marker bool) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.OpTimeout)
	defer cancel()
	if _, err := s.rs.Finish(rctx, ref, st, marker); err != nil {
		s.c.deferred.Add(1)
	}
}

// Refund gives a confirmed order's units back, DB-first: in one MySQL
// transaction the order moves confirmed → refunded (only from confirmed:
// the row lock makes two refunds, or a refund and a cancel, release once),
// its units move sold → available, and the refund's log row is written;
// the worker brings Redis in line. A repeat returns nil and changes
// nothing. A refund of an order reserved but not confirmed fails with
// ErrNotConfirmed, of a cancelled or expired one with ErrAlreadyFinal, of
// an unknown one with ErrUnknownOrder.
func (s *Strategy) Refund(ctx context.Context, ref inventory.OrderRef) error {
	now := clock.Now().UTC()
	var done bool
	err := sqlstore.InTx(ctx, s.db, func(tx *sql.Tx) error {
		done = false
		o, found, err := sqlstore.LockOrder(ctx, tx, ref.OrderID)
		if err != nil || !found || o.State != inventory.StateConfirmed {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE orders SET state=?, updated_at=? WHERE order_id=?", string(stateRefunded), now, o.ID); err != nil {
			return fmt.Errorf("refund: %w", err)
		}
		out, err := tx.ExecContext(ctx, "UPDATE inventory SET sold=sold-?, available=available+? WHERE sku=? AND sold>=?", o.Qty, o.Qty, o.SKU, o.Qty)
		if err != nil {
			return fmt.Errorf("refund: %w", err)
		}
		if n, _ := out.RowsAffected(); n == 0 {
			return fmt.Errorf("refund %s: mysql sold of %s below the order's %d units", o.ID, o.SKU, o.Qty)
		}
		if err := insertLog(ctx, tx, now, logRow{order: o.ID, kind: kindRefund, sku: o.SKU, qty: o.Qty}); err != nil {
			return err
		}
		done = true
		return nil
	})
	if err != nil {
		return fmt.Errorf("refund %s: %w", ref.OrderID, err)
	}
	if done {
		s.c.logged.Add(1)
		s.nudge()
		return nil
	}
	st, err := sqlstore.StateOf(ctx, s.db, ref.OrderID)
	switch {
	case err == nil && st == stateRefunded:
		return nil
	case err == nil:
		return fmt.Errorf("refund %s: order is %s: %w", ref.OrderID, st, inventory.ErrAlreadyFinal)
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("refund %s: %w", ref.OrderID, err)
	}
	// No decision in MySQL: the reservation, if any, lives in Redis.
	return s.rs.RefundRefusal(ctx, ref)
}

// Restock adds stock in MySQL first (journalled), then in Redis; a
// repeated restock id changes nothing (see redisstock.Store.Restock).
func (s *Strategy) Restock(ctx context.Context, r inventory.Restock) error {
	return s.rs.Restock(ctx, s.db, r)
}

// Close has nothing to release.
func (s *Strategy) Close() error { return nil }

// nudge wakes the worker (without blocking: one pending wake is enough).
func (s *Strategy) nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Counters reports the log's figures — rows written, applied by the worker
// and their lag (commit → synced, ms), the largest backlog a pass saw and
// the pending rows at the last pass, the retry job's attempts, rows it
// synced and alerts — and the recovery pass's.
func (s *Strategy) Counters() map[string]float64 {
	s.mu.Lock()
	p50 := float64(s.lag.ValueAtQuantile(50)) / 1000
	p99 := float64(s.lag.ValueAtQuantile(99)) / 1000
	mx := float64(s.lag.Max()) / 1000
	s.mu.Unlock()
	m := map[string]float64{
		"ensure_log_rows":          float64(s.c.logged.Load()),
		"ensure_applied":           float64(s.c.applied.Load()),
		"ensure_marked":            float64(s.c.marked.Load()),
		"ensure_apply_lost":        float64(s.c.lost.Load()),
		"ensure_apply_conflicts":   float64(s.c.conflicts.Load()),
		"ensure_worker_failures":   float64(s.c.workerFailures.Load()),
		"ensure_lag_p50_ms":        p50,
		"ensure_lag_p99_ms":        p99,
		"ensure_lag_max_ms":        mx,
		"ensure_pending_rows":      float64(s.backlog.Load()),
		"ensure_backlog_max":       float64(s.c.backlogMax.Load()),
		"ensure_retries":           float64(s.c.retries.Load()),
		"ensure_retried_synced":    float64(s.c.retriedSynced.Load()),
		"ensure_alerts":            float64(s.c.alerts.Load()),
		"background_errors":        float64(s.c.bgErrors.Load()),
		"ensure_deferred_releases": float64(s.c.deferred.Load()),
		"ensure_recovered":         float64(s.c.recovered.Load()),
		"ensure_expired":           float64(s.c.expired.Load()),
		"ensure_reloads":           float64(s.c.reloads.Load()),
		"ensure_restocks_caught":   float64(s.c.restocksCaught.Load()),
		"ensure_sold_corrected":    float64(s.c.soldCorrected.Load()),
		"ensure_sold_unchecked":    float64(s.c.soldUnchecked.Load()),
		"redis_rebuilds":           float64(s.rs.Fence.Rebuilds()),
	}
	for k, v := range s.confirms.Stats().Counters("confirm") {
		m[k] = v
	}
	return m
}
