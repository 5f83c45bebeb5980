package service_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/service"
)

// BenchmarkReserve is one reserve of lua-tcc in process and through the
// API (client, loopback HTTP, handler): the difference is the service
// tier's cost per call, in time and allocations. "tier-only" is a call the
// handler answers without the store (a confirm without its SKU: 400): the
// client, loopback HTTP and handler alone.
//
//	go test -run '^$' -bench Reserve -benchmem ./service
func BenchmarkReserve(b *testing.B) {
	for _, mode := range []string{"in-process", "http", "tier-only"} {
		b.Run(mode, func(b *testing.B) {
			s := serve(b, "lua-tcc", map[string]int64{"B": 1 << 40}, service.HandlerOptions{OpTimeout: 10 * time.Second})
			var n atomic.Int64
			deadline := time.Now().Add(time.Hour)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					r := inventory.Reservation{OrderID: fmt.Sprintf("b-%s-%d", mode, n.Add(1)), SKU: "B", Qty: 1, Deadline: deadline}
					var err error
					switch mode {
					case "http":
						err = s.c.Reserve(ctx, r)
					case "in-process":
						err = s.strat.Reserve(ctx, r)
					default:
						if err = s.c.Confirm(ctx, inventory.OrderRef{OrderID: r.OrderID}); errors.Is(err, service.ErrBadRequest) {
							err = nil
						}
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
