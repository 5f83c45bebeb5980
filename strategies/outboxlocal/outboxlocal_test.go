package outboxlocal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/servers"
	"github.com/stockbench/stockbench/servers/servertest"
	"github.com/stockbench/stockbench/strategies"
)

var env servertest.Env

func TestMain(m *testing.M) { os.Exit(servertest.Main(m, &env)) }

const sku = "S"

// fresh empties the stores, loads skus SKUs of 10 units (the first is
// sku, the rest S0001…) and starts outbox-local on them with a local
// directory of the test's own, on the Redis client rc (env.Redis if nil).
func fresh(t *testing.T, skus int, rc redis.UniversalClient) *Strategy {
	t.Helper()
	ctx := context.Background()
	if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
		t.Fatal(err)
	}
	if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
		t.Fatal(err)
	}
	stock := make([]inventory.Stock, skus)
	for i := range stock {
		stock[i] = inventory.Stock{SKU: fmt.Sprintf("S%04d", i), Total: 10, Available: 10}
	}
	stock[0].SKU = sku
	if err := inventory.LoadStock(ctx, env.DB, stock); err != nil {
		t.Fatal(err)
	}
	if rc == nil {
		rc = env.Redis
	}
	s, err := New(strategies.Config{DB: env.DB, Redis: rc, LocalDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Setup(ctx, stock); err != nil {
		t.Fatal(err)
	}
	return s
}

func resFor(id, buyer string, limit int64) inventory.Reservation {
	return inventory.Reservation{OrderID: id, SKU: sku, Qty: 1, Deadline: time.Now().Add(time.Hour), Buyer: buyer, Limit: limit}
}

func ref(id string) inventory.OrderRef { return inventory.OrderRef{OrderID: id, SKU: sku} }

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// mysqlOrder reads an order's state and buyer ("" for NULL) from MySQL.
func mysqlOrder(t *testing.T, id string) (inventory.OrderState, string) {
	t.Helper()
	var st string
	var buyer sql.NullString
	if err := env.DB.QueryRow("SELECT state, buyer FROM orders WHERE order_id=?", id).Scan(&st, &buyer); err != nil {
		t.Fatalf("order %s in MySQL: %v", id, err)
	}
	return inventory.OrderState(st), buyer.String
}

// TestRelayCarriesBuyer checks that every way an order reaches MySQL
// through the local table — its reserve event, a decision relayed with it
// or after it, a decision whose reserve event is gone, an expiry — leaves
// the order row with its buyer, where the auditor checks the per-buyer
// limit. An order without a buyer keeps the column NULL.
func TestRelayCarriesBuyer(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		buyer  string
		run    func(t *testing.T, s *Strategy)
		wantSt inventory.OrderState
	}{
		{"reserve relayed alone", "bob", func(t *testing.T, s *Strategy) {}, inventory.StateReserved},
		{"reserve and confirm in one batch", "bob", func(t *testing.T, s *Strategy) {
			must(t, "confirm", s.Confirm(ctx, ref("o")))
		}, inventory.StateConfirmed},
		{"confirm relayed after its reserve", "bob", func(t *testing.T, s *Strategy) {
			must(t, "drain", s.drain(ctx))
			must(t, "confirm", s.Confirm(ctx, ref("o")))
		}, inventory.StateConfirmed},
		{"cancel relayed after its reserve", "bob", func(t *testing.T, s *Strategy) {
			must(t, "drain", s.drain(ctx))
			must(t, "cancel", s.Cancel(ctx, ref("o")))
		}, inventory.StateCancelled},
		{"confirm whose reserve event is gone", "bob", func(t *testing.T, s *Strategy) {
			if _, err := s.local.ExecContext(ctx, "DELETE FROM events WHERE kind=?", kindReserve); err != nil {
				t.Fatal(err)
			}
			must(t, "confirm", s.Confirm(ctx, ref("o")))
		}, inventory.StateConfirmed},
		{"expiry by the sweeper", "bob", func(t *testing.T, s *Strategy) {
			must(t, "drain", s.drain(ctx))
			// The sweeper's clock two hours on: the reservation is due.
			n, _, err := s.sweepBatch(ctx, sku, time.Now().Add(2*time.Hour), 1000)
			must(t, "sweep", err)
			if n != 1 {
				t.Fatalf("the sweep expired %d reservations, want 1", n)
			}
		}, inventory.StateExpired},
		{"no buyer", "", func(t *testing.T, s *Strategy) {
			must(t, "confirm", s.Confirm(ctx, ref("o")))
		}, inventory.StateConfirmed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := fresh(t, 1, nil)
			must(t, "reserve", s.Reserve(ctx, resFor("o", c.buyer, 0)))
			c.run(t, s)
			must(t, "drain", s.drain(ctx))
			st, buyer := mysqlOrder(t, "o")
			if st != c.wantSt || buyer != c.buyer {
				t.Fatalf("MySQL order o is %s for buyer %q, want %s for %q", st, buyer, c.wantSt, c.buyer)
			}
		})
	}
}

// TestLocalTableWithoutBuyer opens a local file an older instance left,
// whose events table has no buyer column and holds an event: the column
// is added, and the event is relayed (without a buyer, as it was written).
func TestLocalTableWithoutBuyer(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	old, err := sql.Open("sqlite", "file:"+dir+"/"+FileName)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, order_id TEXT NOT NULL, sku TEXT NOT NULL,
		 qty INTEGER NOT NULL, kind TEXT NOT NULL, deadline INTEGER NOT NULL, created INTEGER NOT NULL)`,
		`INSERT INTO events (order_id, sku, qty, kind, deadline, created) VALUES ('old', 'S', 1, 'confirmed', 0, 1)`,
	} {
		if _, err := old.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	must(t, "close the old file", old.Close())
	if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
		t.Fatal(err)
	}
	if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
		t.Fatal(err)
	}
	stock := []inventory.Stock{{SKU: sku, Total: 10, Available: 10}}
	must(t, "load", inventory.LoadStock(ctx, env.DB, stock))
	s, err := New(strategies.Config{DB: env.DB, Redis: env.Redis, LocalDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	must(t, "setup", s.Setup(ctx, stock)) // relays what the old instance left
	if st, buyer := mysqlOrder(t, "old"); st != inventory.StateConfirmed || buyer != "" {
		t.Fatalf("old event relayed as %s for %q, want confirmed for no buyer", st, buyer)
	}
	must(t, "reserve", s.Reserve(ctx, resFor("new", "bob", 0)))
	must(t, "drain", s.drain(ctx))
	if _, buyer := mysqlOrder(t, "new"); buyer != "bob" {
		t.Fatalf("new order's buyer %q, want bob", buyer)
	}
}

// TestOverLimitAudited runs outbox-local end to end into the auditor's
// per-buyer check: units a buyer holds beyond the limit must show as
// over_limit_units (they did not while the relay dropped the buyer), and a
// limit the store keeps must still hold after Redis loses its data, when
// the buyer's holds are counted again from MySQL's orders.
func TestOverLimitAudited(t *testing.T) {
	ctx := context.Background()
	const limit = 2
	cases := []struct {
		name          string
		run           func(t *testing.T, s *Strategy) []inventory.Ack
		wantOverLimit int64
	}{
		{"a buyer past the limit is seen", func(t *testing.T, s *Strategy) []inventory.Ack {
			// The store is not told the limit: it lets bob take 3.
			var acks []inventory.Ack
			for _, id := range []string{"b1", "b2", "b3"} {
				must(t, "reserve "+id, s.Reserve(ctx, resFor(id, "bob", 0)))
				acks = append(acks, inventory.Ack{OrderID: id, SKU: sku, State: inventory.StateReserved})
			}
			must(t, "confirm b1", s.Confirm(ctx, ref("b1")))
			return append(acks, inventory.Ack{OrderID: "b1", SKU: sku, State: inventory.StateConfirmed})
		}, 1},
		{"the limit holds after Redis loses its data", func(t *testing.T, s *Strategy) []inventory.Ack {
			must(t, "reserve l1", s.Reserve(ctx, resFor("l1", "bob", limit)))
			must(t, "reserve l2", s.Reserve(ctx, resFor("l2", "bob", limit)))
			must(t, "confirm l1", s.Confirm(ctx, ref("l1")))
			must(t, "drain", s.drain(ctx))
			// A restart without persistence: every key and script gone.
			must(t, "reset redis", inventory.ResetRedis(ctx, env.Redis))
			must(t, "flush scripts", env.Redis.ScriptFlush(ctx).Err())
			if err := s.Reserve(ctx, resFor("l3", "bob", limit)); !errors.Is(err, inventory.ErrLimitExceeded) {
				t.Fatalf("reserve past the limit after the loss: %v, want %v", err, inventory.ErrLimitExceeded)
			}
			must(t, "reserve for carol", s.Reserve(ctx, resFor("c1", "carol", limit)))
			return []inventory.Ack{{OrderID: "l1", SKU: sku, State: inventory.StateReserved}, {OrderID: "l1", SKU: sku, State: inventory.StateConfirmed},
				{OrderID: "l2", SKU: sku, State: inventory.StateReserved}, {OrderID: "c1", SKU: sku, State: inventory.StateReserved}}
		}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := fresh(t, 1, nil)
			acks := c.run(t, s)
			must(t, "settle", s.Settle(ctx))
			a, err := audit.Auditor{DB: env.DB, Redis: env.Redis, RedisReservations: true,
				Ledger: map[string]int64{sku: 10}, LimitPerBuyer: limit}.Audit(ctx, acks)
			must(t, "audit", err)
			if a.OverLimitUnits != c.wantOverLimit || a.Anomalies != c.wantOverLimit {
				t.Fatalf("audit: %d units over the limit, %d anomalies; want %d of each (%v)", a.OverLimitUnits, a.Anomalies, c.wantOverLimit, a.Violations)
			}
		})
	}
}

// roundTrips counts the commands and pipelines a Redis client sends: one
// per call, one per pipeline however many commands it holds.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { r.n.Add(1); return next(ctx, cmd) }
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { r.n.Add(1); return next(ctx, cmds) }
}

// statements is the MySQL server's count of statements received so far
// (Questions: every statement of every client, this one included).
func statements(t *testing.T) int64 {
	t.Helper()
	var name string
	var n int64
	if err := env.DB.QueryRow("SHOW GLOBAL STATUS LIKE 'Questions'").Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSettleIsPaged fails if a Settle — the sweeper's pass, the
// reconciler's pass and the drains — costs a MySQL statement or a Redis
// round trip per SKU: it counts them (never time) on a catalog of 20 SKUs
// and of 1,220, each with the same work to do (three SKUs holding a live
// reservation, one with a restock Redis never counted). The larger
// catalog may cost a few more pages, not a call per SKU; the restock is
// caught up in both.
func TestSettleIsPaged(t *testing.T) {
	ctx := context.Background()
	type cost struct{ statements, trips int64 }
	measure := func(t *testing.T, skus int) cost {
		conns, err := servers.Open(env.Endpoints, 4)
		if err != nil {
			t.Fatal(err)
		}
		defer conns.Close()
		var trips roundTrips
		conns.Redis.AddHook(&trips)
		s := fresh(t, skus, conns.Redis)
		for i, id := range []string{"r1", "r2", "r3"} {
			r := resFor(id, "", 0)
			r.SKU = fmt.Sprintf("S%04d", 1+i*(skus/3))
			must(t, "reserve", s.Reserve(ctx, r))
		}
		must(t, "drain", s.drain(ctx))
		// A restock MySQL committed whose Redis write never came.
		caught := fmt.Sprintf("S%04d", skus-1)
		if _, err := env.DB.Exec("UPDATE inventory SET total=total+5, available=available+5, version=version+1 WHERE sku=?", caught); err != nil {
			t.Fatal(err)
		}
		trips.n.Store(0)
		from := statements(t)
		must(t, "settle", s.Settle(ctx))
		c := cost{statements(t) - from - 1, trips.n.Load()} // the second SHOW STATUS counts itself
		t.Logf("%d SKUs: a Settle sent %d MySQL statements, %d Redis round trips", skus, c.statements, c.trips)
		total, err := env.Redis.HGet(ctx, inventory.RedisStockKey(caught), "total").Int64()
		must(t, "read the caught-up total", err)
		if total != 15 {
			t.Fatalf("%d SKUs: the restock was not caught up: Redis total %d, want 15", skus, total)
		}
		return c
	}
	small := measure(t, 20)
	large := measure(t, 1220)
	// 1,200 more SKUs are 3 more pages for each of the two passes: a
	// statement and a pipeline each, with room to spare; a call per SKU
	// would cost 1,200 more.
	const slack = 12
	if large.statements > small.statements+slack {
		t.Errorf("a Settle sent %d MySQL statements over 1,220 SKUs, %d over 20: a statement per SKU?", large.statements, small.statements)
	}
	if large.trips > small.trips+slack {
		t.Errorf("a Settle made %d Redis round trips over 1,220 SKUs, %d over 20: a call per SKU?", large.trips, small.trips)
	}
}
