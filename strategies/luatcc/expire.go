package luatcc

import (
	"context"
	"time"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies/internal/redisstock"
)

// expireBatch is how many reservations one expiry transaction decides.
const expireBatch = 500

// expireUndecided expires, in batches, those of sku's undecided live
// reservations (ids) that are past their deadline at now: their Redis
// records are read in one pipeline per batch, their expired decisions
// written with one multi-row INSERT per batch (a decision another
// operation wrote first stands: the insert leaves it), the decisions that
// stand read back, and Redis brought in line in one pipeline per decision.
// Per order it is decide(…, StateExpired), with round trips per batch
// instead of per order, so a backlog of expiries — at the end of a long
// run, or behind a stall — is cleared at the stores' bulk rate. A Redis
// write that fails is left to the next pass (counted as deferred).
func (s *Strategy) expireUndecided(ctx context.Context, sku string, ids []string, now time.Time) error {
	for start := 0; start < len(ids); start += expireBatch {
		part := ids[start:min(start+expireBatch, len(ids))]
		refs := make([]inventory.OrderRef, len(part))
		for i, id := range part {
			refs[i] = inventory.OrderRef{OrderID: id, SKU: sku}
		}
		recs, found, err := s.rs.GetAll(ctx, refs)
		if err != nil {
			return err
		}
		var due []inventory.OrderRef
		var dueRes []redisstock.Reservation
		for i, ref := range refs {
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
			st := stand[ref.OrderID]
			if st == inventory.StateReserved {
				// Held in MySQL (degrade.go): MySQL's expiry decides it.
				continue
			}
			if st == inventory.StateExpired {
				s.expired.Add(1)
			} else {
				s.recovered.Add(1)
			}
			if st == inventory.StateCancelled {
				// As decide: a cancel leaves its marker.
				s.finishRedis(ctx, ref, st, true)
				continue
			}
			byState[st] = append(byState[st], ref)
		}
		for st, refs := range byState {
			s.deferred.Add(s.rs.FinishAfterCommit(ctx, s.cfg.OpTimeout, refs, st))
		}
		s.returned(sku, nil)
	}
	return nil
}
