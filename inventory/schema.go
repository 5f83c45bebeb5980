package inventory

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

//go:embed schema.sql
var schemaSQL string

// Tables lists the tables of the shared schema, in creation order.
var Tables = []string{"inventory", "orders", "buyer_holds", "outbox", "restocks", "stock_buckets", "stock_units", "stock_log", "redis_fence", "sku_authority"}

// OwnerMark is the table comment that names a table as stockbench's own.
// Every table stockbench creates carries it; stockbench drops no table
// without it.
const OwnerMark = "stockbench"

// ErrNotOurs means a table stockbench would replace exists without the
// owner mark: it belongs to someone else and must not be touched.
var ErrNotOurs = errors.New("not created by stockbench")

// CheckOwned returns an error wrapping ErrNotOurs, naming the first of
// tables that exists in the connected database without the owner mark.
// Tables that do not exist are fine. It changes nothing.
func CheckOwned(ctx context.Context, db *sql.DB, tables ...string) error {
	for _, t := range tables {
		var schema, comment string
		err := db.QueryRowContext(ctx, "SELECT TABLE_SCHEMA, TABLE_COMMENT FROM information_schema.TABLES "+
			"WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", t).Scan(&schema, &comment)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return fmt.Errorf("check table %s: %w", t, err)
		}
		if comment != OwnerMark {
			return fmt.Errorf("table %s.%s exists and was %w (no %q table comment); refusing to touch it: use a scratch database",
				schema, t, ErrNotOurs, OwnerMark)
		}
	}
	return nil
}

// DropOwned drops each of tables that exists with the owner mark. It
// checks all of them first and drops nothing if one is not ours.
func DropOwned(ctx context.Context, db *sql.DB, tables ...string) error {
	if err := CheckOwned(ctx, db, tables...); err != nil {
		return err
	}
	for _, t := range tables {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+t); err != nil {
			return fmt.Errorf("drop %s: %w", t, err)
		}
	}
	return nil
}

// ResetMySQL drops and recreates the shared tables in the connected database.
// It touches no other table, and drops none that lacks the owner mark: a
// foreign inventory, orders or outbox table makes it fail with ErrNotOurs
// before anything changes.
func ResetMySQL(ctx context.Context, db *sql.DB) error {
	rev := make([]string, len(Tables))
	for i, t := range Tables {
		rev[len(Tables)-1-i] = t
	}
	if err := DropOwned(ctx, db, rev...); err != nil {
		return fmt.Errorf("reset schema: %w", err)
	}
	for _, stmt := range strings.Split(schemaSQL, ";") {
		if strings.TrimSpace(stripComments(stmt)) == "" {
			continue
		}
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("reset schema: %w", err)
		}
	}
	return nil
}

func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// loadBatch is how many inventory rows one INSERT of LoadStock carries.
const loadBatch = 5000

// LoadStock inserts the initial stock rows into the inventory table, in
// multi-row INSERTs of loadBatch rows (a million SKUs is 200 statements).
// progress, when not nil, is called after each statement with the rows
// loaded so far. A failure leaves the rows of the statements before it.
func LoadStock(ctx context.Context, db *sql.DB, stock []Stock, progress ...func(done int)) error {
	for start := 0; start < len(stock); start += loadBatch {
		part := stock[start:min(start+loadBatch, len(stock))]
		var b strings.Builder
		b.WriteString("INSERT INTO inventory (sku,total,available,occupied,sold,version) VALUES ")
		args := make([]any, 0, 5*len(part))
		for i, s := range part {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("(?,?,?,?,?,0)")
			args = append(args, s.SKU, s.Total, s.Available, s.Occupied, s.Sold)
		}
		if _, err := db.ExecContext(ctx, b.String(), args...); err != nil {
			return fmt.Errorf("load stock %s…%s: %w", part[0].SKU, part[len(part)-1].SKU, err)
		}
		for _, p := range progress {
			p(start + len(part))
		}
	}
	return nil
}

// The Redis key layout shared by the Redis strategies and the auditor. Every
// per-SKU key carries the SKU as a hash tag so that one SKU's keys live in one
// Redis Cluster slot and a script may touch them together.
// AvailableMySQL is the stock left available over every SKU in MySQL.
func AvailableMySQL(ctx context.Context, db *sql.DB) (int64, error) {
	var n int64
	// The buckets and skiplocked strategies keep a SKU's available units in
	// stock_buckets and stock_units rows; their inventory rows hold 0.
	err := db.QueryRowContext(ctx, "SELECT (SELECT COALESCE(SUM(available),0) FROM inventory)"+
		" + (SELECT COALESCE(SUM(available),0) FROM stock_buckets)"+
		" + (SELECT COUNT(*) FROM stock_units WHERE state='available')").Scan(&n)
	return n, err
}

const (
	// RedisPrefix starts every key stockbench writes; ResetRedis deletes only these.
	RedisPrefix = "sb:"
	// RedisSKUSet is a set of every SKU loaded into Redis.
	RedisSKUSet = RedisPrefix + "skus"
)

// RedisStockKey is the hash of a SKU's stock: total, available, occupied, sold.
func RedisStockKey(sku string) string { return RedisPrefix + "stock:{" + sku + "}" }

// RedisReservationKey is the hash of one order's reservation: qty, state,
// deadline (Unix ms).
func RedisReservationKey(sku, orderID string) string {
	return RedisPrefix + "res:{" + sku + "}:" + orderID
}

// RedisBuyersKey is the hash of a SKU's per-buyer holds: buyer → units it
// holds (reserved or confirmed) of the SKU, kept by the Try and Finish
// scripts for the per-buyer limit.
func RedisBuyersKey(sku string) string { return RedisPrefix + "buyers:{" + sku + "}" }

// RedisSplitKey lists, space-separated, the shard names of a SKU whose
// Redis stock a strategy split over several stock hashes (lua-split):
// shard name N keeps its stock, reservations, live set and buyer holds
// under the keys of "SKU" N (RedisStockKey(N), …), each its own hash tag,
// so in its own Cluster slot. The auditor sums them.
func RedisSplitKey(sku string) string { return RedisPrefix + "split:{" + sku + "}" }

// RedisLiveKey is the sorted set of a SKU's reserved orders scored by deadline.
func RedisLiveKey(sku string) string { return RedisPrefix + "live:{" + sku + "}" }

// ResetRedis deletes every key under RedisPrefix and nothing else, on every
// master of a Redis Cluster.
func ResetRedis(ctx context.Context, rdb redis.UniversalClient) error {
	err := ScanKeys(ctx, rdb, RedisPrefix+"*", func(keys []string) error {
		// One DEL per key: on Redis Cluster the keys live in different slots.
		pipe := rdb.Pipeline()
		for _, k := range keys {
			pipe.Del(ctx, k)
		}
		_, err := pipe.Exec(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("reset redis: %w", err)
	}
	return nil
}

// ScanKeys calls fn with the keys matching pattern, a batch of at most 500
// at a time: on every master of a Redis Cluster (SCAN sees one node's keys
// only; the masters are scanned in parallel, fn is called for one batch at a
// time), else on the one server.
func ScanKeys(ctx context.Context, rdb redis.UniversalClient, pattern string, fn func(keys []string) error) error {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return scanNode(ctx, rdb, pattern, fn)
	}
	var mu sync.Mutex
	one := func(keys []string) error {
		mu.Lock()
		defer mu.Unlock()
		return fn(keys)
	}
	return cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		return scanNode(ctx, node, pattern, one)
	})
}

func scanNode(ctx context.Context, c redis.Cmdable, pattern string, fn func(keys []string) error) error {
	iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			if err := fn(batch); err != nil {
				return err
			}
			batch = nil
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(batch) > 0 {
		return fn(batch)
	}
	return nil
}
