package outboxlocal

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/internal/waitfor"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/servers"
	"github.com/stockbench/stockbench/strategies"
)

// instance starts one more outbox-local instance on the stores start
// loaded, with a local directory of its own, and runs its background
// loops until the test ends. Its relay and reconciler are an hour apart,
// so what it appends stays in its table until a drain.
func instance(t *testing.T, total int64) *Strategy {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := New(strategies.Config{DB: env.DB, Redis: env.Redis, LocalDir: t.TempDir(),
		OutboxPeriod: time.Hour, ReconcilePeriod: time.Hour, SweepPeriod: time.Hour})
	must(t, "new", err)
	must(t, "setup", s.Setup(ctx, []inventory.Stock{{SKU: sku, Total: total, Available: total}}))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = s.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait(); _ = s.Close() })
	return s
}

// restartRedis restarts the run's Redis through the provider (no
// persistence: it comes back empty) and waits until it answers.
func restartRedis(t *testing.T) {
	t.Helper()
	if env.Faulter == nil {
		t.Skip("no process faults on this backend")
	}
	ctx := context.Background()
	must(t, "restart redis", env.Faulter.Restart(ctx, servers.TargetRedis))
	waitfor.Until(t, "redis answers after its restart", func() bool { return env.Redis.Ping(ctx).Err() == nil })
}

// TestRebuildSeesEveryInstance is finding 2 of issue 42: two instances on
// one MySQL and Redis; instance b's reserve (and, in one case, confirm) of
// the only unit is still in b's local table when Redis restarts empty.
// Whatever instance a is asked next — a reserve of the unit, or the
// confirm of b's order (a client balancing its calls over the instances)
// — a's rebuild must count b's decisions: they are drained into MySQL
// first (the fence's round), so the unit is not sold again and b's order
// is known. The audit after settle is clean.
func TestRebuildSeesEveryInstance(t *testing.T) {
	cases := []struct {
		name      string
		bConfirms bool                             // b confirms its order before the restart
		onA       func(a *Strategy) error          // what a is asked after the restart
		want      error                            // a's answer
		acks      func(aErr error) []inventory.Ack // what the clients were told, beyond b's reserve
	}{
		{
			name: "a reserve on a after b's confirm", bConfirms: true,
			onA:  func(a *Strategy) error { return a.Reserve(context.Background(), resFor("a", "", 0)) },
			want: inventory.ErrOutOfStock,
			acks: func(error) []inventory.Ack {
				return []inventory.Ack{{OrderID: "b", SKU: sku, State: inventory.StateConfirmed}}
			},
		},
		{
			name: "a reserve on a while b holds the unit",
			onA:  func(a *Strategy) error { return a.Reserve(context.Background(), resFor("a", "", 0)) },
			want: inventory.ErrOutOfStock,
			acks: func(error) []inventory.Ack { return nil },
		},
		{
			name: "b's order confirmed on a",
			onA:  func(a *Strategy) error { return a.Confirm(context.Background(), ref("b")) },
			acks: func(error) []inventory.Ack {
				return []inventory.Ack{{OrderID: "b", SKU: sku, State: inventory.StateConfirmed}}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			a := start(t, strategies.Config{OutboxPeriod: time.Hour, ReconcilePeriod: time.Hour, SweepPeriod: time.Hour}, 1)
			b := instance(t, 1)
			must(t, "reserve b on b", b.Reserve(ctx, resFor("b", "", 0)))
			if c.bConfirms {
				must(t, "confirm b on b", b.Confirm(ctx, ref("b")))
			}
			if n, err := b.backlog(ctx); err != nil || n == 0 {
				t.Fatalf("b's backlog before the restart: %d (%v), want its events", n, err)
			}
			restartRedis(t)
			err := c.onA(a)
			if (c.want == nil && err != nil) || (c.want != nil && !errors.Is(err, c.want)) {
				t.Fatalf("on a after the restart: %v, want %v", err, c.want)
			}
			must(t, "settle b", b.Settle(ctx))
			acks := append([]inventory.Ack{{OrderID: "b", SKU: sku, State: inventory.StateReserved}}, c.acks(err)...)
			must(t, "settle a", a.Settle(ctx))
			au, err := audit.Auditor{DB: env.DB, Redis: env.Redis, RedisReservations: true,
				Ledger: map[string]int64{sku: 1}}.Audit(ctx, acks)
			must(t, "audit", err)
			if au.Anomalies != 0 {
				t.Fatalf("audit after settle: %d anomalies: %v", au.Anomalies, au.Violations)
			}
			if r := a.rs.Fence.Rebuilds() + b.rs.Fence.Rebuilds(); r != 1 {
				t.Fatalf("%d rebuilds for one restart, want 1", r)
			}
		})
	}
}

// TestDecisionAfterUnnoticedRestart: a confirm or cancel reads the order's
// reservation, Redis then restarts empty before its decision runs, and
// nothing has noticed the restart yet. The decision must not find "no
// record" and answer "unknown order" (a refused buyer whose reserve was
// acknowledged) or acknowledge a cancel that released nothing: it
// rebuilds first (the fence's round) and decides on the rebuilt record.
func TestDecisionAfterUnnoticedRestart(t *testing.T) {
	cases := []struct {
		name string
		want inventory.OrderState
	}{
		{"confirm", inventory.StateConfirmed},
		{"cancel", inventory.StateCancelled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s := start(t, strategies.Config{}, 1)
			must(t, "reserve a", s.Reserve(ctx, resFor("a", "", 0)))
			res, err := s.rs.Get(ctx, ref("a"))
			must(t, "read a's reservation", err)
			restartRedis(t)
			got, err := s.decide(ctx, ref("a"), res, c.want)
			if err != nil || got != c.want {
				t.Fatalf("%s read before the restart, decided after it: %q, %v; want %q", c.name, got, err, c.want)
			}
			auditClean(t, s, 1, []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateReserved},
				{OrderID: "a", SKU: sku, State: c.want}})
			if st, _ := mysqlOrder(t, "a"); st != c.want {
				t.Fatalf("MySQL order a is %s, want %s", st, c.want)
			}
		})
	}
}
