package luatcc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies/internal/sqlstore"
)

// TestExpireBacklog: a backlog of lapsed reservations larger than one
// batch is expired in batches, each exactly once; a reservation whose
// decision another operation wrote first (here a confirm that reached
// MySQL between the pass's read of decisions and its expiry) keeps that
// decision, in MySQL and in Redis; live ones are left alone and counted by
// Pending. The auditor grades the stores after.
func TestExpireBacklog(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name                     string
		lapsed, confirmed, alive int
		buyer                    string // of the lapsed reservations
	}{
		{"under one batch", 7, 1, 3, ""},
		{"several batches", 3*expireBatch + 11, 5, 10, ""},
		{"a buyer's lapsed reservations", 4, 1, 2, "b1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
				t.Fatal(err)
			}
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
				t.Fatal(err)
			}
			stock := int64(c.lapsed + c.confirmed + c.alive)
			if err := inventory.LoadStock(ctx, env.DB, []inventory.Stock{{SKU: sku, Total: stock, Available: stock}}); err != nil {
				t.Fatal(err)
			}
			s := newStrategy(t)
			var ids []string
			var acks []inventory.Ack
			reserve := func(id string, deadline time.Time, buyer string) {
				r := inventory.Reservation{OrderID: id, SKU: sku, Qty: 1, Deadline: deadline, Buyer: buyer}
				want(t, "reserve "+id, s.Reserve(ctx, r), nil)
				ids = append(ids, id)
				acks = append(acks, inventory.Ack{OrderID: id, SKU: sku, State: inventory.StateReserved})
			}
			past := time.Now().Add(-time.Second)
			for i := range c.lapsed {
				reserve(fmt.Sprintf("e%d", i), past, c.buyer)
			}
			for i := range c.confirmed {
				id := fmt.Sprintf("c%d", i)
				reserve(id, past, "")
				// The confirm's MySQL half landed first (its Redis half not yet).
				if _, err := env.DB.Exec("INSERT INTO orders (order_id, sku, qty, state, created_at, expires_at, updated_at) VALUES (?,?,1,'confirmed',NOW(6),NULL,NOW(6))", id, sku); err != nil {
					t.Fatal(err)
				}
				if _, err := env.DB.Exec("UPDATE inventory SET available=available-1, sold=sold+1 WHERE sku=?", sku); err != nil {
					t.Fatal(err)
				}
				acks = append(acks, inventory.Ack{OrderID: id, SKU: sku, State: inventory.StateConfirmed})
			}
			for i := range c.alive {
				reserve(fmt.Sprintf("a%d", i), time.Now().Add(time.Hour), "")
			}
			if err := s.expireUndecided(ctx, sku, ids, time.Now()); err != nil {
				t.Fatal(err)
			}
			if got := s.expired.Load(); got != int64(c.lapsed) {
				t.Fatalf("expired %d, want %d", got, c.lapsed)
			}
			if got := s.recovered.Load(); got != int64(c.confirmed) {
				t.Fatalf("recovered %d, want %d (decisions written first stand)", got, c.confirmed)
			}
			var expired int
			if err := env.DB.QueryRow("SELECT COUNT(*) FROM orders WHERE state='expired'").Scan(&expired); err != nil {
				t.Fatal(err)
			}
			if expired != c.lapsed {
				t.Fatalf("%d expired order rows, want %d", expired, c.lapsed)
			}
			// Each expired row is the order as every other decision writes
			// it (sqlstore.InsertOrder): its buyer, and its deadline as
			// stored (inventory.StoredDeadline).
			var asStored int
			if err := env.DB.QueryRow("SELECT COUNT(*) FROM orders WHERE state='expired' AND buyer <=> ? AND expires_at = ?",
				sqlstore.BuyerArg(c.buyer), inventory.StoredDeadline(past)).Scan(&asStored); err != nil {
				t.Fatal(err)
			}
			if asStored != c.lapsed {
				t.Fatalf("%d of %d expired rows carry buyer %q and deadline %v", asStored, c.lapsed, c.buyer, inventory.StoredDeadline(past))
			}
			if n, err := s.Pending(ctx); err != nil || n != int64(c.alive) {
				t.Fatalf("pending %d (%v), want the %d live reservations", n, err, c.alive)
			}
			// A second pass finds nothing more to expire.
			if err := s.expireUndecided(ctx, sku, ids, time.Now()); err != nil {
				t.Fatal(err)
			}
			if got := s.expired.Load(); got != int64(c.lapsed) {
				t.Fatalf("second pass expired again: %d", got)
			}
			a, err := audit.Auditor{DB: env.DB, Redis: env.Redis, RedisReservations: true,
				Ledger: map[string]int64{sku: stock}}.Audit(ctx, acks)
			if err != nil {
				t.Fatal(err)
			}
			if a.Anomalies != 0 {
				t.Fatalf("audit: %d anomalies: %v", a.Anomalies, a.Violations)
			}
		})
	}
}
