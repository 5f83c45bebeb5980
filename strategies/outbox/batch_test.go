package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/internal/groupcommit"
)

// batchOf makes s's groups run a batch exactly when n calls of a SKU have
// queued (the wait is an hour: only a full batch cuts it short), so a test
// knows which calls share a batch without timing anything.
func batchOf(s *Strategy, n int) {
	cfg := s.cfg
	cfg.BatchMax, cfg.BatchWait = n, time.Hour
	newGroups(s, cfg)
}

// loseAnswer wraps a group's Batch so that it commits and then reports an
// unknown outcome, as when the commit's answer is lost.
func loseAnswer[T any](g *groupcommit.Group[T]) {
	inner := g.Batch
	g.Batch = func(ctx context.Context, key string, items []T) ([]error, error) {
		if _, err := inner(ctx, key, items); err != nil {
			return nil, err
		}
		return nil, inventory.ErrOutcomeUnknown
	}
}

// events counts each order's outbox events by kind.
func events(t *testing.T) map[string]map[string]int {
	t.Helper()
	rows, err := env.DB.Query("SELECT order_id, kind FROM outbox")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]map[string]int{}
	for rows.Next() {
		var id, kind string
		if err := rows.Scan(&id, &kind); err != nil {
			t.Fatal(err)
		}
		if out[id] == nil {
			out[id] = map[string]int{}
		}
		out[id][kind]++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// orderState reads an order's MySQL state ("" if it has no row).
func orderState(t *testing.T, id string) inventory.OrderState {
	t.Helper()
	var st inventory.OrderState
	err := env.DB.QueryRow("SELECT state FROM orders WHERE order_id=?", id).Scan(&st)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	return st
}

// wantErr checks an outcome against a wanted one (nil: success).
func wantErr(t *testing.T, what string, got, want error) {
	t.Helper()
	if want == nil && got != nil || want != nil && !errors.Is(got, want) {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}

// TestReserveBatch runs reserves of one SKU as one batch and checks each
// one's own outcome, the rows written, Redis, and the batch's fate.
func TestReserveBatch(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		setup func(t *testing.T, s *Strategy)
		ids   []string
		lose  bool // the batch commits, but its answer is lost
		// wantErr: outcomes other than success; refused orders end with no
		// reserve event and their unit back in Redis.
		wantErr       map[string]error
		wantFallbacks int64
	}{
		{name: "every reserve commits in one batch", ids: []string{"a", "b", "c", "d"}},
		{
			// A barrier (a cancel before the reserve, or the reconciler's
			// orphan sweep) already wrote x's row: x's insert fails the
			// batch; run one by one, only x is refused (and its unit given
			// back), the others commit.
			name: "a barrier row fails only its own reserve",
			setup: func(t *testing.T, s *Strategy) {
				if _, err := s.barrier(ctx, inventory.OrderRef{OrderID: "x", SKU: sku}); err != nil {
					t.Fatal(err)
				}
			},
			ids: []string{"a", "x", "b"}, wantErr: map[string]error{"x": inventory.ErrAlreadyFinal}, wantFallbacks: 1,
		},
		{
			// Run one by one after the lost answer, each reserve finds its
			// own committed row (through the barrier) and succeeds; no
			// event is written twice.
			name: "a lost commit answer is found, not repeated", ids: []string{"a", "b", "c"}, lose: true, wantFallbacks: 1,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _ := fresh(t, 10)
			if c.setup != nil {
				c.setup(t, s)
			}
			batchOf(s, len(c.ids))
			if c.lose {
				loseAnswer(s.reserves)
			}
			errs := make([]error, len(c.ids))
			var wg sync.WaitGroup
			for i, id := range c.ids {
				wg.Add(1)
				go func() { defer wg.Done(); errs[i] = s.Reserve(ctx, res(id)) }()
			}
			wg.Wait()
			evs := events(t)
			held := int64(0)
			for i, id := range c.ids {
				wantErr(t, "reserve "+id, errs[i], c.wantErr[id])
				n := evs[id][KindReserve]
				if c.wantErr[id] != nil {
					if n != 0 || orderState(t, id) == inventory.StateReserved {
						t.Errorf("refused %s: %d reserve events, state %s", id, n, orderState(t, id))
					}
					continue
				}
				held++
				if n != 1 || orderState(t, id) != inventory.StateReserved {
					t.Errorf("%s: %d reserve events, state %q; want 1, reserved", id, n, orderState(t, id))
				}
			}
			if got := redisStock(t); got.Available != 10-held || got.Occupied != held {
				t.Errorf("redis %+v, want %d held", got, held)
			}
			st := s.reserves.Stats()
			if st.Batches != 1 || st.Items != int64(len(c.ids)) || st.Fallbacks != c.wantFallbacks {
				t.Errorf("batches %+v, want one of %d with %d fallbacks", st, len(c.ids), c.wantFallbacks)
			}
		})
	}
}

// decide is one confirm or cancel of a decision batch.
type decide struct {
	id string
	to inventory.OrderState
}

// TestDecisionBatch runs confirms and cancels of one SKU as one batch and
// checks that each gets the outcome Orders.Finish would give it alone,
// with exactly one decision event per decided order.
func TestDecisionBatch(t *testing.T) {
	ctx := context.Background()
	confirm := func(id string) decide { return decide{id, inventory.StateConfirmed} }
	cancel := func(id string) decide { return decide{id, inventory.StateCancelled} }
	cases := []struct {
		name string
		// reserved are reserved before the batch; setup changes more.
		reserved []string
		setup    func(t *testing.T, s *Strategy)
		batch    []decide
		lose     bool
		wantErr  map[int]error
		// wantState is each order's MySQL state after; an order whose
		// final state differs from the one asked for has no event for it.
		wantState map[string]inventory.OrderState
		// oneWinner: the batch's decisions of "a" race; exactly one wins.
		oneWinner bool
	}{
		{
			name: "one batch decides every order", reserved: []string{"a", "b", "c"},
			batch:     []decide{confirm("a"), confirm("b"), cancel("c")},
			wantState: map[string]inventory.OrderState{"a": "confirmed", "b": "confirmed", "c": "cancelled"},
		},
		{
			// Each unusual decision is left out of the batch and runs the
			// state machine on its own after the commit; a is confirmed in
			// the batch all the same.
			name: "unusual decisions get their own outcome", reserved: []string{"a", "late", "done"},
			setup: func(t *testing.T, s *Strategy) {
				mustExec(t, "UPDATE orders SET expires_at='2000-01-01' WHERE order_id='late'")
				if err := s.orders.Finish(ctx, inventory.OrderRef{OrderID: "done", SKU: sku}, inventory.StateConfirmed); err != nil {
					t.Fatal(err)
				}
			},
			batch: []decide{confirm("a"), confirm("nope"), cancel("ghost"), confirm("late"), confirm("done"), cancel("done")},
			wantErr: map[int]error{1: inventory.ErrUnknownOrder, 3: inventory.ErrAlreadyFinal,
				5: inventory.ErrAlreadyFinal},
			wantState: map[string]inventory.OrderState{"a": "confirmed", "nope": "", "ghost": "cancelled",
				"late": "expired", "done": "confirmed"},
		},
		{
			name: "a confirm and a cancel of one order: one wins", reserved: []string{"a", "b"},
			batch: []decide{confirm("a"), cancel("a"), confirm("b")}, oneWinner: true,
			wantState: map[string]inventory.OrderState{"b": "confirmed"},
		},
		{
			// Run one by one after the lost answer, each decision finds
			// its order already decided: success, no second event — and
			// Redis gets the decision then, not on the reconciler's next
			// pass (a cancelled unit would stay unsellable until it).
			name: "a lost commit answer is found, not repeated", reserved: []string{"a", "b"}, lose: true,
			batch:     []decide{confirm("a"), cancel("b")},
			wantState: map[string]inventory.OrderState{"a": "confirmed", "b": "cancelled"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _ := fresh(t, 10)
			for _, id := range c.reserved {
				if err := s.Reserve(ctx, res(id)); err != nil {
					t.Fatal(err)
				}
			}
			if c.setup != nil {
				c.setup(t, s)
			}
			before := events(t)
			batchOf(s, len(c.batch))
			if c.lose {
				loseAnswer(s.decisions)
			}
			errs := make([]error, len(c.batch))
			var wg sync.WaitGroup
			for i, d := range c.batch {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ref := inventory.OrderRef{OrderID: d.id, SKU: sku}
					if d.to == inventory.StateConfirmed {
						errs[i] = s.Confirm(ctx, ref)
					} else {
						errs[i] = s.Cancel(ctx, ref)
					}
				}()
			}
			wg.Wait()
			if c.oneWinner {
				won := 0
				for i, d := range c.batch {
					if d.id != "a" {
						continue
					}
					if errs[i] == nil {
						won++
						c.wantState = map[string]inventory.OrderState{"a": d.to, "b": c.wantState["b"]}
					} else {
						wantErr(t, "losing decision", errs[i], inventory.ErrAlreadyFinal)
					}
				}
				if won != 1 {
					t.Fatalf("%d decisions of a won, want 1 (%v)", won, errs)
				}
			} else {
				for i, d := range c.batch {
					wantErr(t, fmt.Sprintf("%s %s", d.to, d.id), errs[i], c.wantErr[i])
				}
			}
			evs := events(t)
			for id, want := range c.wantState {
				if got := orderState(t, id); got != want {
					t.Errorf("%s: state %q, want %q", id, got, want)
				}
				confirms := evs[id][KindConfirm] - before[id][KindConfirm]
				releases := evs[id][KindRelease] - before[id][KindRelease]
				var wantC, wantR int
				switch {
				case want == "confirmed" && before[id][KindConfirm] == 0:
					wantC = 1
				case want == "cancelled" && before[id][KindReserve] == 1, want == "expired":
					wantR = 1
				}
				if confirms != wantC || releases != wantR {
					t.Errorf("%s: %d confirm and %d release events written, want %d and %d", id, confirms, releases, wantC, wantR)
				}
			}
			// Redis holds each order's MySQL decision, with no reconciler pass.
			for id, want := range c.wantState {
				if want == "" || want == inventory.StateReserved {
					continue
				}
				r, err := s.rs.Get(ctx, inventory.OrderRef{OrderID: id, SKU: sku})
				if err != nil {
					t.Fatalf("redis %s: %v", id, err)
				}
				if r.State != want {
					t.Errorf("redis %s: %s, want %s", id, r.State, want)
				}
			}
			if st := s.decisions.Stats(); st.Batches != 1 || st.Items != int64(len(c.batch)) {
				t.Errorf("batches %+v, want one of %d", st, len(c.batch))
			}
		})
	}
}

// TestTwoInstances runs two strategy instances (two service replicas) on the
// same stores, with group commit on and both relays and reconcilers racing
// throughout, then drains both relays at once: every event must be applied
// exactly once — the inventory row equals what the orders say — and the
// auditor must find nothing wrong.
func TestTwoInstances(t *testing.T) {
	ctx := context.Background()
	const stock = 200
	s1, _ := fresh(t, stock)
	s2, err := New(strategies.Config{DB: env.DB, Redis: env.Redis, OpTimeout: time.Second,
		OutboxPeriod: time.Millisecond, ReconcilePeriod: time.Millisecond, SweepPeriod: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Setup(ctx, nil); err != nil {
		t.Fatal(err)
	}
	s1.rec.now = nil // real clock for the background passes
	s1.cfg.OutboxPeriod, s1.cfg.ReconcilePeriod, s1.cfg.SweepPeriod = time.Millisecond, time.Millisecond, time.Millisecond
	bg, stop := context.WithCancel(ctx)
	var bgw sync.WaitGroup
	for _, s := range []*Strategy{s1, s2} {
		bgw.Add(1)
		go func() { defer bgw.Done(); _ = s.Run(bg) }()
	}
	var mu sync.Mutex
	var acks []inventory.Ack
	ack := func(id string, st inventory.OrderState) {
		mu.Lock()
		acks = append(acks, inventory.Ack{OrderID: id, SKU: sku, State: st})
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for w := 0; w < 24; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 12))
			for i := 0; i < 12; i++ {
				// Each step goes to either replica, as a load balancer would.
				pick := func() *Strategy { return []*Strategy{s1, s2}[rng.IntN(2)] }
				id := fmt.Sprintf("w%d-%d", w, i)
				if err := pick().Reserve(ctx, res(id)); err != nil {
					continue
				}
				ack(id, inventory.StateReserved)
				ref := inventory.OrderRef{OrderID: id, SKU: sku}
				if rng.IntN(4) == 0 {
					if pick().Cancel(ctx, ref) == nil {
						ack(id, inventory.StateCancelled)
					}
				} else if pick().Confirm(ctx, ref) == nil {
					ack(id, inventory.StateConfirmed)
				}
			}
		}()
	}
	wg.Wait()
	stop()
	bgw.Wait()
	// Both relays drain at once, racing for the same events.
	var dw sync.WaitGroup
	for _, s := range []*Strategy{s1, s2} {
		dw.Add(1)
		go func() {
			defer dw.Done()
			for {
				n, err := s.relay(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if n == 0 {
					return
				}
			}
		}()
	}
	dw.Wait()
	var unapplied int
	if err := env.DB.QueryRow("SELECT COUNT(*) FROM outbox WHERE applied=0").Scan(&unapplied); err != nil {
		t.Fatal(err)
	}
	if unapplied != 0 {
		t.Fatalf("%d events left unapplied after both relays drained", unapplied)
	}
	var row, want inventory.Stock
	if err := env.DB.QueryRow("SELECT total, available, occupied, sold FROM inventory WHERE sku=?", sku).
		Scan(&row.Total, &row.Available, &row.Occupied, &row.Sold); err != nil {
		t.Fatal(err)
	}
	if err := env.DB.QueryRow("SELECT COALESCE(SUM(IF(state='reserved',qty,0)),0), COALESCE(SUM(IF(state='confirmed',qty,0)),0) FROM orders").
		Scan(&want.Occupied, &want.Sold); err != nil {
		t.Fatal(err)
	}
	want.Total, want.Available = stock, stock-want.Occupied-want.Sold
	if row != want {
		t.Fatalf("inventory row %+v, want %+v from the orders: an event applied twice or never", row, want)
	}
	if want.Sold == 0 {
		t.Fatal("nothing sold: the test did not exercise the batches")
	}
	if err := s1.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	a, err := audit.Auditor{DB: env.DB, Redis: env.Redis, Ledger: map[string]int64{sku: stock}}.Audit(ctx, acks)
	if err != nil {
		t.Fatal(err)
	}
	if a.Anomalies != 0 {
		t.Fatalf("audit: %d anomalies: %+v", a.Anomalies, a)
	}
	st1, st2 := s1.reserves.Stats(), s2.reserves.Stats()
	t.Logf("sold %d; reserve batches %+v / %+v", want.Sold, st1, st2)
}
