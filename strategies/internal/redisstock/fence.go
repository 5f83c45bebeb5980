package redisstock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/inventory"
)

// Fence keeps Try off a Redis that lost its data until the stock is
// rebuilt from MySQL. A Redis that restarts — empty, or holding what its
// append-only file kept, or a replica promoted in its place — has lost the
// writes it did not persist or replicate, acknowledged or not; its stock
// hashes may then offer units MySQL's orders already hold (oversell) or
// count sales it never saw (drift). It also forgets every script: the
// script cache is neither persisted nor replicated. So the Try script is
// the sentinel. Try runs only by EVALSHA, never loading the script itself;
// a NOSCRIPT answer means the server is a new process (or an operator
// flushed the cache), and the Try did not run. The first Try to see it
// rebuilds every SKU's hash from MySQL (Rebuild), loads the script again
// and runs; other Trys of this instance wait for that. A strategy instance
// that starts (Setup, through Ready) on a server without the script does
// the same before it serves. Safe for concurrent use; several instances
// may rebuild at once (each rebuild is safe beside live traffic).
type Fence struct {
	DB *sql.DB
	// OnRebuild, when set, runs after every rebuild (the outbox reconciler
	// drops the differences it was watching: they describe a Redis that
	// is gone).
	OnRebuild func()
	// Drain, when set, makes the fence gated, for a strategy whose truth
	// is MySQL plus writes of its own not yet there (outbox-local's local
	// message table). Each of its operations that writes Redis runs
	// between Enter and Leave, and its Try answers ErrFenced instead of
	// rebuilding; the rebuild (Ready) then waits until no operation is
	// inside, runs Drain — which must bring every write of this instance
	// into MySQL — and rebuilds from MySQL with operations held off, so no
	// decision can land between the drain and the read.
	Drain func(ctx context.Context) error

	mu       sync.Mutex   // one rebuild at a time in this instance
	ops      sync.RWMutex // gated fence: operations read-hold it, the rebuild holds it
	rebuilds atomic.Int64
}

// ErrFenced: a gated fence's Try found a Redis without the Try script (a
// restart) and did not run; the caller leaves the fence (Leave), calls
// Store.Ready, and tries again.
var ErrFenced = errors.New("redis restarted: rebuild first")

// Enter marks the start of an operation that writes Redis (gated fence:
// see Drain); a rebuild waits for it to Leave. A nil fence, or one without
// Drain, does nothing.
func (f *Fence) Enter() {
	if f != nil && f.Drain != nil {
		f.ops.RLock()
	}
}

// Leave ends what Enter began.
func (f *Fence) Leave() {
	if f != nil && f.Drain != nil {
		f.ops.RUnlock()
	}
}

// Rebuilds is how many rebuilds this fence ran.
func (f *Fence) Rebuilds() int64 { return f.rebuilds.Load() }

// isNoScript reports Redis's NOSCRIPT error.
func isNoScript(err error) bool { return redis.HasErrorPrefix(err, "NOSCRIPT") }

// try runs the Try script by EVALSHA only; on NOSCRIPT it rebuilds (or
// waits for this instance's rebuild) and runs it once more.
func (s Store) try(ctx context.Context, r inventory.Reservation) (int, error) {
	args := []any{r.Qty, r.Deadline.UnixMilli(), r.OrderID, r.Buyer, r.Limit}
	if s.Fence == nil {
		return tryScript.Run(ctx, s.R, keys(r.SKU, r.OrderID), args...).Int()
	}
	n, err := s.R.EvalSha(ctx, tryScript.Hash(), keys(r.SKU, r.OrderID), args...).Int()
	if !isNoScript(err) {
		return n, err
	}
	if s.Fence.Drain != nil {
		return 0, ErrFenced
	}
	if err := s.Ready(ctx); err != nil {
		return 0, err
	}
	return s.R.EvalSha(ctx, tryScript.Hash(), keys(r.SKU, r.OrderID), args...).Int()
}

// Ready makes sure Redis holds the Try script, rebuilding every SKU's
// stock from MySQL first when it does not (see Fence). A Store without a
// fence is always ready.
func (s Store) Ready(ctx context.Context) error {
	f := s.Fence
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ok, err := s.R.ScriptExists(ctx, tryScript.Hash()).Result()
	if err != nil {
		return fmt.Errorf("redis fence: %w", err)
	}
	if len(ok) == 1 && ok[0] {
		return nil // loaded: no restart since, or another caller rebuilt
	}
	if f.Drain != nil {
		f.ops.Lock()
		defer f.ops.Unlock()
		if err := f.Drain(ctx); err != nil {
			return fmt.Errorf("redis fence: drain: %w", err)
		}
	}
	if err := s.Rebuild(ctx, f.DB); err != nil {
		return fmt.Errorf("redis fence: %w", err)
	}
	if err := tryScript.Load(ctx, s.R).Err(); err != nil {
		return fmt.Errorf("redis fence: load try: %w", err)
	}
	f.rebuilds.Add(1)
	if f.OnRebuild != nil {
		f.OnRebuild()
	}
	return nil
}

// Arm loads the Try script when the stock hashes were all just built from
// MySQL (a first start on an empty Redis): the rebuild Ready would run
// has nothing left to do. Without a fence it does nothing.
func (s Store) Arm(ctx context.Context) error {
	if s.Fence == nil {
		return nil
	}
	s.Fence.mu.Lock()
	defer s.Fence.mu.Unlock()
	if err := tryScript.Load(ctx, s.R).Err(); err != nil {
		return fmt.Errorf("redis fence: load try: %w", err)
	}
	return nil
}

// Rebuild rebuilds every SKU's stock hash from MySQL, the system of
// record: the hash is dropped and built again as Reload builds a missing
// one — total from MySQL, sold from its confirmed orders, MySQL's
// decisions given to the live reservations that missed them, occupied
// from every reservation still held (live in Redis, or reserved in MySQL
// and recorded again in Redis), available the rest. While a SKU's hash is
// missing its Trys fail (no stock hash) and its decisions wait for the new
// hash (finish.lua), so nothing in flight is counted twice or lost. A
// reservation only Redis held, acknowledged in the window the server lost,
// cannot be rebuilt: nothing else knew it.
func (s Store) Rebuild(ctx context.Context, db *sql.DB) error {
	skus, err := ListSKUs(ctx, db)
	if err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	for _, sku := range skus {
		if err := s.R.Del(ctx, inventory.RedisStockKey(sku), restockKey(sku)).Err(); err != nil {
			return fmt.Errorf("rebuild %s: %w", sku, err)
		}
		if _, err := s.Reload(ctx, db, sku); err != nil {
			return fmt.Errorf("rebuild %s: %w", sku, err)
		}
	}
	return nil
}
