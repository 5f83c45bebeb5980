package redisstock

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// TestCorrectSold: a sale MySQL committed and Redis will never count is
// moved to Redis's sold once (a count Redis has over MySQL, back); a
// confirm in flight is not drift, also when its whole order — reserve,
// MySQL commit, even its Redis write — falls between the correction's
// Redis and MySQL reads (the flow a hot SKU runs in that gap). A difference
// that cannot be told from such a flow is left unchecked, not applied.
// Each case ends with every confirm's Redis write done, when Redis must
// count exactly what MySQL sold.
func TestCorrectSold(t *testing.T) {
	ctx := context.Background()
	s := Store{R: env.Redis, Retain: time.Minute}
	var live []string // orders reserved in Redis, not yet finished
	try := func(id string) func(t *testing.T) {
		return func(t *testing.T) {
			if _, err := s.Try(ctx, inventory.Reservation{OrderID: id, SKU: "S", Qty: 1, Deadline: time.Now().Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
			live = append(live, id)
		}
	}
	commit := func(id string) func(t *testing.T) { // a confirm's MySQL part
		return func(t *testing.T) {
			err := sqlstore.InTx(ctx, env.DB, func(tx *sql.Tx) error {
				if err := sqlstore.InsertOrder(ctx, tx, inventory.Reservation{OrderID: id, SKU: "S", Qty: 1}, inventory.StateConfirmed); err != nil {
					return err
				}
				_, err := tx.ExecContext(ctx, "UPDATE inventory SET available=available-1, sold=sold+1 WHERE sku='S'")
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	finish := func(id string) func(t *testing.T) { // a confirm's Redis part
		return func(t *testing.T) {
			if _, err := s.Finish(ctx, inventory.OrderRef{OrderID: id, SKU: "S"}, inventory.StateConfirmed, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	flow := func(id string) func(t *testing.T) {
		return func(t *testing.T) { try(id)(t); commit(id)(t); finish(id)(t) }
	}
	steps := func(fs ...func(t *testing.T)) func(t *testing.T) {
		return func(t *testing.T) {
			for _, f := range fs {
				f(t)
			}
		}
	}
	redisOver := func(t *testing.T) { // Redis counted a sale MySQL did not
		env.Redis.HIncrBy(ctx, inventory.RedisStockKey("S"), "sold", 1)
		env.Redis.HIncrBy(ctx, inventory.RedisStockKey("S"), "available", -1)
	}
	none := func(*testing.T) {}
	cases := []struct {
		name          string
		before        func(t *testing.T)
		gap           func(t *testing.T, attempt int) // between the Redis and MySQL reads
		wantMoved     int64
		wantUnchecked bool
		// Once every Redis write is done: MySQL's sold, and the units
		// Redis's sold is still short of it (left for the next pass).
		wantSold, wantShort int64
	}{
		{"a sale Redis never counted is moved", commit("lost"), nil, 1, false, 1, 0},
		{"a sale Redis counted alone is moved back", redisOver, nil, -1, false, 0, 0},
		{"no sale, no move", none, nil, 0, false, 0, 0},
		{"a confirm in flight at the Redis read", try("o"), func(t *testing.T, n int) {
			if n == 0 {
				commit("o")(t)
			}
		}, 0, false, 1, 0},
		{"an order reserved and committed in the gap", none, func(t *testing.T, n int) {
			if n == 0 {
				steps(try("o"), commit("o"))(t)
			}
		}, 0, false, 1, 0},
		{"an order reserved, committed and counted in the gap", none, func(t *testing.T, n int) {
			if n == 0 {
				flow("o")(t)
			}
		}, 0, false, 1, 0},
		{"drift beside an order reserved and committed in the gap", commit("lost"), func(t *testing.T, n int) {
			if n == 0 {
				steps(try("o"), commit("o"))(t)
			}
		}, 1, false, 2, 0},
		{"drift beside an order seen live and counted in the gap", steps(commit("lost"), try("o")), func(t *testing.T, n int) {
			if n == 0 {
				steps(commit("o"), finish("o"))(t)
			}
		}, 1, false, 2, 0},
		{"a new order counted in the gap at every attempt: unchecked", commit("lost"), func(t *testing.T, n int) {
			flow(fmt.Sprint("o", n))(t)
		}, 0, true, 1 + correctAttempts, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
				t.Fatal(err)
			}
			if err := inventory.LoadStock(ctx, env.DB, []inventory.Stock{{SKU: "S", Total: 10, Available: 10}}); err != nil {
				t.Fatal(err)
			}
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
				t.Fatal(err)
			}
			env.Redis.HSet(ctx, inventory.RedisStockKey("S"), "total", 10, "available", 10, "occupied", 0, "sold", 0)
			live = nil
			c.before(t)
			attempt := 0
			betweenReads = func() {
				if c.gap != nil {
					c.gap(t, attempt)
				}
				attempt++
			}
			defer func() { betweenReads = func() {} }()
			moved, unchecked, err := s.CorrectSold(ctx, env.DB, "S")
			if err != nil || moved != c.wantMoved || unchecked != c.wantUnchecked {
				t.Fatalf("moved %d, unchecked %v, %v; want %d, %v", moved, unchecked, err, c.wantMoved, c.wantUnchecked)
			}
			for _, id := range live {
				finish(id)(t) // a no-op for one finished already
			}
			snap, err := s.Snapshot(ctx, "S")
			if err != nil {
				t.Fatal(err)
			}
			var sold, avail int64
			if err := env.DB.QueryRow("SELECT sold, available FROM inventory WHERE sku='S'").Scan(&sold, &avail); err != nil {
				t.Fatal(err)
			}
			if sold != c.wantSold || snap.Stock.Sold != sold-c.wantShort || snap.Stock.Available != avail+c.wantShort {
				t.Fatalf("Redis sold %d available %d, MySQL sold %d available %d; want MySQL sold %d, Redis short of it by %d",
					snap.Stock.Sold, snap.Stock.Available, sold, avail, c.wantSold, c.wantShort)
			}
		})
	}
}

// TestCorrectSoldLeavesRefundsInFlight: a refund decided in MySQL (sold
// −1) whose Redis write (refund.lua) has not landed yet looks, to the sold
// correction, like a count Redis has over MySQL. Marked in flight
// (BeginRefund) it is left alone, and the refund's own write then makes
// Redis agree with MySQL; unmarked, the correction moves it and the
// refund's write moves it again — the double release the mark prevents.
func TestCorrectSoldLeavesRefundsInFlight(t *testing.T) {
	ctx := context.Background()
	s := Store{R: env.Redis, Retain: time.Minute}
	ref := inventory.OrderRef{OrderID: "p", SKU: "S"}
	for _, c := range []struct {
		name   string
		marked bool
		// duplicate: a second refund of the order, refused in MySQL as
		// already refunded, marks and clears its own mark in the gap.
		duplicate bool
		wantMoved int64
		// wantRedisSold is Redis's sold once the refund's write landed
		// (MySQL's is 0).
		wantRedisSold int64
	}{
		{"marked in flight: left to the refund's own write", true, false, 0, 0},
		{"unmarked: corrected, then released again", false, false, -1, -1},
		// The refund sent twice at once (--mix refund=): the loser's
		// EndRefund once cleared the winner's mark too (same member),
		// and the correction released the unit twice.
		{"marked, a duplicate came and went: still left alone", true, true, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
				t.Fatal(err)
			}
			if err := inventory.LoadStock(ctx, env.DB, []inventory.Stock{{SKU: "S", Total: 10, Available: 10}}); err != nil {
				t.Fatal(err)
			}
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
				t.Fatal(err)
			}
			env.Redis.HSet(ctx, inventory.RedisStockKey("S"), "total", 10, "available", 10, "occupied", 0, "sold", 0)
			// Order p sold, in both stores.
			if _, err := s.Try(ctx, inventory.Reservation{OrderID: "p", SKU: "S", Qty: 1, Deadline: time.Now().Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
			err := sqlstore.InTx(ctx, env.DB, func(tx *sql.Tx) error {
				if err := sqlstore.InsertOrder(ctx, tx, inventory.Reservation{OrderID: "p", SKU: "S", Qty: 1}, inventory.StateConfirmed); err != nil {
					return err
				}
				_, err := tx.ExecContext(ctx, "UPDATE inventory SET available=available-1, sold=sold+1 WHERE sku='S'")
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Finish(ctx, ref, inventory.StateConfirmed, false); err != nil {
				t.Fatal(err)
			}
			// Its refund: marked, decided in MySQL, Redis write pending.
			mark := ""
			if c.marked {
				if mark, err = s.BeginRefund(ctx, ref); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := env.DB.Exec("UPDATE orders SET state='refunded' WHERE order_id='p'"); err != nil {
				t.Fatal(err)
			}
			if _, err := env.DB.Exec("UPDATE inventory SET available=available+1, sold=sold-1 WHERE sku='S'"); err != nil {
				t.Fatal(err)
			}
			if c.duplicate {
				dup, err := s.BeginRefund(ctx, ref)
				if err != nil {
					t.Fatal(err)
				}
				s.EndRefund(ctx, ref, dup)
			}
			moved, _, err := s.CorrectSold(ctx, env.DB, "S")
			if err != nil || moved != c.wantMoved {
				t.Fatalf("correction moved %d (%v), want %d", moved, err, c.wantMoved)
			}
			if prev, err := s.RefundMarked(ctx, ref, false, mark); err != nil || prev != inventory.StateConfirmed {
				t.Fatalf("refund's Redis write found %q (%v), want confirmed", prev, err)
			}
			snap, err := s.Snapshot(ctx, "S")
			if err != nil {
				t.Fatal(err)
			}
			if snap.Stock.Sold != c.wantRedisSold || snap.Stock.Available != 10-c.wantRedisSold {
				t.Fatalf("Redis sold %d available %d, want %d and %d", snap.Stock.Sold, snap.Stock.Available, c.wantRedisSold, 10-c.wantRedisSold)
			}
			if n, err := env.Redis.ZCard(ctx, refundingKey("S")).Result(); err != nil || n != 0 {
				t.Fatalf("%d refunds still marked in flight (%v)", n, err)
			}
		})
	}
}
