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
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	_ "github.com/glebarez/go-sqlite" // the "sqlite" database/sql driver (pure Go)

	"github.com/stockbench/stockbench/internal/clock"
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

// orderStripes is how many locks the SKUs' ordering is spread over
// (Strategy.order): SKUs sharing one only wait for each other's releases.
const orderStripes = 256

// stripe is sku's ordering lock.
func (s *Strategy) stripe(sku string) *sync.RWMutex {
	h := fnv.New32a()
	h.Write([]byte(sku))
	return &s.order[h.Sum32()%orderStripes]
}

// decisionHook, set by tests only, runs between a decision's Redis
// script and its append (inside its ordering lock).
var decisionHook func(ref inventory.OrderRef, want inventory.OrderState)

// orderWaitHook, set by tests only, runs when a Try waits for a release
// of its SKU's stripe.
var orderWaitHook func()

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
	relayMu sync.Mutex // one relay pass (or reconciler check) at a time

	// unsent holds the events whose append failed after their Redis step
	// had run (the caller was answered "outcome unknown"): every relay pass
	// appends them again first, so a decision never stays in Redis alone
	// while this instance lives, and a rebuild (the fence's Drain) waits
	// until they are in the table. Guarded by unsentMu.
	unsentMu sync.Mutex
	unsent   []event

	// order keeps each SKU's local events in Redis's order where it
	// matters to MySQL's available count: a release (cancel, expiry) holds
	// its SKU's stripe exclusively from its Redis script until its event
	// is queued for the local commit, a Try holds it shared, so a unit a
	// release gave back in Redis and a Try took again reach the table
	// release first, and no relay pass can apply the take without the
	// release (MySQL's available briefly −1, which the mid-run probe
	// flagged). Trys do not wait for each other.
	order [orderStripes]sync.RWMutex

	mu  sync.Mutex
	lag *hdrhistogram.Histogram // relay lag (append → MySQL commit), µs; guarded by mu

	bgErrors, relayed, backlogMax, backlogAtStop, appendFailures atomic.Int64
	expired, reconciled, relayConflicts                          atomic.Int64
	// lateRefused counts the decisions of this instance's table that a
	// catch-up (late member) found the rebuilt stores could not keep.
	lateRefused atomic.Int64
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
	fence.Drain = s.drainAll
	// A member a round went on without replays its table on the rebuilt
	// Redis before it relays it (catchUp).
	fence.CatchUp = s.catchUp
	if s.dir == "" {
		d, err := os.MkdirTemp("", "stockbench-outbox-local-*")
		if err != nil {
			return nil, fmt.Errorf("outbox-local: %w", err)
		}
		s.dir, s.owned = d, true
	}
	member, err := memberID(s.dir)
	if err != nil {
		s.removeOwned()
		return nil, err
	}
	fence.Member = member
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

// MemberFile is the file in LocalDir that names the instance among the
// Redis fence's members (redisstock.Fence.Member): an instance restarted
// on the directory is the same member.
const MemberFile = "fence-member"

// memberID reads dir's member name, creating one (random) if it has none.
func memberID(dir string) (string, error) {
	p := filepath.Join(dir, MemberFile)
	if b, err := os.ReadFile(p); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("outbox-local: member name: %w", err)
	}
	id := hex.EncodeToString(b[:])
	if err := os.WriteFile(p, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("outbox-local: member name: %w", err)
	}
	return id, nil
}

// openLocal opens the local database: WAL, synchronous=FULL (see the
// package comment), one connection (SQLite has one writer; the relay's
// reads are short).
func openLocal(ctx context.Context, path string) (*sql.DB, error) {
	// A short busy wait: SQLite's busy handler does not see a context, so
	// insertEvents waits for a lock another connection holds in steps of
	// busyStep, looking at its deadline between them.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout("+strconv.Itoa(int(busyStep/time.Millisecond))+")")
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
	if err := s.rs.Fence.Join(ctx); err != nil {
		return fmt.Errorf("outbox-local setup: %w", err)
	}
	// A late member (a round went on without it) relays nothing as it is:
	// the load's round makes it catch up (catchUp) first.
	if err := s.drain(ctx); err != nil && !errors.Is(err, redisstock.ErrLate) {
		return fmt.Errorf("outbox-local setup: %w", err)
	}
	return s.skus.Load(ctx, s.rs, s.db)
}

// busyStep is how long one local write waits for a lock another
// connection holds before insertEvents looks at its deadline again.
const busyStep = 20 * time.Millisecond

// insertEvents appends events in one SQLite transaction (one WAL fsync).
// It honours ctx's deadline: a lock held by another connection (another
// process on the file) is waited for in steps of busyStep, never past the
// deadline, whose error the result then wraps.
func (s *Strategy) insertEvents(ctx context.Context, evs []event) error {
	for {
		err := s.insertOnce(ctx, evs)
		if err == nil {
			return nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("%w (%w)", err, cerr)
		}
		if !isBusy(err) {
			return err
		}
		if !clock.Sleep(ctx, busyStep) {
			return fmt.Errorf("%w (%w)", err, ctx.Err())
		}
	}
}

// isBusy reports SQLite's "database is locked" (SQLITE_BUSY): another
// connection holds the file's write lock.
func isBusy(err error) bool {
	var se interface{ Code() int }
	if errors.As(err, &se) && se.Code()&0xff == 5 { // SQLITE_BUSY and its extended codes
		return true
	}
	return strings.Contains(err.Error(), "database is locked") || strings.Contains(err.Error(), "SQLITE_BUSY")
}

// errLocalFail: a local write blocked by the local-fail fault until its
// deadline.
var errLocalFail = errors.New("local table takes no write (local-fail fault)")

// localStall blocks a local write while the local-fail fault is on
// (cfg.LocalFailing), looking every busyStep, until it is off (nil) or
// ctx ends (errLocalFail with ctx's error).
func (s *Strategy) localStall(ctx context.Context) error {
	for s.cfg.LocalFailing != nil && s.cfg.LocalFailing() {
		if !clock.Sleep(ctx, busyStep) {
			return fmt.Errorf("outbox-local: %w: %w", errLocalFail, ctx.Err())
		}
	}
	return nil
}

// insertOnce is one attempt of insertEvents.
func (s *Strategy) insertOnce(ctx context.Context, evs []event) error {
	if err := s.localStall(ctx); err != nil {
		return err
	}
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
	now := clock.Now().UnixNano()
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
// context of its own, which the caller's cancellation does not end (the
// Redis half is done: a service dropping the call must not leave it
// without its event) but which keeps the operation's deadline: the
// caller's, or OpTimeout from now if that comes first. An event that
// could not be appended is kept (unsent) and appended again before the
// next relay pass; the caller must then answer "outcome unknown".
func (s *Strategy) appendEvent(ctx context.Context, e event) error {
	return s.appendQueued(ctx, e, nil)
}

// appendQueued is appendEvent that calls onQueued (when not nil) once the
// event holds its place in the group commit's queue (see
// groupcommit.Group.DoQueued), or once the append failed.
func (s *Strategy) appendQueued(ctx context.Context, e event, onQueued func()) error {
	called := false
	once := func() {
		if !called && onQueued != nil {
			called = true
			onQueued()
		}
	}
	defer once()
	deadline := time.Now().Add(s.cfg.OpTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	actx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	err := s.appends.DoQueued(actx, "", e, once)
	if err != nil {
		s.appendFailures.Add(1)
		s.unsentMu.Lock()
		s.unsent = append(s.unsent, e)
		s.unsentMu.Unlock()
	}
	return err
}

// flushUnsent appends the events kept by failed appends (appendEvent) in
// one local transaction, bounded by OpTimeout; on failure they stay kept. Called with relayMu
// held (the relay's first step).
func (s *Strategy) flushUnsent(ctx context.Context) error {
	s.unsentMu.Lock()
	evs := s.unsent
	s.unsent = nil
	s.unsentMu.Unlock()
	if len(evs) == 0 {
		return nil
	}
	actx, cancel := context.WithTimeout(ctx, s.cfg.OpTimeout)
	defer cancel()
	if err := s.insertEvents(actx, evs); err != nil {
		s.unsentMu.Lock()
		s.unsent = append(evs, s.unsent...)
		s.unsentMu.Unlock()
		return fmt.Errorf("outbox-local: append kept events: %w", err)
	}
	return nil
}

// unsentCount is how many events failed appends keep.
func (s *Strategy) unsentCount() int {
	s.unsentMu.Lock()
	defer s.unsentMu.Unlock()
	return len(s.unsent)
}

// dropUnsent forgets the kept events, as a process crash would (tests).
func (s *Strategy) dropUnsent() {
	s.unsentMu.Lock()
	s.unsent = nil
	s.unsentMu.Unlock()
}

// unsentDecisions is the set of orders with a decision among the kept
// events.
func (s *Strategy) unsentDecisions() map[string]bool {
	s.unsentMu.Lock()
	defer s.unsentMu.Unlock()
	out := map[string]bool{}
	for _, e := range s.unsent {
		if e.kind != kindReserve {
			out[e.orderID] = true
		}
	}
	return out
}

func deadlineMS(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// Reserve runs the Lua Try, then appends the reserve event locally, and
// answers only after that append committed: the outbox's rule. A repeat
// of an order Redis already holds (reserved or confirmed) appends the
// reserve event again (the relay ignores a reserve of an order MySQL has),
// so its answer too says the reservation is durable, whether or not the
// first attempt's append is done. If the append fails (or outlives the
// operation's deadline) the answer is inventory.ErrOutcomeUnknown: the
// reservation stands in Redis, its event is kept and appended again before
// the next relay pass (appendEvent), and the sweeper releases it at its
// deadline if nobody confirms it. It is never undone behind the back of a
// repeat that may have been acknowledged meanwhile. A Redis that restarted
// is rebuilt first (redisstock.Fence, gated: the rebuild drains the local
// table into MySQL and reads MySQL while no operation of this instance
// writes Redis).
func (s *Strategy) Reserve(ctx context.Context, r inventory.Reservation) error {
	for attempt := 0; ; attempt++ {
		if err := s.rs.Fence.Enter(ctx); err != nil {
			return fmt.Errorf("reserve %s: %w", r.OrderID, err)
		}
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
	mu := s.stripe(r.SKU)
	if !mu.TryRLock() {
		if orderWaitHook != nil {
			orderWaitHook()
		}
		mu.RLock()
	}
	held := true
	unlock := func() {
		if held {
			held = false
			mu.RUnlock()
		}
	}
	defer unlock()
	if _, err := s.rs.Try(ctx, r); err != nil {
		return err
	}
	e := event{orderID: r.OrderID, sku: r.SKU, qty: r.Qty, kind: kindReserve, deadline: deadlineMS(r.Deadline), buyer: r.Buyer}
	if err := s.appendQueued(ctx, e, unlock); err != nil {
		return fmt.Errorf("reserve %s: %w: %w", r.OrderID, inventory.ErrOutcomeUnknown, err)
	}
	return nil
}

// errVanished: a decision found no Redis record of an order whose record
// it had read (Redis lost its data in between); decide rebuilds and tries
// again instead of answering "unknown order" — or acknowledging a cancel
// that released nothing.
var errVanished = errors.New("redis record vanished")

// errNoHash: a decision met a live reservation without its stock hash (a
// Redis that lost its data); decide leaves the fence and rebuilds.
var errNoHash = redisstock.ErrNoStockHash

// Confirm decides the order in Redis (confirmed, or expired past its
// deadline) and appends the decision locally; it answers nil only once a
// confirmed event is in the local table — a repeat of a confirm Redis
// already holds appends the decision again (the relay moves an order
// once), so it is never acknowledged on the strength of a first attempt
// whose append may still fail. An order Redis does not know is looked for
// again after the fence's check (a Redis that lost its data is rebuilt
// first, from MySQL and the local table), then in MySQL (elsewhere: an
// order decided before the rebuild is there alone — a repeat of a confirm
// MySQL holds is acknowledged) before the answer is
// inventory.ErrUnknownOrder, or ErrOutcomeUnknown while a member the
// rebuild went on without has not caught up.
func (s *Strategy) Confirm(ctx context.Context, ref inventory.OrderRef) error {
	res, want, err := s.rs.ConfirmTarget(ctx, ref)
	if errors.Is(err, inventory.ErrUnknownOrder) {
		if rerr := s.rs.Ready(ctx); rerr != nil {
			return fmt.Errorf("confirm %s: %w", ref.OrderID, rerr)
		}
		res, want, err = s.rs.ConfirmTarget(ctx, ref)
		if errors.Is(err, inventory.ErrUnknownOrder) {
			// Decided before a rebuild (MySQL holds it), or maybe in a
			// late member's table: not unknown (elsewhere).
			st, lerr := s.elsewhere(ctx, ref)
			switch {
			case lerr != nil:
				return fmt.Errorf("confirm %s: %w", ref.OrderID, lerr)
			case st == "":
				return err
			case st == inventory.StateConfirmed:
				return nil // a repeat: the decision stands in MySQL
			}
			return fmt.Errorf("confirm %s: order is %s: %w", ref.OrderID, st, inventory.ErrAlreadyFinal)
		}
	}
	if err != nil {
		return err
	}
	if want == "" {
		want = inventory.StateConfirmed // a repeat: the decision stands
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
// appends the decision locally; a repeat (the order already cancelled or
// expired) appends the standing decision again before it answers. A
// cancel of an order Redis does not know first has the fence check for a
// Redis that lost its data (and rebuilds it) and looks the order up in
// MySQL (elsewhere: a decision made before the rebuild stands), then
// leaves a cancelled marker in Redis (a late Try is refused) and a marker
// event — but answers ErrOutcomeUnknown instead while a member the
// rebuild went on without has not caught up (its table may hold the
// order's reserve, which the marker would refuse).
func (s *Strategy) Cancel(ctx context.Context, ref inventory.OrderRef) error {
	res, _, err := s.rs.CancelTarget(ctx, ref)
	if err == nil && res.State == "" {
		// Unknown to Redis: a Redis that lost its data is rebuilt first.
		if rerr := s.rs.Ready(ctx); rerr != nil {
			return fmt.Errorf("cancel %s: %w", ref.OrderID, rerr)
		}
		res, _, err = s.rs.CancelTarget(ctx, ref)
		if err == nil && res.State == "" {
			// Decided before a rebuild (MySQL holds it), or maybe in a
			// late member's table: no marker then (elsewhere).
			st, lerr := s.elsewhere(ctx, ref)
			switch {
			case lerr != nil:
				return fmt.Errorf("cancel %s: %w", ref.OrderID, lerr)
			case st == inventory.StateCancelled || st == inventory.StateExpired:
				return nil // a repeat: the release stands in MySQL
			case st != "":
				return fmt.Errorf("cancel %s: order is %s: %w", ref.OrderID, st, inventory.ErrAlreadyFinal)
			}
		}
	}
	if err != nil {
		return err
	}
	want := inventory.StateCancelled
	if res.State == inventory.StateExpired {
		want = inventory.StateExpired // a repeat: the expiry stands
	}
	got, err := s.decide(ctx, ref, res, want)
	if err != nil {
		return err
	}
	if got == inventory.StateConfirmed || got == inventory.StateRefunded {
		return fmt.Errorf("cancel %s: order is %s: %w", ref.OrderID, got, inventory.ErrAlreadyFinal)
	}
	return nil
}

// Refund decides the refund in Redis, where this strategy decides every
// order: refund.lua gives the units of a record still confirmed back to
// available and marks it refunded in one script (the "already released"
// check: a repeat, a racing refund or a cancel then moves nothing), and
// the decision is appended to the local table before the answer, under
// the SKU's release stripe as a cancel's is; the relay then applies it to
// MySQL once (confirmed → refunded, sold → available). A repeat appends
// the standing decision again, which the relay applies once. An order
// Redis does not know is looked for again after the fence's check (a Redis
// that lost its data is rebuilt first), then is ErrUnknownOrder; a
// reserved one is ErrNotConfirmed, a cancelled or expired one
// ErrAlreadyFinal. A record past its retention (Retain, default 1 h) is
// gone from Redis: a refund that late is refused as unknown.
func (s *Strategy) Refund(ctx context.Context, ref inventory.OrderRef) error {
	res, err := s.rs.Get(ctx, ref)
	if errors.Is(err, redisstock.ErrNoReservation) {
		if rerr := s.rs.Ready(ctx); rerr != nil {
			return fmt.Errorf("refund %s: %w", ref.OrderID, rerr)
		}
		res, err = s.rs.Get(ctx, ref)
	}
	switch {
	case errors.Is(err, redisstock.ErrNoReservation):
		return fmt.Errorf("refund %s: %w", ref.OrderID, inventory.ErrUnknownOrder)
	case err != nil:
		return fmt.Errorf("refund %s: %w", ref.OrderID, err)
	case res.State == inventory.StateReserved:
		return fmt.Errorf("refund %s: %w", ref.OrderID, inventory.ErrNotConfirmed)
	case res.State != inventory.StateConfirmed && res.State != inventory.StateRefunded:
		return fmt.Errorf("refund %s: order is %s: %w", ref.OrderID, res.State, inventory.ErrAlreadyFinal)
	}
	got, err := s.decide(ctx, ref, res, inventory.StateRefunded)
	switch {
	case err != nil:
		return err
	case got == inventory.StateRefunded:
		return nil
	case got == "":
		return fmt.Errorf("refund %s: %w", ref.OrderID, inventory.ErrUnknownOrder)
	case got == inventory.StateReserved:
		return fmt.Errorf("refund %s: %w", ref.OrderID, inventory.ErrNotConfirmed)
	}
	return fmt.Errorf("refund %s: order is %s: %w", ref.OrderID, got, inventory.ErrAlreadyFinal)
}

// decide moves the Redis reservation to want (a missing one gets a
// cancelled marker when want is cancelled) and appends the decision that
// stands: the one this call made, or one made before (by an earlier
// attempt whose append may have failed, or by a racing call), again — the
// relay applies a decision once. It returns the state that stands ("" for
// no reservation) only after that append committed; a failed append is
// inventory.ErrOutcomeUnknown (the event is kept and appended again, see
// appendEvent). A live reservation without its stock hash (Redis lost its
// data) has the fence rebuild first.
func (s *Strategy) decide(ctx context.Context, ref inventory.OrderRef, res redisstock.Reservation, want inventory.OrderState) (inventory.OrderState, error) {
	for attempt := 0; ; attempt++ {
		got, err := s.decideOnce(ctx, ref, res, want)
		if !(errors.Is(err, errNoHash) || errors.Is(err, errVanished)) || attempt == 1 {
			return got, err
		}
		if err := s.rs.Ready(ctx); err != nil {
			return "", fmt.Errorf("%s %s: %w", want, ref.OrderID, err)
		}
	}
}

// decideOnce is decide inside the fence.
func (s *Strategy) decideOnce(ctx context.Context, ref inventory.OrderRef, res redisstock.Reservation, want inventory.OrderState) (inventory.OrderState, error) {
	// The Redis move and its event are one step for a rebuild: it drains
	// the events after every move it may not see (redisstock.Fence).
	if err := s.rs.Fence.Enter(ctx); err != nil {
		return "", fmt.Errorf("%s %s: %w", want, ref.OrderID, err)
	}
	defer s.rs.Fence.Leave()
	unlock := func() {}
	if want != inventory.StateConfirmed {
		// A release: its event goes to the table before any take of the
		// unit it gives back (Strategy.order).
		mu := s.stripe(ref.SKU)
		mu.Lock()
		held := true
		unlock = func() {
			if held {
				held = false
				mu.Unlock()
			}
		}
		defer unlock()
	}
	marker := res.State == "" && want == inventory.StateCancelled
	var prev inventory.OrderState
	var err error
	if want == inventory.StateRefunded {
		// Redis decides the refund: only a record still confirmed moves
		// (refund.lua), so a repeat, a racing refund or a cancel finds it
		// refunded and moves nothing.
		prev, err = s.rs.Refund(ctx, ref, true)
		switch prev {
		case inventory.StateConfirmed:
			prev = inventory.StateReserved // moved now, as a Finish that found it live
		case inventory.StateReserved:
			return inventory.StateReserved, nil // not confirmed: nothing to decide
		}
	} else {
		prev, err = s.rs.Finish(ctx, ref, want, marker)
	}
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", want, ref.OrderID, err)
	}
	if decisionHook != nil {
		decisionHook(ref, want)
	}
	got := want
	switch {
	case prev == inventory.StateReserved:
	case prev == "" && marker:
		res.Qty = 0
	case prev == "" && res.State != "":
		// The record read a moment ago is gone: Redis lost its data in
		// between (a restart nobody has noticed yet). Rebuild, then decide.
		return "", fmt.Errorf("%s %s: %w", want, ref.OrderID, errVanished)
	case prev == "":
		return "", nil
	default:
		// Decided before: append what stands, with the record's own
		// quantity (a marker's is 0).
		got = prev
		cur, err := s.rs.Get(ctx, ref)
		if err != nil {
			return "", fmt.Errorf("%s %s: %w", want, ref.OrderID, err)
		}
		res = cur
	}
	e := event{orderID: ref.OrderID, sku: ref.SKU, qty: res.Qty, kind: string(got), deadline: deadlineMS(res.Deadline), buyer: res.Buyer}
	if err := s.appendQueued(ctx, e, unlock); err != nil {
		// The decision stands in Redis; its event is kept (appendEvent).
		return "", fmt.Errorf("%s %s: %w: %w", want, ref.OrderID, inventory.ErrOutcomeUnknown, err)
	}
	return got, nil
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
		{s.cfg.OutboxPeriod, func(ctx context.Context) error {
			_, err := s.relay(ctx)
			if errors.Is(err, redisstock.ErrLate) {
				return nil // the heartbeat's round catches up first (catchUp)
			}
			return err
		}},
		{s.cfg.ReconcilePeriod, s.reconcile},
		{redisstock.BeatPeriod, s.rs.Beat},
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

// drainAll is the fence's Drain: every decision of this instance reaches
// MySQL before a rebuild reads it — the local table and the kept events
// are relayed, then every order MySQL holds as reserved that Redis (kept
// through a restart) holds as decided gets its decision appended and
// relayed too (repairDecisions, forced), so a rebuild cannot offer again a
// unit a decision only Redis held had taken.
func (s *Strategy) drainAll(ctx context.Context) error {
	if err := s.drain(ctx); err != nil {
		return err
	}
	if err := s.repairDecisions(ctx, true); err != nil {
		return err
	}
	return s.drain(ctx)
}

// drain relays until the local table (and the kept events) is empty.
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
	now := clock.Now()
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

// Settle expires due reservations, runs a reconciler pass, appends the
// decision of every order MySQL holds as reserved that Redis has decided
// (whatever its age: repairDecisions, forced) and drains the local table
// (and the kept events) into MySQL: afterwards MySQL holds every event
// this instance answered for and every decision Redis holds of an order
// MySQL knows. Other processes' local tables are theirs to settle.
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
	// Every order still decided in Redis only, whatever its age.
	if err := s.repairDecisions(ctx, true); err != nil {
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
	s.rs.Fence.Stop()
	// An instance that leaves nothing undrained leaves the fence: no round
	// waits for it. One that leaves a backlog stays a member until a
	// restart on its directory relays it (or its lease runs out).
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.OpTimeout)
	if n, err := s.backlog(ctx); err == nil && n == 0 && s.unsentCount() == 0 {
		_ = s.rs.Fence.Quit(ctx)
	}
	cancel()
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
		"redis_fence_rounds":           float64(s.rs.Fence.Rounds()),
		"redis_fence_presumed_dead":    float64(s.rs.Fence.PresumedDead()),
		"redis_fence_catch_ups":        float64(s.rs.Fence.CatchUps()),
		"outbox_local_late_refused":    float64(s.lateRefused.Load()),
	}
	for k, v := range s.appends.Stats().Counters("append") {
		m[k] = v
	}
	return m
}
