package redisstock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/inventory"
)

// GetAll reads the reservation records of refs in one pipeline: one round
// trip for a recovery pass's batch instead of one per order. found[i] is
// false where Redis holds no record of refs[i] (Get's ErrNoReservation).
// Safe for concurrent use.
func (s Store) GetAll(ctx context.Context, refs []inventory.OrderRef) (res []Reservation, found []bool, err error) {
	res, found = make([]Reservation, len(refs)), make([]bool, len(refs))
	if len(refs) == 0 {
		return res, found, nil
	}
	cmds := make([]*redis.SliceCmd, len(refs))
	if _, err := s.R.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, ref := range refs {
			cmds[i] = p.HMGet(ctx, inventory.RedisReservationKey(ref.SKU, ref.OrderID), "qty", "state", "deadline", "buyer")
		}
		return nil
	}); err != nil {
		return nil, nil, fmt.Errorf("redis read reservations: %w", err)
	}
	for i, c := range cmds {
		v := c.Val()
		st, _ := v[1].(string)
		if st == "" {
			continue
		}
		q, _ := v[0].(string)
		d, _ := v[2].(string)
		qty, _ := strconv.ParseInt(q, 10, 64)
		ms, _ := strconv.ParseInt(d, 10, 64)
		res[i] = Reservation{Qty: qty, State: inventory.OrderState(st)}
		res[i].Buyer, _ = v[3].(string)
		if ms > 0 {
			res[i].Deadline = time.UnixMilli(ms)
		}
		found[i] = true
	}
	return res, found, nil
}
