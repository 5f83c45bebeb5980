package luatcc

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies/internal/redisstock"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// The degradation switch (降级开关, --degrade mysql).
//
// Detection: every Redis call of a buyer's operation gets its own deadline
// (Config.DegradeTimeout); a call that fails for any reason but a domain
// refusal (out of stock, already final…) is a Redis failure, and
// Config.DegradeErrors failures within a second trip the switch. Once
// tripped, the next operation on each SKU moves that SKU's authority to
// MySQL, and its reserves, confirms and cancels run as a row-locked MySQL
// strategy does (conditional updates of the inventory row, the order row
// as the state machine), until Redis answers again.
//
// The rule that keeps a unit from being sold twice across the switch:
//   - Redis's holds move with the authority. Each instance remembers the
//     Trys it sent and has not seen decided (acknowledged ones, and those
//     whose reply it lost: they may have run, or run late on a server
//     that resumes); the switch writes them into MySQL as reserved orders
//     and takes their units from MySQL's available, in one transaction
//     with the authority row, before any MySQL-mode reserve of the SKU
//     runs. So MySQL never sells a unit an acknowledged Redis reservation
//     of this instance holds, and that reservation's confirm finds its
//     order in MySQL whatever happened to Redis (a restart that lost it
//     included).
//   - No rebuild of Redis can miss a MySQL-mode sale: every MySQL-mode
//     reserve reads the SKU's sku_authority row under a shared lock and
//     runs only while it says 'mysql'; the switch back first drops the
//     stock hash (Trys fail on a missing hash), then sets the row to
//     'redis' (that update waits for every MySQL-mode reserve in flight,
//     of every instance), drops the hash again and rebuilds it from MySQL
//     (redisstock.Reload: total and sold from MySQL, MySQL's reserved
//     orders recorded in Redis, MySQL's decisions given to the live
//     reservations). Only then does this instance Try in Redis again.
//   - A rebuild that finds Redis holding more than MySQL has left (a Redis
//     reservation MySQL never heard of, whose units MySQL sold) fails and
//     leaves the SKU in MySQL mode; lapsed Redis reservations are expired
//     first, so the next attempt, after their deadlines, succeeds.
//
// Every confirm of a reservation either store made is a conditional
// update of MySQL's row (available or occupied ≥ qty), so MySQL's sold
// never passes its total whatever the switch does. Known gap: an instance
// that never saw Redis fail (a partition of another instance only) keeps
// selling in Redis until its next pass reads the authority table, and its
// holds were not moved; its confirms may then be refused for stock.
// Refunds do not go through the switch.

// degradeWindow is the window in which Config.DegradeErrors failures trip
// the switch.
const degradeWindow = time.Second

// healthyProbes is how many successive passes must find Redis answering
// before the SKUs switch back.
const healthyProbes = 2

// maxSwitchEvents bounds the per-SKU switch times kept for the report.
const maxSwitchEvents = 20

// degrader is the switch of one strategy instance. Safe for concurrent use.
type degrader struct {
	s       *Strategy
	orders  sqlstore.Orders
	timeout time.Duration
	errs    int

	mu      sync.Mutex // the failure window and the SKU table
	n       int
	first   time.Time
	skus    map[string]*skuMode
	tripped atomic.Bool
	healthy atomic.Int64 // successive passes that found Redis answering

	toMySQL, toRedis, imported, importShort, backFailed      atomic.Int64
	mysqlReserves, mysqlConfirms, mysqlCancels, mysqlExpired atomic.Int64
	redisFailures, firstSwitchMs, lastBackMs, drained        atomic.Int64
	// passedAt is when the last recovery pass that ran to its end began
	// (Unix ms): every reservation lapsed before it has a MySQL decision.
	passedAt atomic.Int64

	evMu   sync.Mutex
	events []switchEvent
}

// skuMode is one SKU's authority in this instance and the Redis holds it
// would move to MySQL.
type skuMode struct {
	mu    sync.Mutex
	mysql bool
	held  map[string]heldRes // order id → a Try sent and not seen decided
}

// heldRes is a Try this instance sent.
type heldRes struct {
	qty      int64
	deadline time.Time
	buyer    string
}

// switchEvent is one SKU's switch, for the report.
type switchEvent struct {
	sku string
	to  string
	at  time.Time
}

func newDegrader(s *Strategy) *degrader {
	return &degrader{s: s, orders: sqlstore.Orders{DB: s.db, Move: moveHeld},
		timeout: s.cfg.DegradeTimeout, errs: s.cfg.DegradeErrors, skus: map[string]*skuMode{}}
}

// moveHeld moves a MySQL-held order's units out of occupied, only if the
// row has them.
func moveHeld(ctx context.Context, tx *sql.Tx, ord sqlstore.Order, m sqlstore.Movement) error {
	q := "UPDATE inventory SET occupied=occupied-?, sold=sold+? WHERE sku=? AND occupied>=?"
	if m == sqlstore.ToAvailable {
		q = "UPDATE inventory SET occupied=occupied-?, available=available+? WHERE sku=? AND occupied>=?"
	}
	out, err := tx.ExecContext(ctx, q, ord.Qty, ord.Qty, ord.SKU, ord.Qty)
	if err != nil {
		return fmt.Errorf("move %s: %w", ord.ID, err)
	}
	if n, _ := out.RowsAffected(); n == 0 {
		return fmt.Errorf("move %s: inventory %s occupies fewer than %d units", ord.ID, ord.SKU, ord.Qty)
	}
	return nil
}

func (d *degrader) mode(sku string) *skuMode {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.skus[sku]
	if m == nil {
		m = &skuMode{held: map[string]heldRes{}}
		d.skus[sku] = m
	}
	return m
}

// isDomain reports an error that is an answer, not a failure of Redis.
func isDomain(err error) bool {
	return errors.Is(err, inventory.ErrOutOfStock) || errors.Is(err, inventory.ErrAlreadyFinal) ||
		errors.Is(err, inventory.ErrUnknownOrder) || errors.Is(err, inventory.ErrLimitExceeded) ||
		errors.Is(err, inventory.ErrConflict)
}

// fail counts a Redis failure and reports whether the switch is tripped.
func (d *degrader) fail() bool {
	d.redisFailures.Add(1)
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	if d.n == 0 || now.Sub(d.first) > degradeWindow {
		d.n, d.first = 0, now
	}
	d.n++
	if d.n >= d.errs {
		d.tripped.Store(true)
	}
	return d.tripped.Load()
}

// ok notes a Redis call that answered.
func (d *degrader) ok() {
	d.mu.Lock()
	d.n = 0
	d.mu.Unlock()
}

// redisCtx bounds one Redis call.
func (d *degrader) redisCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.timeout)
}

// enter returns the SKU's mode, switching it to MySQL first when the
// switch is tripped; mysql says which path the operation takes.
func (d *degrader) enter(ctx context.Context, sku string) (m *skuMode, mysql bool, err error) {
	m = d.mode(sku)
	if d.tripped.Load() {
		if err := d.switchToMySQL(ctx, sku, m); err != nil {
			return m, false, err
		}
	}
	m.mu.Lock()
	mysql = m.mysql
	m.mu.Unlock()
	return m, mysql, nil
}

func (d *degrader) reserve(ctx context.Context, r inventory.Reservation) error {
	m, mysql, err := d.enter(ctx, r.SKU)
	if err != nil {
		return err
	}
	if !mysql {
		// Registered under the SKU's lock, so a switch either sees this Try
		// (and moves its hold) or ran before it (and the Try goes to MySQL).
		m.mu.Lock()
		mysql = m.mysql
		if !mysql {
			m.held[r.OrderID] = heldRes{qty: r.Qty, deadline: r.Deadline, buyer: r.Buyer}
		}
		m.mu.Unlock()
	}
	if mysql {
		return d.mysqlReserve(ctx, r)
	}
	rctx, cancel := d.redisCtx(ctx)
	_, err = d.s.rs.Try(rctx, r)
	cancel()
	if errors.Is(err, redisstock.ErrFenced) {
		// Redis restarted: its holds move to MySQL and it is rebuilt
		// (drain, then the fence's rebuild); then the Try runs.
		if err = d.s.rs.Ready(ctx); err == nil {
			rctx, cancel := d.redisCtx(ctx)
			_, err = d.s.rs.Try(rctx, r)
			cancel()
		}
	}
	switch {
	case err == nil:
		d.ok()
		return nil
	case isDomain(err):
		d.ok()
		d.forget(m, r.OrderID)
		return err
	case ctx.Err() != nil:
		return err
	}
	// The Try may have run (or may run late): its hold stays registered.
	if d.fail() {
		if serr := d.switchToMySQL(ctx, r.SKU, m); serr == nil {
			return d.mysqlReserve(ctx, r)
		}
	}
	return err
}

func (d *degrader) forget(m *skuMode, id string) {
	m.mu.Lock()
	delete(m.held, id)
	m.mu.Unlock()
}

// finish is a confirm or cancel (to) through the switch.
func (d *degrader) finish(ctx context.Context, ref inventory.OrderRef, to inventory.OrderState) error {
	m, mysql, err := d.enter(ctx, ref.SKU)
	if err != nil {
		return err
	}
	if !mysql {
		err = d.finishRedis(ctx, ref, to)
		if err == nil || isDomain(err) || !errors.Is(err, errRedisRead) || ctx.Err() != nil {
			if err == nil || isDomain(err) {
				d.forget(m, ref.OrderID)
			}
			return err
		}
		if !d.fail() {
			return err
		}
		if serr := d.switchToMySQL(ctx, ref.SKU, m); serr != nil {
			return err
		}
	}
	if to == inventory.StateConfirmed {
		d.mysqlConfirms.Add(1)
	} else {
		d.mysqlCancels.Add(1)
	}
	return d.orders.Finish(ctx, ref, to)
}

// errRedisRead marks a confirm or cancel whose Redis read failed (nothing
// was decided): it may take the MySQL path.
var errRedisRead = errors.New("redis read failed")

// finishRedis is Confirm or Cancel on the Redis path, with its Redis read
// bounded by the switch's timeout.
func (d *degrader) finishRedis(ctx context.Context, ref inventory.OrderRef, to inventory.OrderState) error {
	rctx, cancel := d.redisCtx(ctx)
	defer cancel()
	if to == inventory.StateConfirmed {
		res, want, err := d.s.rs.ConfirmTarget(rctx, ref)
		if errors.Is(err, inventory.ErrUnknownOrder) {
			// Unknown to a Redis that restarted and lost it? The fence
			// moves the holds to MySQL and rebuilds first; then read again.
			if rerr := d.s.rs.Ready(rctx); rerr != nil {
				return fmt.Errorf("confirm %s: %w: %w", ref.OrderID, errRedisRead, rerr)
			}
			res, want, err = d.s.rs.ConfirmTarget(rctx, ref)
		}
		if err != nil && !isDomain(err) {
			return fmt.Errorf("confirm %s: %w: %w", ref.OrderID, errRedisRead, err)
		}
		d.ok()
		if errors.Is(err, inventory.ErrUnknownOrder) {
			// Redis lost the record (or it outlived Retain): the TCC log
			// answers a client that asks again, as without the switch.
			return sqlstore.ConfirmFromLog(ctx, d.s.db, ref, err)
		}
		if err != nil || want == "" {
			return err
		}
		return d.s.confirmDecided(ctx, ref, res, want)
	}
	res, proceed, err := d.s.rs.CancelTarget(rctx, ref)
	if err != nil && !isDomain(err) {
		return fmt.Errorf("cancel %s: %w: %w", ref.OrderID, errRedisRead, err)
	}
	d.ok()
	if err != nil || !proceed {
		return err
	}
	return d.s.cancelDecided(ctx, ref, res)
}

// restock commits the restock in MySQL, the system of record, then gives
// Redis its units within the switch's timeout — unless the SKU sells from
// MySQL (the switch back rebuilds Redis from MySQL's total). A Redis write
// that fails is a Redis failure, not the restock's: Redis stays short of
// the units, never over, until the recovery pass catches it up.
func (d *degrader) restock(ctx context.Context, r inventory.Restock) error {
	version, applied, err := d.s.rs.RestockMySQL(ctx, d.s.db, r)
	if err != nil || !applied {
		return err
	}
	m := d.mode(r.SKU)
	m.mu.Lock()
	mysql := m.mysql
	m.mu.Unlock()
	if mysql || d.tripped.Load() {
		return nil
	}
	if err := d.s.rs.ApplyRestock(ctx, r, version, d.timeout); err != nil && ctx.Err() == nil {
		d.fail()
	} else if err == nil {
		d.ok()
	}
	return nil
}

// mysqlReserve reserves in MySQL while it has the SKU's authority: the
// order row, the buyer's hold, then the units, only while the authority
// row (read under a shared lock) says mysql and MySQL has them.
func (d *degrader) mysqlReserve(ctx context.Context, r inventory.Reservation) error {
	for {
		mode, err := d.mysqlReserveOnce(ctx, r)
		if err != nil || mode == modeMySQL {
			return err
		}
		m := d.mode(r.SKU)
		if mode == modeRebuilding {
			// A switch back is rebuilding Redis: wait for it (this
			// instance's holds the SKU's lock), then look again.
			m.mu.Lock()
			mysql := m.mysql
			m.mu.Unlock()
			if !mysql {
				return d.reserve(ctx, r)
			}
			if !clock.Sleep(ctx, d.timeout/10) {
				return ctx.Err()
			}
			continue
		}
		// Another instance gave the SKU back to Redis and rebuilt it:
		// follow, and Try there.
		m.mu.Lock()
		m.mysql = false
		m.mu.Unlock()
		return d.reserve(ctx, r)
	}
}

// The values of sku_authority.mode. While a switch back rebuilds Redis
// the row says rebuilding: MySQL-mode reserves wait, and no instance takes
// it for Redis yet. No row: redis.
const (
	modeMySQL      = "mysql"
	modeRebuilding = "rebuilding"
	modeRedis      = "redis"
)

// mysqlReserveOnce is one MySQL-mode reserve, run only while the
// authority row says mysql; mode is what the row said.
func (d *degrader) mysqlReserveOnce(ctx context.Context, r inventory.Reservation) (mode string, err error) {
	err = sqlstore.InTx(ctx, d.s.db, func(tx *sql.Tx) error {
		mode = modeRedis
		err := tx.QueryRowContext(ctx, "SELECT mode FROM sku_authority WHERE sku=? LOCK IN SHARE MODE", r.SKU).Scan(&mode)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("reserve: authority: %w", err)
		}
		if mode != modeMySQL {
			return nil
		}
		if err := sqlstore.InsertOrder(ctx, tx, r, inventory.StateReserved); err != nil {
			return err
		}
		if err := sqlstore.HoldForBuyer(ctx, tx, r); err != nil {
			return err
		}
		out, err := tx.ExecContext(ctx, "UPDATE inventory SET available=available-?, occupied=occupied+? WHERE sku=? AND available>=?",
			r.Qty, r.Qty, r.SKU, r.Qty)
		if err != nil {
			return fmt.Errorf("reserve: %w", err)
		}
		if n, _ := out.RowsAffected(); n == 0 {
			return inventory.ErrOutOfStock
		}
		return nil
	})
	if sqlstore.IsDuplicate(err) {
		// A repeat: of a MySQL-mode reserve, or of a Try whose hold the
		// switch moved.
		err = sqlstore.ReserveRepeat(ctx, d.s.db, r.OrderID)
	}
	if err == nil && mode == modeMySQL {
		d.mysqlReserves.Add(1)
	}
	return mode, err
}

// switchToMySQL gives the SKU's authority to MySQL, moving the holds of
// this instance's Redis Trys into MySQL first (see the rule above).
func (d *degrader) switchToMySQL(ctx context.Context, sku string, m *skuMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mysql {
		return nil
	}
	now := time.Now()
	var moved, short int64
	err := sqlstore.InTx(ctx, d.s.db, func(tx *sql.Tx) (err error) {
		if _, err := tx.ExecContext(ctx, "INSERT INTO sku_authority (sku, mode, epoch, changed_at) VALUES (?,'mysql',1,?) "+
			"ON DUPLICATE KEY UPDATE mode='mysql', epoch=epoch+1, changed_at=VALUES(changed_at)", sku, now.UTC()); err != nil {
			return fmt.Errorf("authority: %w", err)
		}
		moved, short, err = moveHolds(ctx, tx, sku, m.held, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("degrade %s to mysql: %w", sku, err)
	}
	m.mysql = true
	m.held = map[string]heldRes{}
	d.imported.Add(moved)
	d.importShort.Add(short)
	d.toMySQL.Add(1)
	d.firstSwitchMs.CompareAndSwap(0, now.UnixMilli())
	d.event(sku, "mysql", now)
	return nil
}

// moveHolds writes the holds still within their deadline into MySQL, in
// tx, as reserved orders whose units leave MySQL's available; a hold whose
// order MySQL has a row for already (decided, or moved before) is left.
// short counts holds MySQL had no units for (drift): not moved, so their
// confirms will be refused rather than oversell.
func moveHolds(ctx context.Context, tx *sql.Tx, sku string, held map[string]heldRes, now time.Time) (moved, short int64, err error) {
	ids := make([]string, 0, len(held))
	for id := range held {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		h := held[id]
		r := inventory.Reservation{OrderID: id, SKU: sku, Qty: h.qty, Deadline: h.deadline, Buyer: h.buyer}
		st := inventory.StateReserved
		if !h.deadline.IsZero() && !h.deadline.After(now) {
			// Lapsed before any pass expired it: its expiry, which Redis
			// may have lost with the reservation, is written here (it
			// never took units from MySQL's row).
			st = inventory.StateExpired
		}
		err := sqlstore.InsertOrder(ctx, tx, r, st)
		if sqlstore.IsDuplicate(err) || err == nil && st == inventory.StateExpired {
			continue
		}
		if err != nil {
			return 0, 0, fmt.Errorf("move hold %s: %w", id, err)
		}
		out, err := tx.ExecContext(ctx, "UPDATE inventory SET available=available-?, occupied=occupied+? WHERE sku=? AND available>=?",
			h.qty, h.qty, sku, h.qty)
		if err != nil {
			return 0, 0, fmt.Errorf("move hold %s: %w", id, err)
		}
		if n, _ := out.RowsAffected(); n == 0 {
			if _, err := tx.ExecContext(ctx, "DELETE FROM orders WHERE order_id=?", id); err != nil {
				return 0, 0, fmt.Errorf("move hold %s: %w", id, err)
			}
			short++
			continue
		}
		moved++
	}
	return moved, short, nil
}

// drain is the fence's Drain (redisstock.Fence): before a Redis that
// restarted — and lost the reservations it held, acknowledged or not — is
// rebuilt from MySQL, the holds of this instance's Trys move into MySQL,
// so the rebuild records them again instead of selling their units twice.
// The SKUs stay on Redis; their moved orders are decided in MySQL
// (finishHeld) or expire there.
func (d *degrader) drain(ctx context.Context) error {
	d.mu.Lock()
	ms := make(map[string]*skuMode, len(d.skus))
	for sku, m := range d.skus {
		ms[sku] = m
	}
	d.mu.Unlock()
	for sku, m := range ms {
		m.mu.Lock()
		if m.mysql || len(m.held) == 0 {
			m.mu.Unlock()
			continue
		}
		var moved, short int64
		err := sqlstore.InTx(ctx, d.s.db, func(tx *sql.Tx) (err error) {
			moved, short, err = moveHolds(ctx, tx, sku, m.held, time.Now())
			return err
		})
		if err == nil {
			m.held = map[string]heldRes{}
			d.imported.Add(moved)
			d.importShort.Add(short)
			d.drained.Add(moved)
		}
		m.mu.Unlock()
		if err != nil {
			return fmt.Errorf("degrade: drain %s: %w", sku, err)
		}
	}
	return nil
}

func (d *degrader) event(sku, to string, at time.Time) {
	d.evMu.Lock()
	defer d.evMu.Unlock()
	if len(d.events) < maxSwitchEvents {
		d.events = append(d.events, switchEvent{sku: sku, to: to, at: at})
	}
}

// switchBack gives the SKU back to Redis after rebuilding its stock hash
// from MySQL (see the rule above). On failure the SKU stays in MySQL mode.
func (d *degrader) switchBack(ctx context.Context, sku string, m *skuMode) error {
	s := d.s
	// Lapsed Redis reservations MySQL never heard of are expired first,
	// so the rebuild does not count their units as held — before the
	// SKU's lock, which holds its buyers off: expiry is safe beside them.
	due, err := s.rs.Due(ctx, sku, time.Now(), 0)
	if err != nil {
		return err
	}
	if err := s.expireUndecided(ctx, sku, due, time.Now()); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.mysql {
		return nil
	}
	drop := func() error {
		return s.rs.R.Del(ctx, inventory.RedisStockKey(sku)).Err()
	}
	if err := drop(); err != nil {
		return err
	}
	setMode := func(mode string) error {
		_, err := s.db.ExecContext(ctx, "UPDATE sku_authority SET mode=?, epoch=epoch+1, changed_at=? WHERE sku=?", mode, time.Now().UTC(), sku)
		if err != nil {
			return fmt.Errorf("authority: %w", err)
		}
		return nil
	}
	// Waits out every MySQL-mode reserve in flight (their shared locks);
	// none starts after it.
	if err := setMode(modeRebuilding); err != nil {
		return err
	}
	back := func() error {
		// A reload that read MySQL before the row changed (a fence
		// rebuild, another instance's pass) may have built the hash
		// since the drop: drop and build again, from MySQL read now.
		for range 3 {
			if err := drop(); err != nil {
				return err
			}
			created, err := s.rs.Reload(ctx, s.db, sku)
			if err != nil || created {
				return err
			}
		}
		return errors.New("stock hash rebuilt by someone else each time")
	}
	err = back()
	if err == nil {
		err = setMode(modeRedis)
	}
	if err != nil {
		// Redis not ready for it: MySQL keeps the authority.
		d.backFailed.Add(1)
		if uerr := setMode(modeMySQL); uerr != nil {
			return errors.Join(err, uerr)
		}
		return fmt.Errorf("degrade %s back to redis: %w", sku, err)
	}
	m.mysql = false
	now := time.Now()
	d.toRedis.Add(1)
	d.lastBackMs.Store(now.UnixMilli())
	d.event(sku, "redis", now)
	return nil
}

// tick is one pass of the switch's loop: MySQL-held reservations past
// their deadline are expired; SKUs another instance gave to MySQL follow;
// and once Redis has answered healthyProbes passes in a row, every SKU in
// MySQL mode goes back to Redis.
func (d *degrader) tick(ctx context.Context, force bool) error {
	n, err := d.orders.ExpireDue(ctx)
	d.mysqlExpired.Add(int64(n))
	if n > 0 && d.s.so != nil {
		d.s.so.clearAll() // units came back in MySQL; which SKUs, the count does not say
	}
	if err != nil {
		return fmt.Errorf("degrade: expire: %w", err)
	}
	if err := d.follow(ctx); err != nil {
		return err
	}
	var inMySQL []string
	passed := d.passedAt.Load()
	d.mu.Lock()
	for sku, m := range d.skus {
		m.mu.Lock()
		if m.mysql {
			inMySQL = append(inMySQL, sku)
		}
		for id, h := range m.held {
			// Lapsed before a recovery pass that ran to its end began:
			// that pass decided it (expired, or what MySQL held).
			if !h.deadline.IsZero() && h.deadline.UnixMilli() < passed {
				delete(m.held, id)
			}
		}
		m.mu.Unlock()
	}
	d.mu.Unlock()
	if len(inMySQL) == 0 && !d.tripped.Load() {
		d.healthy.Store(0)
		return nil
	}
	pctx, cancel := d.redisCtx(ctx)
	err = d.s.rs.R.Ping(pctx).Err()
	cancel()
	if err != nil {
		d.healthy.Store(0)
		return nil
	}
	if d.healthy.Add(1) < healthyProbes && !force {
		return nil
	}
	// A Redis that restarted is rebuilt by the fence before anything else.
	if err := d.s.rs.Ready(ctx); err != nil {
		return fmt.Errorf("degrade: %w", err)
	}
	d.tripped.Store(false)
	d.ok()
	sort.Strings(inMySQL)
	var errs []error
	for _, sku := range inMySQL {
		if err := d.switchBack(ctx, sku, d.mode(sku)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// inMySQL reports whether this instance sells sku from MySQL: the
// recovery pass leaves such a SKU to the switch back.
func (d *degrader) inMySQL(sku string) bool {
	d.mu.Lock()
	m := d.skus[sku]
	d.mu.Unlock()
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mysql
}

// follow moves to MySQL the SKUs the authority table gives to MySQL that
// this instance still sells in Redis (another instance switched them).
func (d *degrader) follow(ctx context.Context) error {
	rows, err := d.s.db.QueryContext(ctx, "SELECT sku FROM sku_authority WHERE mode='mysql'")
	if err != nil {
		return fmt.Errorf("degrade: authority: %w", err)
	}
	var skus []string
	for rows.Next() {
		var sku string
		if err := rows.Scan(&sku); err != nil {
			rows.Close()
			return fmt.Errorf("degrade: authority: %w", err)
		}
		skus = append(skus, sku)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("degrade: authority: %w", err)
	}
	for _, sku := range skus {
		m := d.mode(sku)
		m.mu.Lock()
		mysql := m.mysql
		m.mu.Unlock()
		if !mysql {
			if err := d.switchToMySQL(ctx, sku, m); err != nil {
				return err
			}
		}
	}
	return nil
}

// run is the switch's loop, every SweepPeriod until ctx ends.
func (d *degrader) run(ctx context.Context) {
	sqlstore.Every(ctx, d.s.cfg.SweepPeriod, func(ctx context.Context) error { return d.tick(ctx, false) },
		func(error) { d.s.bgErrors.Add(1) })
}

// counters are the switch's figures: how often SKUs switched each way,
// the holds moved to MySQL, the operations MySQL served, and the first
// switch times of up to maxSwitchEvents SKUs (Unix ms, in keys
// degrade_at_<sku>_to_<store>_unix_ms).
func (d *degrader) counters(m map[string]float64) {
	m["degrade_to_mysql"] = float64(d.toMySQL.Load())
	m["degrade_to_redis"] = float64(d.toRedis.Load())
	m["degrade_holds_moved"] = float64(d.imported.Load())
	m["degrade_holds_short"] = float64(d.importShort.Load())
	m["degrade_holds_drained"] = float64(d.drained.Load())
	m["degrade_back_failed"] = float64(d.backFailed.Load())
	m["degrade_redis_failures"] = float64(d.redisFailures.Load())
	m["degrade_mysql_reserves"] = float64(d.mysqlReserves.Load())
	m["degrade_mysql_confirms"] = float64(d.mysqlConfirms.Load())
	m["degrade_mysql_cancels"] = float64(d.mysqlCancels.Load())
	m["degrade_mysql_expired"] = float64(d.mysqlExpired.Load())
	if v := d.firstSwitchMs.Load(); v > 0 {
		m["degrade_first_switch_unix_ms"] = float64(v)
	}
	if v := d.lastBackMs.Load(); v > 0 {
		m["degrade_last_back_unix_ms"] = float64(v)
	}
	d.evMu.Lock()
	defer d.evMu.Unlock()
	for _, e := range d.events {
		k := "degrade_at_" + strings.ReplaceAll(e.sku, " ", "_") + "_to_" + e.to + "_unix_ms"
		if _, seen := m[k]; !seen {
			m[k] = float64(e.at.UnixMilli())
		}
	}
}

// finishHeld decides an order MySQL holds as reserved (a hold the switch
// moved, or a MySQL-mode reserve) that a Redis-path decision found there:
// the order row moves under its lock and the units out of MySQL's occupied.
// It returns the decision that stands.
func (s *Strategy) finishHeld(ctx context.Context, ref inventory.OrderRef, want inventory.OrderState) (inventory.OrderState, error) {
	got := want
	err := sqlstore.InTx(ctx, s.db, func(tx *sql.Tx) error {
		ord, found, err := sqlstore.LockOrder(ctx, tx, ref.OrderID)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("decide %s: order row vanished", ref.OrderID)
		}
		got = want
		if ord.State != inventory.StateReserved {
			got = ord.State
			return nil
		}
		if want == inventory.StateConfirmed && ord.ExpiresAt.Valid && !time.Now().Before(ord.ExpiresAt.Time) {
			got = inventory.StateExpired
		}
		m := sqlstore.ToSold
		if got != inventory.StateConfirmed {
			m = sqlstore.ToAvailable
			if err := sqlstore.ReleaseBuyer(ctx, tx, ord.SKU, ord.Buyer, ord.Qty); err != nil {
				return err
			}
		}
		if err := moveHeld(ctx, tx, ord, m); err != nil {
			return err
		}
		return sqlstore.SetState(ctx, tx, ord.ID, got)
	})
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", want, ref.OrderID, err)
	}
	return got, nil
}

// redisFinishTimeout bounds the Redis write that follows a MySQL decision:
// the switch's timeout when it is on (a failure is left to recovery).
func (s *Strategy) redisFinishTimeout() time.Duration {
	if s.dg != nil {
		return s.dg.timeout
	}
	return s.cfg.OpTimeout
}
