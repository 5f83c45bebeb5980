package luatcc

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
	"github.com/stockbench/stockbench/strategies/internal/groupcommit"
	"github.com/stockbench/stockbench/strategies/internal/redisstock"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// confirmItem is one confirm waiting for the MySQL half of its decision.
type confirmItem struct {
	s   *Strategy
	ref inventory.OrderRef
	res redisstock.Reservation
	// set by the group: the decision that stands, and whether Redis was
	// already brought in line (the per-order path does it itself, a batch
	// for all its orders at once).
	got      inventory.OrderState
	finished bool
}

// confirmGroup coalesces the confirms of one SKU: their decision rows go
// in with one INSERT and their units with one UPDATE, in one transaction,
// instead of one hot-row transaction per confirm (cfg.BatchMax 1: off).
// cfg has its defaults already (New).
func confirmGroup(cfg strategies.Config) *groupcommit.Group[*confirmItem] {
	return &groupcommit.Group[*confirmItem]{Max: cfg.BatchMax, Wait: cfg.BatchWait, Batch: confirmBatch,
		One: func(ctx context.Context, _ string, it *confirmItem) error {
			got, err := it.s.decide(ctx, it.ref, it.res, inventory.StateConfirmed)
			it.got, it.finished = got, true
			return err
		},
		After: finishBatch}
}

// finishBatch brings Redis in line for a committed batch in one round trip,
// once the SKU's next batch may run, as finishRedis does per order; a
// failure is left to recovery.
func finishBatch(ctx context.Context, _ string, its []*confirmItem, _ []error) {
	s := its[0].s
	refs := make([]inventory.OrderRef, len(its))
	for i, it := range its {
		refs[i] = it.ref
	}
	n := s.rs.FinishAfterCommit(ctx, s.redisFinishTimeout(), refs, inventory.StateConfirmed)
	s.deferred.Add(n)
	if n > 0 && s.dg != nil && ctx.Err() == nil {
		s.dg.fail() // a Redis failure for the switch's detector too
	}
}

// decideConfirm is decide for a confirm, with the MySQL transaction shared
// by the concurrent confirms of the SKU; other decisions go straight to
// decide. Each confirm gets its own outcome after the commit that holds it.
func (s *Strategy) decideConfirm(ctx context.Context, ref inventory.OrderRef, res redisstock.Reservation, want inventory.OrderState) (inventory.OrderState, error) {
	if want != inventory.StateConfirmed {
		return s.decide(ctx, ref, res, want)
	}
	it := &confirmItem{s: s, ref: ref, res: res}
	if err := s.confirms.Do(ctx, ref.SKU, it); err != nil {
		return "", err
	}
	if !it.finished {
		s.finishRedis(ctx, ref, it.got, false)
	}
	return it.got, nil
}

// confirmBatch writes the confirmed decisions of its (distinct) orders and
// moves their units to sold. Anything unusual — an order that already has a
// decision (duplicate key), MySQL short of stock (drift) — fails the batch,
// and each confirm then takes the per-order path that handles it.
func confirmBatch(ctx context.Context, sku string, its []*confirmItem) ([]error, error) {
	s := its[0].s
	rs := make([]inventory.Reservation, len(its))
	seen := make(map[string]bool, len(its))
	for i, it := range its {
		if seen[it.ref.OrderID] {
			return nil, fmt.Errorf("confirm batch: order %s twice", it.ref.OrderID)
		}
		seen[it.ref.OrderID] = true
		rs[i] = inventory.Reservation{OrderID: it.ref.OrderID, SKU: sku, Qty: it.res.Qty, Deadline: it.res.Deadline, Buyer: it.res.Buyer}
	}
	err := sqlstore.InTx(ctx, s.db, func(tx *sql.Tx) error {
		if ok, err := sqlstore.ConfirmOrders(ctx, tx, sku, rs); err != nil {
			return err
		} else if !ok {
			return sqlstore.ErrNoMySQLStock
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("confirm batch %s: %w", sku, err)
	}
	// Redis is brought in line by finishBatch, after the commit.
	for _, it := range its {
		it.got, it.finished = inventory.StateConfirmed, true
	}
	return make([]error, len(its)), nil
}

// withBatchCounters adds the confirm batch sizes (confirm_batch_size_*).
func (s *Strategy) withBatchCounters(m map[string]float64) map[string]float64 {
	for k, v := range s.confirms.Stats().Counters("confirm") {
		m[k] = v
	}
	return m
}
