package inventory_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stockbench/stockbench/internal/waitfor"
	"github.com/stockbench/stockbench/inventory"
)

// lockDB is a pool of its own, as a run gives its lock.
func lockDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", env.Endpoints.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestRunLock: a second run is refused at once and told who holds the
// stores; after Release, or after the holder dies, the lock is free again.
func TestRunLock(t *testing.T) {
	ctx := context.Background()
	first, err := inventory.AcquireRunLock(ctx, lockDB(t), env.Redis, "host a pid 1 started then", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ttl, err := env.Redis.PTTL(ctx, inventory.RedisLockKey).Result()
	if err != nil || ttl <= 0 || ttl > 30*time.Second {
		t.Fatalf("redis lock key TTL %v (err %v), want one that expires", ttl, err)
	}
	// ResetRedis is run before every strategy: it must leave the lock alone.
	if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		// prepare arranges who holds what before the second acquire.
		prepare func(t *testing.T)
	}{
		{"both held", func(t *testing.T) {}},
		{"only redis held", func(t *testing.T) {
			// Another database on the same Redis: the key still refuses.
			other := lockDB(t)
			other.SetMaxOpenConns(1)
			if _, err := other.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS lock_other"); err != nil {
				t.Fatal(err)
			}
			if _, err := other.ExecContext(ctx, "USE lock_other"); err != nil {
				t.Fatal(err)
			}
			_, err := inventory.AcquireRunLock(ctx, other, env.Redis, "host b pid 2 started now", 30*time.Second)
			if !errors.Is(err, inventory.ErrLocked) || !strings.Contains(err.Error(), "host a pid 1") {
				t.Fatalf("second run on another database, same redis: %v", err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.prepare(t)
			_, err := inventory.AcquireRunLock(ctx, lockDB(t), env.Redis, "host b pid 2 started now", 30*time.Second)
			if !errors.Is(err, inventory.ErrLocked) || !strings.Contains(err.Error(), "host a pid 1 started then") {
				t.Fatalf("second run: %v, want ErrLocked naming the holder", err)
			}
		})
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	if err := first.Release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	second, err := inventory.AcquireRunLock(ctx, lockDB(t), env.Redis, "host b pid 2 started now", 30*time.Second)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	if err := second.Release(); err != nil {
		t.Fatal(err)
	}
}

// TestRunLockOfADeadRun: a run that dies without releasing leaves nothing
// that outlives it: MySQL frees GET_LOCK with the connection, Redis expires
// the key.
func TestRunLockOfADeadRun(t *testing.T) {
	ctx := context.Background()
	dead, err := inventory.AcquireRunLock(ctx, lockDB(t), env.Redis, "host a pid 1 started then", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	dead.Abandon()
	// Wait for the events themselves: the server dropping the connection's
	// lock, and the key expiring.
	name := inventory.LockName(dbName(t))
	waitfor.Until(t, "the lock of a dead run is still held", func() bool {
		var free sql.NullInt64
		if err := env.DB.QueryRowContext(ctx, "SELECT IS_FREE_LOCK(?)", name).Scan(&free); err != nil {
			t.Fatal(err)
		}
		n, err := env.Redis.Exists(ctx, inventory.RedisLockKey).Result()
		if err != nil {
			t.Fatal(err)
		}
		return free.Int64 == 1 && n == 0
	})
	l, err := inventory.AcquireRunLock(ctx, lockDB(t), env.Redis, "host b pid 2 started now", 30*time.Second)
	if err != nil {
		t.Fatalf("after the holder died: %v", err)
	}
	l.Release()
}

func dbName(t *testing.T) string {
	var s string
	if err := env.DB.QueryRow("SELECT DATABASE()").Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}
