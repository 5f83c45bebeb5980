package strategies_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/internal/waitfor"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/servers"
	"github.com/stockbench/stockbench/servers/servertest"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/registry"
)

var env servertest.Env

func TestMain(m *testing.M) { os.Exit(servertest.Main(m, &env)) }

const sku = "SKU-1"

// fixture is one strategy on a freshly reset schema, with the acks its
// clients received, audited when the case ends.
type fixture struct {
	t      *testing.T
	s      strategies.Strategy
	e      registry.Entry
	ledger int64 // what the case put in
	limit  int64 // the per-buyer limit the case's reserves carry (audited)
	mu     sync.Mutex
	acks   []inventory.Ack
}

func newFixture(t *testing.T, e registry.Entry, stock int64, cfg strategies.Config) *fixture {
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
	cfg.DB, cfg.Redis = env.DB, env.Redis
	if level := os.Getenv("STOCKBENCH_TEST_ISOLATION"); level != "" {
		// The suite again with the strategy's sessions at another level
		// (make test runs it at READ COMMITTED), as --isolation does.
		cfg.DB, cfg.Isolation = isolatedDB(t, level), level
	}
	if d := os.Getenv("STOCKBENCH_TEST_DEGRADE"); d != "" && e.Name == "lua-tcc" {
		// TestConformanceDegrade: the rules through the switch's paths. A
		// call on a loaded machine may take long; detection is
		// TestDegradeSwitch's to test, so no call here counts as failed.
		cfg.Degrade, cfg.DegradeTimeout = d, time.Minute
	}
	if d := os.Getenv("STOCKBENCH_TEST_SOLDOUT"); d != "" && e.Name == "lua-tcc" {
		// TestConformanceSoldOut: the rules with the sold-out flag up for
		// as long as the case lasts unless a release lowers it.
		ttl, err := time.ParseDuration(d)
		if err != nil {
			t.Fatal(err)
		}
		cfg.SoldOutFlag = ttl
	}
	s, err := e.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Setup(ctx, st); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, s: s, e: e, ledger: stock}
	t.Cleanup(func() { _ = s.Close() }) // after check (cleanups run last first)
	t.Cleanup(f.check)
	return f
}

// isolatedDB is a pool on the test servers whose sessions run at level
// (rc, rr), closed when the test ends.
func isolatedDB(t *testing.T, level string) *sql.DB {
	t.Helper()
	ep, err := servers.WithIsolation(context.Background(), env.Endpoints, env.DB, level)
	if err != nil {
		t.Fatal(err)
	}
	c, err := servers.Open(ep, 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var got string
	if err := c.DB.QueryRow("SELECT @@session.tx_isolation").Scan(&got); err != nil {
		if err := c.DB.QueryRow("SELECT @@session.transaction_isolation").Scan(&got); err != nil {
			t.Fatal(err)
		}
	}
	if want := map[string]string{"rc": "READ-COMMITTED", "rr": "REPEATABLE-READ"}[level]; got != want {
		t.Fatalf("session isolation %q, want %q", got, want)
	}
	return c.DB
}

func ref(id string) inventory.OrderRef { return inventory.OrderRef{OrderID: id, SKU: sku} }

// reserve holds a unit for an hour: no case but the expiry one may see a
// deadline pass, however long a loaded machine takes (a minute was not
// enough under a load average of 40).
func (f *fixture) reserve(id string) error {
	return f.reserveUntil(id, time.Now().Add(time.Hour))
}

func (f *fixture) reserveUntil(id string, deadline time.Time) error {
	err := f.s.Reserve(context.Background(), inventory.Reservation{OrderID: id, SKU: sku, Qty: 1, Deadline: deadline})
	if err == nil {
		f.ack(id, inventory.StateReserved)
	}
	return err
}

// reserveFor reserves one unit for an hour for buyer, within f.limit.
func (f *fixture) reserveFor(id, buyer string, deadline time.Time) error {
	err := f.s.Reserve(context.Background(), inventory.Reservation{OrderID: id, SKU: sku, Qty: 1, Deadline: deadline, Buyer: buyer, Limit: f.limit})
	if err == nil {
		f.ack(id, inventory.StateReserved)
	}
	return err
}

// burst makes n concurrent reserves of one unit for buyer (order ids
// prefix-0…), released together, and counts their answers.
func (f *fixture) burst(prefix, buyer string, n int) (ok, limited int64) {
	f.t.Helper()
	var okN, limN atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			switch err := f.reserveFor(fmt.Sprintf("%s-%d", prefix, i), buyer, time.Now().Add(time.Hour)); {
			case err == nil:
				okN.Add(1)
			case errors.Is(err, inventory.ErrLimitExceeded):
				limN.Add(1)
			case !f.e.Safe && (isDeadlock(err) || errors.Is(err, inventory.ErrOutOfStock)):
			default:
				f.t.Errorf("reserve %s-%d for %s: %v", prefix, i, buyer, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	return okN.Load(), limN.Load()
}

// burstPastCheck is burst with the orders table's insert gap held (a
// locking read of the whole table, REPEATABLE READ, on every node of a
// cluster: a node's locks are its own) until at least waiting tries are
// inserting their order, held on it: for a strategy whose reserve reads
// before it inserts, each of those read the table with none of the burst's
// orders in it. No insert commits while the gates hold, so none replicates
// to abort a gate (Galera). It returns how many tries reserved.
func (f *fixture) burstPastCheck(prefix, buyer string, n, waiting int) int64 {
	f.t.Helper()
	ctx := context.Background()
	nodes := []*sql.DB{env.DB}
	if len(env.MySQLNodes) > 1 {
		nodes = nil
		for _, dsn := range env.MySQLNodes {
			db, err := sql.Open("mysql", dsn)
			if err != nil {
				f.t.Fatal(err)
			}
			defer db.Close()
			nodes = append(nodes, db)
		}
	}
	var gates []*sql.Tx
	for _, db := range nodes {
		tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
		if err != nil {
			f.t.Fatal(err)
		}
		defer tx.Rollback()
		rows, err := tx.QueryContext(ctx, "SELECT order_id FROM orders FOR UPDATE")
		if err != nil {
			f.t.Fatal(err)
		}
		rows.Close()
		gates = append(gates, tx)
	}
	var ok int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		ok, _ = f.burst(prefix, buyer, n)
	}()
	// On a failure below: let the tries go and wait for them before the
	// test ends (after the release the roll backs do nothing).
	defer func() {
		for _, tx := range gates {
			_ = tx.Rollback()
		}
		<-done
	}()
	waitfor.Until(f.t, fmt.Sprintf("%d tries did not queue on the orders table", waiting), func() bool {
		// The processlist, not INNODB_TRX: MariaDB does not always list an
		// autocommit statement's lock wait there.
		sum := 0
		for _, db := range nodes {
			var w int
			if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'INSERT INTO orders%'").Scan(&w); err != nil {
				f.t.Fatal(err)
			}
			sum += w
		}
		return sum >= waiting
	})
	// Release the gates (they wrote nothing): on a cluster, the inserts a
	// released node commits replicate and may abort a gate still held
	// elsewhere, which releases it too.
	for _, tx := range gates {
		_ = tx.Rollback()
	}
	<-done
	return ok
}

func (f *fixture) confirm(id string) error {
	err := f.s.Confirm(context.Background(), ref(id))
	if err == nil {
		f.ack(id, inventory.StateConfirmed)
	}
	return err
}

func (f *fixture) cancel(id string) error {
	err := f.s.Cancel(context.Background(), ref(id))
	if err == nil {
		f.ack(id, inventory.StateCancelled)
	}
	return err
}

func (f *fixture) refund(id string) error {
	err := f.s.Refund(context.Background(), ref(id))
	if err == nil {
		f.ack(id, inventory.StateRefunded)
	}
	return err
}

// orderStates counts MySQL's orders by state.
func orderStates(t *testing.T) map[inventory.OrderState]int {
	t.Helper()
	rows, err := env.DB.Query("SELECT state, COUNT(*) FROM orders GROUP BY state")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[inventory.OrderState]int{}
	for rows.Next() {
		var st inventory.OrderState
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			t.Fatal(err)
		}
		out[st] = n
	}
	return out
}

// restock issues a restock and records it as the harness does (see
// runner's ledger): acknowledged, or of unknown outcome.
func (f *fixture) restock(id string, qty int64) error {
	err := f.s.Restock(context.Background(), inventory.Restock{ID: id, SKU: sku, Qty: qty})
	st := inventory.AckRestocked
	if err != nil {
		st = inventory.AckRestockUnknown
	}
	f.mu.Lock()
	f.acks = append(f.acks, inventory.Ack{OrderID: id, SKU: sku, State: st, Qty: qty})
	f.mu.Unlock()
	return err
}

func (f *fixture) ack(id string, st inventory.OrderState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acks = append(f.acks, inventory.Ack{OrderID: id, SKU: sku, State: st})
}

// stock settles the strategy and returns the audit of the one SKU.
func (f *fixture) stock() (audit.Audit, audit.SKUAudit) {
	f.t.Helper()
	ctx := context.Background()
	if err := f.s.Settle(ctx); err != nil {
		f.t.Fatalf("settle: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	a, err := f.auditor().Audit(ctx, f.acks)
	if err != nil {
		f.t.Fatalf("audit: %v", err)
	}
	return a, a.SKUs[0]
}

// auditor grades the case's stores against its ledger.
func (f *fixture) auditor() audit.Auditor {
	a := audit.Auditor{DB: env.DB, Ledger: map[string]int64{sku: f.ledger}, LimitPerBuyer: f.limit}
	if f.e.UsesRedis {
		a.Redis, a.RedisReservations = env.Redis, f.e.RedisReservations
	}
	return a
}

// check runs after every case: the auditor's invariants must hold for every
// safe strategy.
func (f *fixture) check() {
	if !f.e.Safe || f.t.Failed() {
		return
	}
	a, _ := f.stock()
	if a.Anomalies != 0 {
		f.t.Errorf("audit after case: %+v", a)
	}
}

// definitive reports an answer a client does not retry: the store said
// no, for good.
func definitive(err error) bool {
	for _, d := range []error{inventory.ErrOutOfStock, inventory.ErrAlreadyFinal, inventory.ErrUnknownOrder, inventory.ErrLimitExceeded} {
		if errors.Is(err, d) {
			return true
		}
	}
	return false
}

func wantErr(t *testing.T, what string, got, want error) {
	t.Helper()
	if want == nil && got != nil || want != nil && !errors.Is(got, want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func wantStock(t *testing.T, s audit.SKUAudit, avail, confirmed int64) {
	t.Helper()
	if s.Redis != nil {
		// Redis strategies keep live reservations in Redis; compare there.
		if s.Redis.Available != avail || s.Redis.Sold != confirmed {
			t.Fatalf("redis stock: available %d sold %d, want %d and %d", s.Redis.Available, s.Redis.Sold, avail, confirmed)
		}
	} else if s.Available != avail {
		t.Fatalf("available %d, want %d", s.Available, avail)
	}
	if s.ConfirmedUnits != confirmed {
		t.Fatalf("confirmed units %d, want %d", s.ConfirmedUnits, confirmed)
	}
}

// The contract cases. Each runs against every strategy on a fresh schema;
// the naive strategy runs only those marked forNaive.
var cases = []struct {
	name     string
	forNaive bool
	run      func(t *testing.T, e registry.Entry)
}{
	{"out of stock", false, func(t *testing.T, e registry.Entry) {
		f := newFixture(t, e, 1, strategies.Config{})
		wantErr(t, "first reserve", f.reserve("o1"), nil)
		wantErr(t, "second reserve", f.reserve("o2"), inventory.ErrOutOfStock)
	}},
	// naive holds nothing at reserve (the article's scheme): it refuses
	// only once the stock is taken.
	{"out of stock once sold", true, func(t *testing.T, e registry.Entry) {
		f := newFixture(t, e, 1, strategies.Config{})
		wantErr(t, "first reserve", f.reserve("o1"), nil)
		wantErr(t, "confirm", f.confirm("o1"), nil)
		wantErr(t, "second reserve", f.reserve("o2"), inventory.ErrOutOfStock)
	}},
	{"reserve then confirm", true, func(t *testing.T, e registry.Entry) {
		f := newFixture(t, e, 5, strategies.Config{})
		wantErr(t, "reserve", f.reserve("o1"), nil)
		wantErr(t, "confirm", f.confirm("o1"), nil)
		_, s := f.stock()
		wantStock(t, s, 4, 1)
	}},
	{"reserve then cancel", true, func(t *testing.T, e registry.Entry) {
		f := newFixture(t, e, 5, strategies.Config{})
		wantErr(t, "reserve", f.reserve("o1"), nil)
		wantErr(t, "cancel", f.cancel("o1"), nil)
		_, s := f.stock()
		wantStock(t, s, 5, 0)
	}},
	{"repeated reserve moves stock once", false, func(t *testing.T, e registry.Entry) {
		f := newFixture(t, e, 5, strategies.Config{})
		wantErr(t, "reserve", f.reserve("o1"), nil)
		wantErr(t, "repeat", f.reserve("o1"), nil)
		_, s := f.stock()
		wantStock(t, s, 4, 0)
	}},
	// A reserve whose reply is lost: its context ends after d, somewhere on
	// its path (before its first round trip, between the stores, after its
	// commit), as a client's call that gives up; the client retries with
	// the same order id until it hears an answer (backing off between
	// tries). The answer is the order's
	// one outcome: reserved (then its confirm sells exactly one unit) or,
	// where the strategy compensated the cut attempt, already final (then
	// the order holds nothing and its confirm is refused) — never a
	// reservation acknowledged that its confirm cannot sell, never two units.
	// d grows from 20 µs by half each order, so the cuts sweep the path on
	// any machine; nothing about time is asserted, only the stores.
	{"lost reply then retried: one outcome per order", false, func(t *testing.T, e registry.Entry) {
		const orders = 14
		f := newFixture(t, e, orders+3, strategies.Config{})
		d := 20 * time.Microsecond
		var sold int64
		for i := 0; i < orders; i++ {
			r := inventory.Reservation{OrderID: fmt.Sprintf("cut-%d", i), SKU: sku, Qty: 1, Deadline: time.Now().Add(time.Hour)}
			ctx, cancel := context.WithTimeout(context.Background(), d)
			_ = f.s.Reserve(ctx, r) // its reply is lost, whatever it was
			cancel()
			d += d / 2
			// The client backs off as a real one does (1 ms, doubling, at
			// most 1 s between tries, about half a minute in all): the cut
			// attempt may still be finishing or compensating server-side.
			var err error
			backoff := time.Millisecond
			for try := 0; try < 40; try++ {
				if err = f.s.Reserve(context.Background(), r); err == nil || definitive(err) {
					break
				}
				time.Sleep(backoff)
				backoff = min(2*backoff, time.Second)
			}
			if errors.Is(err, inventory.ErrAlreadyFinal) {
				wantErr(t, "confirm of compensated "+r.OrderID, f.s.Confirm(context.Background(), ref(r.OrderID)), inventory.ErrAlreadyFinal)
				continue
			}
			wantErr(t, "retried reserve "+r.OrderID, err, nil)
			f.ack(r.OrderID, inventory.StateReserved)
			wantErr(t, "confirm "+r.OrderID, f.confirm(r.OrderID), nil)
			sold++
		}
		t.Logf("%d of %d cut orders sold, %d compensated", sold, orders, orders-sold)
		_, s := f.stock()
		wantStock(t, s, orders+3-sold, sold)
	}},
	{"double confirm", false, func(t *testing.T, e registry.Entry) {
		f := newFixture(t, e, 5, strategies.Config{})
		wantErr(t, "reserve", f.reserve("o1"), nil)
		wantErr(t, "confirm", f.confirm("o1"), nil)
		wantErr(t, "confirm again", f.confirm("o1"), nil)
		_, s := f.stock()
		wantStock(t, s, 4, 1)
	}},
	{"double cancel", false, func(t *testing.T, e registry.Entry) {
		f := newFixture(t, e, 5, strategies.Config{})
		wantErr(t, "reserve", f.reserve("o1"), nil)
		wantErr(t, "cancel", f.cancel("o1"), nil)
		wantErr(t, "cancel again", f.cancel("o1"), nil)
		_, s := f.stock()
		wantStock(t, s, 5, 0)
	}},
	{"cancel after confirm releases nothing", false, func(t *testing.T, e registry.Entry) {
		f := newFixture(t, e, 5, strategies.Config{})
		wantErr(t, "reserve", f.reserve("o1"), nil)
		wantErr(t, "confirm", f.confirm("o1"), nil)
		wantErr(t, "cancel", f.cancel("o1"), inventory.ErrAlreadyFinal)
		_, s := f.stock()
		wantStock(t, s, 4, 1)
	}},
	{"confirm after cancel is already final", false, func(t *testing.T, e registry.Entry) {
		f := newFixture(t, e, 5, strategies.Config{})
		wantErr(t, "reserve", f.reserve("o1"), nil)
		wantErr(t, "cancel", f.cancel("o1"), nil)
		wantErr(t, "confirm", f.confirm("o1"), inventory.ErrAlreadyFinal)
		_, s := f.stock()
		wantStock(t, s, 5, 0)
	}},
	{"confirm of unknown order", false, func(t *testing.T, e registry.Entry) {
		f := newFixture(t, e, 5, strategies.Config{})
		wantErr(t, "confirm", f.confirm("nope"), inventory.ErrUnknownOrder)
	}},
	{"cancel before reserve blocks the reserve", false, func(t *testing.T, e registry.Entry) {
		f := newFixture(t, e, 5, strategies.Config{})
		wantErr(t, "cancel unknown", f.cancel("o1"), nil)
		wantErr(t, "late reserve", f.reserve("o1"), inventory.ErrAlreadyFinal)
		_, s := f.stock()
		wantStock(t, s, 5, 0)
	}},
	{"confirm and cancel race: exactly one wins", false, func(t *testing.T, e registry.Entry) {
		const trials = 40
		f := newFixture(t, e, trials, strategies.Config{})
		var confirms int64
		for i := 0; i < trials; i++ {
			id := fmt.Sprintf("race-%d", i)
			wantErr(t, "reserve", f.reserve(id), nil)
			var wg sync.WaitGroup
			var cErr, xErr error
			start := make(chan struct{})
			wg.Add(2)
			go func() { defer wg.Done(); <-start; cErr = f.confirm(id) }()
			go func() { defer wg.Done(); <-start; xErr = f.cancel(id) }()
			close(start)
			wg.Wait()
			if (cErr == nil) == (xErr == nil) {
				t.Fatalf("trial %d: confirm %v, cancel %v: want exactly one winner", i, cErr, xErr)
			}
			loser := cErr
			if cErr == nil {
				confirms++
				loser = xErr
			}
			wantErr(t, "loser", loser, inventory.ErrAlreadyFinal)
		}
		_, s := f.stock()
		wantStock(t, s, trials-confirms, confirms)
	}},
	// Refunds (issue 46): a confirmed order's units go back from sold to
	// available, once — the article's double release (取消和退款请求重复到达,
	// 库存变成负数) is what these cases rule out.
	{"refund gives a sold unit back, once", true, func(t *testing.T, e registry.Entry) {
		f := newFixture(t, e, 5, strategies.Config{})
		wantErr(t, "reserve", f.reserve("o1"), nil)
		wantErr(t, "confirm", f.confirm("o1"), nil)
		wantErr(t, "refund", f.refund("o1"), nil)
		wantErr(t, "refund again", f.refund("o1"), nil)
		wantErr(t, "cancel after refund", f.cancel("o1"), inventory.ErrAlreadyFinal)
		wantErr(t, "confirm after refund", f.confirm("o1"), inventory.ErrAlreadyFinal)
		_, s := f.stock()
		wantStock(t, s, 5, 0)
		if st := orderStates(t); st[inventory.StateRefunded] != 1 {
			t.Fatalf("orders by state %v, want one refunded", st)
		}
	}},
	{"refund of a reserved, cancelled, expired or unknown order", false, func(t *testing.T, e registry.Entry) {
		f := newFixture(t, e, 5, strategies.Config{SweepPeriod: 20 * time.Millisecond})
		wantErr(t, "reserve", f.reserve("held"), nil)
		wantErr(t, "refund of a reserved order", f.refund("held"), inventory.ErrNotConfirmed)
		wantErr(t, "reserve", f.reserve("gone"), nil)
		wantErr(t, "cancel", f.cancel("gone"), nil)
		wantErr(t, "refund of a cancelled order", f.refund("gone"), inventory.ErrAlreadyFinal)
		wantErr(t, "refund of an unknown order", f.refund("nope"), inventory.ErrUnknownOrder)
		wantErr(t, "cancel of an unknown order (a marker)", f.cancel("marked"), nil)
		wantErr(t, "refund of a cancel marker", f.refund("marked"), inventory.ErrAlreadyFinal)
		deadline := time.Now().Add(50 * time.Millisecond)
		wantErr(t, "reserve", f.reserveUntil("lapsed", deadline), nil)
		waitfor.Until(t, "the deadline did not pass", func() bool { return time.Now().After(deadline) })
		if err := f.s.Settle(context.Background()); err != nil { // expires it
			t.Fatal(err)
		}
		wantErr(t, "refund of an expired order", f.refund("lapsed"), inventory.ErrAlreadyFinal)
		_, s := f.stock()
		wantStock(t, s, 4, 0) // "held" still holds its unit
		wantErr(t, "cancel", f.cancel("held"), nil)
	}},
	{"cancel and refund arrive together: released once", false, func(t *testing.T, e registry.Entry) {
		const trials = 20
		f := newFixture(t, e, trials, strategies.Config{})
		for i := 0; i < trials; i++ {
			id := fmt.Sprintf("cr-%d", i)
			wantErr(t, "reserve", f.reserve(id), nil)
			wantErr(t, "confirm", f.confirm(id), nil)
			var wg sync.WaitGroup
			var rErr, xErr error
			start := make(chan struct{})
			wg.Add(2)
			go func() { defer wg.Done(); <-start; rErr = f.refund(id) }()
			go func() { defer wg.Done(); <-start; xErr = f.cancel(id) }()
			close(start)
			wg.Wait()
			wantErr(t, "refund "+id, rErr, nil)
			wantErr(t, "cancel of a paid order "+id, xErr, inventory.ErrAlreadyFinal)
		}
		a, s := f.stock()
		wantStock(t, s, trials, 0)
		if a.OverReleasedUnits != 0 || s.Available+s.Occupied+s.Sold != trials {
			t.Fatalf("released more than once: %+v", s)
		}
	}},
	{"two refunds arrive together: released once", false, func(t *testing.T, e registry.Entry) {
		const trials = 20
		f := newFixture(t, e, trials, strategies.Config{})
		for i := 0; i < trials; i++ {
			id := fmt.Sprintf("rr-%d", i)
			wantErr(t, "reserve", f.reserve(id), nil)
			wantErr(t, "confirm", f.confirm(id), nil)
			var wg sync.WaitGroup
			errs := make([]error, 2)
			start := make(chan struct{})
			for k := range errs {
				wg.Add(1)
				go func() { defer wg.Done(); <-start; errs[k] = f.refund(id) }()
			}
			close(start)
			wg.Wait()
			for k, err := range errs {
				wantErr(t, fmt.Sprintf("refund %d of %s", k, id), err, nil)
			}
		}
		a, s := f.stock()
		wantStock(t, s, trials, 0)
		if a.OverReleasedUnits != 0 {
			t.Fatalf("released more than once: %+v", s)
		}
		if st := orderStates(t); st[inventory.StateRefunded] != trials {
			t.Fatalf("orders by state %v, want %d refunded", st, trials)
		}
	}},
	// A buyer pays and at once asks for the money back, as its reservation
	// reaches its deadline and two sweepers expire what is due: either the
	// expiry wins (the confirm and the refund are refused) or the confirm
	// does (the refund gives the unit back and the expiry finds nothing) —
	// and a refund sent before the confirm is refused as not confirmed.
	// Every unit is available again exactly once.
	{"a refund races an expiry: released once", false, func(t *testing.T, e registry.Entry) {
		const trials = 12
		f := newFixture(t, e, trials, strategies.Config{SweepPeriod: 5 * time.Millisecond})
		ctx, cancel := context.WithCancel(context.Background())
		var bg sync.WaitGroup
		for i := 0; i < 2; i++ {
			bg.Add(1)
			go func() { defer bg.Done(); _ = f.s.Run(ctx) }()
		}
		defer func() { cancel(); bg.Wait() }()
		var last time.Time
		var wg sync.WaitGroup
		var refunded, expired atomic.Int64
		for i := 0; i < trials; i++ {
			id := fmt.Sprintf("re-%d", i)
			// Deadlines spread over 2–35 ms from now: some pass before the
			// confirm, some while it and the refund run, some after.
			last = time.Now().Add(time.Duration(2+3*i) * time.Millisecond)
			if err := f.reserveUntil(id, last); err != nil {
				wantErr(t, "reserve "+id, err, nil)
			}
			wg.Add(2)
			go func() {
				defer wg.Done()
				err := f.refund(id) // before any confirm
				if !errors.Is(err, inventory.ErrNotConfirmed) && !errors.Is(err, inventory.ErrAlreadyFinal) && err != nil {
					t.Errorf("early refund %s: %v", id, err)
				}
			}()
			go func() {
				defer wg.Done()
				switch err := f.confirm(id); {
				case err == nil:
					if err := f.refund(id); err != nil {
						t.Errorf("refund %s after its confirm: %v", id, err)
						return
					}
					refunded.Add(1)
				case errors.Is(err, inventory.ErrAlreadyFinal):
					expired.Add(1)
					wantErr(t, "refund of an expired order "+id, f.refund(id), inventory.ErrAlreadyFinal)
				default:
					t.Errorf("confirm %s: %v", id, err)
				}
			}()
		}
		wg.Wait()
		waitfor.Until(t, "the last deadline did not pass", func() bool { return time.Now().After(last) })
		cancel()
		bg.Wait()
		a, s := f.stock()
		t.Logf("%d refunded after their confirm, %d expired first", refunded.Load(), expired.Load())
		wantStock(t, s, trials, 0)
		if a.OverReleasedUnits != 0 {
			t.Fatalf("released more than once: %+v", s)
		}
		st := orderStates(t)
		if st[inventory.StateRefunded] != int(refunded.Load()) || st[inventory.StateExpired] != int(expired.Load()) {
			t.Fatalf("orders by state %v, want %d refunded and %d expired", st, refunded.Load(), expired.Load())
		}
	}},
	{"expiry releases exactly once", false, func(t *testing.T, e registry.Entry) {
		f := newFixture(t, e, 3, strategies.Config{SweepPeriod: 20 * time.Millisecond})
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for i := 0; i < 2; i++ { // two sweepers racing for the same reservations
			wg.Add(1)
			go func() { defer wg.Done(); _ = f.s.Run(ctx) }()
		}
		defer func() { cancel(); wg.Wait() }()
		for i := 0; i < 3; i++ {
			// 2 s: long enough that the "sold out" check below runs before
			// any deadline on a busy machine; the wait below is for the event.
			wantErr(t, "reserve", f.reserveUntil(fmt.Sprintf("exp-%d", i), time.Now().Add(2*time.Second)), nil)
		}
		wantErr(t, "sold out", f.reserve("other"), inventory.ErrOutOfStock)
		// Wait for the event (the sweepers expired all three orders), not
		// for a guessed time: a busy machine may run the sweepers late.
		waitfor.Until(t, "the sweepers did not expire all 3 reservations", func() bool {
			var n int
			if err := env.DB.QueryRow("SELECT COUNT(*) FROM orders WHERE state='expired'").Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n >= 3
		})
		wantErr(t, "pay after expiry", f.confirm("exp-0"), inventory.ErrAlreadyFinal)
		cancel()
		wg.Wait()
		a, s := f.stock()
		wantStock(t, s, 3, 0)
		var expired int
		if err := env.DB.QueryRow("SELECT COUNT(*) FROM orders WHERE state='expired'").Scan(&expired); err != nil {
			t.Fatal(err)
		}
		if expired != 3 {
			t.Fatalf("%d orders expired, want 3 (audit %+v)", expired, a)
		}
	}},
	{"concurrent finishes each get their own outcome", false, func(t *testing.T, e registry.Entry) {
		// Many confirms and cancels at once, with repeats, races and unknown
		// orders among them: a strategy that shares work between concurrent
		// calls must still give each call the outcome of its own order.
		const n = 60
		f := newFixture(t, e, n, strategies.Config{})
		for i := 0; i < n; i++ {
			wantErr(t, "reserve", f.reserve(fmt.Sprintf("c-%d", i)), nil)
		}
		type call struct {
			id      string
			confirm bool
			want    error // nil, or a sentinel; raceOK: either nil or ErrAlreadyFinal
			raceOK  bool
		}
		var calls []call
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("c-%d", i)
			switch i % 4 {
			case 0: // confirm, twice
				calls = append(calls, call{id: id, confirm: true}, call{id: id, confirm: true})
			case 1: // cancel, twice
				calls = append(calls, call{id: id}, call{id: id})
			case 2: // confirm and cancel race: exactly one wins
				calls = append(calls, call{id: id, confirm: true, raceOK: true}, call{id: id, raceOK: true})
			case 3:
				calls = append(calls, call{id: id, confirm: true}, call{id: "unknown-" + id, confirm: true, want: inventory.ErrUnknownOrder})
			}
		}
		errs := make([]error, len(calls))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, c := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if c.confirm {
					errs[i] = f.confirm(c.id)
				} else {
					errs[i] = f.cancel(c.id)
				}
			}()
		}
		close(start)
		wg.Wait()
		var confirmed int64
		for i, c := range calls {
			if c.raceOK {
				continue
			}
			wantErr(t, fmt.Sprintf("call %d (%s, confirm=%v)", i, c.id, c.confirm), errs[i], c.want)
		}
		for i := 0; i < len(calls); i += 2 {
			a := calls[i]
			switch {
			case a.raceOK:
				if (errs[i] == nil) == (errs[i+1] == nil) {
					t.Fatalf("%s: confirm %v, cancel %v: want exactly one winner", a.id, errs[i], errs[i+1])
				}
				if errs[i] == nil {
					confirmed++
				}
			case a.confirm: // a confirm, repeated or beside an unknown order
				confirmed++
			}
		}
		_, s := f.stock()
		wantStock(t, s, n-confirmed, confirmed)
	}},
	{"a restock is journalled, and applies once per id", true, func(t *testing.T, e registry.Entry) {
		// Sold, not only reserved, so that naive (which holds nothing at
		// reserve) is sold out too.
		f := newFixture(t, e, 1, strategies.Config{})
		wantErr(t, "reserve", f.reserve("o1"), nil)
		wantErr(t, "confirm", f.confirm("o1"), nil)
		wantErr(t, "sold out", f.reserve("o2"), inventory.ErrOutOfStock)
		wantErr(t, "restock", f.restock("r1", 3), nil)
		wantErr(t, "restock repeated (its reply lost)", f.restock("r1", 3), nil)
		wantErr(t, "reserve the restocked units", f.reserve("o2"), nil)
		wantErr(t, "confirm them", f.confirm("o2"), nil)
		var rows, units int64
		if err := env.DB.QueryRow("SELECT COUNT(*), COALESCE(SUM(qty),0) FROM restocks WHERE sku=?", sku).Scan(&rows, &units); err != nil {
			t.Fatal(err)
		}
		if rows != 1 || units != 3 {
			t.Fatalf("restock journal: %d rows, %d units; want 1 row of 3", rows, units)
		}
		a, s := f.stock()
		if s.Ledger != 4 || s.Total != 4 {
			t.Fatalf("ledger %d, total %d: want 4 (1 initial + 3 journalled); %v", s.Ledger, s.Total, a.Violations)
		}
		wantStock(t, s, 2, 2)
	}},
	{"Redis rolled back: nothing sold twice, no drift left", false, func(t *testing.T, e registry.Entry) {
		// Redis comes back holding what it held before y's reserve and
		// y's confirm (as a crash under AOF everysec, or a failover to a
		// lagging replica, leaves it), while MySQL keeps y confirmed. The
		// rolled-back hash offers y's unit again: z must still be refused
		// (outbox: MySQL holds y's order; lua-tcc: MySQL holds y's
		// decision), and no drift may be left behind.
		f := newFixture(t, e, 2, strategies.Config{})
		wantErr(t, "reserve x", f.reserve("x"), nil)
		cp := checkpointRedis(t)
		wantErr(t, "reserve y", f.reserve("y"), nil)
		wantErr(t, "confirm y", f.confirm("y"), nil)
		rollBackRedis(t, cp)
		wantErr(t, "reserve z after the roll back", f.reserve("z"), inventory.ErrOutOfStock)
		wantErr(t, "confirm x", f.confirm("x"), nil)
		a, s := f.stock()
		wantStock(t, s, 0, 2)
		if a.DriftUnits != 0 || a.OversoldUnits != 0 || a.RefusedAfterReserve != 0 {
			t.Fatalf("after the roll back: %+v", a)
		}
	}},
	{"Redis rolled back, no buyer after: settle rebuilds it", false, func(t *testing.T, e registry.Entry) {
		// The same loss with no Try after it to notice: the strategy's
		// own recovery (here Settle) must find it and leave no drift.
		f := newFixture(t, e, 2, strategies.Config{})
		wantErr(t, "reserve x", f.reserve("x"), nil)
		cp := checkpointRedis(t)
		wantErr(t, "reserve y", f.reserve("y"), nil)
		wantErr(t, "confirm y", f.confirm("y"), nil)
		rollBackRedis(t, cp)
		a, s := f.stock()
		wantStock(t, s, 0, 1)
		if a.DriftUnits != 0 || a.InvariantViolations != 0 {
			t.Fatalf("after the roll back and settle: %+v", a)
		}
	}},
	{"a deadline is kept at one resolution in every store", true, func(t *testing.T, e registry.Entry) {
		// 950 µs past a millisecond boundary: a store keeping µs and one
		// keeping ms would disagree on whether the order is past its
		// deadline for most of that millisecond (the auditor's stale rule
		// could then fall between the sweeper and Redis).
		f := newFixture(t, e, 5, strategies.Config{})
		d := time.Now().Add(time.Hour).Truncate(time.Millisecond).Add(950 * time.Microsecond)
		want := d.Truncate(time.Millisecond)
		wantErr(t, "reserve", f.reserveUntil("o1", d), nil)
		var exp sql.NullTime
		switch err := env.DB.QueryRow("SELECT expires_at FROM orders WHERE order_id='o1'").Scan(&exp); {
		case errors.Is(err, sql.ErrNoRows): // the strategy keeps it elsewhere until decided
		case err != nil:
			t.Fatal(err)
		case !exp.Valid || !exp.Time.Equal(want):
			t.Fatalf("MySQL expires_at %v, want %v (deadline %v at %v)", exp.Time, want, d, inventory.DeadlineResolution)
		}
		if e.UsesRedis {
			ms, err := env.Redis.HGet(context.Background(), inventory.RedisReservationKey(sku, "o1"), "deadline").Int64()
			if err == nil && !time.UnixMilli(ms).Equal(want) {
				t.Fatalf("Redis deadline %v, want %v", time.UnixMilli(ms), want)
			}
		}
	}},
	{"one buyer's concurrent tries stay within its limit", true, func(t *testing.T, e registry.Entry) {
		// A bot (or a double click) fires many reserves for one buyer at
		// once: the limit must hold in the store, atomically, whatever the
		// interleaving; a refusal for the limit is its own answer, not out
		// of stock. naive checks the limit apart from acting on it and must
		// let the same burst through beyond it (the auditor sees it).
		const tries, limit = 40, 2
		f := newFixture(t, e, 100, strategies.Config{})
		f.limit = limit
		if !e.Safe {
			// Left to the scheduler, a busy machine may run the burst one
			// try at a time and naive keeps the limit by luck. Hold the
			// orders table's insert gap so every try that checked the
			// limit waits to write its order, and let them go once more
			// than the limit have checked: the interleaving that breaks a
			// check apart from its act, made certain.
			ok := f.burstPastCheck("bot", "bob", tries, limit+1)
			a, _ := f.stock()
			if a.OverLimitUnits == 0 {
				t.Fatalf("naive kept the limit: %d of %d tries reserved, audit %+v", ok, tries, a)
			}
			return
		}
		ok, limited := f.burst("bot", "bob", tries)
		okAlice, _ := f.burst("alice", "alice", 1)
		a, _ := f.stock()
		if ok != limit || limited != tries-limit || okAlice != 1 {
			t.Fatalf("bob: %d reserved, %d refused for the limit (want %d and %d); alice %d (want 1)", ok, limited, limit, tries-limit, okAlice)
		}
		if a.OverLimitUnits != 0 {
			t.Fatalf("audit: %d units over the limit", a.OverLimitUnits)
		}
	}},
	{"a cancel gives the buyer its allowance back, a confirm does not", false, func(t *testing.T, e registry.Entry) {
		f := newFixture(t, e, 10, strategies.Config{})
		f.limit = 2
		far := time.Now().Add(time.Hour)
		wantErr(t, "reserve 1", f.reserveFor("l1", "bob", far), nil)
		wantErr(t, "reserve 2", f.reserveFor("l2", "bob", far), nil)
		wantErr(t, "reserve 3 past the limit", f.reserveFor("l3", "bob", far), inventory.ErrLimitExceeded)
		wantErr(t, "repeat of reserve 2", f.reserveFor("l2", "bob", far), nil)
		wantErr(t, "confirm 1", f.confirm("l1"), nil)
		wantErr(t, "reserve 4 after a confirm", f.reserveFor("l4", "bob", far), inventory.ErrLimitExceeded)
		wantErr(t, "cancel 2", f.cancel("l2"), nil)
		wantErr(t, "repeat cancel 2", f.cancel("l2"), nil)
		wantErr(t, "reserve 5 after the cancel", f.reserveFor("l5", "bob", far), nil)
		wantErr(t, "reserve 6 past the limit again", f.reserveFor("l6", "bob", far), inventory.ErrLimitExceeded)
		wantErr(t, "another buyer", f.reserveFor("m1", "carol", far), nil)
		a, s := f.stock()
		wantStock(t, s, 10-3, 1)
		if a.OverLimitUnits != 0 {
			t.Fatalf("audit: %d units over the limit", a.OverLimitUnits)
		}
	}},
	{"an expiry gives the buyer its allowance back", false, func(t *testing.T, e registry.Entry) {
		f := newFixture(t, e, 5, strategies.Config{SweepPeriod: 20 * time.Millisecond})
		f.limit = 1
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); _ = f.s.Run(ctx) }()
		defer func() { cancel(); wg.Wait() }()
		wantErr(t, "reserve", f.reserveFor("x1", "bob", time.Now().Add(2*time.Second)), nil)
		waitfor.Until(t, "the sweeper did not expire the reservation", func() bool {
			var n int
			if err := env.DB.QueryRow("SELECT COUNT(*) FROM orders WHERE state='expired' AND order_id='x1'").Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n == 1
		})
		// The store that decided the expiry in MySQL may give the units
		// back in Redis just after: wait for the allowance, then it holds.
		waitfor.Until(t, "the expiry did not give the allowance back", func() bool {
			err := f.reserveFor("x3", "bob", time.Now().Add(time.Hour))
			if err != nil && !errors.Is(err, inventory.ErrLimitExceeded) {
				t.Fatalf("reserve after the expiry: %v", err)
			}
			return err == nil
		})
		wantErr(t, "past the limit again", f.reserveFor("x4", "bob", time.Now().Add(time.Hour)), inventory.ErrLimitExceeded)
	}},
	{"200 buyers on 100 units", true, func(t *testing.T, e registry.Entry) {
		f := newFixture(t, e, 100, strategies.Config{})
		var ok, out atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < 200; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				id := fmt.Sprintf("b-%d", i)
				switch err := f.reserve(id); {
				case err == nil:
					ok.Add(1)
					// naive retries nothing: on a multi-primary cluster its
					// bare statements fail certification, a refusal like any other.
					if err := f.confirm(id); err != nil && (e.Safe || !isDeadlock(err)) {
						t.Errorf("confirm %s: %v", id, err)
					}
				case errors.Is(err, inventory.ErrOutOfStock), errors.Is(err, inventory.ErrConflict):
					out.Add(1)
				case !e.Safe && isDeadlock(err):
					out.Add(1)
				default:
					t.Errorf("reserve %s: %v", id, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		a, s := f.stock()
		if !e.Safe {
			// naive must show the anomaly, and the auditor must see it.
			if a.OversoldUnits == 0 && a.InvariantViolations == 0 {
				t.Fatalf("naive showed no anomaly: %d reserved, audit %+v", ok.Load(), a)
			}
			return
		}
		if ok.Load() != 100 {
			t.Fatalf("%d reserves succeeded, want exactly 100 (%d refused)", ok.Load(), out.Load())
		}
		wantStock(t, s, 0, 100)
	}},
}

// redisCheckpoint is every stockbench key of Redis as DUMP left it.
type redisCheckpoint map[string]struct {
	dump string
	ttl  time.Duration
}

// checkpointRedis DUMPs every stockbench key (every node of a cluster).
func checkpointRedis(t *testing.T) redisCheckpoint {
	t.Helper()
	ctx := context.Background()
	cp := redisCheckpoint{}
	err := inventory.ScanKeys(ctx, env.Redis, inventory.RedisPrefix+"*", func(keys []string) error {
		for _, k := range keys {
			d, err := env.Redis.Dump(ctx, k).Result()
			if err != nil {
				return err
			}
			ttl, err := env.Redis.PTTL(ctx, k).Result()
			if err != nil {
				return err
			}
			cp[k] = struct {
				dump string
				ttl  time.Duration
			}{d, max(ttl, 0)}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// rollBackRedis puts Redis back as the checkpoint found it and forgets
// every script, as a restart does: the keys written since are gone.
func rollBackRedis(t *testing.T, cp redisCheckpoint) {
	t.Helper()
	ctx := context.Background()
	if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
		t.Fatal(err)
	}
	for k, v := range cp {
		if err := env.Redis.RestoreReplace(ctx, k, v.ttl, v.dump).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Redis.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}

// isDeadlock reports MySQL's deadlock error, which is also how a Galera
// certification failure reaches the client.
func isDeadlock(err error) bool { return inventory.Classify(err) == inventory.Deadlock }

// TestConformance runs every case against every registered strategy.
func TestConformance(t *testing.T) {
	for _, e := range registry.All {
		t.Run(e.Name, func(t *testing.T) {
			for _, c := range cases {
				if !e.Safe && !c.forNaive {
					continue
				}
				t.Run(c.name, func(t *testing.T) { c.run(t, e) })
			}
		})
	}
}

// brokenRefund is rowlock with a refund that has no "already released"
// check: it gives the order's units back whatever state the order is in,
// with no lock — the refund the article's team ran before "取消和退款请求
// 重复到达，导致库存变成负数". Test-only: the auditor must catch it.
type brokenRefund struct {
	strategies.Strategy
	db *sql.DB
}

func (b brokenRefund) Refund(ctx context.Context, o inventory.OrderRef) error {
	var qty int64
	if err := b.db.QueryRowContext(ctx, "SELECT qty FROM orders WHERE order_id=?", o.OrderID).Scan(&qty); err != nil {
		return err
	}
	if _, err := b.db.ExecContext(ctx, "UPDATE inventory SET sold=sold-?, available=available+? WHERE sku=?", qty, qty, o.SKU); err != nil {
		return err
	}
	_, err := b.db.ExecContext(ctx, "UPDATE orders SET state='refunded' WHERE order_id=?", o.OrderID)
	return err
}

// TestAuditCatchesDoubleRelease runs the broken refund on real servers
// and has the auditor grade the stores: every double release it makes is
// counted as over-released units, whatever the order of the calls.
func TestAuditCatchesDoubleRelease(t *testing.T) {
	rowlock, err := registry.Lookup("rowlock")
	if err != nil {
		t.Fatal(err)
	}
	broken := rowlock
	broken.Name, broken.Safe = "broken-refund", false // its own audit is this test's
	broken.New = func(cfg strategies.Config) (strategies.Strategy, error) {
		s, err := rowlock.New(cfg)
		return brokenRefund{Strategy: s, db: cfg.DB}, err
	}
	for _, c := range []struct {
		name string
		run  func(f *fixture)
		// overReleased is the units released twice; refundAcks and
		// cancelAcks the ack violations the auditor must count.
		overReleased           int64
		refundAcks, cancelAcks int
	}{
		// The client retries a refund whose reply it lost: the refund
		// runs twice and gives the unit back twice.
		{"a refund repeated", func(f *fixture) {
			wantErr(t, "reserve", f.reserve("o1"), nil)
			wantErr(t, "confirm", f.confirm("o1"), nil)
			wantErr(t, "refund", f.refund("o1"), nil)
			wantErr(t, "refund again", f.refund("o1"), nil)
		}, 1, 0, 0},
		// Two refunds of one order at once.
		{"two refunds together", func(f *fixture) {
			wantErr(t, "reserve", f.reserve("o1"), nil)
			wantErr(t, "confirm", f.confirm("o1"), nil)
			var wg sync.WaitGroup
			for range 2 {
				wg.Add(1)
				go func() { defer wg.Done(); wantErrAsync(t, "refund", f.refund("o1"), nil) }()
			}
			wg.Wait()
		}, 1, 0, 0},
		// The cancel and the refund of an unpaid order both arrive: the
		// cancel releases the held unit, the refund releases it again
		// (from another order's sold units).
		{"a cancel, then a refund of the same order", func(f *fixture) {
			wantErr(t, "reserve", f.reserve("paid"), nil)
			wantErr(t, "confirm", f.confirm("paid"), nil)
			wantErr(t, "reserve", f.reserve("o1"), nil)
			wantErr(t, "cancel", f.cancel("o1"), nil)
			wantErr(t, "refund", f.refund("o1"), nil)
		}, 1, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, broken, 5, strategies.Config{})
			c.run(f)
			a, s := f.stock()
			if a.OverReleasedUnits != c.overReleased || a.RefundAckViolations != c.refundAcks || a.CancelAckViolations != c.cancelAcks {
				t.Fatalf("over-released %d, refund-ack violations %d, cancel-ack violations %d; want %d, %d, %d (sku %+v)",
					a.OverReleasedUnits, a.RefundAckViolations, a.CancelAckViolations, c.overReleased, c.refundAcks, c.cancelAcks, s)
			}
			if a.Anomalies == 0 {
				t.Fatalf("a double release graded clean: %+v", a)
			}
			t.Logf("caught: %d over-released units, %d anomalies in all: %v", a.OverReleasedUnits, a.Anomalies, a.Violations)
		})
	}
}

// wantErrAsync is wantErr for a goroutine: it reports, it does not stop.
func wantErrAsync(t *testing.T, what string, got, want error) {
	t.Helper()
	if want == nil && got != nil || want != nil && !errors.Is(got, want) {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}
