package servers

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/internal/waitfor"
)

// short is a client timeout far below any fault window: a call that waits
// for a paused or dead server fails after it; a live one, however loaded
// the machine, is retried (waitfor) until it answers.
const short = 300 * time.Millisecond

func redisUp(ep Endpoints) error {
	c := ep.RedisClient(func(o *redis.Options) { o.MaxRetries, o.ContextTimeoutEnabled = -1, true })
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), short)
	defer cancel()
	return c.Ping(ctx).Err()
}

func mysqlUp(ep Endpoints) error {
	db, err := sql.Open("mysql", ep.MySQLDSN)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), short)
	defer cancel()
	var one int
	return db.QueryRowContext(ctx, "SELECT 1").Scan(&one)
}

// exerciseFaulter checks every process fault on both targets: each has an
// effect (the server stops answering), and each is undone (it answers
// again). Restarts keep MySQL's committed rows and, with AOF, Redis's keys.
func exerciseFaulter(t *testing.T, f Faulter, ep Endpoints) {
	ctx := context.Background()
	up := map[string]func(Endpoints) error{TargetRedis: redisUp, TargetMySQL: mysqlUp}
	waitUp := func(t *testing.T, target string) {
		t.Helper()
		waitfor.Until(t, target+" does not answer again", func() bool { return up[target](ep) == nil })
	}
	for _, target := range []string{TargetRedis, TargetMySQL} {
		t.Run("pause "+target, func(t *testing.T) {
			waitUp(t, target)
			if err := f.Pause(ctx, target); err != nil {
				t.Fatal(err)
			}
			err := up[target](ep)
			if rerr := f.Resume(ctx, target); rerr != nil {
				t.Fatal(rerr)
			}
			if err == nil {
				t.Fatalf("%s answered while paused", target)
			}
			if !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
				t.Fatalf("%s while paused: %v, want a timeout", target, err)
			}
			waitUp(t, target)
		})
		t.Run("kill and restart "+target, func(t *testing.T) {
			waitUp(t, target)
			pid := f.PID(target)
			if err := f.Kill(ctx, target); err != nil {
				t.Fatal(err)
			}
			if err := up[target](ep); err == nil {
				t.Fatalf("%s answered after kill", target)
			}
			if err := f.Restart(ctx, target); err != nil {
				t.Fatal(err)
			}
			// Restart returns once the server answers.
			if err := up[target](ep); err != nil {
				// One retry for a loaded machine's slow first round trip.
				waitUp(t, target)
			}
			if pid != 0 && f.PID(target) == pid {
				t.Fatalf("%s pid %d unchanged after restart", target, pid)
			}
		})
	}

	t.Run("mysql restart keeps committed rows", func(t *testing.T) {
		db, err := sql.Open("mysql", ep.MySQLDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, q := range []string{"DROP TABLE IF EXISTS faulter_probe", "CREATE TABLE faulter_probe (id INT PRIMARY KEY) ENGINE=InnoDB",
			"INSERT INTO faulter_probe VALUES (1), (2), (3)"} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		if err := f.Restart(ctx, TargetMySQL); err != nil {
			t.Fatal(err)
		}
		t.Logf("mysql kill -9 + restart (crash recovery) until it answers: %s", time.Since(start).Round(time.Millisecond))
		var n int
		waitfor.Until(t, "mysql answers after restart", func() bool {
			return db.QueryRowContext(ctx, "SELECT COUNT(*) FROM faulter_probe").Scan(&n) == nil
		})
		if n != 3 {
			t.Fatalf("%d rows after restart, want 3", n)
		}
		_, _ = db.ExecContext(ctx, "DROP TABLE faulter_probe")
	})

	t.Run("redis restart and persistence", func(t *testing.T) {
		c := ep.RedisClient(nil)
		defer c.Close()
		got, err := c.ConfigGet(ctx, "append*").Result()
		if err != nil {
			t.Fatal(err)
		}
		aof := ep.RedisPersistence != PersistenceNone
		wantAOF := map[bool]string{true: "yes", false: "no"}[aof]
		if got["appendonly"] != wantAOF {
			t.Fatalf("persistence %q: appendonly %q, want %q", ep.RedisPersistence, got["appendonly"], wantAOF)
		}
		if aof && got["appendfsync"] != ep.RedisPersistence {
			t.Fatalf("appendfsync %q, want %q", got["appendfsync"], ep.RedisPersistence)
		}
		if err := c.Set(ctx, "faulter:probe", "kept", 0).Err(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := f.Restart(ctx, TargetRedis); err != nil {
			t.Fatal(err)
		}
		t.Logf("redis kill -9 + restart (%s) until it answers: %s", ep.RedisPersistence, time.Since(start).Round(time.Millisecond))
		var v string
		waitfor.Until(t, "redis answers after restart", func() bool {
			v, err = c.Get(ctx, "faulter:probe").Result()
			return err == nil || errors.Is(err, redis.Nil)
		})
		if aof && v != "kept" {
			t.Fatalf("with appendfsync %s the key was lost on restart (got %q, %v)", ep.RedisPersistence, v, err)
		}
		if !aof && !errors.Is(err, redis.Nil) {
			t.Fatalf("without AOF the key survived a kill -9 (%q): was the server restarted?", v)
		}
		_ = c.Del(ctx, "faulter:probe")
	})
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestLocalFaulter runs every process fault on local servers keeping an
// everysec AOF.
func TestLocalFaulter(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	p, err := New(Options{Backend: "local", RedisPersistence: PersistenceEverysec})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := p.Start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	if ep.RedisPersistence != PersistenceEverysec {
		t.Fatalf("endpoints record persistence %q", ep.RedisPersistence)
	}
	f, err := FaulterOf(p)
	if err != nil {
		t.Fatal(err)
	}
	exerciseFaulter(t, f, ep)
}

// TestLocalRedisWithoutAOF: with persistence none (the default) a Redis
// restart loses its data — what the fault matrix counts.
func TestLocalRedisWithoutAOF(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	l, err := NewLocal()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	port, _, err := l.startSingleRedis(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ep := Endpoints{RedisAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), RedisPersistence: PersistenceNone}
	ctx := context.Background()
	c := ep.RedisClient(nil)
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Restart(ctx, TargetRedis); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, "redis answers after restart", func() bool { return redisUp(ep) == nil })
	if v, err := c.Get(ctx, "k").Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("key after restart without AOF: %q, %v; want it gone", v, err)
	}
	if got, _ := c.ConfigGet(ctx, "appendonly").Result(); got["appendonly"] != "no" {
		t.Fatalf("appendonly %q, want no", got["appendonly"])
	}
}

// TestFaulterRefused: the external backend and clusters have no process
// faults; bad persistence settings are refused.
func TestFaulterRefused(t *testing.T) {
	if _, err := FaulterOf(&External{}); !errors.Is(err, ErrNoFaults) {
		t.Fatalf("external: %v", err)
	}
	l := &Local{RedisCluster: 3, MySQLCluster: 3}
	for _, target := range []string{TargetRedis, TargetMySQL} {
		if err := l.Pause(context.Background(), target); !errors.Is(err, ErrNoFaults) {
			t.Errorf("cluster %s: %v", target, err)
		}
	}
	if err := (&Docker{RedisCluster: 3}).Pause(context.Background(), TargetRedis); !errors.Is(err, ErrNoFaults) {
		t.Errorf("docker redis cluster: %v", err)
	}
	if _, err := New(Options{Backend: "local", RedisPersistence: "sometimes"}); err == nil {
		t.Error("persistence sometimes accepted")
	}
	if _, err := New(Options{Backend: "external", MySQLDSN: "root@tcp(127.0.0.1:1)/x", RedisAddr: "127.0.0.1:1", RedisPersistence: PersistenceAlways}); err == nil {
		t.Error("persistence on an external backend accepted")
	}
}

// TestDockerFaulter runs every process fault on containers keeping an
// always AOF.
func TestDockerFaulter(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	d := needDocker(t)
	d.RedisPersistence = PersistenceAlways
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ep, err := d.Start(ctx)
	if err != nil {
		d.Stop()
		t.Fatal(err)
	}
	defer d.Stop()
	f, err := FaulterOf(d)
	if err != nil {
		t.Fatal(err)
	}
	exerciseFaulter(t, f, ep)
}
