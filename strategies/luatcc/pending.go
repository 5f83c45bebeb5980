package luatcc

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/inventory"
)

// pendingBatch is how many SKUs one pipeline of Pending counts: a bound on
// what it holds at once (a command per SKU), whatever the catalog's size.
const pendingBatch = 1000

// Pending counts the live Redis reservations: what a recovery pass (Settle)
// may have to decide. Pipelines of ZCARDs over the catalog, pendingBatch
// SKUs each. Safe for concurrent use.
func (s *Strategy) Pending(ctx context.Context) (int64, error) {
	skus := s.skus.List()
	cmds := make([]*redis.IntCmd, 0, min(len(skus), pendingBatch))
	var n int64
	for len(skus) > 0 {
		batch := skus[:min(len(skus), pendingBatch)]
		skus = skus[len(batch):]
		cmds = cmds[:0]
		if _, err := s.rs.R.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, sku := range batch {
				cmds = append(cmds, p.ZCard(ctx, inventory.RedisLiveKey(sku)))
			}
			return nil
		}); err != nil {
			return 0, fmt.Errorf("pending: %w", err)
		}
		for _, c := range cmds {
			n += c.Val()
		}
	}
	return n, nil
}
