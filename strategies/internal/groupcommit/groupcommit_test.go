package groupcommit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stockbench/stockbench/internal/waitfor"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/servers/servertest"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

var env servertest.Env

func TestMain(m *testing.M) { os.Exit(servertest.Main(m, &env, "TestAfter")) }

const sku = "GC-1"

// item is one reservation: an order row plus qty units off the SKU.
type item struct {
	id  string
	qty int64
}

// store runs items against the real inventory and orders tables, and
// records the batches it saw.
type store struct {
	gate  chan struct{}   // the item "first" waits here before its transaction
	alone map[string]bool // items Batch leaves out (ErrAlone) for One to run
	mu    sync.Mutex
	sizes []int // sizes of the calls to Batch and One, in order
}

func (s *store) seen(n int) {
	s.mu.Lock()
	s.sizes = append(s.sizes, n)
	s.mu.Unlock()
}

func (s *store) apply(ctx context.Context, items []item) error {
	var sum int64
	rs := make([]inventory.Reservation, len(items))
	for i, it := range items {
		sum += it.qty
		rs[i] = inventory.Reservation{OrderID: it.id, SKU: sku, Qty: it.qty}
	}
	return sqlstore.InTx(ctx, env.DB, func(tx *sql.Tx) error {
		if err := sqlstore.InsertOrders(ctx, tx, rs, inventory.StateReserved); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, "UPDATE inventory SET available=available-?, occupied=occupied+? WHERE sku=? AND available>=?", sum, sum, sku, sum)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return inventory.ErrOutOfStock
		}
		return nil
	})
}

func (s *store) group(max int, wait time.Duration) *Group[item] {
	return &Group[item]{Max: max, Wait: wait,
		Batch: func(ctx context.Context, key string, items []item) ([]error, error) {
			s.seen(len(items))
			out := make([]error, len(items))
			var in []item
			for i, it := range items {
				if s.alone[it.id] {
					out[i] = ErrAlone
					continue
				}
				in = append(in, it)
			}
			if err := s.apply(ctx, in); err != nil {
				return nil, err
			}
			return out, nil
		},
		One: func(ctx context.Context, key string, it item) error {
			if it.id == "first" {
				<-s.gate
			}
			s.seen(1)
			return s.apply(ctx, []item{it})
		},
	}
}

// pending is how many calls of key wait in the queue.
func (g *Group[T]) pending(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if q := g.keys[key]; q != nil {
		return len(q.pending)
	}
	return 0
}

func TestGroup(t *testing.T) {
	cases := []struct {
		name string
		max  int
		wait time.Duration
		// gated: a first call runs alone and holds its transaction open
		// until `queued` more calls wait behind it.
		gated bool
		// queued items o0…oN-1; dup makes item i reuse an existing order id
		// (its insert fails, failing the batch it is in); cancel makes item
		// i's context end while it is queued.
		queued      int
		dup, cancel int
		// alone: the items Batch leaves out, for their callers to run alone.
		alone     map[int]bool
		wantSizes []int // batch sizes, in order (1 = a call run alone)
		wantErr   map[int]error
		wantMoved int64 // units moved off the SKU
	}{
		// Calls that queue behind a running batch share the next one.
		{name: "queued calls share one batch", max: 64, gated: true, queued: 10, dup: -1, cancel: -1,
			wantSizes: []int{1, 10}, wantMoved: 11},
		// Max bounds a batch; the rest follow in later batches.
		{name: "max bounds the batch", max: 4, gated: true, queued: 10, dup: -1, cancel: -1,
			wantSizes: []int{1, 4, 4, 2}, wantMoved: 11},
		// A batch that fails as a whole is retried item by item: only the
		// bad item gets an error, the others succeed.
		{name: "failed batch retried one by one", max: 64, gated: true, queued: 5, dup: 2, cancel: -1,
			wantSizes: []int{1, 5, 1, 1, 1, 1, 1}, wantErr: map[int]error{2: errDup}, wantMoved: 5},
		// Items the batch leaves out run on their own after its commit:
		// the others commit in the batch and are not held up or failed.
		{name: "items left alone run after the batch", max: 64, gated: true, queued: 5, dup: -1, cancel: -1,
			alone: map[int]bool{1: true, 3: true}, wantSizes: []int{1, 5, 1, 1}, wantMoved: 6},
		// One left alone that then fails gets its own error; the rest of
		// its batch commits.
		{name: "item left alone fails on its own", max: 64, gated: true, queued: 4, dup: 2, cancel: -1,
			alone: map[int]bool{2: true}, wantSizes: []int{1, 4, 1}, wantErr: map[int]error{2: errDup}, wantMoved: 4},
		// Max 1 turns coalescing off: every call runs alone.
		{name: "max 1 is off", max: 1, queued: 3, dup: -1, cancel: -1,
			wantSizes: []int{1, 1, 1}, wantMoved: 3},
		// A call whose context ends while queued is not run, and says so.
		{name: "cancelled while queued is not run", max: 64, gated: true, queued: 4, dup: -1, cancel: 1,
			wantSizes: []int{1, 3}, wantErr: map[int]error{1: context.Canceled}, wantMoved: 4},
		// With a wait, the leader holds the batch until it is full (the
		// wait is an hour: the test ends only if "full" cuts it short).
		{name: "wait ends when the batch is full", max: 3, wait: time.Hour, queued: 3, dup: -1, cancel: -1,
			wantSizes: []int{3}, wantMoved: 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
				t.Fatal(err)
			}
			if err := inventory.LoadStock(ctx, env.DB, []inventory.Stock{{SKU: sku, Total: 100, Available: 100}}); err != nil {
				t.Fatal(err)
			}
			if err := sqlstore.InsertOrder(ctx, env.DB, inventory.Reservation{OrderID: "existing", SKU: sku}, inventory.StateCancelled); err != nil {
				t.Fatal(err)
			}
			s := &store{gate: make(chan struct{}), alone: map[string]bool{}}
			g := s.group(c.max, c.wait)
			var wg sync.WaitGroup
			var firstErr error
			if c.gated {
				wg.Add(1)
				go func() { defer wg.Done(); firstErr = g.Do(ctx, sku, item{"first", 1}) }()
				waitfor.Until(t, "the batch did not reach the expected state", func() bool { return g.running(sku) && g.pending(sku) == 0 })
			}
			errs := make([]error, c.queued)
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			for i := 0; i < c.queued; i++ {
				it := item{fmt.Sprintf("o%d", i), 1}
				if i == c.dup {
					it.id = "existing"
				}
				if c.alone[i] {
					s.alone[it.id] = true
				}
				callCtx := ctx
				if i == c.cancel {
					callCtx = cctx
				}
				// One at a time, so that arrival order is i.
				before := g.pending(sku)
				wg.Add(1)
				go func() { defer wg.Done(); errs[i] = g.Do(callCtx, sku, it) }()
				if c.gated {
					waitfor.Until(t, "the batch did not reach the expected state", func() bool { return g.pending(sku) == before+1 })
				}
			}
			if c.cancel >= 0 {
				cancel()
				waitfor.Until(t, "the batch did not reach the expected state", func() bool { return g.pending(sku) == c.queued-1 })
			}
			close(s.gate)
			wg.Wait()
			if firstErr != nil {
				t.Fatalf("first call: %v", firstErr)
			}
			for i, err := range errs {
				want := c.wantErr[i]
				if want == nil && err != nil || want != nil && !errors.Is(err, want) && !(want == errDup && sqlstore.IsDuplicate(err)) {
					t.Errorf("call %d: got %v, want %v", i, err, want)
				}
			}
			if !slices.Equal(s.sizes, c.wantSizes) {
				t.Errorf("batches %v, want %v", s.sizes, c.wantSizes)
			}
			var avail int64
			if err := env.DB.QueryRow("SELECT available FROM inventory WHERE sku=?", sku).Scan(&avail); err != nil {
				t.Fatal(err)
			}
			if moved := 100 - avail; moved != c.wantMoved {
				t.Errorf("moved %d units, want %d", moved, c.wantMoved)
			}
			ran := c.queued
			if c.gated {
				ran++
			}
			if c.cancel >= 0 {
				ran--
			}
			if st := g.Stats(); st.Items != int64(ran) {
				t.Errorf("stats: %d calls in batches, want %d (%+v)", st.Items, ran, st)
			}
		})
	}
}

// errDup stands for a duplicate-key error from the server.
var errDup = errors.New("duplicate order id")

// running reports whether a batch of key is under way.
func (g *Group[T]) running(key string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.keys[key]
	return q != nil && q.running
}

// TestStats checks the size quantiles on a known distribution.
func TestStats(t *testing.T) {
	g := &Group[int]{}
	for _, n := range []int{1, 2, 2, 3, 10} {
		g.record(n, false)
	}
	g.record(4, true)
	got := g.Stats()
	want := Stats{Batches: 6, Items: 22, Min: 1, Median: 2, P90: 4, Max: 10, Fallbacks: 1}
	if got != want {
		t.Fatalf("stats %+v, want %+v", got, want)
	}
}

// TestAfter: After runs for a batch that Batch committed — with its items
// and results — once the key's next batch may run, and before any caller of
// the batch returns; never for an item run alone by One, nor for a batch
// that failed and fell back to One. The group's coordination is plain Go, so
// the items here touch no store.
func TestAfter(t *testing.T) {
	cases := []struct {
		name      string
		max       int
		batchErr  error
		wantAfter int // batches After saw
	}{
		{"committed batches", 2, nil, 2},
		{"failed batch falls back to One", 2, errors.New("lost commit answer"), 0},
		{"one item at a time", 1, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var mu sync.Mutex
			var afters [][]string
			secondRan := make(chan struct{})
			var batches int
			g := &Group[string]{Max: c.max, Wait: time.Hour,
				Batch: func(_ context.Context, _ string, items []string) ([]error, error) {
					mu.Lock()
					batches++
					if batches == 2 {
						close(secondRan)
					}
					mu.Unlock()
					if c.batchErr != nil {
						return nil, c.batchErr
					}
					return make([]error, len(items)), nil
				},
				One: func(context.Context, string, string) error { return nil },
				After: func(_ context.Context, _ string, items []string, results []error) {
					if len(items) != len(results) {
						t.Errorf("After: %d items, %d results", len(items), len(results))
					}
					mu.Lock()
					first := len(afters) == 0
					afters = append(afters, slices.Clone(items))
					mu.Unlock()
					if first {
						// The first batch's After waits until the second
						// batch has run: leadership has passed on.
						<-secondRan
					}
				}}
			var wg sync.WaitGroup
			done := make(chan string, 4)
			for _, id := range []string{"a", "b", "c", "d"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := g.Do(context.Background(), sku, id); err != nil {
						t.Errorf("%s: %v", id, err)
					}
					mu.Lock()
					seen := slices.ContainsFunc(afters, func(b []string) bool { return slices.Contains(b, id) })
					mu.Unlock()
					if c.wantAfter > 0 && !seen {
						t.Errorf("%s returned before After ran for its batch", id)
					}
					done <- id
				}()
			}
			if c.wantAfter == 0 {
				// No After waits on the second batch: let it go either way.
				mu.Lock()
				if batches < 2 {
					close(secondRan)
					batches = 2
				}
				mu.Unlock()
			}
			wg.Wait()
			if len(afters) != c.wantAfter {
				t.Fatalf("After ran for %d batches %v, want %d", len(afters), afters, c.wantAfter)
			}
		})
	}
}
