package outbox

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stockbench/stockbench/inventory"
)

// TestRelayKeepsOnlyBacklog: the relay deletes the events it applies, so
// after a pass the table holds nothing and the inventory row has every
// movement; the background relay records each event's lag, while the
// events Settle drains are counted apart and leave the lag alone.
func TestRelayKeepsOnlyBacklog(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		orders    int
		bySettle  bool
		wantLag   int64 // lag samples recorded
		wantDrain float64
	}{
		{"background relay, over one batch", relayBatch/2 + 3, false, 2 * (relayBatch/2 + 3), 0},
		{"settle's drain", 20, true, 0, 40},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := fresh(t, int64(c.orders))
			for i := range c.orders {
				id := fmt.Sprintf("o%d", i)
				r := inventory.Reservation{OrderID: id, SKU: sku, Qty: 1, Deadline: time.Now().Add(time.Hour)}
				if err := s.Reserve(ctx, r); err != nil {
					t.Fatal(err)
				}
				if err := s.Confirm(ctx, inventory.OrderRef{OrderID: id, SKU: sku}); err != nil {
					t.Fatal(err)
				}
			}
			if c.bySettle {
				if err := s.Settle(ctx); err != nil {
					t.Fatal(err)
				}
			} else if _, err := s.relay(ctx); err != nil {
				t.Fatal(err)
			}
			var left int
			if err := env.DB.QueryRow("SELECT COUNT(*) FROM outbox").Scan(&left); err != nil {
				t.Fatal(err)
			}
			if left != 0 {
				t.Fatalf("%d events left in the table after the relay applied them all", left)
			}
			var sold, occupied int64
			if err := env.DB.QueryRow("SELECT sold, occupied FROM inventory WHERE sku=?", sku).Scan(&sold, &occupied); err != nil {
				t.Fatal(err)
			}
			if sold != int64(c.orders) || occupied != 0 {
				t.Fatalf("inventory sold %d occupied %d, want %d and 0", sold, occupied, c.orders)
			}
			ctr := s.Counters()
			if got := s.lag.TotalCount(); got != c.wantLag {
				t.Fatalf("%d lag samples, want %d", got, c.wantLag)
			}
			if ctr["outbox_settle_drained"] != c.wantDrain || ctr["outbox_relayed"] != float64(2*c.orders) {
				t.Fatalf("counters %v", ctr)
			}
		})
	}
}
