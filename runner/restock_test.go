package runner

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
)

// countingRestocks counts Restock calls; nothing else of the strategy is
// reached by the restocker.
type countingRestocks struct {
	strategies.Strategy
	n atomic.Int64
}

func (c *countingRestocks) Restock(context.Context, inventory.Restock) error {
	c.n.Add(1)
	return nil
}

// TestRestockOneOwnerPerSKU: of several generators, exactly one refills
// each SKU, whichever generators' buyers find it sold out.
func TestRestockOneOwnerPerSKU(t *testing.T) {
	for _, of := range []int{0, 1, 2, 3, 5} {
		t.Run(fmt.Sprintf("of %d", of), func(t *testing.T) {
			gens := max(of, 1)
			counters := make([]*countingRestocks, gens)
			rs := make([]*restocker, gens)
			for i := range rs {
				counters[i] = &countingRestocks{}
				rs[i] = &restocker{s: counters[i], qty: 10, shard: i, of: of, active: map[string]chan struct{}{}}
			}
			const skus = 200
			for k := range skus {
				sku := fmt.Sprintf("SKU-%d", k)
				for _, r := range rs {
					r.trigger(context.Background(), sku)
				}
			}
			var total int64
			for i, c := range counters {
				total += c.n.Load()
				if gens > 1 && c.n.Load() == 0 {
					t.Errorf("generator %d of %d refilled no SKU of %d", i, of, skus)
				}
			}
			if total != skus {
				t.Errorf("%d refills of %d sold-out SKUs, want one each", total, skus)
			}
		})
	}
}
