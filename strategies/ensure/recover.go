package ensure

import (
	"context"
	"fmt"
	"time"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies/internal/redisstock"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// recoverBatch is how many SKUs a recovery pass glances at per round trip.
const recoverBatch = 500

// recover is the recovery pass over every SKU of MySQL's inventory (not a
// list kept in memory, so a restarted or second instance covers the same
// SKUs), after rebuilding a Redis that restarted (redisstock.Fence):
//   - a lost stock hash is rebuilt from MySQL (redisstock.Reload), a
//     restock Redis never counted is caught up;
//   - a live reservation MySQL holds a release for (a cancel whose Redis
//     write failed, a late reserve of a cancelled order) is released now;
//     one MySQL holds a paid decision for (confirmed, refunded) is left to
//     the log, the only path of paid changes to Redis;
//   - a live reservation past its deadline without a decision is expired
//     (decision first, in batches);
//   - Redis's sold count is corrected from MySQL's (redisstock.CorrectSold)
//     while no refund of the SKU is in flight (refundsQuiet): sales or
//     refunds whose order record Redis lost, which no log row can move.
func (s *Strategy) recover(ctx context.Context) error {
	if err := s.rs.Ready(ctx); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	now := clock.Now()
	after := ""
	for {
		rows, err := redisstock.RowsPage(ctx, s.db, after, recoverBatch)
		if err != nil || len(rows) == 0 {
			return err
		}
		after = rows[len(rows)-1].SKU
		gl, err := s.rs.Glances(ctx, rows)
		if err != nil {
			return fmt.Errorf("recover: %w", err)
		}
		for i, row := range rows {
			if err := s.recoverSKU(ctx, row, gl[i], now); err != nil {
				return err
			}
		}
	}
}

// recoverSKU is one SKU's part of a recovery pass. A SKU whose glance shows
// a hash, no restock missing, no live reservation and Redis sold equal to
// MySQL's costs no round trip of its own.
func (s *Strategy) recoverSKU(ctx context.Context, row redisstock.SKURow, g redisstock.Glance, now time.Time) error {
	sku := row.SKU
	if !g.Missing && g.Total >= row.Total && g.Live == 0 && g.Sold == row.Sold {
		return nil
	}
	created, err := s.rs.Reload(ctx, s.db, sku)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	if created {
		s.c.reloads.Add(1)
	} else if caught, err := s.rs.CatchUpRestocks(ctx, row); err != nil {
		return fmt.Errorf("recover: %w", err)
	} else if caught {
		s.c.restocksCaught.Add(1)
	}
	ids, err := s.rs.Due(ctx, sku, time.Time{}, 0)
	if err != nil {
		return err
	}
	states, err := sqlstore.OrderStates(ctx, s.db, ids)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	var undecided []inventory.OrderRef
	for _, id := range ids {
		ref := inventory.OrderRef{OrderID: id, SKU: sku}
		switch st, ok := states[id]; {
		case !ok:
			undecided = append(undecided, ref)
		case st == inventory.StateCancelled || st == inventory.StateExpired:
			prev, err := s.rs.Finish(ctx, ref, st, false)
			if err != nil {
				return fmt.Errorf("recover: %w", err)
			}
			if prev == inventory.StateReserved {
				s.c.recovered.Add(1)
			}
		}
	}
	if err := s.expire(ctx, undecided, now); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	n, unchecked, err := s.rs.CorrectSoldQuiet(ctx, s.db, sku, refundsQuiet)
	if err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	s.c.soldCorrected.Add(max(n, -n))
	if unchecked {
		s.c.soldUnchecked.Add(1)
	}
	return nil
}

// expire expires those of refs (live, undecided) that are past their
// deadline at now, expireBatch at a time: their records read in one
// pipeline, their expired decisions written in one multi-row INSERT that
// leaves a decision another operation wrote first, the decisions that
// stand read back, and the releases applied in one pipeline. A paid
// decision that won is the log's.
func (s *Strategy) expire(ctx context.Context, refs []inventory.OrderRef, now time.Time) error {
	for start := 0; start < len(refs); start += applyBatch {
		part := refs[start:min(start+applyBatch, len(refs))]
		recs, found, err := s.rs.GetAll(ctx, part)
		if err != nil {
			return err
		}
		var due []inventory.OrderRef
		var dueRes []redisstock.Reservation
		for i, ref := range part {
			if found[i] && recs[i].State == inventory.StateReserved && !now.Before(recs[i].Deadline) {
				due = append(due, ref)
				dueRes = append(dueRes, recs[i])
			}
		}
		if len(due) == 0 {
			continue
		}
		stand, err := redisstock.DecideExpired(ctx, s.db, s.cfg.OpTimeout, due, dueRes)
		if err != nil {
			return err
		}
		byState := map[inventory.OrderState][]inventory.OrderRef{}
		for _, ref := range due {
			switch st := stand[ref.OrderID]; st {
			case inventory.StateExpired:
				s.c.expired.Add(1)
				byState[st] = append(byState[st], ref)
			case inventory.StateCancelled:
				s.c.recovered.Add(1)
				s.finishRedis(ctx, ref, st, true)
			}
		}
		for st, refs := range byState {
			s.c.deferred.Add(s.rs.FinishAfterCommit(ctx, s.cfg.OpTimeout, refs, st))
		}
	}
	return nil
}
