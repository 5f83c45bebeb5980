// Package outboxlocal is the seed article's third scheme as written: the
// reserve runs in Redis (the Lua Try) and its event goes to a local message
// table in the service's own in-process database; a worker later persists
// the events to the inventory centre's MySQL. Unlike the outbox strategy,
// whose "local" table is a table of the central MySQL written on the
// request path, nothing here touches MySQL on the request path at all.
//
// Every operation is one Redis script (the decision: Try, or Finish under
// the owner check, so a racing confirm and cancel have exactly one winner)
// plus one event appended to an embedded SQLite database (pure Go, WAL) in
// cfg.LocalDir; concurrent appends share one SQLite transaction (group
// commit). The caller is answered after that commit.
//
// Durability (fsync policy): the local database runs journal_mode=WAL with
// synchronous=FULL, so every (group) commit fsyncs the WAL before the
// caller is answered. A process crash loses nothing that was answered (the
// next instance given the same LocalDir reopens the file and relays the
// rest); a host crash loses nothing answered either, as long as the disk
// honours fsync. A lost file (disk gone, container without a volume) loses
// the events not yet relayed: their reservations stay in Redis and expire
// there, their confirms are in Redis only — the reconciler (reconcile.go)
// brings back the decisions of orders MySQL holds as reserved; a confirm
// whose reserve never reached MySQL is then missing from MySQL (drift).
//
// The relay (relay.go) drains the local table into MySQL every
// OutboxPeriod, a batch per MySQL transaction: order rows inserted or moved
// and the inventory row updated once per SKU. It is idempotent — the order
// row is the key: a reserve event of an order MySQL already has changes
// nothing, a decision moves a reserved order once — so a crash between the
// MySQL commit and the local delete replays harmlessly, and events of one
// order relayed out of order (an expiry decided by another process's
// sweeper) land right. With several generator processes each has its own
// LocalDir, as each service instance would.
package outboxlocal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	_ "github.com/glebarez/go-sqlite" // the "sqlite" database/sql driver (pure Go)

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/internal/groupcommit"
	"github.com/stockbench/stockbench/strategies/internal/redisstock"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// Kinds of local events: a reserve, or the decision an order reached.
const (
	kindReserve = "reserve"
)

// appendMax bounds the events of one local (group) commit.
const appendMax = 1024

// FileName is the local database's file name inside LocalDir.
const FileName = "outbox-local.db"

const localSchema = `CREATE TABLE IF NOT EXISTS events (
  id       INTEGER PRIMARY KEY AUTOINCREMENT,
  order_id TEXT    NOT NULL,
  sku      TEXT    NOT NULL,
  qty      INTEGER NOT NULL,
  kind     TEXT    NOT NULL,
  deadline INTEGER NOT NULL,
  created  INTEGER NOT NULL,
  buyer    TEXT    NOT NULL DEFAULT ''
)`

// addBuyer gives a table an older instance created without the buyer
// column one (empty: no buyer, as its events had).
const addBuyer = `ALTER TABLE events ADD COLUMN buyer TEXT NOT NULL DEFAULT ''`

// Strategy implements strategies.Strategy with Redis and a local message
// table. Safe for concurrent use.
type Strategy struct {
	db    *sql.DB
	rs    redisstock.Store
	cfg   strategies.Config
	skus  redisstock.Catalog
	local *sql.DB
	dir   string
	owned bool // dir was made by New: Close removes it

	appends *groupcommit.Group[event]
	relayMu sync.Mutex // one relay pass at a time

	mu  sync.Mutex
	lag *hdrhistogram.Histogram // relay lag (append → MySQL commit), µs; guarded by mu

	bgErrors, relayed, backlogMax, backlogAtStop, appendFailures atomic.Int64
	expired, reconciled, relayConflicts                          atomic.Int64
}

var _ strategies.Strategy = (*Strategy)(nil)

// event is one row of the local table.
type event struct {
	id       int64
	orderID  string
	sku      string
	qty      int64
	kind     string // kindReserve or a final order state
	deadline int64  // Unix ms, 0: none
	created  int64  // Unix ns of the append
	// buyer is the order's buyer ("" for none): the relay writes it into
	// the MySQL order row, where the per-buyer limit is audited and from
	// which a rebuilt Redis counts the buyer's holds again.
	buyer string
}

// New builds the strategy on cfg.DB and cfg.Redis and opens (or creates)
// the local database in cfg.LocalDir.
func New(cfg strategies.Config) (*Strategy, error) {
	cfg = cfg.WithDefaults()
	if cfg.Redis == nil {
		return nil, errors.New("outbox-local needs redis")
	}
	fence := &redisstock.Fence{DB: cfg.DB}
	s := &Strategy{db: cfg.DB, rs: redisstock.Store{R: cfg.Redis, Retain: cfg.Retain, Fence: fence, DB: cfg.DB}, cfg: cfg, dir: cfg.LocalDir,
		lag: hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)}
	// The truth a rebuild needs is MySQL plus this instance's local table:
	// the fence drains the table into MySQL before it reads (see Ready).
	fence.Drain = s.drain
	if s.dir == "" {
		d, err := os.MkdirTemp("", "stockbench-outbox-local-*")
		if err != nil {
			return nil, fmt.Errorf("outbox-local: %w", err)
		}
		s.dir, s.owned = d, true
	}
	local, err := openLocal(context.Background(), filepath.Join(s.dir, FileName))
	if err != nil {
		s.removeOwned()
		return nil, err
	}
	s.local = local
	// One SQLite file has one writer: every SKU's appends share its
	// queue, so a batch may hold every buyer of the instance (appendMax),
	// not only one SKU's BatchMax. BatchMax 1 still turns coalescing off.
	amax := appendMax
	if cfg.BatchMax <= 1 {
		amax = 1
	}
	s.appends = &groupcommit.Group[event]{Max: amax, Wait: cfg.BatchWait,
		Batch: func(ctx context.Context, _ string, evs []event) ([]error, error) {
			return make([]error, len(evs)), s.insertEvents(ctx, evs)
		},
		One: func(ctx context.Context, _ string, ev event) error { return s.insertEvents(ctx, []event{ev}) },
	}
	return s, nil
}

// openLocal opens the local database: WAL, synchronous=FULL (see the
// package comment), one connection (SQLite has one writer; the relay's
// reads are short).
func openLocal(ctx context.Context, path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, fmt.Errorf("outbox-local: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, localSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("outbox-local: create table in %s: %w", path, err)
	}
	if err := migrateLocal(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("outbox-local: %s: %w", path, err)
	}
	return db, nil
}

// migrateLocal adds the buyer column to a table an older instance left
// without it.
func migrateLocal(ctx context.Context, db *sql.DB) error {
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM pragma_table_info('events') WHERE name='buyer'").Scan(&n); err != nil {
		return fmt.Errorf("read the events table's columns: %w", err)
	}
	if n > 0 {
		return nil
	}
	if _, err := db.ExecContext(ctx, addBuyer); err != nil {
		return fmt.Errorf("add the buyer column: %w", err)
	}
	return nil
}

func (s *Strategy) removeOwned() {
	if s.owned {
		_ = os.RemoveAll(s.dir)
	}
}

// Name is "outbox-local".
func (s *Strategy) Name() string { return "outbox-local" }

// Setup gives each SKU a Redis stock hash if it has none (live stock is
// never overwritten: a restarted instance re-sells nothing). The local
// table a previous instance left is relayed first, so a hash built now
// counts its events.
func (s *Strategy) Setup(ctx context.Context, stock []inventory.Stock) error {
	if err := s.drain(ctx); err != nil {
		return fmt.Errorf("outbox-local setup: %w", err)
	}
	return s.skus.Load(ctx, s.rs, s.db)
}

// insertEvents appends events in one SQLite transaction (one WAL fsync).
func (s *Strategy) insertEvents(ctx context.Context, evs []event) error {
	tx, err := s.local.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("outbox-local: append: %w", err)
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, "INSERT INTO events (order_id, sku, qty, kind, deadline, created, buyer) VALUES (?,?,?,?,?,?,?)")
	if err != nil {
		return fmt.Errorf("outbox-local: append: %w", err)
	}
	defer st.Close()
	now := time.Now().UnixNano()
	for _, e := range evs {
		if _, err := st.ExecContext(ctx, e.orderID, e.sku, e.qty, e.kind, e.deadline, now, e.buyer); err != nil {
			return fmt.Errorf("outbox-local: append: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("outbox-local: append commit: %w", err)
	}
	return nil
}

// appendEvent appends one event through the group commit. It runs on a
// context of its own: the Redis half is done, and the caller's deadline
// ending must not leave it without its event.
func (s *Strategy) appendEvent(ctx context.Context, e event) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.OpTimeout)
	defer cancel()
	err := s.appends.Do(ctx, "", e)
	if err != nil {
		s.appendFailures.Add(1)
	}
	return err
}

func deadlineMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// Reserve runs the Lua Try, then appends the reserve event locally. If the
// append fails, the unit is given back in Redis (the order cancelled
// there, so a retry is refused) and the caller gets the error. A Redis
// that restarted is rebuilt first (redisstock.Fence, gated: the rebuild
// drains the local table into MySQL and reads MySQL while no operation of
// this instance writes Redis).
func (s *Strategy) Reserve(ctx context.Context, r inventory.Reservation) error {
	for attempt := 0; ; attempt++ {
		s.rs.Fence.Enter()
		err := s.reserve(ctx, r)
		s.rs.Fence.Leave()
		if !errors.Is(err, redisstock.ErrFenced) || attempt == 1 {
			return err
		}
		if err := s.rs.Ready(ctx); err != nil {
			return fmt.Errorf("reserve %s: %w", r.OrderID, err)
		}
	}
}

// reserve is Reserve inside the fence.
func (s *Strategy) reserve(ctx context.Context, r inventory.Reservation) error {
	fresh, err := s.rs.Try(ctx, r)
	if err != nil || !fresh {
		return err
	}
	e := event{orderID: r.OrderID, sku: r.SKU, qty: r.Qty, kind: kindReserve, deadline: deadlineMS(r.Deadline), buyer: r.Buyer}
	if err := s.appendEvent(ctx, e); err != nil {
		ref := inventory.OrderRef{OrderID: r.OrderID, SKU: r.SKU}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.OpTimeout)
		defer cancel()
		if _, cerr := s.rs.Finish(cctx, ref, inventory.StateCancelled, false); cerr != nil {
			return fmt.Errorf("reserve %s: %w (%v; undo: %v)", r.OrderID, inventory.ErrOutcomeUnknown, err, cerr)
		}
		return fmt.Errorf("reserve %s: %w", r.OrderID, err)
	}
	return nil
}

// Confirm decides the order in Redis (confirmed, or expired past its
// deadline) and appends the decision locally.
func (s *Strategy) Confirm(ctx context.Context, ref inventory.OrderRef) error {
	res, want, err := s.rs.ConfirmTarget(ctx, ref)
	if err != nil {
		return err
	}
	if want == "" {
		// Already confirmed in Redis: a repeat. The call that decided may
		// have died before its event was appended (a killed instance):
		// the answer is given only once the decision is in a local table.
		return s.reassert(ctx, ref, res, inventory.StateConfirmed)
	}
	got, err := s.decide(ctx, ref, res, want)
	if err != nil {
		return err
	}
	switch got {
	case inventory.StateConfirmed:
		return nil
	case "":
		return fmt.Errorf("confirm %s: %w", ref.OrderID, inventory.ErrUnknownOrder)
	}
	return fmt.Errorf("confirm %s: order is %s: %w", ref.OrderID, got, inventory.ErrAlreadyFinal)
}

// Cancel decides the order cancelled in Redis under the owner check and
// appends the decision locally. A cancel of an unknown order leaves a
// cancelled marker in Redis (a late Try is refused) and a marker event.
func (s *Strategy) Cancel(ctx context.Context, ref inventory.OrderRef) error {
	res, proceed, err := s.rs.CancelTarget(ctx, ref)
	if err != nil {
		return err
	}
	if !proceed {
		// Already cancelled or expired in Redis: a repeat, re-asserted
		// as Confirm's is.
		return s.reassert(ctx, ref, res, res.State)
	}
	got, err := s.decide(ctx, ref, res, inventory.StateCancelled)
	if err != nil {
		return err
	}
	if got == inventory.StateConfirmed {
		return fmt.Errorf("cancel %s: order is confirmed: %w", ref.OrderID, inventory.ErrAlreadyFinal)
	}
	return nil
}

// decide moves the Redis reservation to want (a missing one gets a
// cancelled marker when want is cancelled) and, when this call made the
// move, appends the decision. It returns the state that stands: want, the
// decision another call made first, or "" (no reservation).
func (s *Strategy) decide(ctx context.Context, ref inventory.OrderRef, res redisstock.Reservation, want inventory.OrderState) (inventory.OrderState, error) {
	// The Redis move and its event are one step for a rebuild: it drains
	// the events after every move it may not see (redisstock.Fence).
	s.rs.Fence.Enter()
	defer s.rs.Fence.Leave()
	marker := res.State == "" && want == inventory.StateCancelled
	prev, err := s.rs.Finish(ctx, ref, want, marker)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", want, ref.OrderID, err)
	}
	switch {
	case prev == inventory.StateReserved:
	case prev == "" && marker:
		res.Qty = 0
	case prev == "":
		return "", nil
	case prev == want:
		// A concurrent repeat decided first; its event may never be
		// appended (its instance may die): re-assert it (the fence is
		// held already).
		if err := s.appendDecision(ctx, ref, res, want); err != nil {
			return "", err
		}
		return want, nil
	default:
		return prev, nil // another decision came first
	}
	e := event{orderID: ref.OrderID, sku: ref.SKU, qty: res.Qty, kind: string(want), deadline: deadlineMS(res.Deadline), buyer: res.Buyer}
	if err := s.appendEvent(ctx, e); err != nil {
		// The decision stands in Redis; the reconciler brings it to MySQL
		// if MySQL holds the order as reserved.
		return "", fmt.Errorf("%s %s: %w: %w", want, ref.OrderID, inventory.ErrOutcomeUnknown, err)
	}
	return want, nil
}

// reassert appends the decision state that Redis already holds for the
// order, so that a repeat is answered only once the decision is durable
// in a local table — whichever instance made it, and whether or not that
// instance lived to append its own event. The relay is idempotent by
// order row, so a decision appended twice moves the order once.
func (s *Strategy) reassert(ctx context.Context, ref inventory.OrderRef, res redisstock.Reservation, state inventory.OrderState) error {
	s.rs.Fence.Enter()
	defer s.rs.Fence.Leave()
	return s.appendDecision(ctx, ref, res, state)
}

// appendDecision is reassert with the fence held by the caller.
func (s *Strategy) appendDecision(ctx context.Context, ref inventory.OrderRef, res redisstock.Reservation, state inventory.OrderState) error {
	e := event{orderID: ref.OrderID, sku: ref.SKU, qty: res.Qty, kind: string(state), deadline: deadlineMS(res.Deadline), buyer: res.Buyer}
	if err := s.appendEvent(ctx, e); err != nil {
		return fmt.Errorf("%s %s: %w: %w", state, ref.OrderID, inventory.ErrOutcomeUnknown, err)
	}
	return nil
}

// Run runs the expiry sweeper, the relay and the reconciler until ctx
// ends. A Run ended by plain cancellation (context.Canceled: the service
// stopping gracefully) drains the local table into MySQL before it returns,
// as a service instance flushes its outbox on shutdown; ended with any
// other cause (a crash) it leaves the file to the next instance. The
// backlog found at that moment is kept (outbox_local_backlog_at_stop).
func (s *Strategy) Run(ctx context.Context) error {
	onErr := func(error) { s.bgErrors.Add(1) }
	var wg sync.WaitGroup
	for _, job := range []struct {
		period time.Duration
		fn     func(context.Context) error
	}{
		{s.cfg.SweepPeriod, s.sweep},
		{s.cfg.OutboxPeriod, func(ctx context.Context) error { _, err := s.relay(ctx); return err }},
		{s.cfg.ReconcilePeriod, s.reconcile},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sqlstore.Every(ctx, job.period, job.fn, onErr)
		}()
	}
	wg.Wait()
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.OpTimeout)
	defer cancel()
	n, err := s.backlog(dctx)
	if err == nil {
		s.backlogAtStop.Store(n)
	}
	if !errors.Is(context.Cause(ctx), context.Canceled) {
		return nil
	}
	if err := s.drain(dctx); err != nil {
		s.bgErrors.Add(1)
	}
	return nil
}

// backlog counts the events not yet relayed.
func (s *Strategy) backlog(ctx context.Context) (int64, error) {
	var n int64
	err := s.local.QueryRowContext(ctx, "SELECT COUNT(*) FROM events").Scan(&n)
	return n, err
}

// drain relays until the local table is empty.
func (s *Strategy) drain(ctx context.Context) error {
	for {
		n, err := s.relay(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
	}
}

// sweep expires the reservations past their deadline, in Redis (the
// decision) and then locally, on every SKU of MySQL's catalog that holds
// live reservations (a page of SKUs per glance: see catalog). Several
// sweepers (processes) may race on one reservation: Finish moves it once,
// and only the winner appends the event.
func (s *Strategy) sweep(ctx context.Context) error {
	now := time.Now()
	const batch = 1000
	err := s.catalog(ctx, func(rows []redisstock.SKURow, gl []redisstock.Glance) error {
		for i, row := range rows {
			if gl[i].Live == 0 {
				continue // nothing held: nothing to expire
			}
			// A batch at a time, until a batch is short or expires nothing
			// (a backlog of abandoned reservations on a hot SKU outgrows one).
			for {
				n, full, err := s.sweepBatch(ctx, row.SKU, now, batch)
				if err != nil {
					return err
				}
				if !full || n == 0 {
					break
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	return nil
}

// sweepBatch expires up to batch of sku's reservations due at now; full
// says the batch was full (more may be due), n how many it expired.
func (s *Strategy) sweepBatch(ctx context.Context, sku string, now time.Time, batch int64) (n int, full bool, err error) {
	ids, err := s.rs.Due(ctx, sku, now, batch)
	if err != nil {
		return 0, false, err
	}
	full = int64(len(ids)) == batch
	refs := make([]inventory.OrderRef, len(ids))
	for i, id := range ids {
		refs[i] = inventory.OrderRef{OrderID: id, SKU: sku}
	}
	recs, found, err := s.rs.GetAll(ctx, refs) // one pipeline for the batch
	if err != nil {
		return 0, full, err
	}
	for i, ref := range refs {
		res := recs[i]
		if !found[i] || res.State != inventory.StateReserved || now.Before(res.Deadline) {
			continue
		}
		got, err := s.decide(ctx, ref, res, inventory.StateExpired)
		if err != nil {
			return n, full, err
		}
		if got == inventory.StateExpired {
			s.expired.Add(1)
			n++
		}
	}
	return n, full, nil
}

// Settle expires due reservations, runs a reconciler pass and drains the
// local table into MySQL: afterwards MySQL holds every event this instance
// answered for. Other processes' local tables are theirs to settle.
func (s *Strategy) Settle(ctx context.Context) error {
	if err := s.rs.Ready(ctx); err != nil { // a restart no Try noticed
		return fmt.Errorf("settle: %w", err)
	}
	if err := s.sweep(ctx); err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	if err := s.drain(ctx); err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	if err := s.reconcile(ctx); err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	if err := s.drain(ctx); err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	return nil
}

// Restock adds stock in MySQL first (journalled), then in Redis; a
// repeated restock id changes nothing (see redisstock.Store.Restock).
func (s *Strategy) Restock(ctx context.Context, r inventory.Restock) error {
	return s.rs.Restock(ctx, s.db, r)
}

// Close closes the local database (its file stays for the next instance
// given the same LocalDir; a directory New made itself is removed).
func (s *Strategy) Close() error {
	err := s.local.Close()
	s.removeOwned()
	return err
}

// Counters reports the relay's lag (append → MySQL commit, ms), the
// events relayed, the largest backlog a relay pass found, the backlog when
// the background loop stopped, append failures, expiries and reconciler
// repairs, and the append batch sizes. Safe for concurrent use.
func (s *Strategy) Counters() map[string]float64 {
	s.mu.Lock()
	p50 := float64(s.lag.ValueAtQuantile(50)) / 1000
	p99 := float64(s.lag.ValueAtQuantile(99)) / 1000
	s.mu.Unlock()
	m := map[string]float64{
		"background_errors":            float64(s.bgErrors.Load()),
		"outbox_relayed":               float64(s.relayed.Load()),
		"outbox_lag_p50_ms":            p50,
		"outbox_lag_p99_ms":            p99,
		"outbox_backlog_max":           float64(s.backlogMax.Load()),
		"outbox_local_backlog_at_stop": float64(s.backlogAtStop.Load()),
		"outbox_local_append_failures": float64(s.appendFailures.Load()),
		"outbox_local_relay_conflicts": float64(s.relayConflicts.Load()),
		"outbox_local_expired":         float64(s.expired.Load()),
		"outbox_local_reconciled":      float64(s.reconciled.Load()),
		"redis_rebuilds":               float64(s.rs.Fence.Rebuilds()),
	}
	for k, v := range s.appends.Stats().Counters("append") {
		m[k] = v
	}
	return m
}
