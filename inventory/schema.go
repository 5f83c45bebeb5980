package inventory

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed schema.sql
var schemaSQL string

// Tables lists the tables of the shared schema, in creation order.
var Tables = []string{"inventory", "orders", "outbox"}

// ResetMySQL drops and recreates the shared tables in the connected database.
// It touches no other table.
func ResetMySQL(ctx context.Context, db *sql.DB) error {
	for i := len(Tables) - 1; i >= 0; i-- {
		if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+Tables[i]); err != nil {
			return fmt.Errorf("reset schema: drop %s: %w", Tables[i], err)
		}
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

// LoadStock inserts the initial stock rows into the inventory table.
func LoadStock(ctx context.Context, db *sql.DB, stock []Stock) error {
	for _, s := range stock {
		if _, err := db.ExecContext(ctx,
			"INSERT INTO inventory (sku,total,available,occupied,sold,version) VALUES (?,?,?,?,?,0)",
			s.SKU, s.Total, s.Available, s.Occupied, s.Sold); err != nil {
			return fmt.Errorf("load stock %s: %w", s.SKU, err)
		}
	}
	return nil
}

// The Redis key layout shared by the Redis strategies and the auditor. Every
// per-SKU key carries the SKU as a hash tag so that one SKU's keys live in one
// Redis Cluster slot and a script may touch them together.
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

// RedisLiveKey is the sorted set of a SKU's reserved orders scored by deadline.
func RedisLiveKey(sku string) string { return RedisPrefix + "live:{" + sku + "}" }

// ResetRedis deletes every key under RedisPrefix and nothing else.
func ResetRedis(ctx context.Context, rdb redis.UniversalClient) error {
	iter := rdb.Scan(ctx, 0, RedisPrefix+"*", 1000).Iterator()
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		// One DEL per key: on Redis Cluster the keys live in different slots.
		pipe := rdb.Pipeline()
		for _, k := range batch {
			pipe.Del(ctx, k)
		}
		_, err := pipe.Exec(ctx)
		batch = batch[:0]
		return err
	}
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			if err := flush(); err != nil {
				return fmt.Errorf("reset redis: %w", err)
			}
		}
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("reset redis: %w", err)
	}
	if err := flush(); err != nil {
		return fmt.Errorf("reset redis: %w", err)
	}
	return nil
}
