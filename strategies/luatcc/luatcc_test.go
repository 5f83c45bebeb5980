package luatcc

import (
	"context"
	"errors"
	"os"
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

func newStrategy(t *testing.T) *Strategy {
	t.Helper()
	s, err := New(strategies.Config{DB: env.DB, Redis: env.Redis})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Setup(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	return s
}

func want(t *testing.T, what string, got, want error) {
	t.Helper()
	if want == nil && got != nil || want != nil && !errors.Is(got, want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// TestRecoveryPaths drives lua-tcc through a restart, Redis data loss, a
// late Try and a lost Redis write, on real stores, and checks that no unit
// is sold twice and that each is repaired by the recovery pass — not at the
// reservation's deadline. The auditor grades the stores after each case.
func TestRecoveryPaths(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name      string
		stock     int64
		restocked int64 // units restocked behind the strategy's back (issued: the ledger counts them)
		run       func(t *testing.T, s *Strategy) (acks []inventory.Ack)
	}{
		{"restart on live data re-sells nothing", 1, 0, func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "reserve", s.Reserve(ctx, res("a")), nil)
			s2 := newStrategy(t) // a service restart: Setup on running stores
			want(t, "reserve after restart", s2.Reserve(ctx, res("b")), inventory.ErrOutOfStock)
			want(t, "confirm after restart", s2.Confirm(ctx, ref("a")), nil)
			return []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateReserved}, {OrderID: "a", SKU: sku, State: inventory.StateConfirmed}}
		}},
		{"lost stock hash is rebuilt from what is held", 2, 0, func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "reserve a", s.Reserve(ctx, res("a")), nil)
			want(t, "confirm a", s.Confirm(ctx, ref("a")), nil)
			want(t, "reserve b", s.Reserve(ctx, res("b")), nil)
			env.Redis.Del(ctx, inventory.RedisStockKey(sku))
			if err := s.Reserve(ctx, res("x")); err == nil {
				t.Fatal("a reserve succeeded with no stock hash")
			}
			if err := s.recover(ctx); err != nil {
				t.Fatal(err)
			}
			// a sold, b still held: nothing left to sell.
			want(t, "reserve after reload", s.Reserve(ctx, res("c")), inventory.ErrOutOfStock)
			want(t, "confirm b", s.Confirm(ctx, ref("b")), nil)
			return []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateConfirmed}, {OrderID: "b", SKU: sku, State: inventory.StateConfirmed}}
		}},
		{"all Redis data lost: reload sells only what MySQL has", 2, 0, func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "reserve a", s.Reserve(ctx, res("a")), nil)
			want(t, "confirm a", s.Confirm(ctx, ref("a")), nil)
			want(t, "reserve b", s.Reserve(ctx, res("b")), nil)
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
				t.Fatal(err)
			}
			if err := s.recover(ctx); err != nil {
				t.Fatal(err)
			}
			// b's reservation is gone with Redis: it cannot be paid; its
			// unit is sold once, to c.
			want(t, "confirm b", s.Confirm(ctx, ref("b")), inventory.ErrUnknownOrder)
			want(t, "reserve c", s.Reserve(ctx, res("c")), nil)
			want(t, "confirm c", s.Confirm(ctx, ref("c")), nil)
			want(t, "reserve d", s.Reserve(ctx, res("d")), inventory.ErrOutOfStock)
			return []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateConfirmed}, {OrderID: "c", SKU: sku, State: inventory.StateConfirmed}}
		}},
		{"a repeated confirm after Redis lost the order is answered from MySQL", 3, 0, func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "reserve a", s.Reserve(ctx, res("a")), nil)
			want(t, "confirm a", s.Confirm(ctx, ref("a")), nil) // its reply lost: the client asks again
			want(t, "reserve b", s.Reserve(ctx, res("b")), nil)
			want(t, "cancel b", s.Cancel(ctx, ref("b")), nil)
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
				t.Fatal(err)
			}
			if err := s.recover(ctx); err != nil {
				t.Fatal(err)
			}
			want(t, "confirm a again", s.Confirm(ctx, ref("a")), nil) // was "unknown order"
			want(t, "confirm the cancelled b", s.Confirm(ctx, ref("b")), inventory.ErrAlreadyFinal)
			want(t, "confirm x, never reserved", s.Confirm(ctx, ref("x")), inventory.ErrUnknownOrder)
			return []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateConfirmed}, {OrderID: "b", SKU: sku, State: inventory.StateCancelled}}
		}},
		{"confirm of a reservation Redis lost, decided after the rebuild read MySQL, leaves no drift", 2, 0, func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "reserve a", s.Reserve(ctx, res("a")), nil)
			r, err := s.rs.Get(ctx, ref("a")) // a's confirm has read its reservation…
			if err != nil {
				t.Fatal(err)
			}
			// …when Redis restarts empty (a lost everything it held) and the
			// recovery pass rebuilds it from MySQL, which has no word of a yet.
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
				t.Fatal(err)
			}
			if err := env.Redis.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if err := s.recover(ctx); err != nil {
				t.Fatal(err)
			}
			// Then a's decision commits: MySQL sells the unit; Redis has no
			// reservation to move and still offers both units.
			if got, err := s.decide(ctx, ref("a"), r, inventory.StateConfirmed); err != nil || got != inventory.StateConfirmed {
				t.Fatalf("confirm a: %v, %v", got, err)
			}
			if err := s.recover(ctx); err != nil {
				t.Fatal(err)
			}
			// One unit left, in both stores: b gets it, c is refused at
			// reserve (not acknowledged and then refused at confirm).
			want(t, "reserve b", s.Reserve(ctx, res("b")), nil)
			want(t, "reserve c", s.Reserve(ctx, res("c")), inventory.ErrOutOfStock)
			want(t, "confirm b", s.Confirm(ctx, ref("b")), nil)
			return []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateConfirmed}, {OrderID: "b", SKU: sku, State: inventory.StateConfirmed}}
		}},
		{"late Try after the cancel marker is gone is released on the next pass", 1, 0, func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "cancel first", s.Cancel(ctx, ref("a")), nil)
			env.Redis.Del(ctx, inventory.RedisReservationKey(sku, "a")) // the marker outlived its Retain
			want(t, "late Try", s.Reserve(ctx, res("a")), nil)          // hangs: Redis cannot see MySQL
			want(t, "reserve b while a hangs", s.Reserve(ctx, res("b")), inventory.ErrOutOfStock)
			if err := s.recover(ctx); err != nil {
				t.Fatal(err)
			}
			want(t, "confirm the hanging order", s.Confirm(ctx, ref("a")), inventory.ErrAlreadyFinal)
			want(t, "reserve b after the pass", s.Reserve(ctx, res("b")), nil)
			return []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateCancelled}}
		}},
		{"restock whose caller died between MySQL and Redis is caught up on the next pass", 1, 1, func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "reserve a", s.Reserve(ctx, res("a")), nil)
			// The restock's MySQL half committed (one unit); the service died
			// before its Redis half.
			if _, err := env.DB.Exec("UPDATE inventory SET total=total+1, available=available+1, version=version+1 WHERE sku=?", sku); err != nil {
				t.Fatal(err)
			}
			want(t, "reserve b before the pass", s.Reserve(ctx, res("b")), inventory.ErrOutOfStock)
			if err := s.recover(ctx); err != nil {
				t.Fatal(err)
			}
			want(t, "reserve b after the pass", s.Reserve(ctx, res("b")), nil)
			want(t, "reserve c: nothing more", s.Reserve(ctx, res("c")), inventory.ErrOutOfStock)
			return []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateReserved}, {OrderID: "b", SKU: sku, State: inventory.StateReserved}}
		}},
		{"decision whose Redis write was lost is applied before the deadline", 1, 0, func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "reserve", s.Reserve(ctx, res("a")), nil)
			// The cancel committed in MySQL; its Redis write never happened.
			if _, err := env.DB.Exec("INSERT INTO orders (order_id, sku, qty, state, created_at, expires_at, updated_at) VALUES ('a',?,1,'cancelled',NOW(6),NULL,NOW(6))", sku); err != nil {
				t.Fatal(err)
			}
			if err := s.recover(ctx); err != nil {
				t.Fatal(err)
			}
			want(t, "reserve the released unit", s.Reserve(ctx, res("b")), nil)
			return []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateCancelled}, {OrderID: "b", SKU: sku, State: inventory.StateReserved}}
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
			s := newStrategy(t)
			acks := c.run(t, s)
			if err := s.Settle(ctx); err != nil {
				t.Fatal(err)
			}
			a, err := audit.Auditor{DB: env.DB, Redis: env.Redis, RedisReservations: true,
				Ledger: map[string]int64{sku: c.stock + c.restocked}}.Audit(ctx, acks)
			if err != nil {
				t.Fatal(err)
			}
			if a.Anomalies != 0 {
				t.Fatalf("audit: %+v", a)
			}
		})
	}
}

// TestRepeatConfirmAfterLoss: a client whose confirm's reply was lost asks
// again after Redis lost the order's record (a restart without
// persistence); the TCC log answers, with the degradation switch off or
// on (its Redis path).
func TestRepeatConfirmAfterLoss(t *testing.T) {
	ctx := context.Background()
	for _, degrade := range []string{"", "mysql"} {
		t.Run("degrade="+degrade, func(t *testing.T) {
			if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
				t.Fatal(err)
			}
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
				t.Fatal(err)
			}
			if err := inventory.LoadStock(ctx, env.DB, []inventory.Stock{{SKU: sku, Total: 2, Available: 2}}); err != nil {
				t.Fatal(err)
			}
			s, err := New(strategies.Config{DB: env.DB, Redis: env.Redis, Degrade: degrade, OpTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Setup(ctx, nil); err != nil {
				t.Fatal(err)
			}
			want(t, "reserve a", s.Reserve(ctx, res("a")), nil)
			want(t, "confirm a", s.Confirm(ctx, ref("a")), nil)
			want(t, "reserve b", s.Reserve(ctx, res("b")), nil)
			want(t, "cancel b", s.Cancel(ctx, ref("b")), nil)
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
				t.Fatal(err)
			}
			if err := env.Redis.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if err := s.recover(ctx); err != nil {
				t.Fatal(err)
			}
			want(t, "confirm a again", s.Confirm(ctx, ref("a")), nil)
			want(t, "confirm the cancelled b", s.Confirm(ctx, ref("b")), inventory.ErrAlreadyFinal)
			want(t, "confirm x, never reserved", s.Confirm(ctx, ref("x")), inventory.ErrUnknownOrder)
		})
	}
}
