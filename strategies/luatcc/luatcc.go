// Package luatcc is Redis Lua + TCC. Try reserves atomically in Redis with a
// Lua script; Confirm persists the sale to MySQL and then marks the Redis
// reservation confirmed; Cancel releases the Redis reservation under an owner
// check.
//
// The MySQL orders table is the TCC log and barrier (the model of
// dtm-labs' barrier): every decision about an order — confirmed, cancelled,
// expired — is an INSERT of its row keyed by order id, so the first decision
// wins, a repeat finds it, and a racing confirm and cancel cannot both win.
// Redis is then brought in line with the decision. A recovery loop finds
// reservations past their deadline, writes "expired" unless a decision
// exists, and applies whatever decision MySQL holds — which also finishes a
// confirm interrupted between MySQL and Redis.
package luatcc

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/internal/groupcommit"
	"github.com/stockbench/stockbench/strategies/internal/redisstock"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// Strategy implements inventory.Strategy with Redis Lua and TCC. Safe for
// concurrent use.
type Strategy struct {
	db  *sql.DB
	rs  redisstock.Store
	cfg strategies.Config

	skus redisstock.Catalog

	bgErrors, deferred, recovered, expired atomic.Int64
	confirms                               *groupcommit.Group[*confirmItem]
}

var _ inventory.Strategy = (*Strategy)(nil)

// New builds the strategy on cfg.DB and cfg.Redis.
func New(cfg strategies.Config) (*Strategy, error) {
	cfg = cfg.WithDefaults()
	if cfg.Redis == nil {
		return nil, errors.New("lua-tcc needs redis")
	}
	return &Strategy{db: cfg.DB, rs: redisstock.Store{R: cfg.Redis, Retain: cfg.Retain}, cfg: cfg, confirms: confirmGroup(cfg)}, nil
}

// Name is "lua-tcc".
func (s *Strategy) Name() string { return "lua-tcc" }

// Setup loads the stock from MySQL into Redis.
func (s *Strategy) Setup(ctx context.Context, stock []inventory.Stock) error {
	return s.skus.Load(ctx, s.rs, s.db)
}

// Reserve is the Try: one Lua script, idempotent by order id.
func (s *Strategy) Reserve(ctx context.Context, r inventory.Reservation) error {
	_, err := s.rs.Try(ctx, r)
	return err
}

// Confirm records the sale in MySQL (the decision), then in Redis.
func (s *Strategy) Confirm(ctx context.Context, ref inventory.OrderRef) error {
	res, err := s.rs.Get(ctx, ref)
	if errors.Is(err, redisstock.ErrNoReservation) {
		return fmt.Errorf("confirm %s: %w", ref.OrderID, inventory.ErrUnknownOrder)
	}
	if err != nil {
		return err
	}
	switch res.State {
	case inventory.StateConfirmed:
		return nil
	case inventory.StateCancelled, inventory.StateExpired:
		return fmt.Errorf("confirm %s: order is %s: %w", ref.OrderID, res.State, inventory.ErrAlreadyFinal)
	}
	want := inventory.StateConfirmed
	if !time.Now().Before(res.Deadline) {
		want = inventory.StateExpired
	}
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
	res, err := s.rs.Get(ctx, ref)
	switch {
	case errors.Is(err, redisstock.ErrNoReservation):
		res = redisstock.Reservation{}
	case err != nil:
		return err
	case res.State == inventory.StateConfirmed:
		return fmt.Errorf("cancel %s: order is confirmed: %w", ref.OrderID, inventory.ErrAlreadyFinal)
	case res.State == inventory.StateCancelled || res.State == inventory.StateExpired:
		return nil
	}
	got, err := s.decide(ctx, ref, res, inventory.StateCancelled)
	if err != nil {
		return err
	}
	if got == inventory.StateConfirmed {
		return fmt.Errorf("cancel %s: order is confirmed: %w", ref.OrderID, inventory.ErrAlreadyFinal)
	}
	return nil
}

var errNoMySQLStock = errors.New("mysql has no stock for a redis reservation")

// decide writes decision `want` as the order's row unless one exists, and
// applies the decision that stands to Redis. It returns that decision.
func (s *Strategy) decide(ctx context.Context, ref inventory.OrderRef, res redisstock.Reservation, want inventory.OrderState) (inventory.OrderState, error) {
	got := want
	err := sqlstore.InTx(ctx, s.db, func(tx *sql.Tx) (error, error) {
		r := inventory.Reservation{OrderID: ref.OrderID, SKU: ref.SKU, Qty: res.Qty, Deadline: res.Deadline}
		if err := sqlstore.InsertOrder(ctx, tx, r, want); err != nil {
			return nil, err
		}
		if want != inventory.StateConfirmed {
			return nil, nil
		}
		out, err := tx.ExecContext(ctx,
			"UPDATE inventory SET available=available-?, sold=sold+? WHERE sku=? AND available>=?", res.Qty, res.Qty, ref.SKU, res.Qty)
		if err != nil {
			return nil, fmt.Errorf("confirm: %w", err)
		}
		if n, _ := out.RowsAffected(); n == 0 {
			return nil, errNoMySQLStock
		}
		return nil, nil
	})
	switch {
	case sqlstore.IsDuplicate(err):
		if err := s.db.QueryRowContext(ctx, "SELECT state FROM orders WHERE order_id=?", ref.OrderID).Scan(&got); err != nil {
			return "", fmt.Errorf("read decision %s: %w", ref.OrderID, err)
		}
	case errors.Is(err, errNoMySQLStock):
		// Redis promised a unit MySQL does not have: drift. Give the unit
		// back in Redis and refuse the sale rather than oversell.
		if _, cerr := s.decide(ctx, ref, res, inventory.StateCancelled); cerr != nil {
			return "", errors.Join(err, cerr)
		}
		return "", fmt.Errorf("confirm %s: %w: %w", ref.OrderID, errNoMySQLStock, inventory.ErrOutOfStock)
	case err != nil:
		return "", fmt.Errorf("%s %s: %w", want, ref.OrderID, err)
	}
	if _, err := s.rs.Finish(ctx, ref, got, got == inventory.StateCancelled); err != nil {
		// The decision is durable in MySQL; recovery brings Redis in line.
		s.deferred.Add(1)
	}
	return got, nil
}

// Run is the recovery loop: every SweepPeriod it settles reservations past
// their deadline.
func (s *Strategy) Run(ctx context.Context) error {
	sqlstore.Every(ctx, s.cfg.SweepPeriod, func(ctx context.Context) error { return s.recover(ctx, false) },
		func(error) { s.bgErrors.Add(1) })
	return nil
}

// Settle applies every decision MySQL holds for a live Redis reservation
// and expires those past their deadline.
func (s *Strategy) Settle(ctx context.Context) error { return s.recover(ctx, true) }

// recover visits live reservations: past-deadline ones always, the others
// when all is set. A past-deadline reservation without a decision is
// expired; one with a decision gets it applied.
func (s *Strategy) recover(ctx context.Context, all bool) error {
	skus := s.skus.List()
	now := time.Now()
	due := now
	if all {
		due = time.Time{}
	}
	for _, sku := range skus {
		ids, err := s.rs.Due(ctx, sku, due, 1000)
		if err != nil {
			return err
		}
		for _, id := range ids {
			ref := inventory.OrderRef{OrderID: id, SKU: sku}
			res, err := s.rs.Get(ctx, ref)
			if errors.Is(err, redisstock.ErrNoReservation) {
				continue
			}
			if err != nil {
				return err
			}
			if res.State != inventory.StateReserved {
				continue
			}
			if now.Before(res.Deadline) {
				// Not due: only apply a decision that already exists.
				var st inventory.OrderState
				err := s.db.QueryRowContext(ctx, "SELECT state FROM orders WHERE order_id=?", id).Scan(&st)
				if errors.Is(err, sql.ErrNoRows) {
					continue
				}
				if err != nil {
					return fmt.Errorf("recover %s: %w", id, err)
				}
				if _, err := s.rs.Finish(ctx, ref, st, false); err != nil {
					return err
				}
				s.recovered.Add(1)
				continue
			}
			got, err := s.decide(ctx, ref, res, inventory.StateExpired)
			if err != nil {
				return err
			}
			if got == inventory.StateExpired {
				s.expired.Add(1)
			} else {
				s.recovered.Add(1)
			}
		}
	}
	return nil
}

// Restock adds stock in MySQL first, then in Redis.
func (s *Strategy) Restock(ctx context.Context, sku string, qty int64) error {
	return s.rs.Restock(ctx, s.db, sku, qty)
}

// Close has nothing to release.
func (s *Strategy) Close() error { return nil }

// Counters reports background errors, deferred Redis confirms, recovered
// and expired reservations.
func (s *Strategy) Counters() map[string]float64 {
	return s.withBatchCounters(map[string]float64{
		"background_errors":  float64(s.bgErrors.Load()),
		"tcc_deferred_redis": float64(s.deferred.Load()),
		"tcc_recovered":      float64(s.recovered.Load()),
		"tcc_expired":        float64(s.expired.Load()),
	})
}
