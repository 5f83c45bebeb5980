// Package redisstock holds the Redis side shared by the Redis strategies:
// the Lua scripts that reserve and finish reservations atomically, loading
// stock from MySQL, and reading a reservation. Keys follow the layout in
// package inventory, with the SKU as hash tag.
package redisstock

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

//go:embed try.lua
var tryLua string

//go:embed finish.lua
var finishLua string

//go:embed snapshot.lua
var snapshotLua string

//go:embed adjust.lua
var adjustLua string

//go:embed restock.lua
var restockLua string

//go:embed rebuild.lua
var rebuildLua string

//go:embed sold.lua
var soldLua string

var (
	tryScript      = redis.NewScript(tryLua)
	finishScript   = redis.NewScript(finishLua)
	snapshotScript = redis.NewScript(snapshotLua)
	adjustScript   = redis.NewScript(adjustLua)
	restockScript  = redis.NewScript(restockLua)
	rebuildScript  = redis.NewScript(rebuildLua)
	soldScript     = redis.NewScript(soldLua)
)

// Store runs the scripts on one Redis. Safe for concurrent use.
type Store struct {
	R      redis.UniversalClient
	Retain time.Duration
	// Fence, when set, keeps Try off a Redis that restarted until its
	// stock is rebuilt from MySQL (see Fence). Strategies set it; a Store
	// without one loads and runs its scripts as any client would.
	Fence *Fence
	// DB is MySQL, from which a Try of a reservation with a buyer builds
	// the SKU's buyer holds when Redis has none (BuildBuyers); without it
	// the Fence's DB is used.
	DB *sql.DB
}

// Catalog is the list of SKUs a Redis strategy loaded. Safe for concurrent use.
type Catalog struct {
	mu   sync.Mutex
	skus []string
}

// Load copies the stock from MySQL into Redis (LoadAll) and remembers the
// SKUs; it reports the SKUs loaded to the progress function ctx carries
// (strategies.WithProgress). A Redis that has not run this store's Try
// since it started (a restart, or the first run on it) is then rebuilt
// from MySQL (Store.Ready).
func (c *Catalog) Load(ctx context.Context, s Store, db *sql.DB) error {
	progress := strategies.ProgressOf(ctx)
	var skus []string
	existed, err := s.LoadAll(ctx, db, func(batch []string) {
		skus = append(skus, batch...)
		progress(len(batch))
	})
	if err != nil {
		return err
	}
	alone, err := s.Fence.Alone(ctx)
	if err != nil {
		return err
	}
	if existed == 0 && alone {
		// Every hash was just built from MySQL, the system of record, with
		// the rebuild's rules: nothing a restarted Redis kept can be stale,
		// so the fence is armed without rebuilding it all again. With
		// other members registered on the stores (a gated fence), live or
		// silent past their lease, their tables may hold decisions MySQL
		// lacks: the round (Ready) drains the live ones first and makes
		// the silent ones late (they catch up when they come back).
		err = s.Arm(ctx)
	} else {
		err = s.Ready(ctx)
	}
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.skus = skus
	c.mu.Unlock()
	return nil
}

// List returns the SKUs loaded last.
func (c *Catalog) List() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.skus
}

// LoadFromMySQL gives every SKU of MySQL's inventory table a Redis stock
// hash if it has none, and returns the SKUs. A hash that exists is live
// data (a restart on running stores) and is never touched. A missing hash
// (first start, or Redis lost its data) is rebuilt so that it cannot sell
// a unit twice: total from MySQL; sold from MySQL's confirmed orders;
// occupied from every reservation still held anywhere — live in Redis or
// reserved in MySQL; available is the rest. It is created atomically only
// if still absent, so a reload racing another one (or a replica's) is
// harmless. Safe to call concurrently with load: a Try meanwhile fails
// (no hash) rather than sell from a half-built one.
func (s Store) LoadFromMySQL(ctx context.Context, db *sql.DB) ([]string, error) {
	var skus []string
	_, err := s.LoadAll(ctx, db, func(batch []string) { skus = append(skus, batch...) })
	if err != nil {
		return nil, err
	}
	return skus, nil
}

// loadBatch is how many SKUs LoadAll handles per round trip.
const loadBatch = 1000

// loadQuery reads, per SKU in key order, what rebuilding its stock hash
// needs from MySQL in one pass: total, version, the units of its confirmed
// orders and its reserved orders as "id:qty" pairs.
const loadQuery = `
SELECT i.sku, i.total, i.version, COALESCE(o.sold,0), COALESCE(o.held,'')
FROM inventory i
LEFT JOIN (SELECT sku, SUM(CASE WHEN state='confirmed' THEN qty ELSE 0 END) AS sold,
                  GROUP_CONCAT(CASE WHEN state='reserved' THEN CONCAT(order_id,':',qty) END SEPARATOR ' ') AS held
           FROM orders WHERE state IN ('reserved','confirmed') GROUP BY sku) o ON o.sku=i.sku
ORDER BY i.sku`

// LoadAll is LoadFromMySQL in bulk: MySQL is read in one set-based pass
// and Redis in pipelined batches of loadBatch SKUs (the hashes' existence
// and live reservations, then the guarded creation of the missing ones —
// adjust.lua creates a hash only if there is still none — and their entry
// in the SKU set); a ClusterClient sends each batch to every master at
// once. A missing hash whose SKU has reservations in flight (live in
// Redis, or reserved in MySQL) is rebuilt by Reload, one SKU at a time,
// with its rules. done is called
// with each batch of SKUs handled, in order. existed is how many SKUs
// already had a hash (left as they were).
func (s Store) LoadAll(ctx context.Context, db *sql.DB, done func(skus []string)) (existed int, err error) {
	if err := s.loadScript(ctx); err != nil {
		return 0, fmt.Errorf("load redis: %w", err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("load redis: %w", err)
	}
	defer conn.Close()
	// A SKU's reserved orders in one value: the session allows 64 MiB.
	if _, err := conn.ExecContext(ctx, "SET SESSION group_concat_max_len = 67108864"); err != nil {
		return 0, fmt.Errorf("load redis: %w", err)
	}
	rows, err := conn.QueryContext(ctx, loadQuery)
	if err != nil {
		return 0, fmt.Errorf("load redis: %w", err)
	}
	defer rows.Close()
	batch := make([]loadRow, 0, loadBatch)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		n, err := s.loadBatch(ctx, db, batch)
		if err != nil {
			return err
		}
		existed += n
		skus := make([]string, len(batch))
		for i, r := range batch {
			skus[i] = r.sku
		}
		done(skus)
		batch = batch[:0]
		return nil
	}
	for rows.Next() {
		var r loadRow
		var held string
		if err := rows.Scan(&r.sku, &r.total, &r.version, &r.sold, &held); err != nil {
			return existed, fmt.Errorf("load redis: %w", err)
		}
		for _, f := range strings.Fields(held) {
			i := strings.LastIndexByte(f, ':')
			if i < 0 {
				continue
			}
			q, _ := strconv.ParseInt(f[i+1:], 10, 64)
			if r.held == nil {
				r.held = map[string]int64{}
			}
			r.held[f[:i]] = q
		}
		if batch = append(batch, r); len(batch) == loadBatch {
			if err := flush(); err != nil {
				return existed, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		return existed, fmt.Errorf("load redis: %w", err)
	}
	err = flush()
	return existed, err
}

// loadRow is one SKU's MySQL side as LoadAll reads it.
type loadRow struct {
	sku                  string
	total, version, sold int64
	held                 map[string]int64 // reserved order id → qty
}

// loadScript caches adjust.lua on the server (every master of a cluster),
// so that a pipeline can run it by its digest.
func (s Store) loadScript(ctx context.Context) error {
	if cc, ok := s.R.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return adjustScript.Load(ctx, c).Err()
		})
	}
	return adjustScript.Load(ctx, s.R).Err()
}

// loadBatch creates the stock hash of each SKU of batch that has none.
func (s Store) loadBatch(ctx context.Context, db *sql.DB, batch []loadRow) (existed int, err error) {
	pipe := s.R.Pipeline()
	exists := make([]*redis.IntCmd, len(batch))
	live := make([]*redis.StringSliceCmd, len(batch))
	for i, r := range batch {
		exists[i] = pipe.Exists(ctx, inventory.RedisStockKey(r.sku))
		live[i] = pipe.ZRange(ctx, inventory.RedisLiveKey(r.sku), 0, -1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return existed, fmt.Errorf("load redis: %w", err)
	}
	pipe = s.R.Pipeline()
	var created []any
	var made []*redis.Cmd
	var madeRows []int
	for i, r := range batch {
		if exists[i].Val() == 1 {
			existed++
			continue
		}
		if len(live[i].Val()) > 0 || len(r.held) > 0 {
			// Reservations in flight (a Redis that lost its data under
			// load): Reload's one-instant rebuild (rebuild.lua) gives the
			// live ones MySQL's decisions and records MySQL's reserved
			// orders Redis lost; the bulk path below is for SKUs with none.
			ok, err := s.Reload(ctx, db, r.sku)
			if err != nil {
				return existed, err
			}
			if ok {
				created = append(created, r.sku)
			}
			continue
		}
		st := inventory.Stock{SKU: r.sku, Total: r.total, Sold: r.sold}
		st.Available = st.Total - st.Sold - st.Occupied
		if st.Available < 0 {
			return existed, fmt.Errorf("load redis %s: MySQL total %d < sold %d + held %d: not loading a hash that sells nothing right",
				r.sku, st.Total, st.Sold, st.Occupied)
		}
		made = append(made, adjustScript.EvalSha(ctx, pipe, []string{inventory.RedisStockKey(r.sku), restockKey(r.sku)}, "",
			st.Total, st.Available, st.Occupied, st.Sold, 0, 0, 0, 0, rvArg(r.version)))
		madeRows = append(madeRows, i)
	}
	if len(made) == 0 {
		return existed, nil
	}
	_, _ = pipe.Exec(ctx) // each command's error is looked at below
	for j, c := range made {
		n, err := c.Int()
		r := batch[madeRows[j]]
		if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			// The script left the server's cache (SCRIPT FLUSH, a
			// failover): run this one with its source, which caches it.
			ok, aerr := s.Reload(ctx, db, r.sku)
			if aerr != nil {
				return existed, aerr
			}
			n, err = 0, nil
			if ok {
				n = 1
			}
		}
		if err != nil {
			return existed, wrapLoad(r.sku, err)
		}
		if n == 1 {
			created = append(created, r.sku)
		}
	}
	if len(created) > 0 {
		if err := s.R.SAdd(ctx, inventory.RedisSKUSet, created...).Err(); err != nil {
			return existed, fmt.Errorf("load redis: %w", err)
		}
	}
	return existed, nil
}

// confirmedOrders says which of ids MySQL holds as confirmed, reading them
// by primary key in batches.
func confirmedOrders(ctx context.Context, db *sql.DB, ids []string) (map[string]bool, error) {
	out := map[string]bool{}
	for start := 0; start < len(ids); start += 500 {
		part := ids[start:min(start+500, len(ids))]
		args := make([]any, len(part))
		for i, id := range part {
			args[i] = id
		}
		rows, err := db.QueryContext(ctx, "SELECT order_id FROM orders WHERE state='confirmed' AND order_id IN (?"+strings.Repeat(",?", len(part)-1)+")", args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, err
			}
			out[id] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ListSKUs lists the SKUs of MySQL's inventory table, the system of record.
func ListSKUs(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, "SELECT sku FROM inventory ORDER BY sku")
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	defer rows.Close()
	var skus []string
	for rows.Next() {
		var sku string
		if err := rows.Scan(&sku); err != nil {
			return nil, fmt.Errorf("catalog: %w", err)
		}
		skus = append(skus, sku)
	}
	return skus, rows.Err()
}

// SKURow is one SKU's MySQL inventory row as the recovery passes need it:
// its total and its version (bumped by every restock).
type SKURow struct {
	SKU            string
	Total, Version int64
	// Sold is MySQL's sold units of the SKU.
	Sold int64
}

// CatchUpRestocks gives a SKU's stock hash the restocks MySQL committed
// that Redis never counted: a Restock whose Redis write failed, or whose
// caller died between its MySQL commit and its Redis write (a service
// crash). Totals change only by restocks, so a MySQL total (read at
// version c.Version) above Redis's is units restocked but not sellable.
// The repair is a guarded delta (Adjust: only if the hash is still as
// observed) that makes c.Version the hash's restock floor, so the late
// Redis write of one of those restocks is skipped instead of counted twice.
// It never puts Redis above MySQL, leaves a missing hash to Reload, and
// does nothing when the hash already includes restocks newer than the
// MySQL read (which is then stale: the next pass sees more). It reports
// whether it repaired anything.
func (s Store) CatchUpRestocks(ctx context.Context, c SKURow) (bool, error) {
	t, err := s.R.HGet(ctx, inventory.RedisStockKey(c.SKU), "total").Int64()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("redis catch-up %s: %w", c.SKU, err)
	}
	if t >= c.Total {
		return false, nil
	}
	snap, err := s.Snapshot(ctx, c.SKU)
	if err != nil || snap.Missing || snap.RV > c.Version || snap.Stock.Total >= c.Total {
		return false, err
	}
	d := c.Total - snap.Stock.Total
	return s.Adjust(ctx, c.SKU, snap, inventory.Stock{Total: d, Available: d}, c.Version)
}

// Reload builds sku's stock hash as LoadFromMySQL describes, if it has
// none. created is false when there was one (nothing changed).
//
// It reads Redis's live reservations first, then MySQL — the total and
// version, the confirmed units, the orders reserved in MySQL, and which of
// the live reservations MySQL has decided — and then builds the hash in
// one script (rebuild.lua) that, at one instant of Redis, gives those live
// reservations MySQL's decisions, records MySQL's reserved orders that
// Redis has no reservation for (an outbox reserve whose Try Redis lost),
// and counts occupied from the reservations live then. While the hash is
// missing no Try runs and no decision moves a reservation (finish.lua), so
// a decision MySQL committed after the read is applied to the new hash
// later, once; one committed before it is in the counts.
func (s Store) Reload(ctx context.Context, db *sql.DB, sku string) (created bool, err error) {
	n, err := s.R.Exists(ctx, inventory.RedisStockKey(sku)).Result()
	if err != nil || n == 1 {
		return false, wrapLoad(sku, err)
	}
	live, err := s.Due(ctx, sku, time.Time{}, 0)
	if err != nil {
		return false, wrapLoad(sku, err)
	}
	// One instant of MySQL: a decision committed between the read of sold
	// and the read of the live reservations' decisions would otherwise be
	// in neither (its reservation given the decision, its units not sold).
	var args []any
	err = readOnly(ctx, db, func(tx *sql.Tx) error {
		var total, version, sold int64
		if err := tx.QueryRowContext(ctx, "SELECT total, version FROM inventory WHERE sku=?", sku).Scan(&total, &version); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, "SELECT COALESCE(SUM(qty),0) FROM orders WHERE sku=? AND state='confirmed'", sku).Scan(&sold); err != nil {
			return err
		}
		args = []any{total, sold, version, inventory.RedisReservationKey(sku, ""), s.Retain.Milliseconds()}
		decided, err := decisionsOf(ctx, tx, live)
		if err != nil {
			return err
		}
		args = append(args, len(decided)/2)
		args = append(args, decided...)
		rows, err := tx.QueryContext(ctx, "SELECT order_id, qty, expires_at FROM orders WHERE sku=? AND state='reserved'", sku)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var q int64
			var exp sql.NullTime
			if err := rows.Scan(&id, &q, &exp); err != nil {
				return err
			}
			var ms int64
			if exp.Valid {
				ms = exp.Time.UnixMilli()
			}
			args = append(args, id, q, ms)
		}
		return rows.Err()
	})
	if err != nil {
		return false, wrapLoad(sku, err)
	}
	r, err := rebuildScript.Run(ctx, s.R, []string{inventory.RedisStockKey(sku), inventory.RedisLiveKey(sku), restockKey(sku), buyersPendingKey(sku)}, args...).Int()
	switch {
	case err != nil:
		return false, wrapLoad(sku, err)
	case r == -1:
		return false, fmt.Errorf("load redis %s: MySQL total %v < sold %v + held: not loading a hash that sells nothing right", sku, args[0], args[1])
	case r == 0:
		return false, nil
	}
	if err := s.R.SAdd(ctx, inventory.RedisSKUSet, sku).Err(); err != nil {
		return true, wrapLoad(sku, err)
	}
	return true, nil
}

// decisionsOf returns, for the orders of ids MySQL holds in a final state,
// id and state pairs.
func decisionsOf(ctx context.Context, db querier, ids []string) ([]any, error) {
	states, err := sqlstore.OrderStates(ctx, db, ids)
	if err != nil {
		return nil, err
	}
	var out []any
	for _, id := range ids {
		if st, ok := states[id]; ok && st.Final() {
			out = append(out, id, string(st))
		}
	}
	return out, nil
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func wrapLoad(sku string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("load redis %s: %w", sku, err)
}

func keys(sku, id string) []string {
	return []string{inventory.RedisStockKey(sku), inventory.RedisReservationKey(sku, id), inventory.RedisLiveKey(sku), inventory.RedisBuyersKey(sku), buyersCountedKey(sku)}
}

// Try reserves in Redis. fresh is true when this call moved stock, false for
// an idempotent repeat. Errors: ErrOutOfStock, ErrAlreadyFinal (the order was
// cancelled first), or an infrastructure error.
func (s Store) Try(ctx context.Context, r inventory.Reservation) (fresh bool, err error) {
	n, err := s.try(ctx, r)
	if err == nil && n == -5 {
		// The SKU's buyer holds are not built yet (a new or rebuilt
		// stock hash): build them, then try again.
		db := s.DB
		if db == nil && s.Fence != nil {
			db = s.Fence.DB
		}
		if db == nil {
			return false, fmt.Errorf("redis try %s: buyer holds not built and no MySQL to build them from", r.SKU)
		}
		if err := s.BuildBuyers(ctx, db, r.SKU); err != nil {
			return false, err
		}
		n, err = s.try(ctx, r)
	}
	if err != nil {
		return false, fmt.Errorf("redis try: %w", err)
	}
	switch n {
	case 1:
		return true, nil
	case 2:
		return false, nil
	case 0:
		return false, inventory.ErrOutOfStock
	case -2:
		return false, fmt.Errorf("reserve %s: order already cancelled: %w", r.OrderID, inventory.ErrAlreadyFinal)
	case -4:
		return false, fmt.Errorf("reserve %s: buyer %s at its limit of %d: %w", r.OrderID, r.Buyer, r.Limit, inventory.ErrLimitExceeded)
	default:
		return false, fmt.Errorf("redis try: unknown sku %q", r.SKU)
	}
}

// Finish moves the reservation to `to` under the owner check and returns the
// state it found ("" when there was none; then, if marker is set, a record in
// state `to` with qty 0 is left behind).
func (s Store) Finish(ctx context.Context, ref inventory.OrderRef, to inventory.OrderState, marker bool) (inventory.OrderState, error) {
	m := "0"
	if marker {
		m = "1"
	}
	prev, err := finishScript.Run(ctx, s.R, keys(ref.SKU, ref.OrderID), string(to), ref.OrderID, s.Retain.Milliseconds(), m).Text()
	if err == nil && prev == "nohash" {
		err = ErrNoStockHash
	}
	if err != nil {
		return "", fmt.Errorf("redis %s: %w", to, err)
	}
	return inventory.OrderState(prev), nil
}

// ErrNoStockHash: a live reservation's decision could not be applied
// because the SKU has no stock hash (Redis lost it, or a rebuild is under
// way); it is applied once the hash is back (the strategy's recovery or
// reconciler applies MySQL's decisions to live reservations).
var ErrNoStockHash = errors.New("no stock hash")

// FinishAll moves each reservation of refs to `to` under the owner check,
// as Finish without a marker does, in one pipeline: one round trip for a
// group-committed batch of decisions instead of one per order. errs[i] is
// refs[i]'s error. A script the server does not hold yet (NOSCRIPT) is run
// again through Finish, which loads it.
func (s Store) FinishAll(ctx context.Context, refs []inventory.OrderRef, to inventory.OrderState) (errs []error) {
	errs = make([]error, len(refs))
	cmds := make([]*redis.Cmd, len(refs))
	_, _ = s.R.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, ref := range refs {
			cmds[i] = finishScript.EvalSha(ctx, p, keys(ref.SKU, ref.OrderID), string(to), ref.OrderID, s.Retain.Milliseconds(), "0")
		}
		return nil
	})
	for i, c := range cmds {
		err := c.Err()
		if redis.HasErrorPrefix(err, "NOSCRIPT") {
			_, err = s.Finish(ctx, refs[i], to, false)
		} else if err == nil && c.Val() == "nohash" {
			err = ErrNoStockHash
		}
		if err != nil {
			errs[i] = fmt.Errorf("redis %s: %w", to, err)
		}
	}
	return errs
}

// FinishAfterCommit brings Redis in line with decisions already durable in
// MySQL — refs all moved to `to` — with FinishAll, on a context of its own
// bounded by timeout, so the caller's ending cannot cut the write off. It
// returns how many failed: those are left to the strategy's recovery.
func (s Store) FinishAfterCommit(ctx context.Context, timeout time.Duration, refs []inventory.OrderRef, to inventory.OrderState) (failed int64) {
	if len(refs) == 0 {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	for _, err := range s.FinishAll(ctx, refs, to) {
		if err != nil {
			failed++
		}
	}
	return failed
}

// Reservation is a reservation as recorded in Redis.
type Reservation struct {
	Qty      int64
	State    inventory.OrderState
	Deadline time.Time
	// Buyer is the buyer the reservation was made for ("" for none).
	Buyer string
}

// ErrNoReservation: Redis has no record of the order.
var ErrNoReservation = errors.New("no reservation")

// CancelTarget reads the order's reservation for a Cancel. proceed is
// false (err nil) when there is nothing to do: already cancelled or
// expired. An unknown order proceeds with an empty reservation (the
// cancel leaves a marker, so a late Try is refused); a confirmed or
// refunded one is ErrAlreadyFinal.
func (s Store) CancelTarget(ctx context.Context, ref inventory.OrderRef) (res Reservation, proceed bool, err error) {
	res, err = s.Get(ctx, ref)
	switch {
	case errors.Is(err, ErrNoReservation):
		return Reservation{}, true, nil
	case err != nil:
		return res, false, err
	case res.State == inventory.StateConfirmed, res.State == inventory.StateRefunded:
		return res, false, fmt.Errorf("cancel %s: order is %s: %w", ref.OrderID, res.State, inventory.ErrAlreadyFinal)
	case res.State == inventory.StateCancelled || res.State == inventory.StateExpired:
		return res, false, nil
	}
	return res, true, nil
}

// ConfirmTarget reads the order's reservation for a Confirm and says which
// decision it calls for: confirmed, or expired once its deadline passed.
// want is "" (and err nil) when the order is already confirmed: a repeat,
// nothing to do. An unknown order is ErrUnknownOrder; a cancelled,
// expired or refunded one ErrAlreadyFinal.
func (s Store) ConfirmTarget(ctx context.Context, ref inventory.OrderRef) (res Reservation, want inventory.OrderState, err error) {
	res, err = s.Get(ctx, ref)
	if errors.Is(err, ErrNoReservation) {
		return res, "", fmt.Errorf("confirm %s: %w", ref.OrderID, inventory.ErrUnknownOrder)
	}
	if err != nil {
		return res, "", err
	}
	switch res.State {
	case inventory.StateConfirmed:
		return res, "", nil
	case inventory.StateCancelled, inventory.StateExpired, inventory.StateRefunded:
		return res, "", fmt.Errorf("confirm %s: order is %s: %w", ref.OrderID, res.State, inventory.ErrAlreadyFinal)
	}
	if !clock.Now().Before(res.Deadline) {
		return res, inventory.StateExpired, nil
	}
	return res, inventory.StateConfirmed, nil
}

// Get reads a reservation record.
func (s Store) Get(ctx context.Context, ref inventory.OrderRef) (Reservation, error) {
	v, err := s.R.HMGet(ctx, inventory.RedisReservationKey(ref.SKU, ref.OrderID), "qty", "state", "deadline", "buyer").Result()
	if err != nil {
		return Reservation{}, fmt.Errorf("redis read reservation: %w", err)
	}
	st, _ := v[1].(string)
	if st == "" {
		return Reservation{}, ErrNoReservation
	}
	q, _ := v[0].(string)
	d, _ := v[2].(string)
	qty, _ := strconv.ParseInt(q, 10, 64)
	ms, _ := strconv.ParseInt(d, 10, 64)
	res := Reservation{Qty: qty, State: inventory.OrderState(st)}
	res.Buyer, _ = v[3].(string)
	if ms > 0 {
		res.Deadline = time.UnixMilli(ms)
	}
	return res, nil
}

// Due lists up to limit (0: no limit) order ids of sku whose reservation
// deadline is at or before now (all live ones when now is zero).
func (s Store) Due(ctx context.Context, sku string, now time.Time, limit int64) ([]string, error) {
	maxScore := "+inf"
	if !now.IsZero() {
		maxScore = strconv.FormatInt(now.UnixMilli(), 10)
	}
	by := &redis.ZRangeBy{Min: "-inf", Max: maxScore}
	if limit > 0 {
		by.Count = limit
	}
	ids, err := s.R.ZRangeByScore(ctx, inventory.RedisLiveKey(sku), by).Result()
	if err != nil {
		return nil, fmt.Errorf("redis due: %w", err)
	}
	return ids, nil
}

// Restock adds r.Qty to a SKU's total and available, in MySQL first (with
// its journal row, in one transaction: sqlstore.JournalRestock) and then in
// Redis, so that Redis never promises units MySQL does not have. The
// MySQL update bumps the row's version; Redis records the version it
// includes, so the Redis write applies once even if it lands after a
// reconciler already took the units from MySQL. A Redis write that fails
// leaves Redis short (never over), for the reconciler to repair. A repeat
// of r.ID changes nothing and returns nil (the first call's Redis write,
// if it failed, is the reconciler's to catch up).
func (s Store) Restock(ctx context.Context, db *sql.DB, r inventory.Restock) error {
	var version int64
	var applied bool
	err := sqlstore.InTx(ctx, db, func(tx *sql.Tx) (err error) {
		version, applied, err = sqlstore.JournalRestock(ctx, tx, r)
		return err
	})
	if err != nil || !applied {
		return err
	}
	_, err = s.applyRestock(ctx, r.SKU, r.Qty, version)
	return err
}

// applyRestock is Restock's Redis write: qty units as MySQL restock number
// version. applied is false when the hash already counts that restock.
func (s Store) applyRestock(ctx context.Context, sku string, qty, version int64) (applied bool, err error) {
	n, err := restockScript.Run(ctx, s.R, []string{inventory.RedisStockKey(sku), restockKey(sku)}, qty, version).Int()
	if err != nil {
		return false, fmt.Errorf("redis restock %s: %w", sku, err)
	}
	if n == -3 {
		return false, fmt.Errorf("redis restock %s: no stock hash", sku)
	}
	return n == 1, nil
}

// Snapshot is one SKU's Redis side read atomically: the stock hash (Missing
// when there is none), its version — bumped by every script and restock that
// changes it — and the live reservations still in state reserved.
type Snapshot struct {
	Missing bool
	Stock   inventory.Stock
	Ver     string
	// RV is the MySQL inventory version whose restocks the hash includes.
	RV int64
	// Gen names the hash's generation: set when it is created, changed by
	// every CorrectSold ("" for a hash created before generations).
	Gen  string
	Live map[string]int64 // order id → qty
	// Confirmed is, for snapshotSince, the units of the earlier orders it
	// was given that Redis holds as confirmed; 0 for Snapshot.
	Confirmed int64
}

// Snapshot reads sku's stock hash and live reservations in one script, so
// they are one instant of Redis. Read-only; safe to call concurrently.
func (s Store) Snapshot(ctx context.Context, sku string) (Snapshot, error) {
	return s.snapshotSince(ctx, sku, nil)
}

// snapshotSince is Snapshot that also counts, in Confirmed, the units of
// the earlier live orders (order id → qty, as an earlier Snapshot's Live)
// Redis now holds as confirmed.
func (s Store) snapshotSince(ctx context.Context, sku string, earlier map[string]int64) (Snapshot, error) {
	args := make([]any, 0, len(earlier)+1)
	args = append(args, inventory.RedisReservationKey(sku, ""))
	for id := range earlier {
		args = append(args, id)
	}
	v, err := snapshotScript.Run(ctx, s.R, []string{inventory.RedisStockKey(sku), inventory.RedisLiveKey(sku)}, args...).Slice()
	if err != nil {
		return Snapshot{}, fmt.Errorf("redis snapshot %s: %w", sku, err)
	}
	return parseSnapshot(sku, v), nil
}

// Adjust adds delta (total, available, occupied, sold) to sku's stock hash
// only if the hash is still exactly as observed in snap (same version and
// values); when snap saw no hash, it creates one holding delta's values only
// if there is still none. rv, when not negative, is recorded as the MySQL
// inventory version the repaired hash includes (see Restock). It reports whether it changed anything: false
// means a write raced the observation and nothing was done. Safe to call
// concurrently and from several replicas: at most one of several repairs
// computed from one observation applies.
func (s Store) Adjust(ctx context.Context, sku string, snap Snapshot, delta inventory.Stock, rv int64) (bool, error) {
	ver := snap.Ver
	if snap.Missing {
		ver = ""
	} else if ver == "" {
		ver = "0"
	}
	o := snap.Stock
	n, err := adjustScript.Run(ctx, s.R, []string{inventory.RedisStockKey(sku), restockKey(sku)}, ver,
		delta.Total, delta.Available, delta.Occupied, delta.Sold, o.Total, o.Available, o.Occupied, o.Sold, rvArg(rv)).Int()
	if err != nil {
		return false, fmt.Errorf("redis adjust %s: %w", sku, err)
	}
	return n == 1, nil
}

// buyersPendingKey is the set of a SKU's reservations live when its stock
// hash was last rebuilt (rebuild.lua), over which buyers.lua counts the
// buyer holds: one decided since (its MySQL row committed after
// BuildBuyers read MySQL, or not relayed yet) is no longer live, but was
// then. Same hash tag as the stock hash.
func buyersPendingKey(sku string) string { return inventory.RedisPrefix + "bpend:{" + sku + "}" }

// buyersCountedKey is the set of a SKU's orders buyers.lua counted into
// the buyer holds from MySQL alone (no Redis record): a Try of one of them
// is already in its buyer's hold (try.lua). Same hash tag.
func buyersCountedKey(sku string) string { return inventory.RedisPrefix + "bcounted:{" + sku + "}" }

// restockKey is the set of restock versions a SKU's hash has applied above
// its floor (same hash tag as the stock hash).
func restockKey(sku string) string { return inventory.RedisPrefix + "restocks:{" + sku + "}" }

func rvArg(rv int64) string {
	if rv < 0 {
		return ""
	}
	return strconv.FormatInt(rv, 10)
}
