package servers

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/servers/netpath"
)

// TestLocalRollBack: a roll back brings the local Redis back holding what
// it held at the checkpoint — a write before it kept, writes after it
// lost — as a new process (run id changed), with and without AOF; and a
// later plain restart without persistence comes up empty as before. Behind
// a network profile the Redis listens in the run's namespace, and the
// checkpoint reaches it there.
func TestLocalRollBack(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	cases := []struct {
		name, persistence string
		netns             bool
	}{
		{PersistenceNone, PersistenceNone, false},
		{PersistenceEverysec, PersistenceEverysec, false},
		{"behind a network profile", PersistenceNone, true},
	}
	for _, tc := range cases {
		persistence := tc.persistence
		t.Run(tc.name, func(t *testing.T) {
			l, err := NewLocal()
			if err != nil {
				t.Fatal(err)
			}
			l.RedisPersistence = persistence
			defer l.Stop()
			ctx := context.Background()
			if tc.netns {
				if err := netpath.Available(); err != nil {
					t.Skipf("network profile unavailable here: %v", err)
				}
				p, err := netpath.Create(ctx)
				if err != nil {
					t.Fatal(err)
				}
				l.mu.Lock()
				l.path = p
				l.mu.Unlock()
			}
			port, _, err := l.startSingleRedis(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ep := Endpoints{RedisAddr: net.JoinHostPort(l.host(), strconv.Itoa(port)), RedisPersistence: persistence}
			c := ep.RedisClient(func(o *redis.Options) { o.MaxRetries = -1 })
			defer c.Close()
			runID := func() string {
				info, err := c.Info(ctx, "server").Result()
				if err != nil {
					t.Fatal(err)
				}
				_, id, _ := strings.Cut(info, "run_id:")
				id, _, _ = strings.Cut(id, "\r\n")
				return id
			}
			if err := c.Set(ctx, "kept", "1", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.HSet(ctx, "h", "n", 1).Err(); err != nil {
				t.Fatal(err)
			}
			if err := l.Checkpoint(ctx, TargetRedis); err != nil {
				t.Fatal(err)
			}
			if err := c.Set(ctx, "lost", "1", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.HIncrBy(ctx, "h", "n", 5).Err(); err != nil {
				t.Fatal(err)
			}
			before := runID()
			if err := l.RollBack(ctx, TargetRedis); err != nil {
				t.Fatal(err)
			}
			if v, err := c.Get(ctx, "kept").Result(); err != nil || v != "1" {
				t.Fatalf("key written before the checkpoint: %q, %v", v, err)
			}
			if v, err := c.Get(ctx, "lost").Result(); !errors.Is(err, redis.Nil) {
				t.Fatalf("key written after the checkpoint: %q, %v; want it lost", v, err)
			}
			if n, err := c.HGet(ctx, "h", "n").Int(); err != nil || n != 1 {
				t.Fatalf("field changed after the checkpoint: %d, %v; want 1", n, err)
			}
			if runID() == before {
				t.Fatalf("run id unchanged: the roll back was no restart")
			}
			if err := l.Restart(ctx, TargetRedis); err != nil {
				t.Fatal(err)
			}
			v, err := c.Get(ctx, "kept").Result()
			switch {
			case persistence == PersistenceNone && !errors.Is(err, redis.Nil):
				t.Fatalf("restart without persistence after a roll back kept %q (%v): want it empty", v, err)
			case persistence != PersistenceNone && v != "1":
				t.Fatalf("restart with AOF after a roll back lost the key (%q, %v)", v, err)
			}
			if err := l.Checkpoint(ctx, TargetMySQL); !errors.Is(err, ErrNoFaults) {
				t.Fatalf("checkpoint of MySQL: %v, want ErrNoFaults", err)
			}
		})
	}
}
