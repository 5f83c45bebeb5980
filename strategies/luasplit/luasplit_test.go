package luasplit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/servers/servertest"
	"github.com/stockbench/stockbench/strategies"
)

var env servertest.Env

func TestMain(m *testing.M) { os.Exit(servertest.Main(m, &env)) }

const sku = "S"

func res(id string) inventory.Reservation {
	return inventory.Reservation{OrderID: id, SKU: sku, Qty: 1, Deadline: time.Now().Add(time.Hour)}
}

func ref(id string) inventory.OrderRef { return inventory.OrderRef{OrderID: id, SKU: sku} }

func want(t *testing.T, what string, got, want error) {
	t.Helper()
	if want == nil && got != nil || want != nil && !errors.Is(got, want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// startingAt returns an order id (prefix-i) whose walk starts at shard n of k.
func startingAt(prefix string, n, k int) string {
	for i := 0; ; i++ {
		id := prefix + "-" + strconv.Itoa(i)
		if pick(id, k) == n {
			return id
		}
	}
}

// shardAvailable reads each shard's available units, failing the test on a
// shard whose own counts break the stock invariant.
func shardAvailable(t *testing.T, s *Strategy) []int64 {
	t.Helper()
	names, err := s.shardsOf(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, len(names))
	for j, name := range names {
		h, err := env.Redis.HGetAll(context.Background(), inventory.RedisStockKey(name)).Result()
		if err != nil {
			t.Fatal(err)
		}
		var f [4]int64
		for i, k := range []string{"total", "available", "occupied", "sold"} {
			f[i], _ = strconv.ParseInt(h[k], 10, 64)
		}
		if f[1] < 0 || f[2] < 0 || f[3] < 0 || f[1]+f[2]+f[3] != f[0] {
			t.Fatalf("shard %s: %v", name, h)
		}
		out[j] = f[1]
	}
	return out
}

// TestWalk drives lua-split's walk over two shards on real stores: a
// repeated reserve (a lost reply) must find the unit its first walk took
// past a shard that has units again, never take a second; a walk refused
// everywhere must not keep its order from reserving later; a Redis that
// forgot its scripts (a restart) is rebuilt with each confirmed unit on the
// shard holding its record, so a refund after it gives the unit back there.
// A restock whose shard writes were lost is caught up by the recovery
// pass, and its late writes are skipped; a refund whose Redis write was
// lost is applied by it, once. The auditor grades the stores
// after each case.
func TestWalk(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		stock int64
		run   func(t *testing.T, s *Strategy) []inventory.Ack
	}{
		{"a repeat finds its unit past a shard with units again", 2, func(t *testing.T, s *Strategy) []inventory.Ack {
			a, o, p := startingAt("a", 0, 2), startingAt("o", 0, 2), startingAt("p", 0, 2)
			want(t, "reserve a (shard 0's unit)", s.Reserve(ctx, res(a)), nil)
			want(t, "reserve o (walks on to shard 1)", s.Reserve(ctx, res(o)), nil)
			want(t, "cancel a (shard 0 has its unit again)", s.Cancel(ctx, ref(a)), nil)
			want(t, "repeat o", s.Reserve(ctx, res(o)), nil)
			if got := shardAvailable(t, s); got[0] != 1 || got[1] != 0 {
				t.Fatalf("shards' available %v after the repeat, want [1 0]", got)
			}
			want(t, "reserve p (shard 0's unit)", s.Reserve(ctx, res(p)), nil)
			want(t, "reserve q", s.Reserve(ctx, res("q")), inventory.ErrOutOfStock)
			want(t, "confirm o", s.Confirm(ctx, ref(o)), nil)
			return []inventory.Ack{{OrderID: o, SKU: sku, State: inventory.StateConfirmed}, {OrderID: p, SKU: sku, State: inventory.StateReserved}}
		}},
		{"a walk refused everywhere does not block its order", 1, func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "reserve a", s.Reserve(ctx, res("a")), nil)
			want(t, "reserve o (refused on both shards)", s.Reserve(ctx, res("o")), inventory.ErrOutOfStock)
			want(t, "restock", s.Restock(ctx, inventory.Restock{ID: "r1", SKU: sku, Qty: 1}), nil)
			want(t, "reserve o again", s.Reserve(ctx, res("o")), nil)
			return []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateReserved}, {OrderID: "o", SKU: sku, State: inventory.StateReserved},
				{OrderID: "r1", SKU: sku, State: inventory.AckRestocked, Qty: 1}}
		}},
		{"a restock whose shard writes were lost is caught up, once", 1, func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "reserve a", s.Reserve(ctx, res("a")), nil)
			r := inventory.Restock{ID: "r1", SKU: sku, Qty: 3}
			version, applied, err := s.rs.RestockMySQL(ctx, s.db, r) // its caller dies before Redis
			if err != nil || !applied {
				t.Fatalf("restock in MySQL: applied %v, %v", applied, err)
			}
			want(t, "settle (catches up)", s.Settle(ctx), nil)
			if got := shardAvailable(t, s); got[0]+got[1] != 3 {
				t.Fatalf("shards' available %v after the catch-up, want 3 in all", got)
			}
			names, _ := s.shardsOf(ctx, sku)
			for _, name := range names { // the lost writes arrive late
				want(t, "late write to "+name, s.rs.ApplyRestock(ctx, inventory.Restock{ID: r.ID, SKU: name, Qty: 2}, version, time.Minute), nil)
			}
			if got := shardAvailable(t, s); got[0]+got[1] != 3 {
				t.Fatalf("shards' available %v after the late writes, want still 3", got)
			}
			return []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateReserved}, {OrderID: "r1", SKU: sku, State: inventory.AckRestocked, Qty: 3}}
		}},
		{"a refund whose Redis write was lost is applied by recovery", 2, func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "reserve a", s.Reserve(ctx, res("a")), nil)
			want(t, "confirm a", s.Confirm(ctx, ref("a")), nil)
			// The refund's MySQL decision, its Redis write lost.
			if _, err := s.db.ExecContext(ctx, "UPDATE inventory SET sold=sold-1, available=available+1 WHERE sku=?", sku); err != nil {
				t.Fatal(err)
			}
			if _, err := s.db.ExecContext(ctx, "UPDATE orders SET state='refunded' WHERE order_id='a'"); err != nil {
				t.Fatal(err)
			}
			want(t, "settle (applies the refund)", s.Settle(ctx), nil)
			if got := shardAvailable(t, s); got[0]+got[1] != 2 {
				t.Fatalf("shards' available %v after recovery, want 2 in all", got)
			}
			want(t, "refund repeated", s.Refund(ctx, ref("a")), nil)
			if got := shardAvailable(t, s); got[0]+got[1] != 2 {
				t.Fatalf("shards' available %v after the repeat, want still 2", got)
			}
			return []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateRefunded}}
		}},
		{"a repeated confirm after Redis lost the order is answered from MySQL", 3, func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "reserve a", s.Reserve(ctx, res("a")), nil)
			want(t, "confirm a", s.Confirm(ctx, ref("a")), nil) // its reply lost: the client asks again
			want(t, "reserve b", s.Reserve(ctx, res("b")), nil)
			want(t, "cancel b", s.Cancel(ctx, ref("b")), nil)
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil { // a restart without persistence
				t.Fatal(err)
			}
			if err := env.Redis.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			want(t, "settle (rebuilds)", s.Settle(ctx), nil)
			want(t, "confirm a again", s.Confirm(ctx, ref("a")), nil) // was "unknown order"
			want(t, "confirm the cancelled b", s.Confirm(ctx, ref("b")), inventory.ErrAlreadyFinal)
			want(t, "confirm x, never reserved", s.Confirm(ctx, ref("x")), inventory.ErrUnknownOrder)
			return []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateConfirmed}, {OrderID: "b", SKU: sku, State: inventory.StateCancelled}}
		}},
		{"a rebuild keeps each sold unit on its record's shard", 4, func(t *testing.T, s *Strategy) []inventory.Ack {
			var acks []inventory.Ack
			for n := 0; n < 2; n++ {
				id := startingAt(fmt.Sprintf("c%d", n), n, 2)
				want(t, "reserve "+id, s.Reserve(ctx, res(id)), nil)
				want(t, "confirm "+id, s.Confirm(ctx, ref(id)), nil)
				acks = append(acks, inventory.Ack{OrderID: id, SKU: sku, State: inventory.StateConfirmed})
			}
			live := startingAt("l", 1, 2)
			want(t, "reserve "+live, s.Reserve(ctx, res(live)), nil)
			if err := env.Redis.ScriptFlush(ctx).Err(); err != nil { // as a restart forgets them
				t.Fatal(err)
			}
			want(t, "settle (rebuilds)", s.Settle(ctx), nil)
			if n := s.rebuilds.Load(); n != 1 {
				t.Fatalf("%d rebuilds, want 1", n)
			}
			id := acks[1].OrderID // its record is on shard 1
			want(t, "refund "+id, s.Refund(ctx, ref(id)), nil)
			acks[1].State = inventory.StateRefunded
			if got := shardAvailable(t, s); got[0]+got[1] != 2 {
				t.Fatalf("shards' available %v after the refund, want 2 in all", got)
			}
			want(t, "confirm "+live, s.Confirm(ctx, ref(live)), nil)
			return append(acks, inventory.Ack{OrderID: live, SKU: sku, State: inventory.StateConfirmed})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
				t.Fatal(err)
			}
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
				t.Fatal(err)
			}
			if err := inventory.LoadStock(ctx, env.DB, []inventory.Stock{{SKU: sku, Total: c.stock, Available: c.stock}}); err != nil {
				t.Fatal(err)
			}
			s, err := New(strategies.Config{DB: env.DB, Redis: env.Redis, Buckets: 2})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Setup(ctx, nil); err != nil {
				t.Fatal(err)
			}
			acks := c.run(t, s)
			want(t, "settle", s.Settle(ctx), nil)
			a, err := audit.Auditor{DB: env.DB, Redis: env.Redis, RedisReservations: true,
				Ledger: map[string]int64{sku: c.stock}}.Audit(ctx, acks)
			if err != nil {
				t.Fatal(err)
			}
			if a.Anomalies != 0 {
				t.Fatalf("audit: %d anomalies: %v", a.Anomalies, a.Violations)
			}
			shardAvailable(t, s)
		})
	}
}

// TestAllowance drives allow.lua as concurrent walks of one order would
// (each walk its token): the buyer's units go back only when no walk of
// the order holds them and none reserved, or when the order is released.
func TestAllowance(t *testing.T) {
	ctx := context.Background()
	type step struct {
		op, token string
		want      int
	}
	cases := []struct {
		name  string
		steps []step
		out   int64 // the buyer's units out at the end
	}{
		{"a refused walk gives the units back", []step{{"take", "a", 1}, {"drop", "a", 1}}, 0},
		{"a walk refused while another holds them keeps them out", []step{{"take", "a", 1}, {"take", "b", 2}, {"drop", "a", 0}}, 1},
		{"the last walk refused gives them back", []step{{"take", "a", 1}, {"take", "b", 2}, {"drop", "a", 0}, {"drop", "b", 1}}, 0},
		{"a walk that reserved keeps them out for good", []step{{"take", "a", 1}, {"take", "b", 2}, {"keep", "b", 1}, {"drop", "a", 0}}, 1},
		{"the order's release gives them back", []step{{"take", "a", 1}, {"keep", "a", 1}, {"give", "", 1}, {"give", "", 0}}, 0},
		{"a second order past the limit is refused", []step{{"take", "a", 1}, {"keep", "a", 1}, {"take2", "c", -4}}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
				t.Fatal(err)
			}
			s, err := New(strategies.Config{DB: env.DB, Redis: env.Redis, Buckets: 2})
			if err != nil {
				t.Fatal(err)
			}
			names := shardNames(sku, 2)
			for i, st := range c.steps {
				id, op := "o", st.op
				if op == "take2" {
					id, op = "o2", "take"
				}
				got, err := s.allow(ctx, names, op, id, "bob", 1, 1, st.token)
				if err != nil || got != st.want {
					t.Fatalf("step %d %s %s: %d, %v; want %d", i, st.op, st.token, got, err, st.want)
				}
			}
			out, err := env.Redis.HGet(ctx, allowKey(names[pick("bob", 2)]), "bob").Int64()
			if err != nil && out != 0 || out != c.out {
				t.Fatalf("bob's units out %d (%v), want %d", out, err, c.out)
			}
		})
	}
}
