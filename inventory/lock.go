package inventory

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisLockKey is the Redis key a run holds for its whole life. It lies
// outside RedisPrefix so that ResetRedis never deletes it.
const RedisLockKey = "stockbench:run-lock"

// ErrLocked means another run holds the stores.
var ErrLocked = errors.New("another stockbench run holds")

// RunLock is held by one run at a time on a MySQL database and a Redis
// server: a MySQL GET_LOCK on a connection of its own (freed by the server
// when the connection closes, so a killed run's lock goes with it) and a
// Redis key with a TTL that a goroutine renews (so a killed run's key
// expires by itself). Release is safe to call more than once.
type RunLock struct {
	conn    *sql.Conn
	rdb     redis.UniversalClient
	name    string
	value   string
	ttl     time.Duration
	stop    chan struct{}
	done    chan struct{}
	release sync.Once
}

// Holder describes this process as a lock holder: host, pid, start time.
func Holder() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("host %s pid %d started %s", host, os.Getpid(), time.Now().UTC().Format(time.RFC3339))
}

// LockName is the GET_LOCK name of a database: "stockbench:" and the
// database name (hashed when that would pass MySQL's 64-character limit).
func LockName(database string) string {
	name := "stockbench:" + database
	if len(name) > 64 {
		sum := sha256.Sum256([]byte(database))
		name = "stockbench:" + hex.EncodeToString(sum[:16])
	}
	return name
}

// renewScript extends the key's TTL only while it still holds our value.
var renewScript = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`)

// unlockScript deletes the key only while it still holds our value.
var unlockScript = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1]) end
return 0`)

// AcquireRunLock takes the run lock of the database db is connected to and
// of the Redis server rdb talks to, or fails at once with an error wrapping
// ErrLocked that names the holder. holder (see Holder) is what a refused
// run is told. ttl is the Redis key's lifetime; it is renewed every ttl/3.
// The lock uses one connection of db for its whole life: give it a pool of
// its own so that it takes nothing from the load.
func AcquireRunLock(ctx context.Context, db *sql.DB, rdb redis.UniversalClient, holder string, ttl time.Duration) (*RunLock, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("run lock: %w", err)
	}
	var database sql.NullString
	if err := conn.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&database); err != nil {
		conn.Close()
		return nil, fmt.Errorf("run lock: %w", err)
	}
	l := &RunLock{conn: conn, rdb: rdb, name: LockName(database.String), value: holder, ttl: ttl,
		stop: make(chan struct{}), done: make(chan struct{})}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", l.name).Scan(&got); err != nil {
		conn.Close()
		return nil, fmt.Errorf("run lock: %w", err)
	}
	if got.Int64 != 1 {
		who := l.redisHolder(ctx)
		if who == "" {
			var id sql.NullInt64
			_ = conn.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", l.name).Scan(&id)
			who = fmt.Sprintf("MySQL connection %d", id.Int64)
		}
		conn.Close()
		return nil, fmt.Errorf("%w database %s (%s); wait for it to finish", ErrLocked, database.String, who)
	}
	ok, err := rdb.SetNX(ctx, RedisLockKey, holder, ttl).Result()
	if err != nil || !ok {
		_, _ = conn.ExecContext(ctx, "SELECT RELEASE_LOCK(?)", l.name)
		conn.Close()
		if err != nil {
			return nil, fmt.Errorf("run lock: redis: %w", err)
		}
		return nil, fmt.Errorf("%w the Redis server (%s); wait for it to finish", ErrLocked, l.redisHolder(ctx))
	}
	go l.renew()
	return l, nil
}

func (l *RunLock) redisHolder(ctx context.Context) string {
	v, _ := l.rdb.Get(ctx, RedisLockKey).Result()
	return v
}

// renew extends the Redis key every ttl/3 until Release.
func (l *RunLock) renew() {
	defer close(l.done)
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
			_ = renewScript.Run(ctx, l.rdb, []string{RedisLockKey}, l.value, l.ttl.Milliseconds()).Err()
			cancel()
		}
	}
}

// Release frees both locks. It is safe to call more than once.
func (l *RunLock) Release() error {
	var err error
	l.release.Do(func() {
		close(l.stop)
		<-l.done
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rerr := unlockScript.Run(ctx, l.rdb, []string{RedisLockKey}, l.value).Err()
		_, merr := l.conn.ExecContext(ctx, "SELECT RELEASE_LOCK(?)", l.name)
		err = errors.Join(rerr, merr, l.conn.Close())
		if err != nil {
			err = fmt.Errorf("release run lock: %w", err)
		}
	})
	return err
}
