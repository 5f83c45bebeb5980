package runner

import (
	"database/sql"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/servers"
)

// poolMark is a snapshot of both pools' wait counters.
type poolMark struct {
	db    sql.DBStats
	redis redis.PoolStats
}

func markPools(c servers.Conns) poolMark {
	return poolMark{db: c.DB.Stats(), redis: *c.Redis.PoolStats()}
}

// poolCounters are the waits for a connection between two marks: how many
// times a caller found every connection busy, and how long callers waited in
// all, per store; and the wait per operation (ops: reserve, confirm and
// cancel calls), the part of an operation's latency spent queueing for a
// connection rather than in the store.
func poolCounters(from, to poolMark, ops int64) map[string]float64 {
	myWaits := float64(to.db.WaitCount - from.db.WaitCount)
	myMS := float64(to.db.WaitDuration-from.db.WaitDuration) / 1e6
	rWaits := float64(to.redis.WaitCount - from.redis.WaitCount)
	rMS := float64(to.redis.WaitDurationNs-from.redis.WaitDurationNs) / 1e6
	m := map[string]float64{
		"mysql_pool_waits": myWaits, "mysql_pool_wait_ms": myMS,
		"redis_pool_waits": rWaits, "redis_pool_wait_ms": rMS,
		"redis_pool_timeouts": float64(to.redis.Timeouts - from.redis.Timeouts),
	}
	if ops > 0 {
		m["pool_wait_ms_per_op"] = (myMS + rMS) / float64(ops)
	}
	return m
}
