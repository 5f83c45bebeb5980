package runner

import (
	"context"
	"time"

	"github.com/stockbench/stockbench/strategies"
)

// Allowances by which the settle and audit deadlines grow past their base
// (Options.deadlines): per item a strategy reports pending when load
// ends (a reservation to expire, an event to relay — decided in batches,
// far faster than this), and per ack the audits check (twice, in batches).
// Generous on purpose: the deadline is there to stop a hung store, not to
// throw away a long run whose clean-up is merely large.
const (
	settlePerPending = time.Millisecond
	auditPerAck      = 200 * time.Microsecond
)

// pendingOf asks a strategy that can tell (strategies.Pending) how much
// work its Settle has; 0 when it cannot, or when asking fails (the base
// deadline then applies).
func pendingOf(s strategies.Strategy) int64 {
	p, ok := s.(strategies.Pending)
	if !ok {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := p.Pending(ctx)
	if err != nil {
		return 0
	}
	return n
}
