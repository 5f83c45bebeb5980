package redisstock

import (
	"context"
	"fmt"
	"time"
)

// LateOthers counts the other members of a gated fence that a round went
// on without and that have not caught up yet (their epoch below the
// fence's), heard from within the last within (0: whenever). Until such a
// member catches up, an order only its local table holds is in neither
// MySQL nor the rebuilt Redis: a member asked about an order it cannot
// find must not answer "unknown order" as if that were final. A fence
// without a member name counts none.
func (f *Fence) LateOthers(ctx context.Context, within time.Duration) (int, error) {
	if !f.member() {
		return 0, nil
	}
	q := "SELECT COUNT(*) FROM redis_fence m JOIN redis_fence f ON f.instance='' WHERE m.instance NOT IN ('', ?) AND m.epoch < f.epoch"
	args := []any{f.Member}
	if within > 0 {
		q += " AND m.beat > NOW(6) - INTERVAL ? MICROSECOND"
		args = append(args, within.Microseconds())
	}
	var n int
	if err := f.DB.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("redis fence: late members: %w", err)
	}
	return n, nil
}
