package audit

import (
	"slices"
	"testing"
)

// The ledger is the initial stock with the journalled restocks laid over
// it, never copied: a restock adds to its SKU, and one of a SKU the
// initial stock lacks adds that SKU.
func TestLedgerOverlay(t *testing.T) {
	initial := map[string]int64{"A": 10, "B": 5}
	cases := []struct {
		name      string
		restocked map[string]int64
		want      map[string]int64
	}{
		{"no restock", nil, map[string]int64{"A": 10, "B": 5}},
		{"restock of a stocked SKU", map[string]int64{"A": 3}, map[string]int64{"A": 13, "B": 5}},
		{"restock of a new SKU", map[string]int64{"C": 4}, map[string]int64{"A": 10, "B": 5, "C": 4}},
		{"restock of nothing", map[string]int64{"C": 0}, map[string]int64{"A": 10, "B": 5, "C": 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := Auditor{Ledger: initial, restocked: c.restocked}
			if got := a.ledgerLen(); got != len(c.want) {
				t.Errorf("ledgerLen = %d, want %d", got, len(c.want))
			}
			skus := a.ledgerSKUs()
			slices.Sort(skus)
			wantSKUs := make([]string, 0, len(c.want))
			for sku := range c.want {
				wantSKUs = append(wantSKUs, sku)
			}
			slices.Sort(wantSKUs)
			if !slices.Equal(skus, wantSKUs) {
				t.Errorf("ledgerSKUs = %v, want %v", skus, wantSKUs)
			}
			for sku, n := range c.want {
				if got, ok := a.ledgerSKU(sku); !ok || got != n {
					t.Errorf("ledgerSKU(%s) = %d, %v; want %d, true", sku, got, ok, n)
				}
			}
			if _, ok := a.ledgerSKU("Z"); ok {
				t.Errorf("ledgerSKU(Z) found a SKU no one stocked")
			}
			if initial["A"] != 10 || len(initial) != 2 {
				t.Errorf("initial stock modified: %v", initial)
			}
		})
	}
}
