package luatcc

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/stockbench/stockbench/internal/clock"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies/internal/redisstock"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// expireBatch is how many reservations one expiry transaction decides.
const expireBatch = 500

// dueRes is a live Redis reservation without a MySQL decision.
type dueRes struct {
	ref inventory.OrderRef
	res redisstock.Reservation
}

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
		var due []dueRes
		for i, ref := range refs {
			if found[i] && recs[i].State == inventory.StateReserved && !now.Before(recs[i].Deadline) {
				due = append(due, dueRes{ref: ref, res: recs[i]})
			}
		}
		if len(due) == 0 {
			continue
		}
		stand, err := s.decideExpired(ctx, due)
		if err != nil {
			return err
		}
		byState := map[inventory.OrderState][]inventory.OrderRef{}
		for _, d := range due {
			st := stand[d.ref.OrderID]
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
				s.finishRedis(ctx, d.ref, st, true)
				continue
			}
			byState[st] = append(byState[st], d.ref)
		}
		for st, refs := range byState {
			s.deferred.Add(s.rs.FinishAfterCommit(ctx, s.cfg.OpTimeout, refs, st))
		}
	}
	return nil
}

// decideExpired writes an expired decision for each of due that has none,
// in one transaction, and returns the decision that stands for each. Once
// begun it runs to its end on a context of its own (bounded by the
// operation timeout): a stop of the background loop between the commit and
// the read-back would leave decisions in MySQL that Redis never hears of.
func (s *Strategy) decideExpired(ctx context.Context, due []dueRes) (map[string]inventory.OrderState, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.OpTimeout)
	defer cancel()
	now := clock.Now().UTC()
	var q strings.Builder
	q.WriteString("INSERT INTO orders (order_id, sku, qty, state, created_at, expires_at, updated_at) VALUES ")
	args := make([]any, 0, 7*len(due))
	ids := make([]any, len(due))
	for i, d := range due {
		if i > 0 {
			q.WriteString(",")
		}
		q.WriteString("(?,?,?,?,?,?,?)")
		var exp any
		if !d.res.Deadline.IsZero() {
			exp = d.res.Deadline.UTC()
		}
		args = append(args, d.ref.OrderID, d.ref.SKU, d.res.Qty, string(inventory.StateExpired), now, exp, now)
		ids[i] = d.ref.OrderID
	}
	// A row that exists is a decision already taken: leave it as it is.
	q.WriteString(" ON DUPLICATE KEY UPDATE order_id=order_id")
	err := sqlstore.InTx(ctx, s.db, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, q.String(), args...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("expire %d reservations: %w", len(due), err)
	}
	// Decisions never change once written, so reading them after the
	// commit gives the ones that stand.
	rows, err := s.db.QueryContext(ctx, "SELECT order_id, state FROM orders WHERE order_id IN (?"+strings.Repeat(",?", len(ids)-1)+")", ids...)
	if err != nil {
		return nil, fmt.Errorf("expire: read decisions: %w", err)
	}
	defer rows.Close()
	out := make(map[string]inventory.OrderState, len(due))
	for rows.Next() {
		var id string
		var st inventory.OrderState
		if err := rows.Scan(&id, &st); err != nil {
			return nil, fmt.Errorf("expire: read decisions: %w", err)
		}
		out[id] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("expire: read decisions: %w", err)
	}
	for _, d := range due {
		if _, ok := out[d.ref.OrderID]; !ok {
			return nil, fmt.Errorf("expire %s: no decision after the insert", d.ref.OrderID)
		}
	}
	return out, nil
}
