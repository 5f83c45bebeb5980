package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/inventory"
)

// TestLimitCountsRedisOnlyHolds is finding 10 of issue 42: lua-tcc's (and
// outbox-local's in-flight) reservations live in Redis until decided, so a
// limit the auditor checks over MySQL's orders alone misses a buyer who
// holds a confirmed unit in MySQL and a live one in Redis past the limit.
func TestLimitCountsRedisOnlyHolds(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		buyer string // of the live Redis reservation
		want  int64
	}{
		{"the confirmed buyer's live unit is past the limit", "bob", 1},
		{"another buyer's live unit is within it", "carol", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
				t.Fatal(err)
			}
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
				t.Fatal(err)
			}
			if err := inventory.LoadStock(ctx, env.DB, []inventory.Stock{{SKU: "S", Total: 10, Available: 9, Sold: 1}}); err != nil {
				t.Fatal(err)
			}
			now := time.Now().UTC()
			if _, err := env.DB.ExecContext(ctx, "INSERT INTO orders (order_id, sku, qty, state, created_at, expires_at, updated_at, buyer) VALUES ('c1','S',1,'confirmed',?,?,?,'bob')",
				now, now.Add(time.Hour), now); err != nil {
				t.Fatal(err)
			}
			deadline := now.Add(time.Hour).UnixMilli()
			pipe := env.Redis.TxPipeline()
			pipe.HSet(ctx, inventory.RedisStockKey("S"), "total", 10, "available", 8, "occupied", 1, "sold", 1)
			pipe.HSet(ctx, inventory.RedisReservationKey("S", "r1"), "qty", 1, "state", "reserved", "deadline", deadline, "buyer", c.buyer)
			pipe.ZAdd(ctx, inventory.RedisLiveKey("S"), redis.Z{Score: float64(deadline), Member: "r1"})
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			a, err := audit.Auditor{DB: env.DB, Redis: env.Redis, RedisReservations: true, LimitPerBuyer: 1,
				Ledger: map[string]int64{"S": 10}}.Audit(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if a.OverLimitUnits != c.want || a.Anomalies != c.want {
				t.Fatalf("over_limit_units %d, anomalies %d; want %d of each (%v)", a.OverLimitUnits, a.Anomalies, c.want, a.Violations)
			}
		})
	}
}
