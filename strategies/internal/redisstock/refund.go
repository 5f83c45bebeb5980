package redisstock

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

//go:embed refund.lua
var refundLua string

var refundScript = redis.NewScript(refundLua)

// refundWindow bounds how long a refund counts as in flight after
// BeginRefund: a refund whose caller died between its MySQL commit and its
// Redis write stops holding CorrectSold back after it (its difference is
// then drift, corrected as any other).
const refundWindow = time.Minute

// refundingKey is the sorted set of a SKU's refunds in flight (order id,
// scored by when BeginRefund marked it): decided, or about to be, in MySQL
// and not yet applied to Redis. Same hash tag as the stock hash.
func refundingKey(sku string) string { return inventory.RedisPrefix + "refunding:{" + sku + "}" }

// BeginRefund marks ref's refund in flight, before its decision is written
// in MySQL, for a strategy that decides refunds in MySQL and then applies
// them here (RefundMarked with decide false): until RefundMarked or
// EndRefund clears the mark, CorrectSold leaves the SKU alone, since
// MySQL's sold may already count the refund that Redis's does not yet.
// Without it, a correction computed in that gap and applied before the
// refund's own write releases the units twice in Redis
// (TestCorrectSoldLeavesRefundsInFlight). The mark is this attempt's own
// (the order id and a random tag): a duplicate refund of the same order,
// refused in MySQL as already refunded, clears its own mark and never the
// winner's, whose write may still be on its way.
func (s Store) BeginRefund(ctx context.Context, ref inventory.OrderRef) (mark string, err error) {
	mark = ref.OrderID + "#" + strconv.FormatUint(rand.Uint64(), 36)
	err = s.R.ZAdd(ctx, refundingKey(ref.SKU), redis.Z{Score: float64(clock.Now().UnixMilli()), Member: mark}).Err()
	if err != nil {
		return "", fmt.Errorf("redis refund mark: %w", err)
	}
	return mark, nil
}

// EndRefund clears the in-flight mark BeginRefund returned without
// applying anything: its MySQL decision was not made (refused, or
// failed). Best effort: a mark left behind ages out after refundWindow.
func (s Store) EndRefund(ctx context.Context, ref inventory.OrderRef, mark string) {
	_ = s.R.ZRem(ctx, refundingKey(ref.SKU), mark).Err()
}

// refundsInFlight reports whether sku has a refund marked in flight within
// refundWindow.
func (s Store) refundsInFlight(ctx context.Context, sku string) (bool, error) {
	since := strconv.FormatInt(clock.Now().Add(-refundWindow).UnixMilli(), 10)
	n, err := s.R.ZCount(ctx, refundingKey(sku), since, "+inf").Result()
	if err != nil {
		return false, fmt.Errorf("refunds in flight %s: %w", sku, err)
	}
	return n > 0, nil
}

// Refund gives a confirmed order's units back to available in Redis, once,
// under the owner check of refund.lua, and returns the state it found ("":
// no record, nothing moved). decide says Redis makes the decision (only a
// 'confirmed' record moves); otherwise the refund is already durable in
// MySQL and a record still 'reserved' (a confirm whose Redis write was
// deferred) has its units moved out of occupied instead. Either way it
// clears the order's in-flight mark (BeginRefund) in the same script. A
// missing stock hash is ErrNoStockHash (nothing moved). Safe for
// concurrent use: of several refunds of one order, exactly one moves the
// units.
func (s Store) Refund(ctx context.Context, ref inventory.OrderRef, decide bool) (inventory.OrderState, error) {
	return s.RefundMarked(ctx, ref, decide, "")
}

// RefundMarked is Refund clearing, in the same script, the in-flight mark
// BeginRefund returned ("": none).
func (s Store) RefundMarked(ctx context.Context, ref inventory.OrderRef, decide bool, mark string) (inventory.OrderState, error) {
	mode := "apply"
	if decide {
		mode = "decide"
	}
	k := keys(ref.SKU, ref.OrderID)
	prev, err := refundScript.Run(ctx, s.R, append(k[:4:4], refundingKey(ref.SKU)), mode, ref.OrderID, s.Retain.Milliseconds(), mark).Text()
	if err == nil && prev == "nohash" {
		err = ErrNoStockHash
	}
	if err != nil {
		return "", fmt.Errorf("redis refund: %w", err)
	}
	return inventory.OrderState(prev), nil
}

// RefundRefusal is the answer to a refund of ref that MySQL holds no
// decision for, read from the Redis record: none, the order is unknown;
// reserved, it is not confirmed; any other state (a cancel marker, or a
// release whose row another operation is writing now), it is final.
func (s Store) RefundRefusal(ctx context.Context, ref inventory.OrderRef) error {
	res, err := s.Get(ctx, ref)
	switch {
	case errors.Is(err, ErrNoReservation):
		return fmt.Errorf("refund %s: %w", ref.OrderID, inventory.ErrUnknownOrder)
	case err != nil:
		return fmt.Errorf("refund %s: %w", ref.OrderID, err)
	case res.State == inventory.StateReserved:
		return fmt.Errorf("refund %s: %w", ref.OrderID, inventory.ErrNotConfirmed)
	}
	return fmt.Errorf("refund %s: order is %s in redis: %w", ref.OrderID, res.State, inventory.ErrAlreadyFinal)
}

// RefundTCC is the refund of a strategy whose decisions live in MySQL's
// orders table (lua-tcc, lua-split): the refund marked in flight here,
// decided in MySQL under the order row's lock (sqlstore.RefundSold: the
// "already released" check), then applied to the record rref (the order's
// record key: its shard for lua-split) under refund.lua's owner check, on
// a context of its own bounded by within. moved is true when this call
// moved the units in Redis; deferred when its Redis write failed (left to
// recovery's sold correction). An order MySQL holds no decision for is
// answered from Redis (RefundRefusal).
func (s Store) RefundTCC(ctx context.Context, db *sql.DB, ref, rref inventory.OrderRef, within time.Duration) (moved, deferred bool, err error) {
	mark, err := s.BeginRefund(ctx, rref)
	if err != nil {
		return false, false, fmt.Errorf("refund %s: %w", ref.OrderID, err)
	}
	fresh, err := sqlstore.RefundSold(ctx, db, ref)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), within)
	defer cancel()
	if !fresh || err != nil {
		// Nothing decided now (or the commit's outcome is unknown: then
		// the mark ages out, and recovery corrects what it sees).
		if !errors.Is(err, inventory.ErrOutcomeUnknown) {
			s.EndRefund(rctx, rref, mark)
		}
	} else if _, rerr := s.RefundMarked(rctx, rref, false, mark); rerr != nil {
		deferred = true
	} else {
		moved = true
	}
	if errors.Is(err, sqlstore.ErrNoDecision) {
		return false, false, s.RefundRefusal(ctx, rref)
	}
	return moved, deferred, err
}
