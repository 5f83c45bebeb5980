package outbox

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
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

// clock is a test clock the reconciler reads: passes are "further apart
// than the operation timeout" because the test says so, not because the
// machine was fast or slow.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

// fresh resets the stores and returns an outbox strategy on SKU "S" with
// the given stock, its reconciler on a test clock.
func fresh(t *testing.T, stock int64) (*Strategy, *clock) {
	t.Helper()
	ctx := context.Background()
	if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
		t.Fatal(err)
	}
	if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
		t.Fatal(err)
	}
	st := []inventory.Stock{{SKU: sku, Total: stock, Available: stock}}
	if err := inventory.LoadStock(ctx, env.DB, st); err != nil {
		t.Fatal(err)
	}
	s, err := New(strategies.Config{DB: env.DB, Redis: env.Redis, OpTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Setup(ctx, st); err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Unix(1e9, 0)}
	s.rec.now = c.now
	return s, c
}

func redisStock(t *testing.T) inventory.Stock {
	t.Helper()
	snap, err := s0(t).rs.Snapshot(context.Background(), sku)
	if err != nil {
		t.Fatal(err)
	}
	return snap.Stock
}

// s0 is a strategy value only for its Redis store.
func s0(t *testing.T) *Strategy {
	s, err := New(strategies.Config{DB: env.DB, Redis: env.Redis})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustExec(t *testing.T, q string, args ...any) {
	t.Helper()
	if _, err := env.DB.Exec(q, args...); err != nil {
		t.Fatal(err)
	}
}

func res(id string) inventory.Reservation {
	return inventory.Reservation{OrderID: id, SKU: sku, Qty: 1, Deadline: time.Now().Add(time.Hour)}
}

// TestReconcile builds, on real stores, each situation the reconciler meets
// and checks what it does on passes that are close together and on passes
// further apart than the operation timeout. Redis is 10 units, 0 sold,
// unless the case changes it.
func TestReconcile(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		// setup builds the situation.
		setup func(t *testing.T, s *Strategy)
		// close is Redis after two passes within the operation timeout;
		// apart after two more, further apart than it.
		close, apart inventory.Stock
		// hook runs between the last observation and the guarded repair.
		hook func(t *testing.T, s *Strategy)
	}{
		{
			// The relay lags: the reserve's event is not applied to the
			// row yet. The old reconciler copied the row over Redis and
			// handed the unit out again; the projection counts the event.
			name: "unapplied event is no difference",
			setup: func(t *testing.T, s *Strategy) {
				if err := s.Reserve(ctx, res("a")); err != nil {
					t.Fatal(err)
				}
			},
			close: inventory.Stock{Total: 10, Available: 9, Occupied: 1},
			apart: inventory.Stock{Total: 10, Available: 9, Occupied: 1},
		},
		{
			// A restock whose Redis write was lost: MySQL has 5 more units.
			// Repaired only once the difference has lasted.
			name: "lost restock is repaired once it lasts",
			setup: func(t *testing.T, s *Strategy) {
				mustExec(t, "UPDATE inventory SET total=total+5, available=available+5 WHERE sku=?", sku)
			},
			close: inventory.Stock{Total: 10, Available: 10},
			apart: inventory.Stock{Total: 15, Available: 15},
		},
		{
			// The same restock's Redis write lands between the observation
			// and the repair: the guard must refuse the stale delta, or the
			// 5 units would be added twice (phantom stock, then oversell).
			name: "guard refuses a delta the hash outran",
			setup: func(t *testing.T, s *Strategy) {
				mustExec(t, "UPDATE inventory SET total=total+5, available=available+5 WHERE sku=?", sku)
			},
			hook: func(t *testing.T, s *Strategy) {
				if err := env.Redis.HIncrBy(ctx, inventory.RedisStockKey(sku), "total", 5).Err(); err != nil {
					t.Fatal(err)
				}
				if err := env.Redis.HIncrBy(ctx, inventory.RedisStockKey(sku), "available", 5).Err(); err != nil {
					t.Fatal(err)
				}
			},
			close: inventory.Stock{Total: 10, Available: 10},
			apart: inventory.Stock{Total: 15, Available: 15},
		},
		{
			// A Lua Try with no MySQL order (a reserve in flight, or one
			// whose undo never ran): no stock difference, and an orphan
			// released through the barrier once it has lasted.
			name: "orphan reservation is released once it lasts",
			setup: func(t *testing.T, s *Strategy) {
				if _, err := s.rs.Try(ctx, res("orphan")); err != nil {
					t.Fatal(err)
				}
			},
			close: inventory.Stock{Total: 10, Available: 9, Occupied: 1},
			apart: inventory.Stock{Total: 10, Available: 10},
		},
		{
			// A confirm committed in MySQL whose Redis write failed: the
			// decision is applied on the next pass, not only at Settle.
			name: "missed decision is applied at once",
			setup: func(t *testing.T, s *Strategy) {
				if err := s.Reserve(ctx, res("c")); err != nil {
					t.Fatal(err)
				}
				mustExec(t, "UPDATE orders SET state='confirmed' WHERE order_id='c'")
				mustExec(t, "INSERT INTO outbox (order_id, sku, qty, kind, created_at) VALUES ('c',?,1,'confirm',NOW())", sku)
			},
			close: inventory.Stock{Total: 10, Available: 9, Sold: 1},
			apart: inventory.Stock{Total: 10, Available: 9, Sold: 1},
		},
		{
			// Redis lost its data: the hash is reloaded from the projection
			// (reserved units stay occupied) once the loss has lasted.
			name: "missing hash is reloaded from the projection",
			setup: func(t *testing.T, s *Strategy) {
				if err := s.Reserve(ctx, res("r")); err != nil {
					t.Fatal(err)
				}
				if _, err := s.relay(ctx); err != nil {
					t.Fatal(err)
				}
				mustExec(t, "UPDATE orders SET state='reserved' WHERE order_id='r'")
				if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
					t.Fatal(err)
				}
			},
			close: inventory.Stock{},
			apart: inventory.Stock{Total: 10, Available: 9, Occupied: 1},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, clk := fresh(t, 10)
			c.setup(t, s)
			for i := 0; i < 2; i++ {
				if _, err := s.reconcile(ctx, false); err != nil {
					t.Fatal(err)
				}
				clk.advance(s.cfg.OpTimeout / 2)
			}
			if got := redisStock(t); got != withSKU(c.close, got) {
				t.Fatalf("after close passes: redis %+v, want %+v", got, c.close)
			}
			if c.hook != nil {
				s.rec.beforeAdjust = func() { c.hook(t, s) }
			}
			for i := 0; i < 2; i++ {
				clk.advance(s.cfg.OpTimeout)
				if _, err := s.reconcile(ctx, false); err != nil {
					t.Fatal(err)
				}
			}
			if got := redisStock(t); got != withSKU(c.apart, got) {
				t.Fatalf("after passes apart: redis %+v, want %+v", got, c.apart)
			}
		})
	}
}

func withSKU(st, like inventory.Stock) inventory.Stock {
	st.SKU = like.SKU
	return st
}

// TestUndoAfterFailedWrite: the reserve's MySQL write fails with the
// caller's context already ended; the undo must still give the unit back
// (on its own context) and the order must be refused for good.
func TestUndoAfterFailedWrite(t *testing.T) {
	s, _ := fresh(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	r := res("u")
	if _, err := s.rs.Try(ctx, r); err != nil {
		t.Fatal(err)
	}
	cancel()
	err := s.undo(r, context.Canceled)
	if err == nil || errors.Is(err, inventory.ErrOutcomeUnknown) {
		t.Fatalf("undo: %v, want the write's failure", err)
	}
	if got := redisStock(t); got.Available != 1 || got.Occupied != 0 {
		t.Fatalf("redis after undo: %+v, want the unit back", got)
	}
	if err := s.Reserve(context.Background(), r); !errors.Is(err, inventory.ErrAlreadyFinal) {
		t.Fatalf("reserve after undo: %v, want ErrAlreadyFinal (the barrier refused it)", err)
	}
}

// TestUndoOfCommittedWrite: the write committed but its answer was lost;
// the undo must find the order and keep the reservation (unknown ≠ failed).
func TestUndoOfCommittedWrite(t *testing.T) {
	s, _ := fresh(t, 1)
	ctx := context.Background()
	r := res("k")
	if err := s.Reserve(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := s.undo(r, inventory.ErrOutcomeUnknown); err != nil {
		t.Fatalf("undo of a committed reserve: %v, want success", err)
	}
	if got := redisStock(t); got.Available != 0 || got.Occupied != 1 {
		t.Fatalf("redis after undo: %+v, want the unit still held", got)
	}
	if err := s.Confirm(ctx, inventory.OrderRef{OrderID: "k", SKU: sku}); err != nil {
		t.Fatalf("confirm: %v", err)
	}
}

// TestUnderLoad runs buyers, cancels, abandons (expiry), restocks, the
// relay and the reconciler together on real stores, with an operation
// timeout so short that many operations time out half done — a Try whose
// MySQL write never starts or whose answer is lost, a confirm whose Redis
// update is cut off — so the undo, the orphan sweep, the
// decision repair and the guarded delta all run. Whatever the timing, the
// auditor must then find nothing oversold, leaked, phantom or drifting, and
// no acknowledgement contradicted.
func TestUnderLoad(t *testing.T) {
	ctx := context.Background()
	if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
		t.Fatal(err)
	}
	if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
		t.Fatal(err)
	}
	skus := []string{"A", "B", "C"}
	var stock []inventory.Stock
	ledger := map[string]int64{}
	for _, k := range skus {
		stock = append(stock, inventory.Stock{SKU: k, Total: 20, Available: 20})
		ledger[k] = 20
	}
	if err := inventory.LoadStock(ctx, env.DB, stock); err != nil {
		t.Fatal(err)
	}
	const opTimeout = 30 * time.Millisecond
	s, err := New(strategies.Config{DB: env.DB, Redis: env.Redis, OutboxPeriod: 5 * time.Millisecond,
		ReconcilePeriod: 5 * time.Millisecond, SweepPeriod: 5 * time.Millisecond, OpTimeout: opTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Setup(ctx, stock); err != nil {
		t.Fatal(err)
	}
	bg, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(bg) }()
	var mu sync.Mutex
	var acks []inventory.Ack
	ack := func(a inventory.Ack) { mu.Lock(); acks = append(acks, a); mu.Unlock() }
	op := func(f func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, opTimeout)
		defer cancel()
		return f(ctx)
	}
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := 0; i < 150; i++ {
				k := skus[rng.IntN(len(skus))]
				id := fmt.Sprintf("w%d-%d", w, i)
				ttl := time.Hour
				if rng.IntN(6) == 0 {
					ttl = 20 * time.Millisecond // abandoned: left to expire
				}
				r := inventory.Reservation{OrderID: id, SKU: k, Qty: 1, Deadline: time.Now().Add(ttl)}
				err := op(func(ctx context.Context) error { return s.Reserve(ctx, r) })
				// Restocks run to the end: the ledger must know whether one
				// happened (a lost Redis write is the reconciler's case).
				if errors.Is(err, inventory.ErrOutOfStock) && rng.IntN(4) == 0 {
					rs := inventory.Restock{ID: "r-" + id, SKU: k, Qty: 5}
					st := inventory.AckRestocked
					if s.Restock(ctx, rs) != nil {
						st = inventory.AckRestockUnknown // the journal tells
					}
					ack(inventory.Ack{OrderID: rs.ID, SKU: k, State: st, Qty: 5})
				}
				if err != nil {
					continue
				}
				ack(inventory.Ack{OrderID: id, SKU: k, State: inventory.StateReserved})
				if ttl < time.Hour {
					continue
				}
				ref := inventory.OrderRef{OrderID: id, SKU: k}
				if rng.IntN(5) == 0 {
					if op(func(ctx context.Context) error { return s.Cancel(ctx, ref) }) == nil {
						ack(inventory.Ack{OrderID: id, SKU: k, State: inventory.StateCancelled})
					}
					continue
				}
				if op(func(ctx context.Context) error { return s.Confirm(ctx, ref) }) == nil {
					ack(inventory.Ack{OrderID: id, SKU: k, State: inventory.StateConfirmed})
				}
			}
		}()
	}
	wg.Wait()
	stop()
	<-done
	if err := s.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	a, err := audit.Auditor{DB: env.DB, Redis: env.Redis, Ledger: ledger}.Audit(ctx, acks)
	if err != nil {
		t.Fatal(err)
	}
	if a.Anomalies != 0 || a.ConfirmedUnits == 0 {
		t.Fatalf("audit after load: %d anomalies, %d confirmed: %+v", a.Anomalies, a.ConfirmedUnits, a)
	}
	t.Logf("confirmed %d, counters %v", a.ConfirmedUnits, s.Counters())
}

// TestRepeatedReserveAsksMySQL: a reserve repeated with the same order id
// (its first reply lost) finds the Try already done in Redis; MySQL, not
// Redis, says what the repeat gets — the order must be in MySQL before a
// reserve is acknowledged.
func TestRepeatedReserveAsksMySQL(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		setup func(t *testing.T, s *Strategy) // the first call, as far as it got
		want  error
		state inventory.OrderState // MySQL's order after the repeat
		avail int64                // Redis available after the repeat (stock 5)
	}{
		{"first call complete", func(t *testing.T, s *Strategy) {
			if err := s.Reserve(ctx, res("a")); err != nil {
				t.Fatal(err)
			}
		}, nil, inventory.StateReserved, 4},
		// The Try ran, the reply was lost before the MySQL write: the
		// repeat writes the order.
		{"only the Try ran", func(t *testing.T, s *Strategy) {
			if _, err := s.rs.Try(ctx, res("a")); err != nil {
				t.Fatal(err)
			}
		}, nil, inventory.StateReserved, 4},
		// The reconciler's barrier refused the order meanwhile: the repeat
		// is refused, and Redis gives the unit back.
		{"the barrier refused it", func(t *testing.T, s *Strategy) {
			if _, err := s.rs.Try(ctx, res("a")); err != nil {
				t.Fatal(err)
			}
			if _, err := s.barrier(ctx, inventory.OrderRef{OrderID: "a", SKU: sku}); err != nil {
				t.Fatal(err)
			}
		}, inventory.ErrAlreadyFinal, inventory.StateCancelled, 5},
		{"confirmed", func(t *testing.T, s *Strategy) {
			if err := s.Reserve(ctx, res("a")); err != nil {
				t.Fatal(err)
			}
			if err := s.Confirm(ctx, inventory.OrderRef{OrderID: "a", SKU: sku}); err != nil {
				t.Fatal(err)
			}
		}, nil, inventory.StateConfirmed, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _ := fresh(t, 5)
			c.setup(t, s)
			wantErr(t, "repeat", s.Reserve(ctx, res("a")), c.want)
			if got := orderState(t, "a"); got != c.state {
				t.Fatalf("MySQL order %q, want %q", got, c.state)
			}
			if got := redisStock(t).Available; got != c.avail {
				t.Fatalf("Redis available %d, want %d", got, c.avail)
			}
		})
	}
}
