// Package sqlstore holds the MySQL pieces shared by the strategies that keep
// reservations in MySQL: transactions with deadlock retry, and the order state
// machine (confirm, cancel, expire) guarded by the order row's lock. Each
// strategy supplies its own way of moving stock in the inventory row.
package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
)

// MySQL error numbers the strategies react to.
const (
	errDupKey       = 1062
	errLockWait     = inventory.MySQLLockWaitTimeout
	errDeadlock     = inventory.MySQLDeadlock
	expireBatchSize = 500
	// expireTxOrders bounds the orders one expiry transaction decides:
	// enough to share a commit and a wait for the stock row among many,
	// few enough that the stock row is not held from buyers for long.
	expireTxOrders = 100
)

// Bounds of the pause between transaction retries: the first retry is
// immediate, then a random pause up to firstPause, doubling per retry up to
// maxPause.
const (
	firstPause = time.Millisecond
	maxPause   = 50 * time.Millisecond
)

// IsDuplicate reports a duplicate-key error.
func IsDuplicate(err error) bool { return mysqlErr(err) == errDupKey }

// IsRetryable reports a deadlock or lock wait timeout: the transaction was
// rolled back and may simply be run again. On a Galera cluster a
// certification failure (another primary committed a conflicting write set
// first) and a brute-force abort (a replicated write set killed a local
// transaction holding its rows) reach the client as the same deadlock error
// (1213, with the same message), so they are retryable too; the cluster's
// own counters (wsrep_local_cert_failures, wsrep_local_bf_aborts) tell them
// apart from local deadlocks.
func IsRetryable(err error) bool {
	n := mysqlErr(err)
	return n == errDeadlock || n == errLockWait
}

func mysqlErr(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

// InTx runs fn in a transaction. fn returning nil commits; fn returning an
// error rolls back and InTx returns that error — unless the error came from
// Keep, which commits fn's writes and then returns the outcome Keep wraps
// (such as ErrAlreadyFinal after recording an expiry). One return value, so
// "commit" and "roll back" cannot be swapped by accident.
//
// Deadlocks and lock wait timeouts — and on a multi-primary cluster
// (Galera) certification failures and brute-force aborts, which arrive as
// deadlocks, at a statement or at the commit — are retried after a
// jittered, growing pause (see retryPause), so that primaries that keep
// conflicting on one hot row take turns instead of colliding again. The
// retries are bounded by time, not by count: by ctx's deadline (the
// operation timeout), giving up before a pause that would end past it, so
// the caller gets the conflict (still a *mysql.MySQLError 1213 or 1205,
// classified as such) rather than a timeout whose outcome it could not
// tell. A hot row on several primaries may need many more attempts than
// one server ever does (each round of conflicting commits lets only one
// through); a fixed count gave up while the operation still had most of
// its time. Without a deadline InTx retries until ctx ends. A failed
// commit of any other kind is reported as ErrOutcomeUnknown.
func InTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	return InTxWith(ctx, db, nil, fn)
}

// kept is an outcome that commits: see Keep.
type kept struct{ outcome error }

func (k kept) Error() string { return k.outcome.Error() }
func (k kept) Unwrap() error { return k.outcome }

// Keep wraps a domain outcome that InTx must return after committing fn's
// writes instead of rolling them back. Keep(nil) is nil: commit, no outcome.
func Keep(outcome error) error {
	if outcome == nil {
		return nil
	}
	return kept{outcome}
}

// InTxWith is InTx with transaction options (such as an isolation level).
func InTxWith(ctx context.Context, db *sql.DB, opts *sql.TxOptions, fn func(tx *sql.Tx) error) error {
	for attempt := 1; ; attempt++ {
		tx, err := db.BeginTx(ctx, opts)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		var result error
		err = fn(tx)
		if errors.As(err, new(kept)) {
			// Kept, even when wrapped: commit, and return err as fn gave it
			// (its text is the outcome's; errors.Is sees through it).
			result, err = err, nil
		}
		if err != nil {
			_ = tx.Rollback()
		} else if err = tx.Commit(); err == nil {
			return result
		} else if !IsRetryable(err) {
			return fmt.Errorf("%w: commit: %v", inventory.ErrOutcomeUnknown, err)
		}
		if !IsRetryable(err) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("transaction stopped after %d attempts: %w (last attempt: %w)", attempt, ctx.Err(), err)
		}
		left := time.Duration(math.MaxInt64)
		if d, ok := ctx.Deadline(); ok {
			left = time.Until(d)
		}
		wait, giveUp := retryPause(attempt, left, rand.N[time.Duration])
		if giveUp {
			return fmt.Errorf("transaction gave up after %d attempts, %s before its deadline: %w", attempt, left.Round(time.Microsecond), err)
		}
		if !clock.Sleep(ctx, wait) {
			return fmt.Errorf("transaction stopped after %d attempts: %w (last attempt: %w)", attempt, ctx.Err(), err)
		}
	}
}

// retryPause is the pause after failed attempt number attempt (1 for the
// first) given the time left before the deadline: none after the first (a
// single deadlock usually clears at once), then a uniform draw (rnd draws
// from [0, n)) up to firstPause doubling per attempt, capped at maxPause,
// plus 1 ns. giveUp is true when the pause would end past the time left —
// nothing has changed, and the attempt that would follow could not finish.
func retryPause(attempt int, left time.Duration, rnd func(n time.Duration) time.Duration) (wait time.Duration, giveUp bool) {
	if attempt > 1 {
		wait = rnd(min(firstPause<<min(attempt-2, 6), maxPause)) + 1
	}
	return wait, wait >= left
}

// JournalRestock applies restock r inside tx: it writes r's journal row
// and adds r.Qty to the SKU's total and available (bumping the row's
// version), so the journal and the total commit or roll back together. It
// returns the row's version after the restock. applied is false, and
// nothing changes, when the journal already holds r.ID (a repeat of a
// restock whose reply was lost). An unknown SKU is an error.
func JournalRestock(ctx context.Context, tx *sql.Tx, r inventory.Restock) (version int64, applied bool, err error) {
	if applied, err = JournalRow(ctx, tx, r); err != nil || !applied {
		return 0, false, err
	}
	res, err := tx.ExecContext(ctx, "UPDATE inventory SET total=total+?, available=available+?, version=version+1 WHERE sku=?", r.Qty, r.Qty, r.SKU)
	if err != nil {
		return 0, false, fmt.Errorf("restock %s: %w", r.SKU, err)
	}
	if n, err := res.RowsAffected(); err == nil && n != 1 {
		return 0, false, fmt.Errorf("restock %s: no inventory row", r.SKU)
	}
	if err := tx.QueryRowContext(ctx, "SELECT version FROM inventory WHERE sku=?", r.SKU).Scan(&version); err != nil {
		return 0, false, fmt.Errorf("restock %s: %w", r.SKU, err)
	}
	return version, true, nil
}

// JournalTotal writes restock r's journal row and adds r.Qty to the SKU's
// total (not to available) inside tx, for a strategy that keeps the
// available units in a layout of its own (stock buckets, unit rows) and
// adds them there in the same transaction. applied is false, and nothing
// is written, when the journal already holds r.ID: the caller must then
// change nothing either. An unknown SKU is an error.
func JournalTotal(ctx context.Context, tx *sql.Tx, r inventory.Restock) (applied bool, err error) {
	if applied, err = JournalRow(ctx, tx, r); err != nil || !applied {
		return false, err
	}
	res, err := tx.ExecContext(ctx, "UPDATE inventory SET total=total+?, version=version+1 WHERE sku=?", r.Qty, r.SKU)
	if err != nil {
		return false, fmt.Errorf("restock %s: %w", r.SKU, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, fmt.Errorf("restock %s: no inventory row", r.SKU)
	}
	return true, nil
}

// JournalRow writes restock r's journal row inside tx. applied is false,
// and nothing is written, when the journal already holds r.ID.
func JournalRow(ctx context.Context, tx *sql.Tx, r inventory.Restock) (applied bool, err error) {
	if r.ID == "" || r.Qty <= 0 {
		return false, fmt.Errorf("restock %s: needs an id and a positive quantity (id %q, qty %d)", r.SKU, r.ID, r.Qty)
	}
	_, err = tx.ExecContext(ctx, "INSERT INTO restocks (restock_id, sku, qty, created_at) VALUES (?,?,?,?)",
		r.ID, r.SKU, r.Qty, clock.Now().UTC())
	if IsDuplicate(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("restock %s: journal: %w", r.SKU, err)
	}
	return true, nil
}

// Order is an order row as read under its lock.
type Order struct {
	ID        string
	SKU       string
	Qty       int64
	State     inventory.OrderState
	ExpiresAt sql.NullTime
	// Buyer is the order's buyer ("" for none): a cancel or expiry gives
	// its units back to the buyer's holds (ReleaseBuyer).
	Buyer string
}

// LockOrder reads an order row FOR UPDATE. found is false when there is none.
func LockOrder(ctx context.Context, tx *sql.Tx, id string) (o Order, found bool, err error) {
	o.ID = id
	var buyer sql.NullString
	err = tx.QueryRowContext(ctx, "SELECT sku, qty, state, expires_at, buyer FROM orders WHERE order_id=? FOR UPDATE", id).
		Scan(&o.SKU, &o.Qty, &o.State, &o.ExpiresAt, &buyer)
	o.Buyer = buyer.String
	if errors.Is(err, sql.ErrNoRows) {
		return o, false, nil
	}
	if err != nil {
		return o, false, fmt.Errorf("lock order: %w", err)
	}
	return o, true, nil
}

// InsertOrder writes a new order row in state st. A duplicate order id comes
// back as an error for which IsDuplicate is true.
func InsertOrder(ctx context.Context, q Execer, r inventory.Reservation, st inventory.OrderState) error {
	now := clock.Now().UTC()
	var exp any
	if !r.Deadline.IsZero() {
		exp = inventory.StoredDeadline(r.Deadline)
	}
	_, err := q.ExecContext(ctx,
		"INSERT INTO orders (order_id, sku, qty, state, created_at, expires_at, updated_at, buyer) VALUES (?,?,?,?,?,?,?,?)",
		r.OrderID, r.SKU, r.Qty, string(st), now, exp, now, BuyerArg(r.Buyer))
	return err
}

// BuyerArg is an order row's buyer column: NULL for none.
func BuyerArg(buyer string) any {
	if buyer == "" {
		return nil
	}
	return buyer
}

// HoldForBuyer counts r's units against its buyer's holds of r.SKU inside
// tx, the transaction that reserves them: one guarded upsert raises the
// buyer's row only while held + qty stays within r.Limit (when positive),
// so two reserves of one buyer serialise on that row and cannot both pass
// the limit. It fails with ErrLimitExceeded (nothing written; the caller
// rolls back) when the limit would be passed. Without a buyer it does
// nothing. The buyer row is locked before the inventory row in every
// transaction that touches both (reserve, and Orders' cancel and expiry),
// so the two never deadlock on each other.
func HoldForBuyer(ctx context.Context, tx *sql.Tx, r inventory.Reservation) error {
	if r.Buyer == "" {
		return nil
	}
	if r.Limit > 0 && r.Qty > r.Limit {
		return fmt.Errorf("reserve %s: %d units for buyer %s: %w", r.OrderID, r.Qty, r.Buyer, inventory.ErrLimitExceeded)
	}
	// The upsert creates the buyer's row or locks it (an exclusive lock,
	// as for any write); the guarded UPDATE then raises it only within the
	// limit. Its rows affected are the rows its WHERE matched, whether
	// or not the connection counts found rows rather than changed ones.
	if _, err := tx.ExecContext(ctx,
		"INSERT INTO buyer_holds (sku, buyer, held) VALUES (?,?,0) ON DUPLICATE KEY UPDATE held=held", r.SKU, r.Buyer); err != nil {
		return fmt.Errorf("reserve %s: buyer holds: %w", r.OrderID, err)
	}
	limit := r.Limit
	if limit <= 0 {
		limit = math.MaxInt64 / 2
	}
	res, err := tx.ExecContext(ctx, "UPDATE buyer_holds SET held=held+? WHERE sku=? AND buyer=? AND held+?<=?",
		r.Qty, r.SKU, r.Buyer, r.Qty, limit)
	if err != nil {
		return fmt.Errorf("reserve %s: buyer holds: %w", r.OrderID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("reserve %s: buyer %s holds %d of %s already: %w", r.OrderID, r.Buyer, r.Limit, r.SKU, inventory.ErrLimitExceeded)
	}
	return nil
}

// ReleaseBuyer gives qty units of sku back to buyer's holds inside tx (a
// cancel or expiry of one of its orders). Without a buyer it does nothing.
func ReleaseBuyer(ctx context.Context, tx *sql.Tx, sku, buyer string, qty int64) error {
	if buyer == "" || qty <= 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, "UPDATE buyer_holds SET held=held-? WHERE sku=? AND buyer=? AND held>=?", qty, sku, buyer, qty); err != nil {
		return fmt.Errorf("release buyer hold: %w", err)
	}
	return nil
}

// SetState moves an order row to st.
func SetState(ctx context.Context, q Execer, id string, st inventory.OrderState) error {
	_, err := q.ExecContext(ctx, "UPDATE orders SET state=?, updated_at=? WHERE order_id=?", string(st), clock.Now().UTC(), id)
	if err != nil {
		return fmt.Errorf("set order state: %w", err)
	}
	return nil
}

// Execer is satisfied by *sql.DB and *sql.Tx.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Querier is a *sql.DB or a *sql.Tx.
type Querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// StateOf reads an order's state (sql.ErrNoRows when there is no order row).
func StateOf(ctx context.Context, q Querier, id string) (inventory.OrderState, error) {
	var st inventory.OrderState
	err := q.QueryRowContext(ctx, "SELECT state FROM orders WHERE order_id=?", id).Scan(&st)
	return st, err
}

// ReserveRepeat is the outcome of a reserve whose order id already exists:
// a repeat of a successful reserve succeeds, a reserve of a cancelled or
// expired order is refused (anti-hanging).
func ReserveRepeat(ctx context.Context, db *sql.DB, id string) error {
	st, err := StateOf(ctx, db, id)
	if err != nil {
		return fmt.Errorf("reserve repeat: %w", err)
	}
	if st == inventory.StateReserved || st == inventory.StateConfirmed {
		return nil
	}
	return fmt.Errorf("reserve %s: order is %s: %w", id, st, inventory.ErrAlreadyFinal)
}

// Movement names a stock movement of an order's units.
type Movement int

// The movements: two out of occupied, and the refund out of sold.
const (
	// ToSold is a confirm: occupied → sold.
	ToSold Movement = iota
	// ToAvailable is a cancel or expiry: occupied → available.
	ToAvailable
	// Refunded is a refund of a confirmed order: sold → available.
	Refunded
)

// MoveFunc moves the order's units inside tx (out of occupied, or for
// Refunded out of sold), the strategy's own way (row lock, CAS version,
// conditional update, outbox event). It must refuse, with an error, a move
// the stock cannot cover (fewer units occupied, or sold, than the order's).
type MoveFunc func(ctx context.Context, tx *sql.Tx, ord Order, m Movement) error

// Orders is the order state machine of the MySQL strategies. Every
// transition happens under the order row's lock, so a confirm and a cancel
// racing on one order serialise and exactly one wins.
type Orders struct {
	DB   *sql.DB
	Move MoveFunc
	// OnFinal, when set, is called after the commit of every transition
	// (and of every cancel marker, with marker set), outside the transaction:
	// the place to bring a second store in line. It is also called when
	// Finish finds the order already in the state asked for (a repeat, or
	// the retry of a transition whose commit reply was lost), so it must be
	// idempotent.
	OnFinal func(ctx context.Context, ref inventory.OrderRef, to inventory.OrderState, marker bool)
	// TxOpts are the options of Finish's and the expiry's transactions
	// (nil: the server's default isolation). Every read those transactions
	// make is a locking one, so their outcome does not depend on the
	// level; a Move that passes over rows it does not change may ask for
	// READ COMMITTED, which releases them at once instead of at commit.
	TxOpts *sql.TxOptions
}

// Finish moves order ref to `to` (StateConfirmed or StateCancelled):
//   - reserved → to, moving the stock; a confirm past the deadline expires
//     the order instead and returns ErrAlreadyFinal;
//   - already `to` → nil (idempotent repeat);
//   - another final state → ErrAlreadyFinal, except that a cancel of an
//     expired order is a no-op success;
//   - unknown order: confirm → ErrUnknownOrder; cancel writes a cancelled
//     marker row (qty 0) so that a later reserve is refused.
func (o Orders) Finish(ctx context.Context, ref inventory.OrderRef, to inventory.OrderState) error {
	var applied inventory.OrderState
	var marker bool
	err := InTxWith(ctx, o.DB, o.TxOpts, func(tx *sql.Tx) error {
		applied, marker = "", false
		ord, found, err := LockOrder(ctx, tx, ref.OrderID)
		if err != nil {
			return err
		}
		if !found {
			if to == inventory.StateConfirmed {
				return Keep(fmt.Errorf("confirm %s: %w", ref.OrderID, inventory.ErrUnknownOrder))
			}
			err := InsertOrder(ctx, tx, inventory.Reservation{OrderID: ref.OrderID, SKU: ref.SKU}, inventory.StateCancelled)
			if IsDuplicate(err) {
				// A reserve got in first: treat it like a lock conflict and run again.
				return &mysql.MySQLError{Number: errDeadlock, Message: "order appeared concurrently"}
			}
			applied, marker = inventory.StateCancelled, true
			return err
		}
		switch {
		case ord.State == to:
			// A repeat — or the retry of a call whose commit reply was
			// lost (a decision batch's): OnFinal runs again, so a second
			// store that missed the first call's update gets it now.
			applied = to
			return nil
		case ord.State == inventory.StateExpired && to == inventory.StateCancelled:
			return nil
		case ord.State != inventory.StateReserved:
			return Keep(fmt.Errorf("%s %s: order is %s: %w", verb(to), ref.OrderID, ord.State, inventory.ErrAlreadyFinal))
		}
		if to == inventory.StateConfirmed && ord.ExpiresAt.Valid && !clock.Now().Before(ord.ExpiresAt.Time) {
			if err := o.transition(ctx, tx, ord, inventory.StateExpired); err != nil {
				return err
			}
			applied = inventory.StateExpired
			return Keep(fmt.Errorf("confirm %s: reservation expired: %w", ref.OrderID, inventory.ErrAlreadyFinal))
		}
		applied = to
		return o.transition(ctx, tx, ord, to)
	})
	if applied != "" && o.OnFinal != nil && (err == nil || errors.Is(err, inventory.ErrAlreadyFinal)) {
		o.OnFinal(ctx, ref, applied, marker)
	}
	return err
}

// Refund moves a confirmed order to refunded and its units from sold back
// to available, in one transaction under the order row's lock — the
// "already released" check of the article's pitfall: the state read under
// the lock decides, so a refund racing a cancel, an expiry or another
// refund of the order releases its units at most once.
//   - confirmed → refunded, moving the stock (Move with Refunded) and giving
//     the buyer's hold back;
//   - already refunded → nil (idempotent repeat). OnFinal runs only
//     after the call that made the transition, not after a repeat: a
//     second store brought in line by a refund's OnFinal must repair a
//     lost write its own way (outbox's reconciler), since a repeat cannot
//     tell a lost write from one already repaired, and applying the
//     refund again to a repaired store would release it twice;
//   - reserved → ErrNotConfirmed; cancelled or expired (a cancel marker
//     too) → ErrAlreadyFinal; no order row → ErrUnknownOrder.
func (o Orders) Refund(ctx context.Context, ref inventory.OrderRef) error {
	applied := false
	err := InTxWith(ctx, o.DB, o.TxOpts, func(tx *sql.Tx) error {
		applied = false
		ord, found, err := LockOrder(ctx, tx, ref.OrderID)
		switch {
		case err != nil:
			return err
		case !found:
			return fmt.Errorf("refund %s: %w", ref.OrderID, inventory.ErrUnknownOrder)
		}
		if repeat, err := refundable(ref, ord.State); repeat || err != nil {
			return err
		}
		// The buyer row before the stock, as in every transaction.
		if err := ReleaseBuyer(ctx, tx, ord.SKU, ord.Buyer, ord.Qty); err != nil {
			return err
		}
		if err := o.Move(ctx, tx, ord, Refunded); err != nil {
			return err
		}
		applied = true
		return SetState(ctx, tx, ord.ID, inventory.StateRefunded)
	})
	if applied && err == nil && o.OnFinal != nil {
		o.OnFinal(ctx, ref, inventory.StateRefunded, false)
	}
	return err
}

func (o Orders) transition(ctx context.Context, tx *sql.Tx, ord Order, to inventory.OrderState) error {
	m := ToAvailable
	if to == inventory.StateConfirmed {
		m = ToSold
	} else if err := ReleaseBuyer(ctx, tx, ord.SKU, ord.Buyer, ord.Qty); err != nil {
		// Before the stock: the buyer row is locked before the inventory
		// row, as in a reserve (HoldForBuyer).
		return err
	}
	if err := o.Move(ctx, tx, ord, m); err != nil {
		return err
	}
	return SetState(ctx, tx, ord.ID, to)
}

func verb(to inventory.OrderState) string {
	if to == inventory.StateConfirmed {
		return "confirm"
	}
	return "cancel"
}

// ExpireDue releases every reservation whose deadline has passed, each
// exactly once (the order row lock and the state check guard it). It returns
// how many it expired.
//
// The due orders are decided in batches: up to expireTxOrders orders of one
// SKU per transaction (their rows locked in one statement, their buyers'
// holds, then their moves, then their states in one statement), so a
// backlog costs one commit and one wait for the SKU's hot stock row per
// batch, not per order. One transaction per order expired about 30 orders
// a second under load while buyers abandoned more than that, and the
// backlog of an hour outgrew settle's deadline (issue #27).
func (o Orders) ExpireDue(ctx context.Context) (int, error) {
	n := 0
	for {
		due, err := dueOrders(ctx, o.DB, expireBatchSize)
		if err != nil {
			return n, err
		}
		for _, g := range bySKU(due, expireTxOrders) {
			done, err := o.expire(ctx, g)
			if err != nil {
				return n, err
			}
			n += len(done)
			if o.OnFinal != nil {
				for _, ord := range done {
					o.OnFinal(ctx, inventory.OrderRef{OrderID: ord.ID, SKU: ord.SKU}, inventory.StateExpired, false)
				}
			}
		}
		if len(due) < expireBatchSize {
			return n, nil
		}
	}
}

// expire moves the orders of g (listed as due) that are still reserved to
// expired, in one transaction, and returns those it expired. The locks
// are taken as every transaction takes them: order rows, then buyer rows,
// then the stock.
func (o Orders) expire(ctx context.Context, g dueGroup) ([]Order, error) {
	var done []Order
	err := InTxWith(ctx, o.DB, o.TxOpts, func(tx *sql.Tx) error {
		done = done[:0]
		locked, err := LockOrders(ctx, tx, g.ids)
		if err != nil {
			return err
		}
		for _, id := range g.ids {
			if ord, ok := locked[id.(string)]; ok && ord.State == inventory.StateReserved {
				done = append(done, ord)
			}
		}
		if len(done) == 0 {
			return nil
		}
		byBuyer := slices.Clone(done)
		slices.SortFunc(byBuyer, func(a, b Order) int { return cmp.Compare(a.Buyer, b.Buyer) })
		for _, ord := range byBuyer {
			if err := ReleaseBuyer(ctx, tx, ord.SKU, ord.Buyer, ord.Qty); err != nil {
				return err
			}
		}
		expired := make([]any, 0, len(done)+2)
		expired = append(expired, string(inventory.StateExpired), clock.Now().UTC())
		for _, ord := range done {
			if err := o.Move(ctx, tx, ord, ToAvailable); err != nil {
				return err
			}
			expired = append(expired, ord.ID)
		}
		if _, err := tx.ExecContext(ctx, "UPDATE orders SET state=?, updated_at=? WHERE order_id IN ("+Placeholders(len(done))+")", expired...); err != nil {
			return fmt.Errorf("set order states: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("expire %d orders of %s: %w", len(g.ids), g.sku, err)
	}
	return done, nil
}

// dueOrder is a due order as listed: its id and SKU.
type dueOrder struct{ id, sku string }

// dueGroup is due orders of one SKU, to expire in one transaction.
type dueGroup struct {
	sku string
	ids []any
}

// bySKU splits the due orders into groups of one SKU each, at most size
// orders a group, in SKU order.
func bySKU(due []dueOrder, size int) []dueGroup {
	sorted := slices.Clone(due)
	slices.SortStableFunc(sorted, func(a, b dueOrder) int { return cmp.Compare(a.sku, b.sku) })
	var out []dueGroup
	for _, d := range sorted {
		if n := len(out); n == 0 || out[n-1].sku != d.sku || len(out[n-1].ids) == size {
			out = append(out, dueGroup{sku: d.sku, ids: make([]any, 0, size)})
		}
		last := &out[len(out)-1]
		last.ids = append(last.ids, d.id)
	}
	return out
}

// DueOrders lists up to limit reserved orders whose deadline has passed.
func DueOrders(ctx context.Context, db *sql.DB, limit int) ([]string, error) {
	due, err := dueOrders(ctx, db, limit)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(due))
	for i, d := range due {
		ids[i] = d.id
	}
	return ids, nil
}

// dueOrders is DueOrders with each order's SKU.
func dueOrders(ctx context.Context, db *sql.DB, limit int) ([]dueOrder, error) {
	rows, err := db.QueryContext(ctx,
		"SELECT order_id, sku FROM orders WHERE state='reserved' AND expires_at <= ? ORDER BY expires_at LIMIT ?",
		clock.Now().UTC(), limit)
	if err != nil {
		return nil, fmt.Errorf("due orders: %w", err)
	}
	defer rows.Close()
	var due []dueOrder
	for rows.Next() {
		var d dueOrder
		if err := rows.Scan(&d.id, &d.sku); err != nil {
			return nil, fmt.Errorf("due orders: %w", err)
		}
		due = append(due, d)
	}
	return due, rows.Err()
}

// Every calls fn every period until ctx ends; errors from fn go to onErr.
func Every(ctx context.Context, period time.Duration, fn func(context.Context) error, onErr func(error)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				onErr(err)
			}
		}
	}
}

// GuardedMove is a MoveFunc that moves the units with one conditional
// UPDATE (occupied >= qty, or for a refund sold >= qty) and no read first.
func GuardedMove(ctx context.Context, tx *sql.Tx, ord Order, m Movement) error {
	from := "occupied"
	q := "UPDATE inventory SET occupied=occupied-?, sold=sold+? WHERE sku=? AND occupied>=?"
	switch m {
	case ToAvailable:
		q = "UPDATE inventory SET occupied=occupied-?, available=available+? WHERE sku=? AND occupied>=?"
	case Refunded:
		from, q = "sold", "UPDATE inventory SET sold=sold-?, available=available+? WHERE sku=? AND sold>=?"
	}
	res, err := tx.ExecContext(ctx, q, ord.Qty, ord.Qty, ord.SKU, ord.Qty)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("inventory %s: %s < %d", ord.SKU, from, ord.Qty)
	}
	return nil
}
