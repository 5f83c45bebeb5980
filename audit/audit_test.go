package audit_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/servers/servertest"
)

var env servertest.Env

func TestMain(m *testing.M) { os.Exit(servertest.Main(m, &env)) }

// TestAuditDetects builds states by hand in a real database and checks that
// the auditor reports each anomaly, and only it.
func TestAuditDetects(t *testing.T) {
	type order struct {
		id    string
		qty   int64
		state inventory.OrderState
	}
	cases := []struct {
		name   string
		stock  inventory.Stock // SKU "S"
		orders []order
		redis  *inventory.Stock // stock hash in Redis, when set
		acks   []inventory.Ack
		check  func(t *testing.T, a audit.Audit)
	}{
		{name: "consistent", stock: inventory.Stock{Total: 10, Available: 7, Occupied: 1, Sold: 2},
			orders: []order{{"a", 1, inventory.StateConfirmed}, {"b", 1, inventory.StateConfirmed}, {"c", 1, inventory.StateReserved}},
			acks:   []inventory.Ack{{OrderID: "a", State: inventory.StateConfirmed}},
			check: func(t *testing.T, a audit.Audit) {
				if a.ConfirmedUnits != 2 || a.OversoldUnits != 0 || a.LeakedUnits != 0 || a.InvariantViolations != 0 || a.LostAcks != 0 {
					t.Fatalf("clean state flagged: %+v", a)
				}
			}},
		{name: "oversold", stock: inventory.Stock{Total: 2, Available: 0, Occupied: 0, Sold: 2},
			orders: []order{{"a", 1, inventory.StateConfirmed}, {"b", 1, inventory.StateConfirmed}, {"c", 1, inventory.StateConfirmed}},
			check: func(t *testing.T, a audit.Audit) {
				if a.OversoldUnits != 1 || a.ConfirmedUnits != 3 || a.OversellRate < 0.33 || a.OversellRate > 0.34 {
					t.Fatalf("oversell not reported: %+v", a)
				}
			}},
		{name: "leaked", stock: inventory.Stock{Total: 10, Available: 5, Occupied: 3, Sold: 2},
			orders: []order{{"a", 2, inventory.StateConfirmed}},
			check: func(t *testing.T, a audit.Audit) {
				if a.LeakedUnits != 3 {
					t.Fatalf("leak of 3 not reported: %+v", a)
				}
			}},
		{name: "invariant broken", stock: inventory.Stock{Total: 10, Available: 9, Occupied: 0, Sold: 0},
			check: func(t *testing.T, a audit.Audit) {
				if a.InvariantViolations == 0 || !strings.Contains(strings.Join(a.Violations, ";"), "!= total") {
					t.Fatalf("sum != total not reported: %+v", a)
				}
			}},
		{name: "negative stock", stock: inventory.Stock{Total: 1, Available: -1, Occupied: 0, Sold: 2},
			orders: []order{{"a", 1, inventory.StateConfirmed}, {"b", 1, inventory.StateConfirmed}},
			check: func(t *testing.T, a audit.Audit) {
				if !strings.Contains(strings.Join(a.Violations, ";"), "negative") {
					t.Fatalf("negative stock not reported: %+v", a)
				}
			}},
		{name: "lost ack", stock: inventory.Stock{Total: 5, Available: 4, Occupied: 1},
			orders: []order{{"a", 1, inventory.StateReserved}},
			acks:   []inventory.Ack{{OrderID: "a", State: inventory.StateConfirmed}, {OrderID: "ghost", State: inventory.StateConfirmed}},
			check: func(t *testing.T, a audit.Audit) {
				if a.LostAcks != 2 {
					t.Fatalf("want 2 lost acks: %+v", a)
				}
			}},
		{name: "cancel ack of a confirmed order", stock: inventory.Stock{Total: 5, Available: 4, Sold: 1},
			orders: []order{{"a", 1, inventory.StateConfirmed}},
			acks:   []inventory.Ack{{OrderID: "a", State: inventory.StateCancelled}},
			check: func(t *testing.T, a audit.Audit) {
				if a.CancelAckViolations != 1 {
					t.Fatalf("want 1 cancel-ack violation: %+v", a)
				}
			}},
		{name: "redis drift", stock: inventory.Stock{Total: 10, Available: 10},
			redis: &inventory.Stock{Total: 10, Available: 8, Sold: 2},
			check: func(t *testing.T, a audit.Audit) {
				if a.DriftUnits != 4 || a.SKUs[0].Redis == nil {
					t.Fatalf("drift of 2 sold + 2 available not reported as 4: %+v", a)
				}
			}},
	}
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
				t.Fatal(err)
			}
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
				t.Fatal(err)
			}
			c.stock.SKU = "S"
			if err := inventory.LoadStock(ctx, env.DB, []inventory.Stock{c.stock}); err != nil {
				t.Fatal(err)
			}
			now := time.Now().UTC()
			for _, o := range c.orders {
				if _, err := env.DB.Exec("INSERT INTO orders VALUES (?,?,?,?,?,?,?)", o.id, "S", o.qty, string(o.state), now, now.Add(time.Hour), now); err != nil {
					t.Fatal(err)
				}
			}
			if r := c.redis; r != nil {
				env.Redis.HSet(ctx, inventory.RedisStockKey("S"), "total", r.Total, "available", r.Available, "occupied", r.Occupied, "sold", r.Sold)
			}
			aud := audit.Auditor{DB: env.DB}
			if c.redis != nil {
				aud.Redis = env.Redis
			}
			a, err := aud.Audit(ctx, c.acks)
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, a)
		})
	}
}

// TestLedgerFromJournal: the ledger is the initial stock plus the restock
// journal rows the harness's restock acks name — a restock whose reply was
// lost counts exactly as the journal says, an acknowledged restock the
// journal lacks is a lost ack, and a row nobody issued is stock nobody put in.
func TestLedgerFromJournal(t *testing.T) {
	type row struct {
		id  string
		qty int64
	}
	restock := func(id string, st inventory.OrderState, qty int64) inventory.Ack {
		return inventory.Ack{OrderID: id, SKU: "S", State: st, Qty: qty}
	}
	cases := []struct {
		name       string
		total      int64 // MySQL total (all available); the initial stock is 10
		journal    []row
		acks       []inventory.Ack
		ledger     int64
		lost       int
		violations int
		phantom    int64
	}{
		{"acknowledged restock", 15, []row{{"r1", 5}}, []inventory.Ack{restock("r1", inventory.AckRestocked, 5)}, 15, 0, 0, 0},
		// The call failed after its commit (reply lost): the journal has it.
		{"lost reply, applied", 15, []row{{"r1", 5}}, []inventory.Ack{restock("r1", inventory.AckRestockUnknown, 5)}, 15, 0, 0, 0},
		// The call failed before its commit: nothing to count.
		{"failed, not applied", 10, nil, []inventory.Ack{restock("r1", inventory.AckRestockUnknown, 5)}, 10, 0, 0, 0},
		{"acknowledged, not journalled", 10, nil, []inventory.Ack{restock("r1", inventory.AckRestocked, 5)}, 10, 1, 0, 0},
		// A journal row no ack names: total != ledger, and its units are phantom.
		{"journalled, never issued", 15, []row{{"r9", 5}}, nil, 10, 0, 2, 5},
		{"journalled with another quantity", 17, []row{{"r1", 7}}, []inventory.Ack{restock("r1", inventory.AckRestocked, 5)}, 10, 0, 2, 7},
	}
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
				t.Fatal(err)
			}
			if err := inventory.LoadStock(ctx, env.DB, []inventory.Stock{{SKU: "S", Total: c.total, Available: c.total}}); err != nil {
				t.Fatal(err)
			}
			for _, r := range c.journal {
				if _, err := env.DB.Exec("INSERT INTO restocks VALUES (?,?,?,NOW(6))", r.id, "S", r.qty); err != nil {
					t.Fatal(err)
				}
			}
			a, err := audit.Auditor{DB: env.DB, Ledger: map[string]int64{"S": 10}}.Audit(ctx, c.acks)
			if err != nil {
				t.Fatal(err)
			}
			if a.SKUs[0].Ledger != c.ledger || a.LostAcks != c.lost || a.InvariantViolations != c.violations || a.PhantomUnits != c.phantom {
				t.Fatalf("ledger %d lost acks %d violations %d phantom %d, want %d %d %d %d (%v)",
					a.SKUs[0].Ledger, a.LostAcks, a.InvariantViolations, a.PhantomUnits, c.ledger, c.lost, c.violations, c.phantom, a.Violations)
			}
		})
	}
}
