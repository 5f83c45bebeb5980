package luasplit

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies/internal/redisstock"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

//go:embed rebuild.lua
var rebuildLua string

var rebuildScript = redis.NewScript(rebuildLua)

//go:embed catchup.lua
var catchUpLua string

var catchUpScript = redis.NewScript(catchUpLua)

// catchUp gives sku's shards what MySQL committed and Redis never heard
// of. Restocks: when the shards' totals sum below MySQL's total (a
// Restock whose shard writes failed, or whose caller died between MySQL
// and Redis), every shard's restock floor is raised to MySQL's version
// first, so no late write of those restocks can land any more, then the
// shards are read again and the units still missing are added to the
// first shard; a restock newer than the MySQL read that lands meanwhile
// only makes the repair smaller (Redis short, never over), the next pass
// sees it. Refunds: when the shards' sold sums above MySQL's (a refund
// whose Redis write failed), each refunded order whose record is still
// confirmed gets refund.lua's owner-checked apply, which moves its units
// once whoever else tries. It reports whether it repaired anything.
func (s *Strategy) catchUp(ctx context.Context, sku string, names []string) (bool, error) {
	var total, version, sold int64
	if err := s.db.QueryRowContext(ctx, "SELECT total, version, sold FROM inventory WHERE sku=?", sku).Scan(&total, &version, &sold); err != nil {
		return false, fmt.Errorf("lua-split catch-up %s: %w", sku, err)
	}
	rTotal, rSold, err := s.shardCounts(ctx, names)
	if err != nil {
		return false, err
	}
	repaired := false
	if rSold > sold {
		n, err := s.refundsCaught(ctx, sku)
		if err != nil {
			return false, err
		}
		repaired = n > 0
	}
	if rTotal >= total {
		return repaired, nil
	}
	for _, name := range names {
		if err := catchUpScript.Run(ctx, s.r, []string{inventory.RedisStockKey(name)}, "floor", version).Err(); err != nil {
			return false, fmt.Errorf("lua-split catch-up %s: %w", name, err)
		}
	}
	if rTotal, _, err = s.shardCounts(ctx, names); err != nil || rTotal >= total {
		return repaired, err
	}
	if err := catchUpScript.Run(ctx, s.r, []string{inventory.RedisStockKey(names[0])}, "add", total-rTotal).Err(); err != nil {
		return false, fmt.Errorf("lua-split catch-up %s: %w", names[0], err)
	}
	return true, nil
}

// refundsCaught applies, in Redis, the refunds MySQL holds for sku whose
// record is still confirmed, and returns how many it moved.
func (s *Strategy) refundsCaught(ctx context.Context, sku string) (int, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT order_id FROM orders WHERE sku=? AND state='refunded'", sku)
	if err != nil {
		return 0, fmt.Errorf("lua-split refunds %s: %w", sku, err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, fmt.Errorf("lua-split refunds %s: %w", sku, err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("lua-split refunds %s: %w", sku, err)
	}
	n := 0
	for _, id := range ids {
		vref, rec, err := s.find(ctx, inventory.OrderRef{OrderID: id, SKU: sku})
		if errors.Is(err, redisstock.ErrNoReservation) || err == nil && rec.State != inventory.StateConfirmed {
			continue
		}
		if err != nil {
			return n, err
		}
		prev, err := s.rs.RefundMarked(ctx, vref, false, "")
		if err != nil {
			return n, err
		}
		if prev == inventory.StateConfirmed {
			n++
			s.soldCorrected.Add(rec.Qty)
			s.giveBack(ctx, sku, id, rec.Buyer)
		}
	}
	return n, nil
}

// shardCounts sums the shards' totals and sold units (one pipeline).
func (s *Strategy) shardCounts(ctx context.Context, names []string) (total, sold int64, err error) {
	pipe := s.r.Pipeline()
	cmds := make([]*redis.SliceCmd, len(names))
	for j, name := range names {
		cmds[j] = pipe.HMGet(ctx, inventory.RedisStockKey(name), "total", "sold")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, 0, fmt.Errorf("lua-split shard counts: %w", err)
	}
	for _, c := range cmds {
		v := c.Val()
		t, _ := v[0].(string)
		so, _ := v[1].(string)
		tn, _ := strconv.ParseInt(t, 10, 64)
		sn, _ := strconv.ParseInt(so, 10, 64)
		total += tn
		sold += sn
	}
	return total, sold, nil
}

// The fence, lua-tcc's (redisstock.Fence) for a split: a Redis that
// restarted, or was rolled back, has forgotten its scripts; a reserve that
// meets NOSCRIPT, and every recovery pass, rebuild every SKU's shards from
// MySQL before any reserve runs again. Every operation of this process
// holds s.fence for reading, the rebuild for writing, so nothing of this
// process moves a shard while it is rebuilt. (Other processes are not
// fenced: lua-tcc's gated fence, redis_fence in MySQL, is not built here.)

// ready rebuilds Redis from MySQL if it lost the Try script (a restart).
// The caller holds no fence.
func (s *Strategy) ready(ctx context.Context) error {
	s.fence.Lock()
	defer s.fence.Unlock()
	if ok, err := s.loaded(ctx); err != nil || ok {
		return err
	}
	skus, err := redisstock.ListSKUs(ctx, s.db)
	if err != nil {
		return fmt.Errorf("lua-split rebuild: %w", err)
	}
	for _, sku := range skus {
		if err := s.rebuildSKU(ctx, sku); err != nil {
			return err
		}
	}
	s.rebuilds.Add(1)
	return s.arm(ctx)
}

// arm loads the Try script on every master: its absence later means a
// restart (or a roll back) to rebuild from.
func (s *Strategy) arm(ctx context.Context) error {
	if err := tryScript.Load(ctx, s.r).Err(); err != nil {
		return fmt.Errorf("lua-split fence: load try: %w", err)
	}
	return nil
}

// loaded reports whether every master holds the Try script.
func (s *Strategy) loaded(ctx context.Context) (bool, error) {
	ok, err := s.r.ScriptExists(ctx, tryScript.Hash()).Result()
	if err != nil {
		return false, fmt.Errorf("lua-split fence: %w", err)
	}
	return len(ok) == 1 && ok[0], nil
}

// order is an order as the rebuild sees it.
type order struct {
	id, buyer string
	qty       int64
}

// rebuildSKU writes sku's shards anew from MySQL, the system of record, as
// lua-tcc's Reload rebuilds a hash: total from MySQL; sold from MySQL's
// confirmed orders, each on the shard holding its record (or its path's
// first shard when no shard does); occupied from the reservations still
// live once they were given MySQL's decisions; the rest available, spread
// evenly. The buyer allowances are rebuilt from the same orders (every
// order with a buyer counts, limited or not: stricter, never looser), and
// the pass markers in front of each shard holding a record, so a retried
// reserve still finds its unit. Runs under the fence's write lock.
func (s *Strategy) rebuildSKU(ctx context.Context, sku string) error {
	names, err := s.shardsOf(ctx, sku)
	if err != nil {
		return err
	}
	k := len(names)
	// Redis: every shard's live reservations.
	pipe := s.r.Pipeline()
	zs := make([]*redis.StringSliceCmd, k)
	for j, name := range names {
		zs[j] = pipe.ZRange(ctx, inventory.RedisLiveKey(name), 0, -1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("lua-split rebuild %s: %w", sku, err)
	}
	var liveRefs []inventory.OrderRef
	for j, z := range zs {
		for _, id := range z.Val() {
			liveRefs = append(liveRefs, inventory.OrderRef{OrderID: id, SKU: names[j]})
		}
	}
	recs, found, err := s.rs.GetAll(ctx, liveRefs)
	if err != nil {
		return fmt.Errorf("lua-split rebuild %s: %w", sku, err)
	}
	// MySQL, one snapshot: total and version, the confirmed orders, the
	// decisions of the live reservations.
	var total, version int64
	var confirmed []order
	var states map[string]inventory.OrderState
	ids := make([]string, len(liveRefs))
	for i, r := range liveRefs {
		ids[i] = r.OrderID
	}
	err = sqlstore.InTxWith(ctx, s.db, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}, func(tx *sql.Tx) error {
		confirmed = nil
		if err := tx.QueryRowContext(ctx, "SELECT total, version FROM inventory WHERE sku=?", sku).Scan(&total, &version); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, "SELECT order_id, qty, COALESCE(buyer,'') FROM orders WHERE sku=? AND state='confirmed'", sku)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var o order
			if err := rows.Scan(&o.id, &o.qty, &o.buyer); err != nil {
				return err
			}
			confirmed = append(confirmed, o)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		states, err = sqlstore.OrderStates(ctx, tx, ids)
		return err
	})
	if err != nil {
		return fmt.Errorf("lua-split rebuild %s: read mysql: %w", sku, err)
	}
	// Which shard holds each confirmed order's record.
	pipe = s.r.Pipeline()
	where := make([][]*redis.StringCmd, len(confirmed))
	for i, o := range confirmed {
		for _, name := range names {
			where[i] = append(where[i], pipe.HGet(ctx, inventory.RedisReservationKey(name, o.id), "state"))
		}
	}
	if len(confirmed) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("lua-split rebuild %s: %w", sku, err)
		}
	}
	sold := make([]int64, k)
	var soldAll int64
	held := map[int][]order{} // shard → orders whose record it holds (live or confirmed)
	for i, o := range confirmed {
		at := pick(o.id, k)
		for j, c := range where[i] {
			if st := c.Val(); st == string(inventory.StateConfirmed) || st == string(inventory.StateReserved) {
				at = j
				held[j] = append(held[j], o)
				break
			}
		}
		sold[at] += o.qty
		soldAll += o.qty
	}
	decisions := make([][]any, k)
	var occAll int64
	var live []order // undecided live reservations, with their buyers
	shardOf := map[string]int{}
	for j, name := range names {
		shardOf[name] = j
	}
	for i, r := range liveRefs {
		if !found[i] || recs[i].State != inventory.StateReserved {
			continue
		}
		j := shardOf[r.SKU]
		if st, ok := states[r.OrderID]; ok && st.Final() {
			decisions[j] = append(decisions[j], r.OrderID, string(st))
			continue
		}
		occAll += recs[i].Qty
		o := order{id: r.OrderID, buyer: recs[i].Buyer, qty: recs[i].Qty}
		live = append(live, o)
		held[j] = append(held[j], o)
	}
	avail := total - soldAll - occAll
	if avail < 0 {
		return fmt.Errorf("lua-split rebuild %s: MySQL total %d < sold %d + held %d: not rebuilding shards that sell nothing right", sku, total, soldAll, occAll)
	}
	for j, name := range names {
		a := avail/int64(k) + b2i(int64(j) < avail%int64(k))
		args := append([]any{inventory.RedisReservationKey(name, ""), sold[j], a, version, s.cfg.Retain.Milliseconds()}, decisions[j]...)
		keys := []string{inventory.RedisStockKey(name), inventory.RedisLiveKey(name), inventory.RedisBuyersKey(name)}
		if err := rebuildScript.Run(ctx, s.r, keys, args...).Err(); err != nil {
			return fmt.Errorf("lua-split rebuild %s: %w", name, err)
		}
	}
	// The allowances, the pass markers and the list of shards.
	pipe = s.r.Pipeline()
	for _, name := range names {
		pipe.Del(ctx, allowKey(name), allowOrdersKey(name))
	}
	for _, o := range append(append([]order(nil), confirmed...), live...) {
		if o.buyer == "" {
			continue
		}
		shard := names[pick(o.buyer, k)]
		pipe.HIncrBy(ctx, allowKey(shard), o.buyer, o.qty)
		pipe.HSet(ctx, allowOrdersKey(shard), o.id, fmt.Sprintf("%s %d", o.buyer, o.qty))
		pipe.SAdd(ctx, allowWalksKey(shard, o.id), "kept")
		pipe.PExpire(ctx, allowWalksKey(shard, o.id), s.cfg.Retain)
	}
	for j, os := range held {
		for _, o := range os {
			start := pick(o.id, k)
			for p := start; p != j; p = (p + 1) % k {
				pipe.SAdd(ctx, passKey(names[p], o.id), "rebuilt")
				pipe.PExpire(ctx, passKey(names[p], o.id), s.cfg.Retain)
			}
		}
	}
	pipe.Set(ctx, inventory.RedisSplitKey(sku), strings.Join(names, " "), 0)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("lua-split rebuild %s: %w", sku, err)
	}
	s.returned(sku)
	return nil
}

func allowKey(shard string) string       { return inventory.RedisPrefix + "allow:{" + shard + "}" }
func allowOrdersKey(shard string) string { return inventory.RedisPrefix + "allowo:{" + shard + "}" }

// allowWalksKey is the set of the walks of order id that hold its
// allowance (allow.lua), in the buyer's shard.
func allowWalksKey(shard, id string) string {
	return inventory.RedisPrefix + "alloww:{" + shard + "}:" + id
}
