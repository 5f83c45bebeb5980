package servers

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// ProbeRounds is how many round trips ProbeRTT times per store.
const ProbeRounds = 200

// RTT is a store's round trip as the harness measures it: n requests one
// after another on one idle connection of the run's pool (SELECT 1, Redis
// PING), so it crosses the same path as the run's load.
type RTT struct {
	N                   int
	MinMS, MedianMS     float64
	P90MS, P99MS, MaxMS float64
}

// ProbeRTT times n round trips to each store through c, one at a time, and
// returns the figures of MySQL and of Redis. It is meant for idle stores,
// before the load starts; it is safe to call from one goroutine at a time
// per Conns.
func ProbeRTT(ctx context.Context, c Conns, n int) (mysql, redis RTT, err error) {
	conn, err := c.DB.Conn(ctx)
	if err != nil {
		return mysql, redis, fmt.Errorf("rtt probe: mysql: %w", err)
	}
	defer conn.Close()
	ds := make([]time.Duration, 0, n)
	var one int
	for range n {
		start := time.Now()
		if err := conn.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
			return mysql, redis, fmt.Errorf("rtt probe: mysql: %w", err)
		}
		ds = append(ds, time.Since(start))
	}
	mysql = summarize(ds)
	ds = ds[:0]
	for range n {
		start := time.Now()
		if err := c.Redis.Ping(ctx).Err(); err != nil {
			return mysql, redis, fmt.Errorf("rtt probe: redis: %w", err)
		}
		ds = append(ds, time.Since(start))
	}
	return mysql, summarize(ds), nil
}

func summarize(ds []time.Duration) RTT {
	if len(ds) == 0 {
		return RTT{}
	}
	slices.Sort(ds)
	ms := func(q float64) float64 {
		i := min(len(ds)-1, int(q*float64(len(ds))))
		return float64(ds[i]) / float64(time.Millisecond)
	}
	return RTT{N: len(ds), MinMS: ms(0), MedianMS: ms(0.5), P90MS: ms(0.9), P99MS: ms(0.99), MaxMS: ms(1)}
}
