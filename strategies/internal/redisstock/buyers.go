package redisstock

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/inventory"
)

//go:embed buyers.lua
var buyersLua string

var buyersScript = redis.NewScript(buyersLua)

// buyersReadHook, set by tests only, runs between BuildBuyers' MySQL read
// and its script: where a decision committed meanwhile used to fall
// between the two.
var buyersReadHook func(sku string)

// buildLocks serialises BuildBuyers per SKU within a process, so a flash
// sale's first buyers do not all read MySQL to build the same holds.
var buildLocks sync.Map // sku → *sync.Mutex

// BuildBuyers builds sku's buyer holds (the per-buyer limit's counts,
// inventory.RedisBuyersKey) in Redis when its stock hash has none valid: a
// hash that is new, or was rebuilt from MySQL after Redis lost its data
// (Reload, Rebuild), starts without them, and the Try of a reservation
// with a buyer refuses to run until they are built (try.lua's -5). The
// counts come from MySQL's orders with a buyer (reserved or confirmed)
// and Redis's own reservation records, at one instant (buyers.lua), over
// every reservation live when the hash was rebuilt as well as those live
// now, so a decision landing between the MySQL read and the script is
// counted by its record. It is
// apart from the stock rebuild on purpose: the stock hash is rebuilt
// without knowing about buyers, and the holds follow on first use. Safe
// for concurrent use and beside live traffic; a second call finds the
// holds valid and changes nothing.
func (s Store) BuildBuyers(ctx context.Context, db *sql.DB, sku string) error {
	mu, _ := buildLocks.LoadOrStore(sku, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	if v, err := s.R.HGet(ctx, inventory.RedisStockKey(sku), "bv").Result(); err == nil && v == "1" {
		return nil
	}
	rows, err := db.QueryContext(ctx,
		"SELECT order_id, buyer, qty FROM orders WHERE sku=? AND buyer IS NOT NULL AND state IN ('reserved','confirmed')", sku)
	if err != nil {
		return fmt.Errorf("build buyer holds %s: %w", sku, err)
	}
	retain := s.Retain.Milliseconds()
	if retain <= 0 {
		retain = time.Hour.Milliseconds()
	}
	args := []any{inventory.RedisReservationKey(sku, ""), retain}
	for rows.Next() {
		var id, buyer string
		var q int64
		if err := rows.Scan(&id, &buyer, &q); err != nil {
			rows.Close()
			return fmt.Errorf("build buyer holds %s: %w", sku, err)
		}
		args = append(args, id, buyer, q)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("build buyer holds %s: %w", sku, err)
	}
	if buyersReadHook != nil {
		buyersReadHook(sku)
	}
	keys := []string{inventory.RedisStockKey(sku), inventory.RedisLiveKey(sku), inventory.RedisBuyersKey(sku), buyersPendingKey(sku), buyersCountedKey(sku)}
	if err := buyersScript.Run(ctx, s.R, keys, args...).Err(); err != nil {
		return fmt.Errorf("build buyer holds %s: %w", sku, err)
	}
	return nil
}
