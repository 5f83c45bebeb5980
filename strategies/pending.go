package strategies

import "context"

// Pending is implemented by strategies whose Settle has work that grows
// with what is left when load ends (reservations to expire, events to
// relay). Pending counts it, cheaply (a count, not a read of every item),
// so the harness can give Settle a deadline that grows with the backlog.
// Safe to call concurrently with the strategy's other methods.
type Pending interface {
	Pending(ctx context.Context) (int64, error)
}
