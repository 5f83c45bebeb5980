package service_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/internal/waitfor"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/servers/servertest"
	"github.com/stockbench/stockbench/service"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/registry"
)

var env servertest.Env

func TestMain(m *testing.M) {
	os.Exit(servertest.Main(m, &env, "TestStatusesDistinct", "TestRemoteErrorClassifies"))
}

// served is one strategy served on fresh stores through a real listener,
// with the client that calls it and the acks the client got.
type served struct {
	t      testing.TB
	e      registry.Entry
	strat  strategies.Strategy // what the instance serves (for in-process comparisons)
	in     *service.Instance
	c      *service.Client
	ledger map[string]int64
	mu     sync.Mutex
	acks   []inventory.Ack
}

// serve resets the stores, loads stock, sets name up as serve does and
// serves it on 127.0.0.1:0. The instance is shut down when the test ends.
func serve(t testing.TB, name string, stock map[string]int64, o service.HandlerOptions) *served {
	t.Helper()
	ctx := context.Background()
	e, err := registry.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
		t.Fatal(err)
	}
	if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
		t.Fatal(err)
	}
	var st []inventory.Stock
	for sku, n := range stock {
		st = append(st, inventory.Stock{SKU: sku, Total: n, Available: n})
	}
	if err := inventory.LoadStock(ctx, env.DB, st); err != nil {
		t.Fatal(err)
	}
	s, err := e.New(strategies.Config{DB: env.DB, Redis: env.Redis, LocalDir: t.TempDir(), SweepPeriod: 100 * time.Millisecond,
		OutboxPeriod: 100 * time.Millisecond, ReconcilePeriod: 200 * time.Millisecond, OpTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	live, err := service.ReadStock(ctx, env.DB)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Setup(ctx, live); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	in := service.Start(s, ln, o)
	t.Cleanup(func() {
		if err := in.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	c, err := service.NewClient(service.ClientOptions{Name: name}, in.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Setup(ctx, nil); err != nil {
		t.Fatal(err)
	}
	return &served{t: t, e: e, strat: s, in: in, c: c, ledger: stock}
}

func (s *served) ack(a inventory.Ack) {
	s.mu.Lock()
	s.acks = append(s.acks, a)
	s.mu.Unlock()
}

// audit settles the instance through the API and grades the stores
// against the ledger and the acks; every anomaly fails the test.
func (s *served) audit() audit.Audit {
	s.t.Helper()
	ctx := context.Background()
	a := audit.Auditor{DB: env.DB, Ledger: s.ledger}
	if s.e.UsesRedis {
		a.Redis, a.RedisReservations = env.Redis, s.e.RedisReservations
	}
	if err := s.c.Settle(ctx); err != nil {
		s.t.Fatalf("settle: %v", err)
	}
	s.mu.Lock()
	acks := append([]inventory.Ack(nil), s.acks...)
	s.mu.Unlock()
	res, err := a.Audit(ctx, acks)
	if err != nil {
		s.t.Fatalf("audit: %v", err)
	}
	if res.Anomalies != 0 {
		s.t.Errorf("audit after settle: %d anomalies: %v", res.Anomalies, res.Violations)
	}
	return res
}

// TestStatusesDistinct: every sentinel outcome has its own HTTP status, so
// a client that reads only statuses (k6, vegeta) tells them apart.
func TestStatusesDistinct(t *testing.T) {
	seen := map[int]inventory.Outcome{}
	for _, o := range []inventory.Outcome{inventory.OK, inventory.OutOfStock, inventory.LimitExceeded, inventory.AlreadyFinal,
		inventory.UnknownOrder, inventory.Conflict, inventory.Busy, service.OutcomeBadRequest, inventory.OutcomeUnknown} {
		st, ok := service.Statuses[o]
		if !ok {
			t.Errorf("%s has no status", o)
			continue
		}
		if prev, dup := seen[st]; dup {
			t.Errorf("%s and %s share status %d", prev, o, st)
		}
		seen[st] = o
	}
}

// TestRemoteErrorClassifies: an answer's outcome maps back to the sentinel
// the strategy returned, so inventory.Classify agrees on both sides.
func TestRemoteErrorClassifies(t *testing.T) {
	for _, o := range []inventory.Outcome{inventory.OutOfStock, inventory.LimitExceeded, inventory.AlreadyFinal, inventory.UnknownOrder,
		inventory.Conflict, inventory.Busy, inventory.OutcomeUnknown, inventory.Timeout, inventory.Deadlock, inventory.LockWaitTimeout, inventory.Failure} {
		err := service.NewRemoteError("reserve", o, "from the service")
		if got := inventory.Classify(err); got != o {
			t.Errorf("outcome %s comes back classified %s", o, got)
		}
	}
}

// TestThroughClient runs the conformance suite's core cases against
// served strategies through the typed client, and audits the stores after
// each: the API keeps every rule the strategy keeps in process.
func TestThroughClient(t *testing.T) {
	const sku = "SKU-1"
	ctx := context.Background()
	hour := time.Now().Add(time.Hour)
	res := func(id string) inventory.Reservation {
		return inventory.Reservation{OrderID: id, SKU: sku, Qty: 1, Deadline: hour}
	}
	ref := func(id string) inventory.OrderRef { return inventory.OrderRef{OrderID: id, SKU: sku} }
	type step struct {
		op   string // reserve, confirm, cancel, restock
		id   string
		want error // nil: ok
	}
	cases := []struct {
		name  string
		stock int64
		steps []step
	}{
		// reserve, confirm, and a repeat of each: the repeat answers as the first did.
		{"reserve-confirm-repeat", 2, []step{{"reserve", "o1", nil}, {"reserve", "o1", nil}, {"confirm", "o1", nil}, {"confirm", "o1", nil}}},
		// cancel releases; a repeat is ok; confirm and reserve after it are refused.
		{"cancel-then-final", 1, []step{{"reserve", "o1", nil}, {"cancel", "o1", nil}, {"cancel", "o1", nil},
			{"confirm", "o1", inventory.ErrAlreadyFinal}, {"reserve", "o1", inventory.ErrAlreadyFinal}, {"reserve", "o2", nil}}},
		// cancel after confirm releases nothing.
		{"cancel-after-confirm", 1, []step{{"reserve", "o1", nil}, {"confirm", "o1", nil}, {"cancel", "o1", inventory.ErrAlreadyFinal}, {"reserve", "o2", inventory.ErrOutOfStock}}},
		// the stock runs out: the third reserve is refused, a repeat of the first is not.
		{"out-of-stock", 2, []step{{"reserve", "o1", nil}, {"reserve", "o2", nil}, {"reserve", "o3", inventory.ErrOutOfStock}, {"reserve", "o1", nil}}},
		// confirm of an order never reserved; cancel of one is a no-op that bars a late reserve.
		{"unknown-orders", 1, []step{{"confirm", "x1", inventory.ErrUnknownOrder}, {"cancel", "x2", nil}, {"reserve", "x2", inventory.ErrAlreadyFinal}}},
		// a restock applies once per id and its units sell.
		{"restock-once", 1, []step{{"reserve", "o1", nil}, {"restock", "r1", nil}, {"restock", "r1", nil}, {"reserve", "o2", nil}, {"reserve", "o3", inventory.ErrOutOfStock}}},
	}
	for _, name := range []string{"rowlock", "lua-tcc", "outbox-local"} {
		for _, tc := range cases {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				s := serve(t, name, map[string]int64{sku: tc.stock}, service.HandlerOptions{OpTimeout: 10 * time.Second})
				for i, st := range tc.steps {
					var err error
					switch st.op {
					case "reserve":
						if err = s.c.Reserve(ctx, res(st.id)); err == nil {
							s.ack(inventory.Ack{OrderID: st.id, SKU: sku, State: inventory.StateReserved})
						}
					case "confirm":
						if err = s.c.Confirm(ctx, ref(st.id)); err == nil {
							s.ack(inventory.Ack{OrderID: st.id, SKU: sku, State: inventory.StateConfirmed})
						}
					case "cancel":
						if err = s.c.Cancel(ctx, ref(st.id)); err == nil {
							s.ack(inventory.Ack{OrderID: st.id, SKU: sku, State: inventory.StateCancelled})
						}
					case "restock":
						if err = s.c.Restock(ctx, inventory.Restock{ID: st.id, SKU: sku, Qty: 1}); err == nil {
							s.ack(inventory.Ack{OrderID: st.id, SKU: sku, State: inventory.AckRestocked, Qty: 1})
						}
					}
					if (st.want == nil) != (err == nil) || (st.want != nil && !errors.Is(err, st.want)) {
						t.Fatalf("step %d %s %s: got %v, want %v", i, st.op, st.id, err, st.want)
					}
				}
				s.audit()
			})
		}
	}
}

// TestLostReply: a reserve whose reply never reached its caller (the
// connection closed once the request was sent) took effect once; the
// client's retry with the same order id is answered ok and moves no more
// stock, and the audit with the retry's ack is clean.
func TestLostReply(t *testing.T) {
	const sku = "SKU-L"
	s := serve(t, "lua-tcc", map[string]int64{sku: 1}, service.HandlerOptions{OpTimeout: 10 * time.Second})
	body := `{"order_id":"lost-1","sku":"SKU-L","qty":1,"ttl_ms":3600000}`
	conn, err := net.Dial("tcp", s.in.Addr())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v1/reserve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	// The reply is lost: wait until the instance has answered it (its
	// counters say so), without ever reading the answer.
	waitfor.Until(t, "the instance answers the reserve", func() bool { return servedCounts(t, s.in.URL())[inventory.OK] >= 1 })
	conn.Close()
	if err := s.c.Reserve(context.Background(), inventory.Reservation{OrderID: "lost-1", SKU: sku, Qty: 1, Deadline: time.Now().Add(time.Hour)}); err != nil {
		t.Fatalf("retry of the lost reserve: %v", err)
	}
	s.ack(inventory.Ack{OrderID: "lost-1", SKU: sku, State: inventory.StateReserved})
	// The one unit is held once: another order finds none.
	err = s.c.Reserve(context.Background(), inventory.Reservation{OrderID: "other", SKU: sku, Qty: 1, Deadline: time.Now().Add(time.Hour)})
	if !errors.Is(err, inventory.ErrOutOfStock) {
		t.Fatalf("another reserve after the retry: %v, want out of stock", err)
	}
	if err := s.c.Confirm(context.Background(), inventory.OrderRef{OrderID: "lost-1", SKU: sku}); err != nil {
		t.Fatal(err)
	}
	s.ack(inventory.Ack{OrderID: "lost-1", SKU: sku, State: inventory.StateConfirmed})
	if a := s.audit(); a.ConfirmedUnits != 1 {
		t.Errorf("confirmed units %d, want 1", a.ConfirmedUnits)
	}
}

// TestUnavailable: a call to an instance that is gone is refused at
// connect: ErrUnavailable, classified busy (it had no effect).
func TestUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	c, err := service.NewClient(service.ClientOptions{Name: "rowlock"}, url)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Confirm(context.Background(), inventory.OrderRef{OrderID: "o", SKU: "s"})
	if !errors.Is(err, service.ErrUnavailable) || inventory.Classify(err) != inventory.Busy {
		t.Fatalf("call to a closed port: %v (%s), want unavailable, classified busy", err, inventory.Classify(err))
	}
}

// servedCounts reads the instance's answered-outcome counters from its health.
func servedCounts(t *testing.T, url string) map[inventory.Outcome]int64 {
	t.Helper()
	h, err := service.ReadHealth(context.Background(), http.DefaultClient, url)
	if err != nil {
		t.Fatal(err)
	}
	return h.Served
}

// TestQuiesce: the client's Run, when its context ends (the end of load),
// stops the instance's background loop before it returns — health says
// so — and the instance still serves operations and settles: an order
// left past its deadline is expired by the settle, not by a sweeper.
func TestQuiesce(t *testing.T) {
	cases := []struct{ strategy string }{{"rowlock"}, {"lua-tcc"}}
	for _, c := range cases {
		t.Run(c.strategy, func(t *testing.T) {
			s := serve(t, c.strategy, map[string]int64{"S": 5}, service.HandlerOptions{})
			ctx := context.Background()
			h, err := service.ReadHealth(ctx, nil, s.in.URL())
			if err != nil || h.Background != "running" {
				t.Fatalf("health before: %+v, %v", h, err)
			}
			runCtx, cancel := context.WithCancel(ctx)
			cancel()
			if err := s.c.Run(runCtx); err != nil {
				t.Fatalf("run: %v", err)
			}
			if h, err = service.ReadHealth(ctx, nil, s.in.URL()); err != nil || h.Background != "stopped" {
				t.Fatalf("health after the client's run ended: %+v, %v", h, err)
			}
			if err := s.c.Reserve(ctx, inventory.Reservation{OrderID: "o1", SKU: "S", Qty: 2, Deadline: time.Now().Add(-time.Second)}); err != nil {
				t.Fatalf("reserve after quiesce: %v", err)
			}
			s.ack(inventory.Ack{OrderID: "o1", SKU: "S", State: inventory.StateReserved})
			if err := s.c.Reserve(ctx, inventory.Reservation{OrderID: "o2", SKU: "S", Qty: 1, Deadline: time.Now().Add(time.Hour)}); err != nil {
				t.Fatalf("reserve after quiesce: %v", err)
			}
			s.ack(inventory.Ack{OrderID: "o2", SKU: "S", State: inventory.StateReserved})
			if err := s.c.Confirm(ctx, inventory.OrderRef{OrderID: "o2", SKU: "S"}); err != nil {
				t.Fatalf("confirm after quiesce: %v", err)
			}
			s.ack(inventory.Ack{OrderID: "o2", SKU: "S", State: inventory.StateConfirmed})
			res := s.audit() // settles: o1 is past its deadline
			if res.ConfirmedUnits != 1 {
				t.Errorf("confirmed units %d, want 1", res.ConfirmedUnits)
			}
			var st string
			if err := env.DB.QueryRowContext(ctx, "SELECT state FROM orders WHERE order_id='o1'").Scan(&st); err != nil || st != string(inventory.StateExpired) {
				t.Errorf("o1 after settle: %q, %v; want expired", st, err)
			}
		})
	}
}

// TestCountersThroughHealth: a strategy served in its own process reports
// its own figures (relay counts, rebuilds, late refusals…) through the
// health answer, so a --service process:N run records them as an
// in-process one does.
func TestCountersThroughHealth(t *testing.T) {
	cases := []struct {
		strategy string
		key      string // a counter the strategy keeps
	}{
		{"outbox-local", "outbox_local_append_failures"},
		{"ensure", "ensure_alerts"},
	}
	for _, c := range cases {
		t.Run(c.strategy, func(t *testing.T) {
			s := serve(t, c.strategy, map[string]int64{"S": 5}, service.HandlerOptions{})
			ctx := context.Background()
			if err := s.c.Reserve(ctx, inventory.Reservation{OrderID: "o1", SKU: "S", Qty: 1, Deadline: time.Now().Add(time.Hour)}); err != nil {
				t.Fatalf("reserve: %v", err)
			}
			s.ack(inventory.Ack{OrderID: "o1", SKU: "S", State: inventory.StateReserved})
			if err := s.c.Confirm(ctx, inventory.OrderRef{OrderID: "o1", SKU: "S"}); err != nil {
				t.Fatalf("confirm: %v", err)
			}
			s.ack(inventory.Ack{OrderID: "o1", SKU: "S", State: inventory.StateConfirmed})
			s.audit()
			// Stop the background loops, as the end of a run does, so no
			// figure moves between the two reads.
			runCtx, cancel := context.WithCancel(ctx)
			cancel()
			if err := s.c.Run(runCtx); err != nil {
				t.Fatalf("quiesce: %v", err)
			}
			want := s.strat.(strategies.Counters).Counters()
			got := s.c.Counters()
			if _, ok := want[c.key]; !ok {
				t.Fatalf("the strategy keeps no %s: %v", c.key, want)
			}
			if len(got) != len(want) {
				t.Errorf("through the API %d counters, in the process %d: %v vs %v", len(got), len(want), got, want)
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s: through the API %v, in the process %v", k, got[k], v)
				}
			}
		})
	}
}
