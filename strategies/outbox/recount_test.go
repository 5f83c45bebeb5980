package outbox

import (
	"context"
	"testing"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/inventory"
)

// TestRecountCountsOrderOnce is finding 11 of issue 42: Redis is rebuilt
// between a reserve's Try and its MySQL commit, so the rebuild does not
// know the order and recount tries it again. That Try builds the buyer's
// holds from MySQL, which already has this order, and must not count it a
// second time: with a limit of 1 the reserve was refused while MySQL kept
// the order (an orphan); with a limit of 2 the buyer's legitimate second
// unit was refused.
func TestRecountCountsOrderOnce(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		limit int64
		prior bool // bob already holds one unit, reserved before the loss
	}{
		{"limit 1", 1, false},
		{"limit 2, second unit", 2, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _ := fresh(t, 10)
			r := func(id string) inventory.Reservation {
				x := res(id)
				x.Buyer, x.Limit = "bob", c.limit
				return x
			}
			acks := []inventory.Ack{{OrderID: "o1", SKU: sku, State: inventory.StateReserved}}
			if c.prior {
				if err := s.Reserve(ctx, r("o0")); err != nil {
					t.Fatal(err)
				}
				acks = append(acks, inventory.Ack{OrderID: "o0", SKU: sku, State: inventory.StateReserved})
			}
			// The Try of o1, then Redis loses its data and is rebuilt from
			// MySQL, which has no o1 yet, then o1's MySQL write commits.
			if _, err := s.rs.Try(ctx, r("o1")); err != nil {
				t.Fatal(err)
			}
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
				t.Fatal(err)
			}
			if err := env.Redis.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if err := s.rs.Ready(ctx); err != nil {
				t.Fatal(err)
			}
			if err := s.reserves.Do(ctx, sku, r("o1")); err != nil {
				t.Fatal(err)
			}
			if err := s.recount(ctx, r("o1")); err != nil {
				t.Fatalf("recount of o1 after the rebuild: %v, want it held", err)
			}
			if err := s.Settle(ctx); err != nil {
				t.Fatal(err)
			}
			a, err := audit.Auditor{DB: env.DB, Redis: env.Redis, Ledger: map[string]int64{sku: 10}, LimitPerBuyer: c.limit}.Audit(ctx, acks)
			if err != nil {
				t.Fatal(err)
			}
			if a.Anomalies != 0 {
				t.Fatalf("audit: %d anomalies: %v", a.Anomalies, a.Violations)
			}
			n, err := env.Redis.HGet(ctx, inventory.RedisBuyersKey(sku), "bob").Int64()
			if err != nil {
				t.Fatal(err)
			}
			want := int64(1)
			if c.prior {
				want = 2
			}
			if n != want {
				t.Fatalf("bob's hold count %d, want %d (the orders bob holds)", n, want)
			}
		})
	}
}
