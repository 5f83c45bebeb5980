package outbox

import (
	"context"
	"fmt"
)

// Pending counts what Settle may have to work through: the events not yet
// relayed (the table holds only those) and the orders still reserved
// (expiry candidates). Two index counts. Safe for concurrent use.
func (s *Strategy) Pending(ctx context.Context) (int64, error) {
	var events, reserved int64
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM outbox WHERE applied=0").Scan(&events); err != nil {
		return 0, fmt.Errorf("pending events: %w", err)
	}
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE state='reserved'").Scan(&reserved); err != nil {
		return 0, fmt.Errorf("pending orders: %w", err)
	}
	return events + reserved, nil
}
