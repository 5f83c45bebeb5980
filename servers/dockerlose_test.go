package servers

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestDockerRollBack: a roll back brings the docker provider's Redis back
// holding what it held at the checkpoint — a write before it kept, writes
// after it lost — as a new process (run id changed), with and without AOF.
func TestDockerRollBack(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	for _, persistence := range []string{PersistenceNone, PersistenceEverysec} {
		t.Run(persistence, func(t *testing.T) {
			d := needDocker(t)
			d.RedisPersistence = persistence
			defer d.Stop()
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			ep, err := d.Start(ctx)
			if err != nil {
				t.Fatal(err)
			}
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
			if err := d.Checkpoint(ctx, TargetRedis); err != nil {
				t.Fatal(err)
			}
			if err := c.Set(ctx, "lost", "1", 0).Err(); err != nil {
				t.Fatal(err)
			}
			before := runID()
			if err := d.RollBack(ctx, TargetRedis); err != nil {
				t.Fatal(err)
			}
			if v, err := c.Get(ctx, "kept").Result(); err != nil || v != "1" {
				t.Fatalf("key written before the checkpoint: %q, %v", v, err)
			}
			if v, err := c.Get(ctx, "lost").Result(); !errors.Is(err, redis.Nil) {
				t.Fatalf("key written after the checkpoint: %q, %v; want it lost", v, err)
			}
			if runID() == before {
				t.Fatalf("run id unchanged: the roll back was no restart")
			}
			if err := d.RollBack(ctx, TargetRedis); err == nil {
				t.Fatal("a second roll back without a checkpoint succeeded")
			}
		})
	}
}
