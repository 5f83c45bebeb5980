package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/inventory"
)

// TestAuditSumsRedisShards: a SKU whose Redis stock is split over shards
// (lua-split, inventory.RedisSplitKey) is audited as the shards' sum, its
// live reservations and reserve acks found in whichever shard holds them;
// a shard lost is a missing stock hash, a shard off by a unit is drift,
// and a shard whose own counts break the invariant is reported even when
// the sum hides it.
func TestAuditSumsRedisShards(t *testing.T) {
	ctx := context.Background()
	type shard struct{ total, avail, occ, sold int64 }
	cases := []struct {
		name              string
		a, b              *shard // nil: the shard's hash is missing
		wantMissing       int
		wantDrift         audit.FieldDrift
		wantAckViolations int
		wantViolations    int
	}{
		{"the shards sum to MySQL", &shard{6, 4, 1, 1}, &shard{4, 4, 0, 0}, 0, audit.FieldDrift{}, 0, 0},
		{"a shard off by a unit is drift", &shard{6, 4, 1, 1}, &shard{5, 5, 0, 0}, 0, audit.FieldDrift{Total: 1, Available: 1}, 0, 0},
		{"a shard lost is a missing hash", &shard{6, 4, 1, 1}, nil, 1, audit.FieldDrift{}, 0, 1},
		{"the shard holding the reservation lost", nil, &shard{4, 4, 0, 0}, 1, audit.FieldDrift{}, 1, 1},
		// Sold -1 on one shard, +1 on the other: the sum is right, the
		// shard is not (a refund moved units in the wrong shard).
		{"a shard negative under a right sum", &shard{6, 6, 1, -1}, &shard{4, 2, 0, 2}, 0, audit.FieldDrift{}, 0, 1},
		{"each shard's own counts off, their sum right", &shard{6, 4, 1, 0}, &shard{4, 4, 0, 1}, 0, audit.FieldDrift{}, 0, 2},
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
			if _, err := env.DB.ExecContext(ctx, "INSERT INTO orders (order_id, sku, qty, state, created_at, expires_at, updated_at) VALUES ('c1','S',1,'confirmed',?,?,?)",
				now, now.Add(time.Hour), now); err != nil {
				t.Fatal(err)
			}
			deadline := now.Add(time.Hour).UnixMilli()
			// Keys in several slots: a plain pipeline, not a transaction.
			pipe := env.Redis.Pipeline()
			pipe.Set(ctx, inventory.RedisSplitKey("S"), "S~a S~b", 0)
			for name, sh := range map[string]*shard{"S~a": c.a, "S~b": c.b} {
				if sh != nil {
					pipe.HSet(ctx, inventory.RedisStockKey(name), "total", sh.total, "available", sh.avail, "occupied", sh.occ, "sold", sh.sold)
				}
			}
			if c.a != nil {
				pipe.HSet(ctx, inventory.RedisReservationKey("S~a", "r1"), "qty", 1, "state", "reserved", "deadline", deadline)
				pipe.ZAdd(ctx, inventory.RedisLiveKey("S~a"), redis.Z{Score: float64(deadline), Member: "r1"})
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			acks := []inventory.Ack{{OrderID: "r1", SKU: "S", State: inventory.StateReserved}}
			a, err := audit.Auditor{DB: env.DB, Redis: env.Redis, RedisReservations: true, Ledger: map[string]int64{"S": 10}}.Audit(ctx, acks)
			if err != nil {
				t.Fatal(err)
			}
			s := a.SKUs[0]
			var drift audit.FieldDrift
			if s.Drift != nil {
				drift = *s.Drift
			}
			if a.MissingRedisStock != c.wantMissing || drift != c.wantDrift || a.ReserveAckViolations != c.wantAckViolations || a.InvariantViolations != c.wantViolations {
				t.Fatalf("missing %d, drift %+v, reserve ack violations %d, invariant violations %d; want %d, %+v, %d, %d (%v)",
					a.MissingRedisStock, drift, a.ReserveAckViolations, a.InvariantViolations, c.wantMissing, c.wantDrift, c.wantAckViolations, c.wantViolations, a.Violations)
			}
			if c.wantMissing == 0 && (s.Redis == nil || s.Redis.Available != 8+c.wantDrift.Available || s.RedisReservedUnits != 1) {
				t.Fatalf("redis %+v, reserved units %d: want the shards' sum and r1", s.Redis, s.RedisReservedUnits)
			}
		})
	}
}
