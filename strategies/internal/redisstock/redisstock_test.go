package redisstock

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/servers/servertest"
)

var env servertest.Env

func TestMain(m *testing.M) { os.Exit(servertest.Main(m, &env)) }

// TestFinishOwnerCheck runs the finish script on a real Redis from every
// reservation state: stock moves only out of 'reserved', so a late or
// repeated cancel never hands a unit out twice.
func TestFinishOwnerCheck(t *testing.T) {
	cases := []struct {
		from      inventory.OrderState // "" = no reservation
		to        inventory.OrderState
		marker    bool
		wantPrev  inventory.OrderState
		wantAvail int64 // available after, from 10 with the reservation (if any) taken
		wantSold  int64
	}{
		{inventory.StateReserved, inventory.StateCancelled, false, inventory.StateReserved, 10, 0},
		{inventory.StateReserved, inventory.StateConfirmed, false, inventory.StateReserved, 9, 1},
		{inventory.StateReserved, inventory.StateExpired, false, inventory.StateReserved, 10, 0},
		{inventory.StateConfirmed, inventory.StateCancelled, false, inventory.StateConfirmed, 9, 1},
		{inventory.StateCancelled, inventory.StateCancelled, false, inventory.StateCancelled, 10, 0},
		{inventory.StateExpired, inventory.StateCancelled, false, inventory.StateExpired, 10, 0},
		{inventory.StateCancelled, inventory.StateConfirmed, false, inventory.StateCancelled, 10, 0},
		{"", inventory.StateCancelled, true, "", 10, 0},
	}
	ctx := context.Background()
	s := Store{R: env.Redis, Retain: time.Minute}
	for _, c := range cases {
		t.Run(string(c.from)+"->"+string(c.to), func(t *testing.T) {
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
				t.Fatal(err)
			}
			env.Redis.HSet(ctx, inventory.RedisStockKey("S"), "total", 10, "available", 10, "occupied", 0, "sold", 0)
			ref := inventory.OrderRef{OrderID: "o", SKU: "S"}
			if c.from != "" {
				if _, err := s.Try(ctx, inventory.Reservation{OrderID: "o", SKU: "S", Qty: 1, Deadline: time.Now().Add(time.Minute)}); err != nil {
					t.Fatal(err)
				}
				if c.from != inventory.StateReserved {
					if _, err := s.Finish(ctx, ref, c.from, false); err != nil {
						t.Fatal(err)
					}
				}
			}
			prev, err := s.Finish(ctx, ref, c.to, c.marker)
			if err != nil {
				t.Fatal(err)
			}
			if prev != c.wantPrev {
				t.Fatalf("prev %q, want %q", prev, c.wantPrev)
			}
			h := env.Redis.HGetAll(ctx, inventory.RedisStockKey("S")).Val()
			if h["available"] != itoa(c.wantAvail) || h["sold"] != itoa(c.wantSold) {
				t.Fatalf("stock %v, want available %d sold %d", h, c.wantAvail, c.wantSold)
			}
			if c.marker {
				if _, err := s.Try(ctx, inventory.Reservation{OrderID: "o", SKU: "S", Qty: 1, Deadline: time.Now().Add(time.Minute)}); err == nil {
					t.Fatal("a Try after a cancel marker succeeded")
				}
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
