package audit

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/stockbench/stockbench/inventory"
)

// errNoTable is MySQL's "table doesn't exist".
const errNoTable = 1146

// journalRow is one row of the restock journal.
type journalRow struct {
	id, sku string
	qty     int64
}

// ledgerOf is the stock put in per SKU: the harness's initial stock plus
// every restock journal row whose id the harness issued (an ack in state
// AckRestocked or AckRestockUnknown, same SKU and quantity). The journal is
// written in the same transaction as the total, so a restock whose reply
// was lost is counted exactly as it happened, fault announced or not. A
// journal row no restock ack names is stock nobody put in (an invariant
// violation; its units then show as phantom), and an acknowledged restock
// the journal lacks is a lost ack. initial is not modified. Stores without
// a journal table (made by an older stockbench) count as an empty journal.
func (a Auditor) ledgerOf(ctx context.Context, initial map[string]int64, src AckSource, out *Audit, k sink) (map[string]int64, error) {
	ledger := make(map[string]int64, len(initial))
	for sku, n := range initial {
		ledger[sku] = n
	}
	// Restocks are few (one per sold-out SKU refill): kept apart from the
	// stream of acks, which is read batch by batch.
	var acks []inventory.Ack
	issued := map[string]inventory.Ack{}
	err := src.EachAck(ctx, func(batch []inventory.Ack) error {
		for _, ack := range batch {
			if ack.IsRestock() {
				issued[ack.OrderID] = ack
				acks = append(acks, ack)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("audit: restock acks: %w", err)
	}
	rows, err := a.journal(ctx)
	if err != nil {
		return nil, err
	}
	inJournal := make(map[string]bool, len(rows))
	for _, r := range rows {
		inJournal[r.id] = true
		ack, ok := issued[r.id]
		switch {
		case !ok:
			k.violate("mysql %s: restock journal row %s (%d units) that the harness never issued", r.sku, r.id, r.qty)
		case ack.SKU != r.sku || ack.Qty != r.qty:
			k.violate("mysql %s: restock journal row %s holds %d units of %s; the harness issued %d units of %s", r.sku, r.id, r.qty, r.sku, ack.Qty, ack.SKU)
		default:
			ledger[r.sku] += r.qty
		}
	}
	for _, ack := range acks {
		if ack.State == inventory.AckRestocked && !inJournal[ack.OrderID] {
			out.LostAcks++
			k.note("restock %s of %d units to %s acknowledged, not in the restock journal", ack.OrderID, ack.Qty, ack.SKU)
		}
	}
	return ledger, nil
}

// journal reads the restock journal.
func (a Auditor) journal(ctx context.Context) ([]journalRow, error) {
	rows, err := a.DB.QueryContext(ctx, "SELECT restock_id, sku, qty FROM restocks")
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == errNoTable {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit: read restock journal: %w", err)
	}
	defer rows.Close()
	var out []journalRow
	for rows.Next() {
		var r journalRow
		if err := rows.Scan(&r.id, &r.sku, &r.qty); err != nil {
			return nil, fmt.Errorf("audit: read restock journal: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit: read restock journal: %w", err)
	}
	return out, nil
}
