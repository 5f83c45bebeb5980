// Package cas is the optimistic strategy: read the inventory row's version,
// then UPDATE … WHERE version=? AND available>=?; when another writer got in
// first the update matches no row and the reserve retries, a bounded number
// of times, immediately or after a fair backoff.
//
// The backoff is fair. An uncapped per-buyer exponential backoff lets a
// buyer that has missed often sleep ever longer while fresh buyers win —
// starvation, seen as a P99 that grows through the run. Here the backoff
// window is shared by every buyer of the strategy and adapts to contention
// (it grows a little on each miss and shrinks a little on each success, so
// it settles where few attempts collide), and a buyer's wait is drawn from
// that window divided by its age (attempts so far, up to 8): an old buyer
// retries sooner than a new one instead of later. Each reserve has a total
// time budget — its context's deadline (the operation timeout), or
// CASMaxWait when that is set and shorter — and CASMaxAttempts: when the
// next wait would end past the budget, the reserve gives up with
// ErrConflict (nothing changed; the client may try again) instead of
// running into a timeout whose outcome the client cannot tell.
package cas

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// Retry policies.
const (
	RetryBackoff   = "backoff"
	RetryImmediate = "immediate"
)

// Bounds of the shared backoff window, and its steps: ×missGrow on a miss,
// ×hitShrink on a success (settling near one miss per two successes).
const (
	windowMin = time.Millisecond
	windowMax = time.Second
	missGrow  = 1.1
	hitShrink = 0.95
	maxAge    = 8
)

// backoff is the wait before retry number attempt (1 for the first retry)
// given the shared window: a uniform draw (rnd draws from [0, n)) from the
// window divided by the buyer's age, so older buyers go first. giveUp is
// true when that wait would end past the budget left.
func backoff(attempt int, window, left time.Duration, rnd func(n time.Duration) time.Duration) (wait time.Duration, giveUp bool) {
	bound := max(window/time.Duration(min(max(attempt, 1), maxAge)), 1)
	wait = rnd(bound)
	return wait, wait >= left
}

// nextWindow is the shared window after a miss (hit false) or a success.
func nextWindow(w time.Duration, hit bool) time.Duration {
	f := missGrow
	if hit {
		f = hitShrink
	}
	return min(max(time.Duration(float64(w)*f), windowMin), windowMax)
}

// window is the shared backoff window; safe for concurrent use (a lost
// update between racing buyers only nudges it less).
type window struct{ ns atomic.Int64 }

func (w *window) get() time.Duration {
	if d := time.Duration(w.ns.Load()); d > 0 {
		return d
	}
	return windowMin
}

func (w *window) step(hit bool) { w.ns.Store(int64(nextWindow(w.get(), hit))) }

// Strategy implements strategies.Strategy with compare-and-set on a version
// column. Safe for concurrent use.
type Strategy struct {
	sqlstore.Base
	retries, successes, giveups atomic.Int64
	window                      window
}

var _ strategies.Strategy = (*Strategy)(nil)

// New builds the strategy; cfg.CASRetry must be "backoff" or "immediate".
func New(cfg strategies.Config) (*Strategy, error) {
	cfg = cfg.WithDefaults()
	if cfg.CASRetry != RetryBackoff && cfg.CASRetry != RetryImmediate {
		return nil, fmt.Errorf("cas: retry policy %q: want backoff or immediate", cfg.CASRetry)
	}
	// Confirm and cancel move units out of occupied with a guarded relative
	// UPDATE; they leave the version alone, since no reserve's check reads
	// occupied or sold, and bumping it would only fail reserves for nothing.
	return &Strategy{Base: sqlstore.NewBase(cfg, sqlstore.GuardedMove)}, nil
}

// Name is "cas".
func (s *Strategy) Name() string { return "cas" }

var errMiss = errors.New("cas miss")

// Reserve reads (available, version) without a lock and tries the versioned
// update together with the order row; a miss rolls back and retries.
func (s *Strategy) Reserve(ctx context.Context, r inventory.Reservation) error {
	giveUpAt, bounded := ctx.Deadline()
	if s.Cfg.CASMaxWait > 0 && (!bounded || time.Now().Add(s.Cfg.CASMaxWait).Before(giveUpAt)) {
		giveUpAt, bounded = time.Now().Add(s.Cfg.CASMaxWait), true
	}
	for attempt := 1; ; attempt++ {
		var avail, ver int64
		err := s.DB.QueryRowContext(ctx, "SELECT available, version FROM inventory WHERE sku=?", r.SKU).Scan(&avail, &ver)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("reserve: unknown sku %q", r.SKU)
		}
		if err != nil {
			return fmt.Errorf("reserve: read version: %w", err)
		}
		if avail < r.Qty {
			if err := sqlstore.ReserveRepeat(ctx, s.DB, r.OrderID); err == nil || errors.Is(err, inventory.ErrAlreadyFinal) {
				return err
			}
			return inventory.ErrOutOfStock
		}
		// The versioned UPDATE comes first, so the window between the read
		// and the compare-and-set is as short as it can be.
		err = sqlstore.InTx(ctx, s.DB, func(tx *sql.Tx) error {
			res, err := tx.ExecContext(ctx,
				"UPDATE inventory SET available=available-?, occupied=occupied+?, version=version+1 WHERE sku=? AND version=? AND available>=?",
				r.Qty, r.Qty, r.SKU, ver, r.Qty)
			if err != nil {
				return fmt.Errorf("reserve: %w", err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return errMiss
			}
			if err := sqlstore.InsertOrder(ctx, tx, r, inventory.StateReserved); err != nil {
				return err
			}
			// After the versioned UPDATE, to keep the compare-and-set window
			// short; a limit refusal rolls the UPDATE back.
			return sqlstore.HoldForBuyer(ctx, tx, r)
		})
		switch {
		case err == nil:
			s.successes.Add(1)
			s.window.step(true)
			return nil
		case sqlstore.IsDuplicate(err):
			return sqlstore.ReserveRepeat(ctx, s.DB, r.OrderID)
		case !errors.Is(err, errMiss):
			return err
		}
		if attempt >= s.Cfg.CASMaxAttempts {
			s.giveups.Add(1)
			return fmt.Errorf("reserve %s after %d attempts: %w", r.OrderID, attempt, inventory.ErrConflict)
		}
		if s.Cfg.CASRetry == RetryBackoff {
			left := time.Duration(1<<63 - 1)
			if bounded {
				left = time.Until(giveUpAt)
			}
			s.window.step(false)
			wait, giveUp := backoff(attempt, s.window.get(), left, rand.N[time.Duration])
			if giveUp {
				s.giveups.Add(1)
				return fmt.Errorf("reserve %s: gave up after %d attempts, out of time: %w", r.OrderID, attempt, inventory.ErrConflict)
			}
			s.retries.Add(1)
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
			continue
		}
		s.retries.Add(1)
	}
}

// Counters adds cas_retries, cas_successes, cas_giveups,
// cas_retries_per_success and cas_backoff_window_ms (its value at the end)
// to the background error count.
func (s *Strategy) Counters() map[string]float64 {
	c := s.Base.Counters()
	r, ok, g := s.retries.Load(), s.successes.Load(), s.giveups.Load()
	c["cas_retries"], c["cas_successes"], c["cas_giveups"] = float64(r), float64(ok), float64(g)
	c["cas_backoff_window_ms"] = float64(s.window.get()) / float64(time.Millisecond)
	if ok > 0 {
		c["cas_retries_per_success"] = float64(r) / float64(ok)
	}
	return c
}
