package outboxlocal

import (
	"context"
	"errors"
	"fmt"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// errLateMember: an order neither Redis nor MySQL holds may be in the
// local table of a member a rebuild round went on without, which has not
// caught up yet.
var errLateMember = errors.New("a member the last rebuild went on without has not caught up: the order may be in its table")

// elsewhere answers for an order Redis does not know even after the
// fence's check (a Redis that lost its data is rebuilt first). A rebuild
// records only the orders MySQL holds as reserved, so an order decided
// before the loss is in MySQL alone (as is one whose record outlived
// Retain): its state there is the answer ("confirmed", "cancelled", …).
// An order MySQL does not hold either is unknown — unless another member
// is late (redisstock.Fence.LateOthers, heard from within Retain): until
// it catches up its table may hold the order's acknowledged reserve, and
// "unknown order", a final answer, would be a guess. That is
// inventory.ErrOutcomeUnknown (the client asks again). An order MySQL
// holds as reserved that the rebuilt Redis lacks is a rebuild under way:
// ErrOutcomeUnknown too. Only this rare path reads MySQL on a request.
func (s *Strategy) elsewhere(ctx context.Context, ref inventory.OrderRef) (inventory.OrderState, error) {
	states, err := sqlstore.OrderStates(ctx, s.db, []string{ref.OrderID})
	if err != nil {
		return "", fmt.Errorf("read order %s in mysql: %w", ref.OrderID, err)
	}
	switch st := states[ref.OrderID]; {
	case st == inventory.StateReserved:
		return "", fmt.Errorf("%w: order %s is reserved in MySQL but not in the rebuilt Redis (a rebuild is under way)", inventory.ErrOutcomeUnknown, ref.OrderID)
	case st != "":
		return st, nil
	}
	late, err := s.rs.Fence.LateOthers(ctx, s.cfg.Retain)
	if err != nil {
		return "", err
	}
	if late > 0 {
		return "", fmt.Errorf("%w: %w", inventory.ErrOutcomeUnknown, errLateMember)
	}
	return "", nil
}
