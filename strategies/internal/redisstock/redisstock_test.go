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

// TestFinishAll: the pipelined finish of a batch does what Finish does for
// each order — moves only reserved units, leaves a decided or unknown order
// alone — also when the server has not loaded the script yet (NOSCRIPT).
func TestFinishAll(t *testing.T) {
	ctx := context.Background()
	s := Store{R: env.Redis, Retain: time.Minute}
	for _, flushed := range []bool{false, true} {
		t.Run("script flushed "+strconv.FormatBool(flushed), func(t *testing.T) {
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
				t.Fatal(err)
			}
			env.Redis.HSet(ctx, inventory.RedisStockKey("S"), "total", 10, "available", 10, "occupied", 0, "sold", 0)
			ref := func(id string) inventory.OrderRef { return inventory.OrderRef{OrderID: id, SKU: "S"} }
			for _, id := range []string{"o1", "o2", "o3"} {
				if _, err := s.Try(ctx, inventory.Reservation{OrderID: id, SKU: "S", Qty: 1, Deadline: time.Now().Add(time.Minute)}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Finish(ctx, ref("o3"), inventory.StateCancelled, false); err != nil {
				t.Fatal(err)
			}
			if flushed {
				if err := env.Redis.ScriptFlush(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			for i, err := range s.FinishAll(ctx, []inventory.OrderRef{ref("o1"), ref("o2"), ref("o3"), ref("o4")}, inventory.StateConfirmed) {
				if err != nil {
					t.Fatalf("order %d: %v", i+1, err)
				}
			}
			h := env.Redis.HGetAll(ctx, inventory.RedisStockKey("S")).Val()
			if h["available"] != "8" || h["occupied"] != "0" || h["sold"] != "2" {
				t.Fatalf("stock %v, want available 8, occupied 0, sold 2", h)
			}
			for id, want := range map[string]inventory.OrderState{"o1": inventory.StateConfirmed, "o2": inventory.StateConfirmed, "o3": inventory.StateCancelled} {
				r, err := s.Get(ctx, ref(id))
				if err != nil || r.State != want {
					t.Fatalf("%s: %+v %v, want %s", id, r, err, want)
				}
			}
			if _, err := s.Get(ctx, ref("o4")); err != ErrNoReservation {
				t.Fatalf("o4: %v, want no reservation", err)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestRestockAppliesOnce runs restocks' Redis writes and reconciler repairs
// in the orders a busy system produces: each restock's units are counted
// exactly once, whichever lands first.
func TestRestockAppliesOnce(t *testing.T) {
	type step struct {
		restock int64 // apply the Redis write of MySQL restock number restock (5 units)
		repair  int64 // or: a repair that takes every restock up to this version from MySQL
		units   int64 // units the repair adds (the restocks it took)
	}
	cases := []struct {
		name      string
		steps     []step
		wantTotal int64
	}{
		{"in order", []step{{restock: 1}, {restock: 2}}, 20},
		{"out of order", []step{{restock: 2}, {restock: 1}}, 20},
		{"repeated", []step{{restock: 1}, {restock: 1}}, 15},
		// The reconciler took restock 1 from MySQL; its Redis write lands late.
		{"late after a repair", []step{{repair: 1, units: 5}, {restock: 1}}, 15},
		// The repair took 1 and 2; 3 is newer than the repair and still counts.
		{"newer than the repair", []step{{restock: 2}, {repair: 2, units: 5}, {restock: 1}, {restock: 3}}, 25},
	}
	ctx := context.Background()
	s := Store{R: env.Redis}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
				t.Fatal(err)
			}
			env.Redis.HSet(ctx, inventory.RedisStockKey("S"), "total", 10, "available", 10, "occupied", 0, "sold", 0)
			for _, st := range c.steps {
				if st.restock > 0 {
					if _, err := s.applyRestock(ctx, "S", 5, st.restock); err != nil {
						t.Fatal(err)
					}
					continue
				}
				snap, err := s.Snapshot(ctx, "S")
				if err != nil {
					t.Fatal(err)
				}
				ok, err := s.Adjust(ctx, "S", snap, inventory.Stock{Total: st.units, Available: st.units}, st.repair)
				if err != nil || !ok {
					t.Fatalf("repair: %v %v", ok, err)
				}
			}
			snap, err := s.Snapshot(ctx, "S")
			if err != nil {
				t.Fatal(err)
			}
			if snap.Stock.Total != c.wantTotal || snap.Stock.Available != c.wantTotal {
				t.Fatalf("stock %+v, want total and available %d", snap.Stock, c.wantTotal)
			}
		})
	}
}

// TestAdjustGuard: a repair computed from an observation applies only while
// the hash is as observed.
func TestAdjustGuard(t *testing.T) {
	ctx := context.Background()
	s := Store{R: env.Redis}
	cases := []struct {
		name   string
		change func(t *testing.T) // between the observation and the repair
		want   bool
	}{
		{"unchanged", func(t *testing.T) {}, true},
		{"a reserve in between", func(t *testing.T) {
			if _, err := s.Try(ctx, inventory.Reservation{OrderID: "o", SKU: "S", Qty: 1, Deadline: time.Now().Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"a raw write in between", func(t *testing.T) {
			env.Redis.HIncrBy(ctx, inventory.RedisStockKey("S"), "available", 1)
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
				t.Fatal(err)
			}
			env.Redis.HSet(ctx, inventory.RedisStockKey("S"), "total", 10, "available", 10, "occupied", 0, "sold", 0)
			snap, err := s.Snapshot(ctx, "S")
			if err != nil {
				t.Fatal(err)
			}
			c.change(t)
			ok, err := s.Adjust(ctx, "S", snap, inventory.Stock{Total: 1, Available: 1}, -1)
			if err != nil {
				t.Fatal(err)
			}
			if ok != c.want {
				t.Fatalf("applied %v, want %v", ok, c.want)
			}
		})
	}
}

// TestCatchUpRestocks: a restock MySQL counted and Redis did not is added
// once (its late Redis write is then skipped); Redis already level, a
// stale MySQL read and a missing hash change nothing.
func TestCatchUpRestocks(t *testing.T) {
	cases := []struct {
		name       string
		rv         int64 // restock floor the hash holds
		row        SKURow
		late       int64 // then the late Redis write of this restock version (0: none)
		wantCaught bool
		wantTotal  int64
	}{
		{"a restock Redis missed is caught up; its late write is skipped", 0, SKURow{SKU: "S", Total: 15, Version: 1}, 1, true, 15},
		{"Redis already counts it", 0, SKURow{SKU: "S", Total: 10, Version: 0}, 0, false, 10},
		{"a MySQL read older than the hash's floor waits for the next pass", 3, SKURow{SKU: "S", Total: 15, Version: 2}, 0, false, 10},
		{"never above MySQL", 0, SKURow{SKU: "S", Total: 5, Version: 0}, 0, false, 10},
	}
	ctx := context.Background()
	s := Store{R: env.Redis}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
				t.Fatal(err)
			}
			env.Redis.HSet(ctx, inventory.RedisStockKey("S"), "total", 10, "available", 10, "occupied", 0, "sold", 0, "rv", c.rv)
			caught, err := s.CatchUpRestocks(ctx, c.row)
			if err != nil || caught != c.wantCaught {
				t.Fatalf("caught %v, %v; want %v", caught, err, c.wantCaught)
			}
			if c.late > 0 {
				if _, err := s.applyRestock(ctx, "S", 5, c.late); err != nil {
					t.Fatal(err)
				}
			}
			snap, err := s.Snapshot(ctx, "S")
			if err != nil {
				t.Fatal(err)
			}
			if snap.Stock.Total != c.wantTotal || snap.Stock.Available != c.wantTotal {
				t.Fatalf("stock %+v, want total and available %d", snap.Stock, c.wantTotal)
			}
		})
	}
	t.Run("no hash: left to Reload", func(t *testing.T) {
		if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
			t.Fatal(err)
		}
		if caught, err := s.CatchUpRestocks(ctx, SKURow{SKU: "S", Total: 15, Version: 1}); caught || err != nil {
			t.Fatalf("caught %v, %v", caught, err)
		}
		if n := env.Redis.Exists(ctx, inventory.RedisStockKey("S")).Val(); n != 0 {
			t.Fatal("a hash was created")
		}
	})
}
