package redisstock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockbench/stockbench/inventory"
)

// TestBuildBuyersSeesDecisionBetweenReads is finding 9 of issue 42: after
// a rebuild, a confirm that commits its MySQL row after BuildBuyers read
// MySQL and leaves the live set before its script runs (lua-tcc's confirm:
// MySQL first, then Redis) was in neither count, so the buyer came out
// one short and a second unit past the limit was accepted. The hook runs
// such a confirm exactly between the two reads.
func TestBuildBuyersSeesDecisionBetweenReads(t *testing.T) {
	ctx := context.Background()
	db := env.DB
	if err := inventory.ResetMySQL(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
		t.Fatal(err)
	}
	if err := inventory.LoadStock(ctx, db, []inventory.Stock{{SKU: "S", Total: 10, Available: 10}}); err != nil {
		t.Fatal(err)
	}
	s := Store{R: env.Redis, Retain: time.Minute, DB: db}
	if _, err := s.LoadFromMySQL(ctx, db); err != nil {
		t.Fatal(err)
	}
	res := func(id string) inventory.Reservation {
		return inventory.Reservation{OrderID: id, SKU: "S", Qty: 1, Deadline: time.Now().Add(time.Hour), Buyer: "bob", Limit: 1}
	}
	if _, err := s.Try(ctx, res("o1")); err != nil {
		t.Fatalf("first unit: %v", err)
	}
	// Redis restarts (keeping its data): the stock hash is rebuilt, the
	// buyer holds are built again at the next Try of a buyer.
	if err := s.Rebuild(ctx, db); err != nil {
		t.Fatal(err)
	}
	buyersReadHook = func(string) {
		buyersReadHook = nil
		now := time.Now().UTC()
		if _, err := db.ExecContext(ctx, "INSERT INTO orders (order_id, sku, qty, state, created_at, expires_at, updated_at, buyer) VALUES ('o1','S',1,'confirmed',?,?,?,'bob')",
			now, now.Add(time.Hour), now); err != nil {
			t.Error(err)
		}
		if _, err := s.Finish(ctx, inventory.OrderRef{OrderID: "o1", SKU: "S"}, inventory.StateConfirmed, false); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { buyersReadHook = nil })
	if _, err := s.Try(ctx, res("o2")); !errors.Is(err, inventory.ErrLimitExceeded) {
		t.Fatalf("bob's second unit with a limit of 1, after the rebuild: %v, want %v", err, inventory.ErrLimitExceeded)
	}
}
