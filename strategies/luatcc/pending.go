package luatcc

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/inventory"
)

// Pending counts the live Redis reservations: what a recovery pass (Settle)
// may have to decide. One pipeline of ZCARDs over the catalog. Safe for
// concurrent use.
func (s *Strategy) Pending(ctx context.Context) (int64, error) {
	skus := s.skus.List()
	cmds := make([]*redis.IntCmd, len(skus))
	if _, err := s.rs.R.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sku := range skus {
			cmds[i] = p.ZCard(ctx, inventory.RedisLiveKey(sku))
		}
		return nil
	}); err != nil {
		return 0, fmt.Errorf("pending: %w", err)
	}
	var n int64
	for _, c := range cmds {
		n += c.Val()
	}
	return n, nil
}
