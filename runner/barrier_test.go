package runner_test

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stockbench/stockbench/internal/waitfor"
	"github.com/stockbench/stockbench/runner"
)

// TestReleasedAfterBarrierExpiry: a generator that dies after every one
// reached the start barrier is lost, not fatal, even once the barrier's
// key has expired (a run longer than its TTL): what watchBarrier saw
// stands. One that dies before all arrived stops the run.
func TestReleasedAfterBarrierExpiry(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		in     int64 // the barrier's arrivals (0: the key is gone)
		seen   bool  // watchBarrier saw every generator arrive
		want   bool
		tokens int64
	}{
		{"all arrived, key live", 2, false, true, 2},
		{"one missing", 1, false, false, 0},
		{"key expired, never seen", 0, false, false, 0},
		{"key expired, seen before", 0, true, true, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := "test:barrier:" + c.name
			env.Redis.Del(ctx, "{"+key+"}:in", "{"+key+"}:go")
			defer env.Redis.Del(ctx, "{"+key+"}:in", "{"+key+"}:go")
			if c.in > 0 {
				if err := env.Redis.Set(ctx, "{"+key+"}:in", c.in, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if got := runner.Released(ctx, env.Redis, key, 2, c.seen); got != c.want {
				t.Fatalf("released = %v, want %v", got, c.want)
			}
			if n := env.Redis.LLen(ctx, "{"+key+"}:go").Val(); n != c.tokens {
				t.Fatalf("%d release tokens, want %d", n, c.tokens)
			}
		})
	}
	// watchBarrier remembers the arrivals once they are all in.
	key := "test:barrier:watch"
	defer env.Redis.Del(ctx, "{"+key+"}:in")
	var allIn atomic.Bool
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go runner.WatchBarrier(wctx, env.Redis, key, 2, &allIn)
	env.Redis.Incr(ctx, "{"+key+"}:in")
	if allIn.Load() {
		t.Fatal("one of two arrivals counted as all")
	}
	env.Redis.Incr(ctx, "{"+key+"}:in")
	waitfor.Until(t, "watchBarrier to see both arrivals", allIn.Load)
	env.Redis.Del(ctx, "{"+key+"}:in") // the key expires
	if !allIn.Load() {
		t.Fatal("the arrivals were forgotten with the key")
	}
}

// TestReviveAfterFaults: a store a fault left down (its restart not seen
// through) is started again before the next run, and one that answers is
// left alone.
func TestReviveAfterFaults(t *testing.T) {
	if env.Faulter == nil {
		t.Skip("process faults need servers stockbench started (not the external backend)")
	}
	ctx := context.Background()
	var log bytes.Buffer
	runner.Revive(ctx, env.Conns, env.Faulter, &log)
	if log.Len() != 0 {
		t.Fatalf("revive touched stores that answer: %s", log.String())
	}
	if err := env.Faulter.Kill(ctx, "redis"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if env.Redis.Ping(ctx).Err() != nil {
			_ = env.Faulter.Restart(ctx, "redis")
		}
	})
	runner.Revive(ctx, env.Conns, env.Faulter, &log)
	if err := env.Redis.Ping(ctx).Err(); err != nil {
		t.Fatalf("redis still down after revive: %v (log: %s)", err, log.String())
	}
	if !strings.Contains(log.String(), "redis does not answer") {
		t.Errorf("revive did not say what it did: %q", log.String())
	}
}
