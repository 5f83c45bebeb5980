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

// ledgerOf is what the restocks added to the stock put in per SKU (the
// harness's initial stock, a.Ledger, is the rest: see ledgerSKU): every
// restock journal row whose id the harness issued (an ack in state
// AckRestocked or AckRestockUnknown, same SKU and quantity). The journal is
// written in the same transaction as the total, so a restock whose reply
// was lost is counted exactly as it happened, fault announced or not. A
// journal row no restock ack names is stock nobody put in (an invariant
// violation; its units then show as phantom), and an acknowledged restock
// the journal lacks is a lost ack. Stores without a journal table (made
// by an older stockbench) count as an empty journal. The initial stock is
// not copied: one entry per SKU is the catalog's size, and restocks are few.
func (a Auditor) ledgerOf(ctx context.Context, src AckSource, out *Audit, k sink) (map[string]int64, error) {
	restocked := map[string]int64{}
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
			restocked[r.sku] += r.qty
		}
	}
	for _, ack := range acks {
		if ack.State == inventory.AckRestocked && !inJournal[ack.OrderID] {
			out.LostAcks++
			k.note("restock %s of %d units to %s acknowledged, not in the restock journal", ack.OrderID, ack.Qty, ack.SKU)
		}
	}
	return restocked, nil
}

// ledgerSKU is the stock put in for sku: the initial stock plus the
// journalled restocks the harness issued; false when the ledger has none.
func (a Auditor) ledgerSKU(sku string) (int64, bool) {
	n, ok := a.Ledger[sku]
	r, restocked := a.restocked[sku]
	return n + r, ok || restocked
}

// ledgerSKUs are the SKUs the ledger holds, in no order.
func (a Auditor) ledgerSKUs() []string {
	skus := make([]string, 0, len(a.Ledger)+len(a.restocked))
	for sku := range a.Ledger {
		skus = append(skus, sku)
	}
	for sku := range a.restocked {
		if _, ok := a.Ledger[sku]; !ok {
			skus = append(skus, sku)
		}
	}
	return skus
}

// ledgerLen is how many SKUs the ledger holds.
func (a Auditor) ledgerLen() int {
	n := len(a.Ledger)
	for sku := range a.restocked {
		if _, ok := a.Ledger[sku]; !ok {
			n++
		}
	}
	return n
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
