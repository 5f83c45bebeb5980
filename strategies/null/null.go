// Package null is a harness-cost probe, not an inventory strategy: every
// call succeeds at once and touches no store. A run of it measures what the
// load generator alone costs per flow (the driver, the service model, the
// recorder, the ledger of acks) — the part of every strategy's harness CPU
// that is not its service code. It sells nothing, is never audited and is
// never ranked; `--strategies all` and make bench leave it out, and the
// conformance suite does not run it (registry.Probes).
package null

import (
	"context"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
)

// Name is the probe's CLI name.
const Name = "null"

// Strategy answers every call with success and keeps nothing.
type Strategy struct{}

var _ strategies.Strategy = Strategy{}

// New returns the probe; it ignores cfg (it has no store).
func New(strategies.Config) Strategy { return Strategy{} }

// Name is "null".
func (Strategy) Name() string { return Name }

// Setup does nothing: the runner loaded the catalog, the probe never reads it.
func (Strategy) Setup(context.Context, []inventory.Stock) error { return nil }

// Reserve succeeds without holding anything.
func (Strategy) Reserve(context.Context, inventory.Reservation) error { return nil }

// Confirm succeeds without selling anything.
func (Strategy) Confirm(context.Context, inventory.OrderRef) error { return nil }

// Cancel succeeds without releasing anything.
func (Strategy) Cancel(context.Context, inventory.OrderRef) error { return nil }

// Refund succeeds without giving anything back.
func (Strategy) Refund(context.Context, inventory.OrderRef) error { return nil }

// Restock succeeds without adding anything.
func (Strategy) Restock(context.Context, inventory.Restock) error { return nil }

// Run has no background work: it waits for ctx to end.
func (Strategy) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Settle has nothing to drain.
func (Strategy) Settle(context.Context) error { return nil }

// Close has nothing to release.
func (Strategy) Close() error { return nil }
