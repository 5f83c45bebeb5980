package ensure

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/internal/waitfor"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/servers/servertest"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/internal/redisstock"
)

var env servertest.Env

func TestMain(m *testing.M) { os.Exit(servertest.Main(m, &env)) }

const sku = "S"

func res(id string) inventory.Reservation {
	return inventory.Reservation{OrderID: id, SKU: sku, Qty: 1, Deadline: time.Now().Add(time.Hour)}
}

func ref(id string) inventory.OrderRef { return inventory.OrderRef{OrderID: id, SKU: sku} }

// fresh resets both stores, loads stock units of sku and returns a strategy
// set up on them (its background loops not running: each test drives the
// worker, the retry job and the recovery pass itself, or starts Run).
func fresh(t *testing.T, stock int64, cfg strategies.Config) *Strategy {
	t.Helper()
	ctx := context.Background()
	if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
		t.Fatal(err)
	}
	if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
		t.Fatal(err)
	}
	if err := inventory.LoadStock(ctx, env.DB, []inventory.Stock{{SKU: sku, Total: stock, Available: stock}}); err != nil {
		t.Fatal(err)
	}
	return started(t, cfg)
}

// started builds and sets up a strategy on the stores as they are (a
// service start or restart).
func started(t *testing.T, cfg strategies.Config) *Strategy {
	t.Helper()
	cfg.DB, cfg.Redis = env.DB, env.Redis
	s, err := New(cfg)
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

// stocks reads the SKU's MySQL row and Redis hash.
func stocks(t *testing.T) (my, rd inventory.Stock) {
	t.Helper()
	ctx := context.Background()
	if err := env.DB.QueryRowContext(ctx, "SELECT total, available, occupied, sold FROM inventory WHERE sku=?", sku).
		Scan(&my.Total, &my.Available, &my.Occupied, &my.Sold); err != nil {
		t.Fatal(err)
	}
	h, err := env.Redis.HGetAll(ctx, inventory.RedisStockKey(sku)).Result()
	if err != nil {
		t.Fatal(err)
	}
	for f, dst := range map[string]*int64{"total": &rd.Total, "available": &rd.Available, "occupied": &rd.Occupied, "sold": &rd.Sold} {
		if _, err := fmt.Sscan(h[f], dst); err != nil {
			t.Fatalf("redis %s: %q: %v", f, h[f], err)
		}
	}
	my.SKU, rd.SKU = sku, sku
	return my, rd
}

// unsynced counts the log rows not yet synced.
func unsynced(t *testing.T) int {
	t.Helper()
	var n int
	if err := env.DB.QueryRow("SELECT COUNT(*) FROM stock_log WHERE synced=0").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// settleAndAudit drains the strategy and has the auditor grade the stores
// against the stock put in; acks are what the clients were told (confirm
// acks of orders refunded later are left out: the auditor of this branch
// knows no refund).
func settleAndAudit(t *testing.T, s *Strategy, stock int64, acks []inventory.Ack) {
	t.Helper()
	ctx := context.Background()
	if err := s.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if n := unsynced(t); n != 0 {
		t.Fatalf("%d log rows unsynced after settle", n)
	}
	a, err := audit.Auditor{DB: env.DB, Redis: env.Redis, RedisReservations: true,
		Ledger: map[string]int64{sku: stock}, StaleBefore: time.Now()}.Audit(ctx, acks)
	if err != nil {
		t.Fatal(err)
	}
	if a.Anomalies != 0 {
		t.Fatalf("audit: %d anomalies: %v", a.Anomalies, a.Violations)
	}
}

// TestRefundContract drives Refund through the contract on real stores:
// the answer of each case, then the counts MySQL holds at once (DB-first)
// and Redis holds after Settle drained the log, and the auditor's grade.
func TestRefundContract(t *testing.T) {
	ctx := context.Background()
	past := time.Now().Add(-time.Second)
	cases := []struct {
		name string
		run  func(t *testing.T, s *Strategy) []inventory.Ack
		// sold and held are the units sold and live-reserved at the end,
		// in both stores (after settle).
		sold, held int64
	}{
		{"refund gives a confirmed unit back, once", func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "reserve", s.Reserve(ctx, res("a")), nil)
			want(t, "confirm", s.Confirm(ctx, ref("a")), nil)
			want(t, "refund", s.Refund(ctx, ref("a")), nil)
			want(t, "refund again", s.Refund(ctx, ref("a")), nil)
			if my, _ := stocks(t); my.Sold != 0 || my.Available != 2 {
				t.Fatalf("mysql after the refund (DB-first): %+v", my)
			}
			return nil
		}, 0, 0},
		{"refund applied before its confirm's row reaches Redis", func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "reserve", s.Reserve(ctx, res("a")), nil)
			want(t, "confirm", s.Confirm(ctx, ref("a")), nil)
			want(t, "refund", s.Refund(ctx, ref("a")), nil)
			rows, err := s.pending(ctx, "synced=0 AND kind=?", kindRefund)
			if err != nil || len(rows) != 1 {
				t.Fatalf("refund row: %v %v", rows, err)
			}
			ok, failed := s.applyRows(ctx, rows) // the refund's row first: occupied → available
			if len(ok) != 1 || len(failed) != 0 {
				t.Fatalf("apply refund: ok %d failed %d", len(ok), len(failed))
			}
			if err := s.markSynced(ctx, ok); err != nil {
				t.Fatal(err)
			}
			if _, rd := stocks(t); rd.Occupied != 0 || rd.Available != 2 || rd.Sold != 0 {
				t.Fatalf("redis after the refund's row: %+v", rd)
			}
			return nil // the confirm's row, applied at settle, finds the order refunded
		}, 0, 0},
		{"refund of a reserved order is refused", func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "reserve", s.Reserve(ctx, res("a")), nil)
			want(t, "refund", s.Refund(ctx, ref("a")), inventory.ErrNotConfirmed)
			return []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateReserved}}
		}, 0, 1},
		{"refund of a cancelled order is refused", func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "reserve", s.Reserve(ctx, res("a")), nil)
			want(t, "cancel", s.Cancel(ctx, ref("a")), nil)
			want(t, "refund", s.Refund(ctx, ref("a")), inventory.ErrAlreadyFinal)
			return []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateCancelled}}
		}, 0, 0},
		{"refund of an expired order is refused", func(t *testing.T, s *Strategy) []inventory.Ack {
			r := res("a")
			r.Deadline = past
			want(t, "reserve", s.Reserve(ctx, r), nil)
			want(t, "confirm after the deadline", s.Confirm(ctx, ref("a")), inventory.ErrAlreadyFinal)
			want(t, "refund", s.Refund(ctx, ref("a")), inventory.ErrAlreadyFinal)
			return nil
		}, 0, 0},
		{"refund of an unknown order", func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "refund", s.Refund(ctx, ref("nobody")), inventory.ErrUnknownOrder)
			return nil
		}, 0, 0},
		{"cancel and confirm of a refunded order are refused", func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "reserve", s.Reserve(ctx, res("a")), nil)
			want(t, "confirm", s.Confirm(ctx, ref("a")), nil)
			want(t, "refund", s.Refund(ctx, ref("a")), nil)
			want(t, "cancel", s.Cancel(ctx, ref("a")), inventory.ErrAlreadyFinal)
			want(t, "confirm", s.Confirm(ctx, ref("a")), inventory.ErrAlreadyFinal)
			if err := s.drain(ctx); err != nil {
				t.Fatal(err)
			}
			// Once Redis holds the refund too, the same answers.
			want(t, "cancel after sync", s.Cancel(ctx, ref("a")), inventory.ErrAlreadyFinal)
			want(t, "confirm after sync", s.Confirm(ctx, ref("a")), inventory.ErrAlreadyFinal)
			want(t, "reserve the refunded unit", s.Reserve(ctx, res("b")), nil)
			want(t, "confirm b", s.Confirm(ctx, ref("b")), nil)
			return []inventory.Ack{{OrderID: "b", SKU: sku, State: inventory.StateConfirmed}}
		}, 1, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			const stock = 2
			s := fresh(t, stock, strategies.Config{})
			acks := c.run(t, s)
			settleAndAudit(t, s, stock, acks)
			my, rd := stocks(t)
			// Reservations live in Redis only until decided: MySQL's
			// available still counts the units they hold.
			wantStock := inventory.Stock{SKU: sku, Total: stock, Available: stock - c.sold, Sold: c.sold}
			rdWant := wantStock
			rdWant.Available, rdWant.Occupied = stock-c.sold-c.held, c.held
			if my != wantStock || rd != rdWant {
				t.Fatalf("after settle: mysql %+v redis %+v; want mysql %+v redis %+v", my, rd, wantStock, rdWant)
			}
		})
	}
}

// TestRefundRaces: operations that race on one confirmed order — a cancel
// and a refund, two refunds — release its unit exactly once, on many
// orders at once, with the worker running; and a refund racing the expiry
// of an order never confirmed releases nothing twice.
func TestRefundRaces(t *testing.T) {
	ctx := context.Background()
	const orders = 40
	cases := []struct {
		name string
		// confirm says whether the orders are confirmed before the race.
		confirm bool
		ops     []func(s *Strategy, id string) error
		// sold is what each order holds in the end.
		sold int64
	}{
		{"cancel and refund", true, []func(*Strategy, string) error{
			func(s *Strategy, id string) error { return s.Cancel(ctx, ref(id)) },
			func(s *Strategy, id string) error { return s.Refund(ctx, ref(id)) }}, 0},
		{"two refunds", true, []func(*Strategy, string) error{
			func(s *Strategy, id string) error { return s.Refund(ctx, ref(id)) },
			func(s *Strategy, id string) error { return s.Refund(ctx, ref(id)) }}, 0},
		{"refund and expiry of an unconfirmed order", false, []func(*Strategy, string) error{
			func(s *Strategy, id string) error { return s.Refund(ctx, ref(id)) },
			func(s *Strategy, id string) error { return s.Confirm(ctx, ref(id)) }}, 0}, // the confirm finds it past its deadline: expires it
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := fresh(t, orders, strategies.Config{})
			rctx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); _ = s.Run(rctx) }()
			deadline := time.Now().Add(time.Hour)
			if !c.confirm {
				deadline = time.Now().Add(-time.Millisecond)
			}
			for i := range orders {
				id := fmt.Sprintf("o%d", i)
				r := res(id)
				r.Deadline = deadline
				want(t, "reserve "+id, s.Reserve(ctx, r), nil)
				if c.confirm {
					want(t, "confirm "+id, s.Confirm(ctx, ref(id)), nil)
				}
			}
			var wg sync.WaitGroup
			errs := make(chan error, orders*len(c.ops))
			for i := range orders {
				id := fmt.Sprintf("o%d", i)
				for _, op := range c.ops {
					wg.Add(1)
					go func() {
						defer wg.Done()
						err := op(s, id)
						if err != nil && !errors.Is(err, inventory.ErrAlreadyFinal) && !errors.Is(err, inventory.ErrNotConfirmed) {
							errs <- fmt.Errorf("%s: %w", id, err)
						}
					}()
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			stop()
			<-done
			settleAndAudit(t, s, orders, nil)
			my, rd := stocks(t)
			w := inventory.Stock{SKU: sku, Total: orders, Available: orders - orders*c.sold, Sold: orders * c.sold}
			if my != w || rd != w {
				t.Fatalf("mysql %+v redis %+v, want both %+v (each unit released exactly once)", my, rd, w)
			}
		})
	}
}

// TestWorker: with Run going, every confirm's log row reaches Redis and is
// marked synced without Settle, and the counters say so.
func TestWorker(t *testing.T) {
	ctx := context.Background()
	const n = 25
	s := fresh(t, n, strategies.Config{OutboxPeriod: time.Hour}) // only the nudges wake the worker
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(rctx) }()
	defer func() { stop(); <-done }()
	for i := range n {
		id := fmt.Sprintf("o%d", i)
		want(t, "reserve", s.Reserve(ctx, res(id)), nil)
		want(t, "confirm", s.Confirm(ctx, ref(id)), nil)
	}
	waitfor.Until(t, "every log row synced", func() bool { return unsynced(t) == 0 })
	_, rd := stocks(t)
	if rd.Sold != n || rd.Occupied != 0 {
		t.Fatalf("redis after the worker: %+v", rd)
	}
	c := s.Counters()
	if c["ensure_log_rows"] != n || c["ensure_applied"] != n || c["ensure_lag_max_ms"] <= 0 || c["ensure_retries"] != 0 || c["ensure_alerts"] != 0 {
		t.Fatalf("counters: %v", c)
	}
}

// TestRetryAndAlert: a row the worker cannot apply (its stock hash gone)
// is the retry job's once older than OpTimeout; each retry is counted, the
// alert is raised after the first failure and alertAfter failed retries,
// once; once Redis is back the retry job syncs it. A row younger than
// OpTimeout is left to the worker.
func TestRetryAndAlert(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name      string
		opTimeout time.Duration
		retries   int // retry passes run while Redis fails
		// wantRetries, wantAlerts: the counters after those passes.
		wantRetries, wantAlerts float64
	}{
		{"old row: retried, alert after 3 failed retries", time.Nanosecond, alertAfter + 2, alertAfter + 2, 1},
		{"two failed retries: no alert yet", time.Nanosecond, alertAfter - 1, alertAfter - 1, 0},
		{"young row: left alone", time.Hour, 3, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := fresh(t, 1, strategies.Config{OpTimeout: c.opTimeout})
			want(t, "reserve", s.Reserve(ctx, res("a")), nil)
			want(t, "confirm", s.Confirm(ctx, ref("a")), nil)
			// Redis loses the SKU's hash: every apply answers nohash.
			if err := env.Redis.Del(ctx, inventory.RedisStockKey(sku)).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := s.work(ctx); err != nil {
				t.Fatal(err)
			}
			if got := s.Counters()["ensure_worker_failures"]; got != 1 {
				t.Fatalf("worker failures %v, want 1", got)
			}
			for range c.retries {
				if err := s.retry(ctx); err != nil {
					t.Fatal(err)
				}
			}
			cs := s.Counters()
			if cs["ensure_retries"] != c.wantRetries || cs["ensure_alerts"] != c.wantAlerts || unsynced(t) != 1 {
				t.Fatalf("retries %v alerts %v unsynced %d; want %v, %v, 1", cs["ensure_retries"], cs["ensure_alerts"], unsynced(t), c.wantRetries, c.wantAlerts)
			}
			// The hash is rebuilt from MySQL (the order counted sold there),
			// and the row applies: the record already says confirmed.
			if err := s.recover(ctx); err != nil {
				t.Fatal(err)
			}
			if c.opTimeout < time.Hour {
				if err := s.retry(ctx); err != nil {
					t.Fatal(err)
				}
				if unsynced(t) != 0 || s.Counters()["ensure_retried_synced"] != 1 {
					t.Fatalf("after Redis came back: unsynced %d, counters %v", unsynced(t), s.Counters())
				}
			}
			settleAndAudit(t, s, 1, []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateConfirmed}})
		})
	}
}

// TestRecoveryPaths: a restart, lost Redis data and the sold correction,
// each followed by the auditor's grade after settle.
func TestRecoveryPaths(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		stock int64
		run   func(t *testing.T, s *Strategy) []inventory.Ack
	}{
		{"a restarted instance applies its predecessor's log", 2, func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "reserve", s.Reserve(ctx, res("a")), nil)
			want(t, "confirm", s.Confirm(ctx, ref("a")), nil)
			s2 := started(t, strategies.Config{})
			if _, err := s2.work(ctx); err != nil {
				t.Fatal(err)
			}
			if unsynced(t) != 0 {
				t.Fatal("the new instance's worker left the row")
			}
			want(t, "reserve b", s2.Reserve(ctx, res("b")), nil)
			want(t, "reserve c: sold out", s2.Reserve(ctx, res("c")), inventory.ErrOutOfStock)
			return []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateConfirmed}, {OrderID: "b", SKU: sku, State: inventory.StateReserved}}
		}},
		{"a refund in flight is not taken for drift", 2, func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "reserve", s.Reserve(ctx, res("a")), nil)
			want(t, "confirm", s.Confirm(ctx, ref("a")), nil)
			if err := s.drain(ctx); err != nil {
				t.Fatal(err)
			}
			want(t, "refund", s.Refund(ctx, ref("a")), nil) // MySQL sold 0; Redis sold 1 until the row applies
			// Unguarded, the correction would move the refunded unit back
			// (and the refund's row would then move it a second time).
			if err := s.recover(ctx); err != nil {
				t.Fatal(err)
			}
			if _, rd := stocks(t); rd.Sold != 1 || rd.Available != 1 {
				t.Fatalf("redis moved by the correction while the refund was in flight: %+v", rd)
			}
			return nil
		}},
		{"a sale whose Redis record was lost is counted by the correction", 2, func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "reserve", s.Reserve(ctx, res("a")), nil)
			// Redis loses every trace of a; MySQL then decides the sale.
			if err := env.Redis.Del(ctx, inventory.RedisReservationKey(sku, "a")).Err(); err != nil {
				t.Fatal(err)
			}
			if err := env.Redis.ZRem(ctx, inventory.RedisLiveKey(sku), "a").Err(); err != nil {
				t.Fatal(err)
			}
			if err := env.Redis.HIncrBy(ctx, inventory.RedisStockKey(sku), "occupied", -1).Err(); err != nil {
				t.Fatal(err)
			}
			if err := env.Redis.HIncrBy(ctx, inventory.RedisStockKey(sku), "available", 1).Err(); err != nil {
				t.Fatal(err)
			}
			// a's confirm had read its record before Redis lost it.
			got, err := s.confirmOne(ctx, ref("a"), redisstock.Reservation{Qty: 1, State: inventory.StateReserved, Deadline: time.Now().Add(time.Hour)})
			if err != nil || got != inventory.StateConfirmed {
				t.Fatalf("confirm a: %v %v", got, err)
			}
			if err := s.drain(ctx); err != nil { // the row finds no record
				t.Fatal(err)
			}
			if s.Counters()["ensure_apply_lost"] != 1 {
				t.Fatalf("counters: %v", s.Counters())
			}
			if err := s.recover(ctx); err != nil {
				t.Fatal(err)
			}
			want(t, "reserve b", s.Reserve(ctx, res("b")), nil)
			want(t, "reserve c: sold out", s.Reserve(ctx, res("c")), inventory.ErrOutOfStock)
			return []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateConfirmed}, {OrderID: "b", SKU: sku, State: inventory.StateReserved}}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := fresh(t, c.stock, strategies.Config{})
			acks := c.run(t, s)
			settleAndAudit(t, s, c.stock, acks)
		})
	}
}
