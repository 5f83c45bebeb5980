package strategies_test

import (
	"context"
	"testing"
	"time"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/registry"
)

// TestBucketsMovePassesLockedBucket: a confirm or cancel of buckets takes
// its units from a bucket no one holds instead of queueing on the one its
// order id hashes to. While another transaction holds the fullest bucket,
// as many orders as the other buckets cover are finished, each taking from
// those, and the held bucket is left as it was. A move that waited for the
// held bucket would not finish until the holder let go (the backstop
// deadline below is only there to end such a hang).
func TestBucketsMovePassesLockedBucket(t *testing.T) {
	e, err := registry.Lookup("buckets")
	if err != nil {
		t.Fatal(err)
	}
	const buckets, perBucket, orders = 8, 2, 8
	cases := []struct {
		name  string
		to    inventory.OrderState
		apply func(s strategies.Strategy, ctx context.Context, r inventory.OrderRef) error
	}{
		{"confirm", inventory.StateConfirmed, strategies.Strategy.Confirm},
		{"cancel", inventory.StateCancelled, strategies.Strategy.Cancel},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, e, buckets*perBucket, strategies.Config{Buckets: buckets})
			for i := 0; i < orders; i++ {
				if err := f.reserve(orderName(i)); err != nil {
					t.Fatal(err)
				}
			}
			occupied := bucketOccupied(t)
			held := 0
			for b, n := range occupied {
				if n > occupied[held] {
					held = b
				}
			}
			ctx := context.Background()
			tx, err := env.DB.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			if _, err := tx.ExecContext(ctx, "SELECT bucket FROM stock_buckets WHERE sku=? AND bucket=? FOR UPDATE", sku, held); err != nil {
				t.Fatal(err)
			}
			backstop, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			for i := 0; i < orders-int(occupied[held]); i++ {
				if err := c.apply(f.s, backstop, ref(orderName(i))); err != nil {
					t.Fatalf("%s %s while bucket %d is held: %v", c.name, orderName(i), held, err)
				}
				f.ack(orderName(i), c.to)
			}
			if after := bucketOccupied(t); after[held] != occupied[held] {
				t.Fatalf("held bucket %d: occupied %d → %d, want unchanged", held, occupied[held], after[held])
			}
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func orderName(i int) string { return "o" + string(rune('a'+i)) }

// bucketOccupied reads the occupied count of every bucket of sku (a plain
// read: it waits for no lock).
func bucketOccupied(t *testing.T) map[int]int64 {
	t.Helper()
	rows, err := env.DB.Query("SELECT bucket, occupied FROM stock_buckets WHERE sku=?", sku)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := map[int]int64{}
	for rows.Next() {
		var b int
		var n int64
		if err := rows.Scan(&b, &n); err != nil {
			t.Fatal(err)
		}
		m[b] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}
