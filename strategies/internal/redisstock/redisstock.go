// Package redisstock holds the Redis side shared by the Redis strategies:
// the Lua scripts that reserve and finish reservations atomically, loading
// stock from MySQL, and reading a reservation. Keys follow the layout in
// package inventory, with the SKU as hash tag.
package redisstock

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/inventory"
)

//go:embed try.lua
var tryLua string

//go:embed finish.lua
var finishLua string

var (
	tryScript    = redis.NewScript(tryLua)
	finishScript = redis.NewScript(finishLua)
)

// Store runs the scripts on one Redis. Safe for concurrent use.
type Store struct {
	R      redis.UniversalClient
	Retain time.Duration
}

// Catalog is the list of SKUs a Redis strategy loaded. Safe for concurrent use.
type Catalog struct {
	mu   sync.Mutex
	skus []string
}

// Load copies the stock from MySQL into Redis and remembers the SKUs.
func (c *Catalog) Load(ctx context.Context, s Store, db *sql.DB) error {
	skus, err := s.LoadFromMySQL(ctx, db)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.skus = skus
	c.mu.Unlock()
	return nil
}

// List returns the SKUs loaded last.
func (c *Catalog) List() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.skus
}

// LoadFromMySQL copies every inventory row of MySQL into the Redis stock
// hashes and returns the SKUs.
func (s Store) LoadFromMySQL(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, "SELECT sku, total, available, occupied, sold FROM inventory")
	if err != nil {
		return nil, fmt.Errorf("load redis: %w", err)
	}
	defer rows.Close()
	var skus []string
	pipe := s.R.Pipeline()
	for rows.Next() {
		var st inventory.Stock
		if err := rows.Scan(&st.SKU, &st.Total, &st.Available, &st.Occupied, &st.Sold); err != nil {
			return nil, fmt.Errorf("load redis: %w", err)
		}
		skus = append(skus, st.SKU)
		pipe.HSet(ctx, inventory.RedisStockKey(st.SKU), "total", st.Total, "available", st.Available, "occupied", st.Occupied, "sold", st.Sold)
		pipe.SAdd(ctx, inventory.RedisSKUSet, st.SKU)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load redis: %w", err)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("load redis: %w", err)
	}
	return skus, nil
}

func keys(sku, id string) []string {
	return []string{inventory.RedisStockKey(sku), inventory.RedisReservationKey(sku, id), inventory.RedisLiveKey(sku)}
}

// Try reserves in Redis. fresh is true when this call moved stock, false for
// an idempotent repeat. Errors: ErrOutOfStock, ErrAlreadyFinal (the order was
// cancelled first), or an infrastructure error.
func (s Store) Try(ctx context.Context, r inventory.Reservation) (fresh bool, err error) {
	n, err := tryScript.Run(ctx, s.R, keys(r.SKU, r.OrderID), r.Qty, r.Deadline.UnixMilli(), r.OrderID).Int()
	if err != nil {
		return false, fmt.Errorf("redis try: %w", err)
	}
	switch n {
	case 1:
		return true, nil
	case 2:
		return false, nil
	case 0:
		return false, inventory.ErrOutOfStock
	case -2:
		return false, fmt.Errorf("reserve %s: order already cancelled: %w", r.OrderID, inventory.ErrAlreadyFinal)
	default:
		return false, fmt.Errorf("redis try: unknown sku %q", r.SKU)
	}
}

// Finish moves the reservation to `to` under the owner check and returns the
// state it found ("" when there was none; then, if marker is set, a record in
// state `to` with qty 0 is left behind).
func (s Store) Finish(ctx context.Context, ref inventory.OrderRef, to inventory.OrderState, marker bool) (inventory.OrderState, error) {
	m := "0"
	if marker {
		m = "1"
	}
	prev, err := finishScript.Run(ctx, s.R, keys(ref.SKU, ref.OrderID), string(to), ref.OrderID, s.Retain.Milliseconds(), m).Text()
	if err != nil {
		return "", fmt.Errorf("redis %s: %w", to, err)
	}
	return inventory.OrderState(prev), nil
}

// Reservation is a reservation as recorded in Redis.
type Reservation struct {
	Qty      int64
	State    inventory.OrderState
	Deadline time.Time
}

// ErrNoReservation: Redis has no record of the order.
var ErrNoReservation = errors.New("no reservation")

// Get reads a reservation record.
func (s Store) Get(ctx context.Context, ref inventory.OrderRef) (Reservation, error) {
	v, err := s.R.HMGet(ctx, inventory.RedisReservationKey(ref.SKU, ref.OrderID), "qty", "state", "deadline").Result()
	if err != nil {
		return Reservation{}, fmt.Errorf("redis read reservation: %w", err)
	}
	st, _ := v[1].(string)
	if st == "" {
		return Reservation{}, ErrNoReservation
	}
	q, _ := v[0].(string)
	d, _ := v[2].(string)
	qty, _ := strconv.ParseInt(q, 10, 64)
	ms, _ := strconv.ParseInt(d, 10, 64)
	res := Reservation{Qty: qty, State: inventory.OrderState(st)}
	if ms > 0 {
		res.Deadline = time.UnixMilli(ms)
	}
	return res, nil
}

// Due lists up to limit (0: no limit) order ids of sku whose reservation
// deadline is at or before now (all live ones when now is zero).
func (s Store) Due(ctx context.Context, sku string, now time.Time, limit int64) ([]string, error) {
	maxScore := "+inf"
	if !now.IsZero() {
		maxScore = strconv.FormatInt(now.UnixMilli(), 10)
	}
	by := &redis.ZRangeBy{Min: "-inf", Max: maxScore}
	if limit > 0 {
		by.Count = limit
	}
	ids, err := s.R.ZRangeByScore(ctx, inventory.RedisLiveKey(sku), by).Result()
	if err != nil {
		return nil, fmt.Errorf("redis due: %w", err)
	}
	return ids, nil
}

// Restock adds qty to a SKU's total and available, in MySQL first and then
// in Redis, so that Redis never promises units MySQL does not have.
func (s Store) Restock(ctx context.Context, db *sql.DB, sku string, qty int64) error {
	if _, err := db.ExecContext(ctx, "UPDATE inventory SET total=total+?, available=available+? WHERE sku=?", qty, qty, sku); err != nil {
		return fmt.Errorf("restock %s: %w", sku, err)
	}
	pipe := s.R.TxPipeline()
	pipe.HIncrBy(ctx, inventory.RedisStockKey(sku), "total", qty)
	pipe.HIncrBy(ctx, inventory.RedisStockKey(sku), "available", qty)
	_, err := pipe.Exec(ctx)
	if err != nil {
		return fmt.Errorf("redis restock: %w", err)
	}
	return nil
}

// ApplyDecisions brings every live Redis reservation of the SKUs in line
// with the final state its MySQL order row holds, if any. It returns how many
// it changed.
func (s Store) ApplyDecisions(ctx context.Context, db *sql.DB, skus []string) (int, error) {
	n := 0
	for _, sku := range skus {
		ids, err := s.Due(ctx, sku, time.Time{}, 0)
		if err != nil {
			return n, err
		}
		for _, id := range ids {
			var st inventory.OrderState
			err := db.QueryRowContext(ctx, "SELECT state FROM orders WHERE order_id=?", id).Scan(&st)
			if errors.Is(err, sql.ErrNoRows) || err == nil && !st.Final() {
				continue
			}
			if err != nil {
				return n, fmt.Errorf("apply decision %s: %w", id, err)
			}
			prev, err := s.Finish(ctx, inventory.OrderRef{OrderID: id, SKU: sku}, st, false)
			if err != nil {
				return n, err
			}
			if prev == inventory.StateReserved {
				n++
			}
		}
	}
	return n, nil
}
