// Package luasplit is lua-tcc with a SKU's Redis stock split over K stock
// hashes ("shards") whose hash tags fall in K different parts of the Redis
// Cluster slot space, so a hot SKU's reserves spread over the masters
// instead of queueing on one. K is --buckets.
//
// Shard n of SKU S keeps its stock, reservations, live set and buyer
// holds under the keys lua-tcc keeps for a SKU, with the shard's name
// ("S~i", chosen so its slot falls in the n-th K-th of the slot space) in
// place of S: every Lua call touches one shard, one slot. The names are
// listed under inventory.RedisSplitKey(S), which the auditor reads to sum
// the shards. MySQL is lua-tcc's: one inventory row per SKU, the orders
// table the TCC log whose first decision wins.
//
// A reserve starts at the shard its order id hashes to and, refused there,
// moves on to the next, one Lua call per hop, until one reserves or all K
// refused. A shard that refused an order and let it move on leaves a pass
// marker for it (try.lua), so a repeated reserve of the order walks the
// same path to the shard holding its unit and never takes a second one; a
// walk that ends refused everywhere takes its markers back. The per-buyer
// limit is an allowance kept in the shard the buyer hashes to (allow.lua):
// taken before the walk, given back when the walk ends holding nothing and
// when the order is cancelled, expired or refunded — two scripts, not one,
// so a crash between them leaves the buyer short, never over its limit.
//
// Confirm, cancel and refund find the order's shard by reading its
// reservation record along the same path (a hop per shard passed); the
// decision is lua-tcc's. A cancel of an order no shard knows leaves a
// cancelled marker in every shard. Expiry and the application of MySQL's
// decisions run per shard. A restock spreads its units over the shards.
//
// A Redis that restarted is rebuilt from MySQL before a reserve runs
// again (fence.go), as lua-tcc's is, within this process only; a restock
// whose shard writes were lost is caught up by the recovery pass, and so
// is a refund whose Redis write was lost (catchUp). Not here: lua-tcc's
// gated fence across processes, group commit of confirms, --degrade, --soldout-flag; see
// docs/redis-split.md.
package luasplit

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/internal/redisstock"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

//go:embed try.lua
var tryLua string

var tryScript = redis.NewScript(tryLua)

//go:embed allow.lua
var allowLua string

var allowScript = redis.NewScript(allowLua)

// Name is the strategy's name on the command line.
const Name = "lua-split"

// Strategy implements strategies.Strategy. Safe for concurrent use.
type Strategy struct {
	db  *sql.DB
	r   redis.UniversalClient
	rs  redisstock.Store
	cfg strategies.Config
	k   int

	mu     sync.Mutex
	shards map[string][]string // SKU → shard names
	empty  map[string]bool     // SKU → the last false-sold-out check saw no units
	gen    map[string]int64    // SKU → releases seen (clears empty)

	// fence is held for reading by every operation and for writing by a
	// rebuild (fence.go).
	fence                                                                  sync.RWMutex
	rebuilds, restocksCaught, soldCorrected                                atomic.Int64
	hops, probes, refusals, falseSoldOut, falseSoldOutUnits, limitRefusals atomic.Int64
	bgErrors, deferred, recovered, expired                                 atomic.Int64
}

var _ strategies.Strategy = (*Strategy)(nil)

// New builds the strategy on cfg.DB and cfg.Redis with cfg.Buckets shards.
func New(cfg strategies.Config) (*Strategy, error) {
	cfg = cfg.WithDefaults()
	if cfg.Redis == nil {
		return nil, errors.New("lua-split needs redis")
	}
	if cfg.Degrade != "" || cfg.SoldOutFlag > 0 {
		return nil, errors.New("lua-split: --degrade and --soldout-flag are lua-tcc's options")
	}
	return &Strategy{db: cfg.DB, r: cfg.Redis, rs: redisstock.Store{R: cfg.Redis, Retain: cfg.Retain, DB: cfg.DB}, cfg: cfg, k: cfg.Buckets,
		shards: map[string][]string{}, empty: map[string]bool{}, gen: map[string]int64{}}, nil
}

// Name is "lua-split".
func (s *Strategy) Name() string { return Name }

// Setup splits each SKU of MySQL's inventory table over K shards, unless
// Redis already lists its shards (a restart on running stores: live data,
// kept). Only a fresh sale splits: a SKU with units held in MySQL is
// refused (this strategy cannot rebuild reservations).
func (s *Strategy) Setup(ctx context.Context, _ []inventory.Stock) error {
	rows, err := s.db.QueryContext(ctx, "SELECT sku, total, available, occupied, sold, version FROM inventory ORDER BY sku")
	if err != nil {
		return fmt.Errorf("lua-split setup: %w", err)
	}
	type row struct {
		sku                              string
		total, avail, occ, sold, version int64
	}
	var all []row
	existed := false
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.sku, &r.total, &r.avail, &r.occ, &r.sold, &r.version); err != nil {
			rows.Close()
			return fmt.Errorf("lua-split setup: %w", err)
		}
		all = append(all, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("lua-split setup: %w", err)
	}
	for start := 0; start < len(all); start += 500 {
		part := all[start:min(start+500, len(all))]
		pipe := s.r.Pipeline()
		got := make([]*redis.StringCmd, len(part))
		for i, r := range part {
			got[i] = pipe.Get(ctx, inventory.RedisSplitKey(r.sku))
		}
		_, _ = pipe.Exec(ctx)
		pipe = s.r.Pipeline()
		var made []*redis.BoolCmd
		for i, r := range part {
			if v, err := got[i].Result(); err == nil {
				s.remember(r.sku, strings.Fields(v))
				existed = true
				continue
			} else if !errors.Is(err, redis.Nil) {
				return fmt.Errorf("lua-split setup %s: %w", r.sku, err)
			}
			if r.occ != 0 || r.total != r.avail+r.sold {
				return fmt.Errorf("lua-split setup %s: MySQL holds %d units reserved (total %d): only a fresh sale splits", r.sku, r.occ, r.total)
			}
			names := shardNames(r.sku, s.k)
			for n, name := range names {
				a := r.avail/int64(s.k) + b2i(int64(n) < r.avail%int64(s.k))
				sold := int64(0)
				if n == 0 {
					sold = r.sold
				}
				pipe.HSet(ctx, inventory.RedisStockKey(name), "total", a+sold, "available", a, "occupied", 0, "sold", sold,
					"ver", 0, "rv", r.version, "bv", 1)
			}
			made = append(made, pipe.SetNX(ctx, inventory.RedisSplitKey(r.sku), strings.Join(names, " "), 0))
			s.remember(r.sku, names)
		}
		if len(made) == 0 {
			continue
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("lua-split setup: %w", err)
		}
	}
	if existed {
		// A restart on running stores: a Redis that restarted too is
		// rebuilt from MySQL first.
		return s.ready(ctx)
	}
	return s.arm(ctx)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// remember caches sku's shard names.
func (s *Strategy) remember(sku string, names []string) {
	s.mu.Lock()
	s.shards[sku] = names
	s.mu.Unlock()
}

// shardsOf returns sku's shard names (from Redis the first time).
func (s *Strategy) shardsOf(ctx context.Context, sku string) ([]string, error) {
	s.mu.Lock()
	names, ok := s.shards[sku]
	s.mu.Unlock()
	if ok {
		return names, nil
	}
	v, err := s.r.Get(ctx, inventory.RedisSplitKey(sku)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("lua-split: unknown sku %q (no shards)", sku)
	}
	if err != nil {
		return nil, fmt.Errorf("lua-split shards %s: %w", sku, err)
	}
	names = strings.Fields(v)
	s.remember(sku, names)
	return names, nil
}

// shardNames names K shards of sku, "sku~i" for the smallest i whose Redis
// Cluster slot falls in the n-th K-th of the 16384 slots: on a cluster of
// K masters with the slots spread evenly, one shard per master.
func shardNames(sku string, k int) []string {
	out := make([]string, k)
	for n := range out {
		lo, hi := n*16384/k, (n+1)*16384/k
		for i := 0; ; i++ {
			name := sku + "~" + strconv.Itoa(i)
			if sl := int(crc16(name) % 16384); sl >= lo && sl < hi || i >= 1<<20 {
				out[n] = name
				break
			}
		}
	}
	return out
}

// crc16 is Redis Cluster's key hash (CRC-16/XMODEM).
func crc16(s string) uint16 {
	var c uint16
	for i := 0; i < len(s); i++ {
		c ^= uint16(s[i]) << 8
		for b := 0; b < 8; b++ {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
	}
	return c
}

// pick is the shard a key (order id, buyer) starts at.
func pick(key string, k int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(k))
}

func passKey(shard, id string) string { return inventory.RedisPrefix + "pass:{" + shard + "}:" + id }

// Reserve is the Try, walked over the shards from the one the order id
// hashes to (see the package comment). A reserve with a per-buyer limit
// first takes the buyer's allowance for the order (allow.lua, in the
// buyer's shard), keeps it when the walk holds a unit and drops its hold
// when the walk is refused; the units go back when no walk of the order
// holds them, or when the order is cancelled, expired or refunded.
// Several walks of one order id (retries reaching several instances) may
// run at once: the pass markers and the allowance's holders are per walk.
func (s *Strategy) Reserve(ctx context.Context, r inventory.Reservation) error {
	err := s.reserve(ctx, r)
	if errors.Is(err, errFenced) {
		// Redis restarted (or was rolled back): rebuild it from MySQL,
		// then walk again.
		if err := s.ready(ctx); err != nil {
			return err
		}
		err = s.reserve(ctx, r)
	}
	return err
}

// errFenced: a shard's server has lost the Try script (a restart).
var errFenced = errors.New("redis lost its scripts: rebuild first")

// reserve is Reserve under the fence.
func (s *Strategy) reserve(ctx context.Context, r inventory.Reservation) error {
	s.fence.RLock()
	defer s.fence.RUnlock()
	names, err := s.shardsOf(ctx, r.SKU)
	if err != nil {
		return err
	}
	token := strconv.FormatUint(rand.Uint64(), 36)
	limited := r.Buyer != "" && r.Limit > 0
	if limited {
		switch n, err := s.allow(ctx, names, "take", r.OrderID, r.Buyer, r.Qty, r.Limit, token); {
		case err != nil:
			return fmt.Errorf("redis allowance: %w", err)
		case n == -4:
			s.limitRefusals.Add(1)
			return fmt.Errorf("reserve %s: buyer %s at its limit of %d: %w", r.OrderID, r.Buyer, r.Limit, inventory.ErrLimitExceeded)
		}
	}
	held, err := s.walk(ctx, names, r, token)
	switch {
	case !limited:
	case held:
		// Its units stay out until the order is cancelled, expired or
		// refunded (a failure here leaves them out all the same).
		_, _ = s.allow(ctx, names, "keep", r.OrderID, r.Buyer, 0, 0, token)
	case errors.Is(err, inventory.ErrOutOfStock) || errors.Is(err, inventory.ErrAlreadyFinal):
		// The walk holds nothing, for sure: its hold on the allowance
		// goes (the units go back when no other walk of the order holds
		// them). After any other error a Try may have reserved unheard:
		// the hold stays, for a retry or the order's release to settle.
		_, _ = s.allow(ctx, names, "drop", r.OrderID, r.Buyer, 0, 0, token)
	}
	return err
}

// walk is Reserve's walk over the shards; held says a shard holds the
// order's unit (reserved now or before).
func (s *Strategy) walk(ctx context.Context, names []string, r inventory.Reservation, token string) (held bool, err error) {
	k := len(names)
	start := pick(r.OrderID, k)
	for i := 0; i < k; i++ {
		moveOn := i < k-1
		n, err := s.try(ctx, names[(start+i)%k], r, moveOn, token)
		if err != nil {
			if errors.Is(err, errFenced) {
				// The script never ran here: this walk holds nothing,
				// its pass markers go. After any other error the Try
				// may have reserved unheard, and the markers are what
				// walks a retry on past the shards it passed to that
				// unit: they stay (at worst the order's later reserves
				// are refused there: undersell, never a unit twice).
				s.dropMarkers(ctx, names, start, i, r.OrderID, token)
			}
			return false, fmt.Errorf("redis try: %w", err)
		}
		switch n {
		case 1, 2:
			s.hops.Add(int64(i))
			return true, nil
		case 0, 3:
			if moveOn {
				continue
			}
			s.hops.Add(int64(i))
			// Refused everywhere: this walk holds nothing, so its pass
			// markers go (a failure leaves them: the order's later
			// reserves are then refused there, undersell, never a unit
			// twice).
			s.dropMarkers(ctx, names, start, k-1, r.OrderID, token)
			s.refused(ctx, r, names)
			return false, inventory.ErrOutOfStock
		case -2:
			return false, fmt.Errorf("reserve %s: order already cancelled: %w", r.OrderID, inventory.ErrAlreadyFinal)
		default:
			return false, fmt.Errorf("redis try: shard %s of %q has no stock hash (%d)", names[(start+i)%k], r.SKU, n)
		}
	}
	return false, inventory.ErrOutOfStock // not reached: the last shard does not move on
}

// dropMarkers takes a walk's token back from the pass markers of the
// first n shards of its path, the walk holding nothing (best effort: a
// marker left makes the order's later reserves skip that shard,
// undersell, never a unit twice).
func (s *Strategy) dropMarkers(ctx context.Context, names []string, start, n int, id, token string) {
	if n == 0 {
		return
	}
	pipe := s.r.Pipeline()
	for j := 0; j < n; j++ {
		pipe.SRem(ctx, passKey(names[(start+j)%len(names)], id), token)
	}
	_, _ = pipe.Exec(ctx)
}

// allow runs allow.lua in the shard the buyer hashes to.
func (s *Strategy) allow(ctx context.Context, names []string, op, id, buyer string, qty, limit int64, token string) (int, error) {
	shard := names[pick(buyer, len(names))]
	keys := []string{allowKey(shard), allowOrdersKey(shard), allowWalksKey(shard, id)}
	return allowScript.Run(ctx, s.r, keys, op, id, buyer, qty, limit, token, s.cfg.Retain.Milliseconds()).Int()
}

// giveBack returns a released order's allowance (a no-op for an order
// that took none); a failure leaves the buyer short, never over.
func (s *Strategy) giveBack(ctx context.Context, sku, id, buyer string) {
	if buyer == "" {
		return
	}
	names, err := s.shardsOf(ctx, sku)
	if err != nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.OpTimeout)
	defer cancel()
	_, _ = s.allow(rctx, names, "give", id, buyer, 0, 0, "")
}

// try runs try.lua on one shard; a shard without valid buyer holds (not
// made by Setup) gets them built from MySQL first.
func (s *Strategy) try(ctx context.Context, shard string, r inventory.Reservation, moveOn bool, token string) (int, error) {
	keys := []string{inventory.RedisStockKey(shard), inventory.RedisReservationKey(shard, r.OrderID), inventory.RedisLiveKey(shard),
		inventory.RedisBuyersKey(shard), passKey(shard, r.OrderID)}
	mo := "0"
	if moveOn {
		mo = "1"
	}
	// The limit is the allowance's (allow.lua): the shard's own buyer
	// holds are kept but not checked.
	args := []any{r.Qty, r.Deadline.UnixMilli(), r.OrderID, r.Buyer, 0, mo, s.cfg.Retain.Milliseconds(), token}
	// By its digest: a server without it restarted (the fence, fence.go).
	n, err := s.r.EvalSha(ctx, tryScript.Hash(), keys, args...).Int()
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		return 0, errFenced
	}
	return n, err
}

// refused counts a refusal, and a false sold-out when another shard held
// the units at the time of the check (one pipelined read of the shards;
// skipped while this process saw the SKU empty and gave nothing back
// since, so a sold-out SKU's refusals cost no extra round trip).
func (s *Strategy) refused(ctx context.Context, r inventory.Reservation, names []string) {
	s.refusals.Add(1)
	s.mu.Lock()
	empty, gen := s.empty[r.SKU], s.gen[r.SKU]
	s.mu.Unlock()
	if empty {
		return
	}
	pipe := s.r.Pipeline()
	cmds := make([]*redis.StringCmd, len(names))
	for i, name := range names {
		cmds[i] = pipe.HGet(ctx, inventory.RedisStockKey(name), "available")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return
	}
	var sum int64
	for _, c := range cmds {
		v, _ := c.Int64()
		sum += v
	}
	if sum >= r.Qty {
		s.falseSoldOut.Add(1)
		s.falseSoldOutUnits.Add(r.Qty)
	} else if sum == 0 {
		s.mu.Lock()
		if s.gen[r.SKU] == gen {
			s.empty[r.SKU] = true
		}
		s.mu.Unlock()
	}
}

// returned notes that sku may have units again (a release succeeded).
func (s *Strategy) returned(sku string) {
	s.mu.Lock()
	s.gen[sku]++
	delete(s.empty, sku)
	s.mu.Unlock()
}

// find reads the order's reservation record along its path: the shard
// holding it (vref names it as the SKU) and the record. With no record in
// any shard it returns the path's first shard and ErrNoReservation.
func (s *Strategy) find(ctx context.Context, ref inventory.OrderRef) (inventory.OrderRef, redisstock.Reservation, error) {
	names, err := s.shardsOf(ctx, ref.SKU)
	if err != nil {
		return ref, redisstock.Reservation{}, err
	}
	start := pick(ref.OrderID, len(names))
	for i := range names {
		vref := inventory.OrderRef{OrderID: ref.OrderID, SKU: names[(start+i)%len(names)]}
		res, err := s.rs.Get(ctx, vref)
		if errors.Is(err, redisstock.ErrNoReservation) {
			s.probes.Add(1)
			continue
		}
		return vref, res, err
	}
	return inventory.OrderRef{OrderID: ref.OrderID, SKU: names[start]}, redisstock.Reservation{}, redisstock.ErrNoReservation
}

// Confirm records the sale in MySQL (the decision), then in the shard.
func (s *Strategy) Confirm(ctx context.Context, ref inventory.OrderRef) error {
	s.fence.RLock()
	defer s.fence.RUnlock()
	vref, res, err := s.find(ctx, ref)
	switch {
	case errors.Is(err, redisstock.ErrNoReservation):
		// Redis lost the record (a restart, a rollback) or it outlived
		// Retain: the TCC log answers a client that asks again.
		return sqlstore.ConfirmFromLog(ctx, s.db, ref, fmt.Errorf("confirm %s: %w", ref.OrderID, inventory.ErrUnknownOrder))
	case err != nil:
		return err
	}
	switch res.State {
	case inventory.StateConfirmed:
		return nil
	case inventory.StateCancelled, inventory.StateExpired, inventory.StateRefunded:
		return fmt.Errorf("confirm %s: order is %s: %w", ref.OrderID, res.State, inventory.ErrAlreadyFinal)
	}
	want := inventory.StateConfirmed
	if !clock.Now().Before(res.Deadline) {
		want = inventory.StateExpired
	}
	got, err := s.decide(ctx, ref, res, want)
	if err != nil {
		return err
	}
	if s.finishRedis(ctx, vref, got) && got != inventory.StateConfirmed {
		s.giveBack(ctx, ref.SKU, ref.OrderID, res.Buyer)
	}
	if got != inventory.StateConfirmed {
		s.returned(ref.SKU)
		return fmt.Errorf("confirm %s: order is %s: %w", ref.OrderID, got, inventory.ErrAlreadyFinal)
	}
	return nil
}

// Cancel records the cancel in MySQL unless another decision exists, then
// releases the shard's reservation under the owner check. An order no
// shard knows gets a cancelled marker in every shard, so a late Try is
// refused wherever its path starts.
func (s *Strategy) Cancel(ctx context.Context, ref inventory.OrderRef) error {
	s.fence.RLock()
	defer s.fence.RUnlock()
	vref, res, err := s.find(ctx, ref)
	unknown := errors.Is(err, redisstock.ErrNoReservation)
	switch {
	case unknown:
		res = redisstock.Reservation{}
	case err != nil:
		return err
	case res.State == inventory.StateConfirmed, res.State == inventory.StateRefunded:
		return fmt.Errorf("cancel %s: order is %s: %w", ref.OrderID, res.State, inventory.ErrAlreadyFinal)
	case res.State == inventory.StateCancelled, res.State == inventory.StateExpired:
		return nil
	}
	got, err := s.decide(ctx, ref, res, inventory.StateCancelled)
	if err != nil {
		return err
	}
	if unknown && got == inventory.StateCancelled {
		names, _ := s.shardsOf(ctx, ref.SKU)
		for _, name := range names {
			s.finishRedis(ctx, inventory.OrderRef{OrderID: ref.OrderID, SKU: name}, got)
		}
	} else if s.finishRedis(ctx, vref, got) && got != inventory.StateConfirmed && got != inventory.StateRefunded {
		s.giveBack(ctx, ref.SKU, ref.OrderID, res.Buyer)
	}
	if got == inventory.StateConfirmed || got == inventory.StateRefunded {
		return fmt.Errorf("cancel %s: order is %s: %w", ref.OrderID, got, inventory.ErrAlreadyFinal)
	}
	s.returned(ref.SKU)
	return nil
}

// decide writes decision want as the order's MySQL row unless one exists
// (a confirm also moves the SKU's units from available to sold), and
// returns the decision that stands. Redis is the caller's to update.
func (s *Strategy) decide(ctx context.Context, ref inventory.OrderRef, res redisstock.Reservation, want inventory.OrderState) (inventory.OrderState, error) {
	err := sqlstore.WriteDecision(ctx, s.db, inventory.Reservation{OrderID: ref.OrderID, SKU: ref.SKU, Qty: res.Qty, Deadline: res.Deadline, Buyer: res.Buyer}, want)
	switch {
	case sqlstore.IsDuplicate(err):
		got, err := sqlstore.StateOf(ctx, s.db, ref.OrderID)
		if err != nil {
			return "", fmt.Errorf("read decision %s: %w", ref.OrderID, err)
		}
		if !got.Final() {
			return "", fmt.Errorf("decision %s: MySQL holds it %s (not lua-split's)", ref.OrderID, got)
		}
		return got, nil
	case errors.Is(err, sqlstore.ErrNoMySQLStock):
		// Redis promised a unit MySQL does not have: drift. Refuse the
		// sale (the cancel gives the unit back) rather than oversell.
		if _, cerr := s.decide(ctx, ref, res, inventory.StateCancelled); cerr != nil {
			return "", errors.Join(err, cerr)
		}
		return inventory.StateCancelled, nil
	case err != nil:
		return "", fmt.Errorf("%s %s: %w", want, ref.OrderID, err)
	}
	return want, nil
}

// finishRedis brings the shard in line with a decision durable in MySQL,
// on a context of its own; a failure is left to recovery (counted). A
// cancel leaves its marker.
func (s *Strategy) finishRedis(ctx context.Context, vref inventory.OrderRef, got inventory.OrderState) bool {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.OpTimeout)
	defer cancel()
	if _, err := s.rs.Finish(rctx, vref, got, got == inventory.StateCancelled); err != nil {
		s.deferred.Add(1)
		return false
	}
	return true
}

// Refund is lua-tcc's refund (the decision under the order row's lock in
// MySQL, then the shard's record moved under refund.lua's owner check),
// on the shard that holds the order's record.
func (s *Strategy) Refund(ctx context.Context, ref inventory.OrderRef) error {
	s.fence.RLock()
	defer s.fence.RUnlock()
	vref, rec, err := s.find(ctx, ref)
	if err != nil && !errors.Is(err, redisstock.ErrNoReservation) {
		return err
	}
	moved, deferred, err := s.rs.RefundTCC(ctx, s.db, ref, vref, s.cfg.OpTimeout)
	if deferred {
		s.deferred.Add(1)
	}
	if moved {
		// The buyer's allowance back, on a context of its own as the
		// Redis write was.
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.OpTimeout)
		s.giveBack(gctx, ref.SKU, ref.OrderID, rec.Buyer)
		cancel()
	}
	if err == nil {
		s.returned(ref.SKU)
	}
	return err
}

// Restock adds the units in MySQL first (journalled), then spreads them
// over the shards, each write applied once by the restock's version. A
// shard write that fails leaves Redis short (undersell, never oversell).
func (s *Strategy) Restock(ctx context.Context, r inventory.Restock) error {
	s.fence.RLock()
	defer s.fence.RUnlock()
	names, err := s.shardsOf(ctx, r.SKU)
	if err != nil {
		return err
	}
	version, applied, err := s.rs.RestockMySQL(ctx, s.db, r)
	if err != nil || !applied {
		return err
	}
	k := int64(len(names))
	var errs []error
	for n, name := range names {
		q := r.Qty/k + b2i(int64(n) < r.Qty%k)
		if q == 0 {
			continue
		}
		if err := s.rs.ApplyRestock(ctx, inventory.Restock{ID: r.ID, SKU: name, Qty: q}, version, s.cfg.OpTimeout); err != nil {
			errs = append(errs, err)
		}
	}
	s.returned(r.SKU)
	return errors.Join(errs...)
}

// Run is the recovery loop: every SweepPeriod, each shard's live
// reservations get MySQL's decisions, and those past their deadline
// without one expire.
func (s *Strategy) Run(ctx context.Context) error {
	sqlstore.Every(ctx, s.cfg.SweepPeriod, s.recover, func(error) { s.bgErrors.Add(1) })
	return nil
}

// Settle runs one recovery pass.
func (s *Strategy) Settle(ctx context.Context) error { return s.recover(ctx) }

// recover visits every shard of every SKU of MySQL's catalog.
func (s *Strategy) recover(ctx context.Context) error {
	// A Redis that restarted, even with no reserve to notice it, is
	// rebuilt from MySQL first.
	if err := s.ready(ctx); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	s.fence.RLock()
	defer s.fence.RUnlock()
	skus, err := redisstock.ListSKUs(ctx, s.db)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	now := clock.Now()
	for _, sku := range skus {
		names, err := s.shardsOf(ctx, sku)
		if err != nil {
			return fmt.Errorf("recover: %w", err)
		}
		if caught, err := s.catchUp(ctx, sku, names); err != nil {
			return fmt.Errorf("recover: %w", err)
		} else if caught {
			s.restocksCaught.Add(1) // restocks or refunds caught up
			s.returned(sku)
		}
		for _, name := range names {
			if err := s.recoverShard(ctx, sku, name, now); err != nil {
				return fmt.Errorf("recover %s: %w", name, err)
			}
		}
	}
	return nil
}

// recoverShard applies MySQL's decisions to one shard's live reservations
// and expires those past their deadline without one (lua-tcc's pass, for
// one shard).
func (s *Strategy) recoverShard(ctx context.Context, sku, shard string, now time.Time) error {
	ids, err := s.rs.Due(ctx, shard, time.Time{}, 0)
	if err != nil || len(ids) == 0 {
		return err
	}
	states, err := sqlstore.OrderStates(ctx, s.db, ids)
	if err != nil {
		return err
	}
	var undecided []string
	for _, id := range ids {
		st, ok := states[id]
		if !ok || !st.Final() {
			undecided = append(undecided, id)
			continue
		}
		vref := inventory.OrderRef{OrderID: id, SKU: shard}
		rec, err := s.rs.Get(ctx, vref)
		if err != nil && !errors.Is(err, redisstock.ErrNoReservation) {
			return err
		}
		prev, err := s.rs.Finish(ctx, vref, st, false)
		if err != nil {
			return err
		}
		if st != inventory.StateConfirmed {
			s.giveBack(ctx, sku, id, rec.Buyer)
		}
		if prev == inventory.StateReserved {
			s.recovered.Add(1)
			s.returned(sku)
		}
	}
	for start := 0; start < len(undecided); start += 500 {
		part := undecided[start:min(start+500, len(undecided))]
		vrefs := make([]inventory.OrderRef, len(part))
		for i, id := range part {
			vrefs[i] = inventory.OrderRef{OrderID: id, SKU: shard}
		}
		recs, found, err := s.rs.GetAll(ctx, vrefs)
		if err != nil {
			return err
		}
		var due, dueV []inventory.OrderRef
		var dueRes []redisstock.Reservation
		for i, v := range vrefs {
			if found[i] && recs[i].State == inventory.StateReserved && !now.Before(recs[i].Deadline) {
				due = append(due, inventory.OrderRef{OrderID: v.OrderID, SKU: sku})
				dueV = append(dueV, v)
				dueRes = append(dueRes, recs[i])
			}
		}
		if len(due) == 0 {
			continue
		}
		stand, err := redisstock.DecideExpired(ctx, s.db, s.cfg.OpTimeout, due, dueRes)
		if err != nil {
			return err
		}
		byState := map[inventory.OrderState][]inventory.OrderRef{}
		buyers := map[string]string{}
		for i, ref := range due {
			st := stand[ref.OrderID]
			if st == inventory.StateExpired {
				s.expired.Add(1)
			} else {
				s.recovered.Add(1)
			}
			if st == inventory.StateCancelled {
				if s.finishRedis(ctx, dueV[i], st) {
					s.giveBack(ctx, sku, ref.OrderID, dueRes[i].Buyer)
				}
				continue
			}
			byState[st] = append(byState[st], dueV[i])
			if st != inventory.StateConfirmed {
				buyers[ref.OrderID] = dueRes[i].Buyer
			}
		}
		for st, refs := range byState {
			errs := s.rs.FinishAll(ctx, refs, st)
			for j, err := range errs {
				if err != nil {
					s.deferred.Add(1)
				} else if b := buyers[refs[j].OrderID]; b != "" {
					s.giveBack(ctx, sku, refs[j].OrderID, b)
				}
			}
		}
		s.returned(sku)
	}
	return nil
}

// Close has nothing to release.
func (s *Strategy) Close() error { return nil }

// Counters reports the split's hops and refusals, false sold-outs
// (refused while the shards together held the units, as buckets counts
// them), finish look-ups past the first shard, and lua-tcc's recovery
// counters.
func (s *Strategy) Counters() map[string]float64 {
	return map[string]float64{
		"split_shards":         float64(s.k),
		"split_hops":           float64(s.hops.Load()),
		"split_probes":         float64(s.probes.Load()),
		"split_refusals":       float64(s.refusals.Load()),
		"split_limit_refusals": float64(s.limitRefusals.Load()),
		"false_sold_out":       float64(s.falseSoldOut.Load()),
		"false_sold_out_units": float64(s.falseSoldOutUnits.Load()),
		"background_errors":    float64(s.bgErrors.Load()),
		"tcc_deferred_redis":   float64(s.deferred.Load()),
		"tcc_recovered":        float64(s.recovered.Load()),
		"tcc_expired":          float64(s.expired.Load()),
		"redis_rebuilds":       float64(s.rebuilds.Load()),
		"tcc_restocks_caught":  float64(s.restocksCaught.Load()),
		"tcc_sold_corrected":   float64(s.soldCorrected.Load()),
	}
}
