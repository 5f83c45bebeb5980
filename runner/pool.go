package runner

import (
	"database/sql"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/results"
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

// poolFigures are the waits for a connection between two marks: how many
// times a caller found every connection busy, and how long callers waited in
// all, per store; and the wait per operation (ops: reserve, confirm and
// cancel calls), the part of an operation's latency spent queueing for a
// connection rather than in the store.
func poolFigures(h *results.Harness, from, to poolMark, ops int64) {
	h.MySQLPoolWaits = to.db.WaitCount - from.db.WaitCount
	h.MySQLPoolWaitMS = float64(to.db.WaitDuration-from.db.WaitDuration) / 1e6
	h.RedisPoolWaits = int64(to.redis.WaitCount - from.redis.WaitCount)
	h.RedisPoolWaitMS = float64(to.redis.WaitDurationNs-from.redis.WaitDurationNs) / 1e6
	h.RedisPoolTimeouts = int64(to.redis.Timeouts - from.redis.Timeouts)
	if ops > 0 {
		h.PoolWaitMSPerOp = (h.MySQLPoolWaitMS + h.RedisPoolWaitMS) / float64(ops)
	}
}
