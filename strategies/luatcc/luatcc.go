// Package luatcc is Redis Lua + TCC. Try reserves atomically in Redis with a
// Lua script; Confirm persists the sale to MySQL and then marks the Redis
// reservation confirmed; Cancel releases the Redis reservation under an owner
// check.
//
// The MySQL orders table is the TCC log and barrier (the model of
// dtm-labs' barrier): every decision about an order — confirmed, cancelled,
// expired — is an INSERT of its row keyed by order id, so the first decision
// wins, a repeat finds it, and a racing confirm and cancel cannot both win.
// Redis is then brought in line with the decision. A recovery loop applies
// every decision MySQL holds to the live Redis reservations (which also
// finishes a confirm interrupted between MySQL and Redis), expires those
// past their deadline unless a decision exists, and rebuilds a stock hash
// Redis lost.
//
// Anti-hanging (a Try that arrives after its order was cancelled): the
// cancel writes its decision in MySQL, then a cancelled marker in Redis
// that the Try script refuses, for Retain (default 1 h). A Try that comes
// later than that, or after a marker write that failed, reserves in Redis —
// the Try is one Lua script and cannot read MySQL — but the next recovery
// pass finds the order's decision and releases the unit: hanging is bounded
// by one SweepPeriod, and the order can never be confirmed (its decision
// stands). Null compensation (cancel before Try) is the same marker.
package luatcc

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/internal/groupcommit"
	"github.com/stockbench/stockbench/strategies/internal/redisstock"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// Strategy implements strategies.Strategy with Redis Lua and TCC. Safe for
// concurrent use.
type Strategy struct {
	db  *sql.DB
	rs  redisstock.Store
	cfg strategies.Config

	skus redisstock.Catalog

	bgErrors, deferred, recovered, expired, reloads, restocksCaught, soldCorrected, soldUnchecked atomic.Int64
	confirms                                                                                      *groupcommit.Group[*confirmItem]
	// dg is the degradation switch (degrade.go); nil when off.
	dg *degrader
	// so is the sold-out flag (soldout.go); nil when off.
	so *soldOut
}

var _ strategies.Strategy = (*Strategy)(nil)

// New builds the strategy on cfg.DB and cfg.Redis.
func New(cfg strategies.Config) (*Strategy, error) {
	cfg = cfg.WithDefaults()
	if cfg.Redis == nil {
		return nil, errors.New("lua-tcc needs redis")
	}
	fence := &redisstock.Fence{DB: cfg.DB}
	s := &Strategy{db: cfg.DB, rs: redisstock.Store{R: cfg.Redis, Retain: cfg.Retain, Fence: fence}, cfg: cfg, confirms: confirmGroup(cfg)}
	switch cfg.Degrade {
	case "":
	case "mysql":
		s.dg = newDegrader(s)
		fence.Drain = s.dg.drain
	default:
		return nil, fmt.Errorf("lua-tcc: degrade %q: want mysql or nothing", cfg.Degrade)
	}
	if cfg.SoldOutFlag > 0 {
		s.so = newSoldOut(cfg.SoldOutFlag)
	}
	return s, nil
}

// Name is "lua-tcc".
func (s *Strategy) Name() string { return "lua-tcc" }

// Setup gives each SKU a Redis stock hash if it has none (see
// redisstock.LoadFromMySQL); live stock is never overwritten, so starting
// the strategy on running stores — a service restart — re-sells nothing.
func (s *Strategy) Setup(ctx context.Context, stock []inventory.Stock) error {
	if err := s.skus.Load(ctx, s.rs, s.db); err != nil {
		return err
	}
	if s.dg != nil {
		// A restart while SKUs sell from MySQL: they stay there until
		// Redis is rebuilt for them.
		return s.dg.follow(ctx)
	}
	return nil
}

// Reserve is the Try: one Lua script, idempotent by order id. With the
// sold-out flag on, a SKU flagged sold out is refused here (soldout.go).
func (s *Strategy) Reserve(ctx context.Context, r inventory.Reservation) error {
	if s.so == nil {
		return s.reserve(ctx, r)
	}
	refuse, gen := s.so.before(r)
	if refuse {
		return refusal(r)
	}
	err := s.reserve(ctx, r)
	s.so.after(r, gen, err)
	return err
}

// reserve is Reserve past the sold-out flag.
func (s *Strategy) reserve(ctx context.Context, r inventory.Reservation) error {
	if s.dg != nil {
		return s.dg.reserve(ctx, r)
	}
	_, err := s.rs.Try(ctx, r)
	return err
}

// Confirm records the sale in MySQL (the decision), then in Redis.
func (s *Strategy) Confirm(ctx context.Context, ref inventory.OrderRef) error {
	if s.dg != nil {
		return s.dg.finish(ctx, ref, inventory.StateConfirmed)
	}
	res, want, err := s.rs.ConfirmTarget(ctx, ref)
	if errors.Is(err, inventory.ErrUnknownOrder) {
		// Redis lost the record, or it outlived Retain: the TCC log
		// answers a client that asks again.
		return sqlstore.ConfirmFromLog(ctx, s.db, ref, err)
	}
	if err != nil || want == "" {
		return err
	}
	return s.confirmDecided(ctx, ref, res, want)
}

// confirmDecided is Confirm once the reservation was read.
func (s *Strategy) confirmDecided(ctx context.Context, ref inventory.OrderRef, res redisstock.Reservation, want inventory.OrderState) error {
	got, err := s.decideConfirm(ctx, ref, res, want)
	if err != nil {
		return err
	}
	if got != inventory.StateConfirmed {
		return fmt.Errorf("confirm %s: order is %s: %w", ref.OrderID, got, inventory.ErrAlreadyFinal)
	}
	return nil
}

// Cancel records the cancel in MySQL (unless another decision exists), then
// releases the Redis reservation under the owner check. A cancel of an
// unknown order leaves a cancelled marker in Redis so that a late Try is
// refused.
func (s *Strategy) Cancel(ctx context.Context, ref inventory.OrderRef) error {
	err := s.cancel(ctx, ref)
	s.returned(ref.SKU, err)
	return err
}

// returned lowers sku's sold-out flag (when on) after an operation that
// may have given units back ended with err nil.
func (s *Strategy) returned(sku string, err error) {
	if s.so != nil && err == nil {
		s.so.clear(sku)
	}
}

// cancel is Cancel, the flag aside.
func (s *Strategy) cancel(ctx context.Context, ref inventory.OrderRef) error {
	if s.dg != nil {
		return s.dg.finish(ctx, ref, inventory.StateCancelled)
	}
	res, proceed, err := s.rs.CancelTarget(ctx, ref)
	if err != nil || !proceed {
		return err
	}
	return s.cancelDecided(ctx, ref, res)
}

// cancelDecided is Cancel once the reservation was read.
func (s *Strategy) cancelDecided(ctx context.Context, ref inventory.OrderRef, res redisstock.Reservation) error {
	got, err := s.decide(ctx, ref, res, inventory.StateCancelled)
	if err != nil {
		return err
	}
	if got == inventory.StateConfirmed || got == inventory.StateRefunded {
		return fmt.Errorf("cancel %s: order is %s: %w", ref.OrderID, got, inventory.ErrAlreadyFinal)
	}
	return nil
}

// Refund decides the refund in MySQL, the TCC log: under the order row's
// lock a confirmed order becomes refunded and MySQL's row moves its units
// from sold to available, in one transaction — the "already released"
// check, so a refund racing another refund or a cancel releases once. Then
// Redis gives the units back under its own owner check (refund.lua: only a
// record still confirmed moves, and it becomes refunded), on a context of
// its own. The refund is marked in flight in Redis before the MySQL
// transaction (redisstock.BeginRefund), so that recovery's sold correction
// does not count it a second time while its Redis write is on its way. A
// Redis write that fails, or finds no record (Redis lost it, or its
// retention passed), is left to recovery, whose sold correction
// (redisstock.CorrectSold) brings Redis's sold down to MySQL's — and so is
// a repeat (the order already refunded): it answers nil and writes
// nothing, since its first call's Redis write may have been lost and
// corrected already. An order MySQL holds no decision for is read in
// Redis: a live reservation is ErrNotConfirmed, no record ErrUnknownOrder,
// a cancelled marker ErrAlreadyFinal.
func (s *Strategy) Refund(ctx context.Context, ref inventory.OrderRef) error {
	err := s.refund(ctx, ref)
	s.returned(ref.SKU, err)
	return err
}

// refund is Refund, the flag aside.
func (s *Strategy) refund(ctx context.Context, ref inventory.OrderRef) error {
	_, deferred, err := s.rs.RefundTCC(ctx, s.db, ref, ref, s.cfg.OpTimeout)
	if deferred {
		s.deferred.Add(1)
	}
	return err
}

// decide writes decision `want` as the order's row unless one exists, and
// applies the decision that stands to Redis. It returns that decision.
func (s *Strategy) decide(ctx context.Context, ref inventory.OrderRef, res redisstock.Reservation, want inventory.OrderState) (inventory.OrderState, error) {
	got := want
	err := sqlstore.WriteDecision(ctx, s.db, inventory.Reservation{OrderID: ref.OrderID, SKU: ref.SKU, Qty: res.Qty, Deadline: res.Deadline, Buyer: res.Buyer}, want)
	switch {
	case sqlstore.IsDuplicate(err):
		if got, err = sqlstore.StateOf(ctx, s.db, ref.OrderID); err != nil {
			return "", fmt.Errorf("read decision %s: %w", ref.OrderID, err)
		}
		if got == inventory.StateReserved {
			// Held in MySQL (the degradation switch, degrade.go).
			if got, err = s.finishHeld(ctx, ref, want); err != nil {
				return "", err
			}
		}
	case errors.Is(err, sqlstore.ErrNoMySQLStock):
		// Redis promised a unit MySQL does not have: drift. Give the unit
		// back in Redis and refuse the sale rather than oversell.
		if _, cerr := s.decide(ctx, ref, res, inventory.StateCancelled); cerr != nil {
			return "", errors.Join(err, cerr)
		}
		return "", fmt.Errorf("confirm %s: %w: %w", ref.OrderID, sqlstore.ErrNoMySQLStock, inventory.ErrOutOfStock)
	case err != nil:
		return "", fmt.Errorf("%s %s: %w", want, ref.OrderID, err)
	}
	s.finishRedis(ctx, ref, got, got == inventory.StateCancelled)
	return got, nil
}

// finishRedis brings Redis in line with a decision already durable in MySQL,
// on a context of its own, so the caller's ending cannot cut this write off.
// A failure is left to recovery (and counted).
func (s *Strategy) finishRedis(ctx context.Context, ref inventory.OrderRef, got inventory.OrderState, release bool) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.redisFinishTimeout())
	defer cancel()
	if _, err := s.rs.Finish(rctx, ref, got, release); err != nil {
		s.deferred.Add(1)
		if s.dg != nil && ctx.Err() == nil {
			s.dg.fail() // a Redis failure for the switch's detector too
		}
	}
}

// Run is the recovery loop: every SweepPeriod it reloads a lost stock hash,
// applies every decision MySQL holds to the live Redis reservations,
// expires those past their deadline and corrects Redis's sold count from
// MySQL's (see recover).
func (s *Strategy) Run(ctx context.Context) error {
	if s.dg != nil {
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.dg.run(ctx)
		}()
		defer func() { <-done }()
	}
	sqlstore.Every(ctx, s.cfg.SweepPeriod, s.recover, func(error) { s.bgErrors.Add(1) })
	return nil
}

// Settle runs one recovery pass (see Run).
// With the degradation switch on, SKUs selling from MySQL go back to
// Redis first (Redis must answer).
func (s *Strategy) Settle(ctx context.Context) error {
	if s.dg != nil {
		if err := s.dg.tick(ctx, true); err != nil {
			return fmt.Errorf("settle: %w", err)
		}
	}
	return s.recover(ctx)
}

// recover visits every SKU of the catalog — MySQL's inventory table, not a
// list kept in memory, so a restarted or second replica recovers the same
// SKUs — and every live Redis reservation (after rebuilding a Redis that
// restarted, see redisstock.Fence):
//   - a SKU whose stock hash is gone (Redis lost its data) gets it rebuilt
//     by the guarded reload (redisstock.Reload), so reserves work again
//     without re-selling held units;
//   - a restock MySQL committed but Redis never counted (its caller died
//     between the two writes) is caught up (redisstock.CatchUpRestocks);
//   - a reservation MySQL holds a decision for gets it applied now, not at
//     its deadline: a cancel whose Redis write failed, or a late Try of a
//     cancelled order, holds its unit for at most one pass;
//   - a reservation past its deadline without a decision is expired;
//   - sales MySQL committed that Redis never counted (a confirm whose
//     reservation Redis lost, see redisstock.CorrectSold) are moved from
//     available to sold in Redis, so no drift outlives the pass.
func (s *Strategy) recover(ctx context.Context) error {
	// A Redis that restarted (even with no Try to notice it) is rebuilt
	// from MySQL first: its drift repaired, its lost sales counted.
	if err := s.rs.Ready(ctx); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	now := clock.Now()
	if s.so != nil {
		s.so.prune(now)
	}
	after := ""
	for {
		rows, err := redisstock.RowsPage(ctx, s.db, after, recoverBatch)
		if err != nil {
			return fmt.Errorf("recover: %w", err)
		}
		if len(rows) == 0 {
			if s.dg != nil {
				s.dg.passedAt.Store(now.UnixMilli())
			}
			return nil
		}
		after = rows[len(rows)-1].SKU
		gl, err := s.rs.Glances(ctx, rows)
		if err != nil {
			return fmt.Errorf("recover: %w", err)
		}
		for i, row := range rows {
			if err := s.recoverSKU(ctx, row, gl[i], now); err != nil {
				return err
			}
		}
	}
}

// recoverBatch is how many SKUs a recovery pass glances at per round trip
// (one MySQL page, one Redis pipeline); only the SKUs the glance shows
// work for are visited one by one.
const recoverBatch = 500

// recoverSKU is one SKU's part of a recovery pass, given what a glance at
// its Redis side, taken after its MySQL row was read, showed. A SKU with a
// hash, no restock missing, no live reservation and Redis sold equal to
// MySQL sold has nothing to recover and costs no round trip of its own. (A
// drift a concurrent confirm happens to mask in that comparison is found by
// a later pass; Settle's pass runs with no load.)
func (s *Strategy) recoverSKU(ctx context.Context, row redisstock.SKURow, g redisstock.Glance, now time.Time) error {
	sku := row.SKU
	if s.so != nil && !g.Missing && g.Available > 0 {
		s.so.clearSeen(sku) // stock came back, whoever returned it
	}
	if s.dg != nil && s.dg.inMySQL(sku) {
		return nil // sells from MySQL: the switch back rebuilds it
	}
	if !g.Missing && g.Total >= row.Total && g.Live == 0 && g.Sold == row.Sold {
		return nil
	}
	created, err := s.rs.Reload(ctx, s.db, sku)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	if created {
		s.reloads.Add(1)
	} else if caught, err := s.rs.CatchUpRestocks(ctx, row); err != nil {
		return fmt.Errorf("recover: %w", err)
	} else if caught {
		s.restocksCaught.Add(1)
	}
	ids, err := s.rs.Due(ctx, sku, time.Time{}, 0)
	if err != nil {
		return err
	}
	decided, err := decisions(ctx, s.db, ids)
	if err != nil {
		return err
	}
	var undecided []string
	for _, id := range ids {
		ref := inventory.OrderRef{OrderID: id, SKU: sku}
		st, ok := decided[id]
		if !ok {
			undecided = append(undecided, id)
			continue
		}
		prev, err := s.rs.Finish(ctx, ref, st, false)
		if err != nil {
			return err
		}
		if prev == inventory.StateReserved {
			s.recovered.Add(1)
		}
	}
	// Expiry in batches (expire.go): a backlog is cleared at bulk rate.
	if err := s.expireUndecided(ctx, sku, undecided, now); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	// Sales MySQL committed that this Redis will never count (a
	// confirm of a reservation Redis lost): drift, corrected now.
	n, unchecked, err := s.rs.CorrectSold(ctx, s.db, sku)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	s.soldCorrected.Add(max(n, -n))
	if unchecked {
		s.soldUnchecked.Add(1)
	}
	return nil
}

// decisions reads the MySQL decisions (final order states) of the given
// orders.
func decisions(ctx context.Context, db *sql.DB, ids []string) (map[string]inventory.OrderState, error) {
	states, err := sqlstore.OrderStates(ctx, db, ids)
	if err != nil {
		return nil, fmt.Errorf("recover: decisions: %w", err)
	}
	for id, st := range states {
		if !st.Final() {
			delete(states, id)
		}
	}
	return states, nil
}

// Restock adds stock in MySQL first (journalled), then in Redis; a
// repeated restock id changes nothing (see redisstock.Store.Restock).
func (s *Strategy) Restock(ctx context.Context, r inventory.Restock) error {
	var err error
	if s.dg != nil {
		err = s.dg.restock(ctx, r)
	} else {
		err = s.rs.Restock(ctx, s.db, r)
	}
	s.returned(r.SKU, err)
	return err
}

// Close has nothing to release.
func (s *Strategy) Close() error { return nil }

// Counters reports background errors, deferred Redis confirms, recovered
// and expired reservations.
func (s *Strategy) Counters() map[string]float64 {
	m := s.withBatchCounters(map[string]float64{
		"background_errors":   float64(s.bgErrors.Load()),
		"tcc_deferred_redis":  float64(s.deferred.Load()),
		"tcc_recovered":       float64(s.recovered.Load()),
		"tcc_expired":         float64(s.expired.Load()),
		"tcc_reloads":         float64(s.reloads.Load()),
		"tcc_restocks_caught": float64(s.restocksCaught.Load()),
		"tcc_sold_corrected":  float64(s.soldCorrected.Load()),
		"tcc_sold_unchecked":  float64(s.soldUnchecked.Load()),
		"redis_rebuilds":      float64(s.rs.Fence.Rebuilds()),
	})
	if s.dg != nil {
		s.dg.counters(m)
	}
	if s.so != nil {
		s.so.counters(m)
	}
	return m
}
