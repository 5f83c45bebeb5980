// Package calibrate measures the raw ceilings of the stores on one hot item
// (Redis EVALSHA of a reserve-shaped script, a hot-row autocommit UPDATE, a
// hot-row FOR UPDATE transaction), so each strategy's throughput can be read
// as a share of what its store can do at all. Runs record it; the calibrate
// command runs it alone.
package calibrate

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/results"
	"github.com/stockbench/stockbench/servers"
)

// ReserveShaped is the calibration script: the reserve step of the Lua
// strategies without the reservation record — check, decrement, increment.
const ReserveShaped = `local a = tonumber(redis.call('HGET', KEYS[1], 'available'))
if a < tonumber(ARGV[1]) then return 0 end
redis.call('HINCRBY', KEYS[1], 'available', -tonumber(ARGV[1]))
redis.call('HINCRBY', KEYS[1], 'occupied', tonumber(ARGV[1]))
return 1`

const calibStock = int64(1) << 50

// Run measures the raw ceilings of the stores on one hot item with
// `concurrency` clients for d each: EVALSHA of a reserve-shaped script, an
// autocommit conditional UPDATE of one row, and a SELECT … FOR UPDATE +
// UPDATE transaction on one row. It uses its own table and key and removes
// them afterwards.
func Run(ctx context.Context, ep servers.Endpoints, c servers.Conns, concurrency int, d time.Duration) (results.Calibration, error) {
	return WithProgress(ctx, ep, c, concurrency, d, nil)
}

// Probes is the number of probes Run runs, each for its
// duration d.
const Probes = 3

// WithProgress is Run that calls progress (when not nil) as each
// probe starts and ends, with a line such as "probe 1/3: Redis EVALSHA…".
func WithProgress(ctx context.Context, ep servers.Endpoints, c servers.Conns, concurrency int, d time.Duration, progress func(string)) (results.Calibration, error) {
	say := func(format string, args ...any) {
		if progress != nil {
			progress(fmt.Sprintf(format, args...))
		}
	}
	cal := results.Calibration{Concurrency: concurrency, DurationSec: d.Seconds()}
	key := inventory.RedisPrefix + "calib:{hot}"
	if err := c.Redis.HSet(ctx, key, "available", calibStock, "occupied", 0).Err(); err != nil {
		return cal, fmt.Errorf("calibrate redis: %w", err)
	}
	defer c.Redis.Del(context.Background(), key)
	sha, err := c.Redis.ScriptLoad(ctx, ReserveShaped).Result()
	if err != nil {
		return cal, fmt.Errorf("calibrate redis: %w", err)
	}
	if err := inventory.DropOwned(ctx, c.DB, "calib_hot"); err != nil {
		return cal, fmt.Errorf("calibrate mysql: %w", err)
	}
	for _, stmt := range []string{
		"CREATE TABLE calib_hot (id INT PRIMARY KEY, available BIGINT NOT NULL) ENGINE=InnoDB COMMENT='" + inventory.OwnerMark + "'",
		fmt.Sprintf("INSERT INTO calib_hot VALUES (1, %d)", calibStock),
	} {
		if _, err := c.DB.ExecContext(ctx, stmt); err != nil {
			return cal, fmt.Errorf("calibrate mysql: %w", err)
		}
	}
	defer inventory.DropOwned(context.Background(), c.DB, "calib_hot")

	probes := []struct {
		name string
		dst  *float64
		fn   func(context.Context) error
	}{
		{"Redis EVALSHA, reserve-shaped script, one key", &cal.RedisEvalshaOps, nil}, // raw connections, below
		{"MySQL conditional UPDATE, one hot row", &cal.MySQLHotUpdateOps, func(ctx context.Context) error {
			_, err := c.DB.ExecContext(ctx, "UPDATE calib_hot SET available=available-1 WHERE id=1 AND available>=1")
			return err
		}},
		{"MySQL SELECT … FOR UPDATE + UPDATE txn, one hot row", &cal.MySQLHotTxnOps, func(ctx context.Context) error {
			tx, err := c.DB.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			var a int64
			if err := tx.QueryRowContext(ctx, "SELECT available FROM calib_hot WHERE id=1 FOR UPDATE").Scan(&a); err != nil {
				tx.Rollback()
				return err
			}
			if _, err := tx.ExecContext(ctx, "UPDATE calib_hot SET available=? WHERE id=1", a-1); err != nil {
				tx.Rollback()
				return err
			}
			return tx.Commit()
		}},
	}
	for i, p := range probes {
		say("probe %d/%d: %s, %d clients for %s…", i+1, len(probes), p.name, concurrency, d)
		var ops float64
		var err error
		if p.fn == nil {
			ops, err = probeEvalsha(ctx, ep, c.Redis, concurrency, d, sha, key)
		} else {
			ops, err = probe(ctx, concurrency, d, p.fn)
		}
		if err != nil {
			return cal, fmt.Errorf("calibrate: %w", err)
		}
		*p.dst = ops
		say("probe %d/%d: %.0f ops/s", i+1, len(probes), ops)
	}
	return cal, nil
}

// probe runs fn from `concurrency` goroutines for d and returns successful
// calls per second; the first error stops it.
func probe(ctx context.Context, concurrency int, d time.Duration, fn func(context.Context) error) (float64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var n atomic.Int64
	var once sync.Once
	var firstErr error
	var wg sync.WaitGroup
	t0 := time.Now()
	end := t0.Add(d)
	for i := 0; i < concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) && ctx.Err() == nil {
				if err := fn(ctx); err != nil {
					if ctx.Err() == nil {
						once.Do(func() { firstErr = err; cancel() })
					}
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return float64(n.Load()) / time.Since(t0).Seconds(), nil
}

// probeEvalsha measures EVALSHA with one bare RESP connection per client,
// like redis-benchmark: a pooled general-purpose client spends enough CPU
// per call to understate the server's ceiling on a small machine.
//
// On a Redis Cluster the one hot key lives on one master: the probe talks to
// that node, so its figure is the hot-key ceiling of the cluster.
func probeEvalsha(ctx context.Context, ep servers.Endpoints, rdb redis.UniversalClient, concurrency int, d time.Duration, sha, key string) (float64, error) {
	cmd := resp("EVALSHA", sha, "1", key, "1")
	// One connection per client goroutine: the pool hands each call a
	// connection that no other call is using.
	pool := make(chan *rawConn, concurrency)
	defer func() {
		close(pool)
		for c := range pool {
			c.Close()
		}
	}()
	ro := ep.RedisOptions()
	addr := ro.Addr
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("redis probe: node of %s: %w", key, err)
		}
		addr = node.Options().Addr
	}
	var dialer net.Dialer
	for i := 0; i < concurrency; i++ {
		nc, err := dialer.DialContext(ctx, "tcp", addr)
		if err != nil {
			return 0, fmt.Errorf("redis probe: %w", err)
		}
		if ro.TLSConfig != nil {
			tc := tls.Client(nc, ro.TLSConfig)
			if err := tc.HandshakeContext(ctx); err != nil {
				nc.Close()
				return 0, fmt.Errorf("redis probe: tls: %w", err)
			}
			nc = tc
		}
		c := &rawConn{Conn: nc, r: bufio.NewReader(nc)}
		pool <- c
		auth := []string{"AUTH", ro.Password}
		if ro.Username != "" {
			auth = []string{"AUTH", ro.Username, ro.Password}
		}
		if ro.Password != "" {
			if err := c.roundTrip(resp(auth...)); err != nil {
				return 0, fmt.Errorf("redis probe: auth: %w", err)
			}
		}
		if ro.DB != 0 {
			if err := c.roundTrip(resp("SELECT", strconv.Itoa(ro.DB))); err != nil {
				return 0, fmt.Errorf("redis probe: select: %w", err)
			}
		}
	}
	return probe(ctx, concurrency, d, func(ctx context.Context) error {
		c := <-pool
		defer func() { pool <- c }()
		return c.roundTrip(cmd)
	})
}

// rawConn is a bare RESP connection.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

// resp encodes a command as a RESP array of bulk strings.
func resp(args ...string) []byte {
	b := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b = append(b, "$"+strconv.Itoa(len(a))+"\r\n"+a+"\r\n"...)
	}
	return b
}

// roundTrip writes one command and reads a one-line reply; an error reply
// becomes an error.
func (c *rawConn) roundTrip(cmd []byte) error {
	if _, err := c.Write(cmd); err != nil {
		return err
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		return err
	}
	if strings.HasPrefix(line, "-") {
		return fmt.Errorf("redis: %s", strings.TrimSpace(line[1:]))
	}
	return nil
}
