package redisstock

import (
	"context"
	"testing"
	"time"

	"github.com/stockbench/stockbench/internal/waitfor"
	"github.com/stockbench/stockbench/inventory"
)

// TestDrainingMemberIsAlive is issue 42's live member presumed dead: a
// member whose drain outlasts the lease (its relay waiting on the rows a
// paused member's transaction holds) must keep beating — its Beat waits
// for the round — or another member's round presumes it dead, rebuilds
// without its drained decisions, and makes it late. Member a's drain
// blocks until released; b's round must wait for a instead of going on
// without it, and once a drains both are level, nobody presumed dead.
func TestDrainingMemberIsAlive(t *testing.T) {
	cases := []struct {
		name  string
		stock int64
	}{
		{"one sku", 10},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			must := func(what string, err error) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			must("reset mysql", inventory.ResetMySQL(ctx, env.DB))
			must("reset redis", inventory.ResetRedis(ctx, env.Redis))
			must("load", inventory.LoadStock(ctx, env.DB, []inventory.Stock{{SKU: "S", Total: c.stock, Available: c.stock}}))
			lease := 300 * time.Millisecond // short, asserted nowhere
			started, release := make(chan struct{}), make(chan struct{})
			a := &Fence{DB: env.DB, Member: "a", Lease: lease, Drain: func(ctx context.Context) error {
				close(started)
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}}
			b := &Fence{DB: env.DB, Member: "b", Lease: lease, Drain: func(context.Context) error { return nil }}
			defer a.Stop()
			defer b.Stop()
			for _, f := range []*Fence{a, b} {
				must("join", f.Join(ctx))
			}
			must("a restart, as the fence sees it", env.Redis.ScriptFlush(ctx).Err())
			aDone, bDone := make(chan error, 1), make(chan error, 1)
			go func() { aDone <- (Store{R: env.Redis, Fence: a}).Ready(ctx) }()
			<-started
			var since time.Time
			must("read the clock", env.DB.QueryRowContext(ctx, "SELECT NOW(6)").Scan(&since))
			go func() { bDone <- (Store{R: env.Redis, Fence: b}).Ready(ctx) }()
			bEnded := false
			waitfor.Until(t, "a beats on past a lease while its drain waits, or b's round ended", func() bool {
				select {
				case err := <-bDone:
					bDone <- err
					bEnded = true
					return true
				default:
				}
				var n int
				err := env.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM redis_fence WHERE instance='a' AND beat > ? + INTERVAL ? MICROSECOND",
					since, lease.Microseconds()).Scan(&n)
				return err == nil && n == 1
			})
			if bEnded {
				t.Fatalf("b's round ended while a was still draining (a presumed dead: %d)", b.PresumedDead())
			}
			close(release)
			must("a's round", <-aDone)
			must("b's round", <-bDone)
			if d := a.PresumedDead() + b.PresumedDead(); d != 0 || a.Rebuilds()+b.Rebuilds() != 1 {
				t.Fatalf("presumed dead %d, rebuilds %d; want 0, 1", d, a.Rebuilds()+b.Rebuilds())
			}
			for _, f := range []*Fence{a, b} {
				if late, _, err := f.late(ctx); err != nil || late {
					t.Fatalf("member %s late after the round: %v, %v", f.Member, late, err)
				}
			}
		})
	}
}
