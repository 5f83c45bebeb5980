package audit_test

import (
	"fmt"
	"sync/atomic"

	"context"
	"github.com/redis/go-redis/v9"
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
				if _, err := env.DB.Exec("INSERT INTO orders (order_id, sku, qty, state, created_at, expires_at, updated_at) VALUES (?,?,?,?,?,?,?)", o.id, "S", o.qty, string(o.state), now, now.Add(time.Hour), now); err != nil {
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

// statements is the server's count of statements received so far
// (Questions: every statement of every client, this one included).
func statements(t *testing.T) int64 {
	t.Helper()
	var name string
	var n int64
	if err := env.DB.QueryRow("SHOW GLOBAL STATUS LIKE 'Questions'").Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// roundTrips counts the commands and pipelines a Redis client sends: one
// per call, one per pipeline however many commands it holds.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { r.n.Add(1); return next(ctx, cmd) }
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { r.n.Add(1); return next(ctx, cmds) }
}

// TestAuditIsSetBased fails if the audit issues a statement (or a Redis
// round trip) per SKU: over 2,000 SKUs with orders, outbox events, live
// Redis reservations and acks it may send a few dozen of each — it counts
// statements on the server and round trips on the client, never time. The
// state carries one broken SKU, which the audit must name, and a clean
// audit otherwise; the SKU detail it keeps stays bounded.
func TestAuditIsSetBased(t *testing.T) {
	const skus = 2000
	cases := []struct {
		name              string
		redis             bool
		redisReservations bool
	}{
		{"mysql only", false, false},
		{"redis with mysql orders", true, false},
		{"reservations in redis", true, true},
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
			stock := make([]inventory.Stock, skus)
			ledger := map[string]int64{}
			for i := range stock {
				stock[i] = inventory.Stock{SKU: fmt.Sprintf("K%05d", i), Total: 10, Available: 10}
				ledger[stock[i].SKU] = 10
			}
			// Every tenth SKU sold 2 units and holds one reserved.
			var acks []inventory.Ack
			now := time.Now().UTC()
			pipe := env.Redis.Pipeline()
			for i := range stock {
				s := &stock[i]
				if i%10 == 0 {
					s.Available, s.Occupied, s.Sold = 7, 1, 2
					for j, st := range []inventory.OrderState{inventory.StateConfirmed, inventory.StateConfirmed, inventory.StateReserved} {
						id := fmt.Sprintf("%s-o%d", s.SKU, j)
						if st == inventory.StateReserved && c.redisReservations {
							// lua-tcc: a reservation lives in Redis only until decided.
							pipe.HSet(ctx, inventory.RedisReservationKey(s.SKU, id), "qty", 1, "state", "reserved", "deadline", now.Add(time.Hour).UnixMilli())
							pipe.ZAdd(ctx, inventory.RedisLiveKey(s.SKU), redis.Z{Score: float64(now.Add(time.Hour).UnixMilli()), Member: id})
							acks = append(acks, inventory.Ack{OrderID: id, SKU: s.SKU, State: inventory.StateReserved})
							continue
						}
						if _, err := env.DB.Exec("INSERT INTO orders (order_id, sku, qty, state, created_at, expires_at, updated_at) VALUES (?,?,?,?,?,?,?)", id, s.SKU, 1, string(st), now, now.Add(time.Hour), now); err != nil {
							t.Fatal(err)
						}
						if st == inventory.StateReserved && c.redis {
							pipe.HSet(ctx, inventory.RedisReservationKey(s.SKU, id), "qty", 1, "state", "reserved", "deadline", now.Add(time.Hour).UnixMilli())
							pipe.ZAdd(ctx, inventory.RedisLiveKey(s.SKU), redis.Z{Score: float64(now.Add(time.Hour).UnixMilli()), Member: id})
						}
						acks = append(acks, inventory.Ack{OrderID: id, SKU: s.SKU, State: st})
					}
				}
				if c.redis {
					pipe.HSet(ctx, inventory.RedisStockKey(s.SKU), "total", s.Total, "available", s.Available, "occupied", s.Occupied, "sold", s.Sold)
				}
				if c.redisReservations && i%10 == 0 {
					// MySQL's row still counts the undecided unit as available.
					s.Available, s.Occupied = 8, 0
				}
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			// One broken SKU: a unit gone from available.
			broken := stock[skus/2+1]
			broken.Available--
			stock[skus/2+1] = broken
			if err := inventory.LoadStock(ctx, env.DB, stock); err != nil {
				t.Fatal(err)
			}
			if c.redis {
				env.Redis.HIncrBy(ctx, inventory.RedisStockKey(broken.SKU), "available", -1)
			}
			aud := audit.Auditor{DB: env.DB, Ledger: ledger, RedisReservations: c.redisReservations}
			var trips roundTrips
			if c.redis {
				rc := redis.NewClient(&redis.Options{Addr: env.Endpoints.RedisAddr})
				defer rc.Close()
				rc.AddHook(&trips)
				aud.Redis = rc
			}
			from := statements(t)
			a, err := aud.Audit(ctx, acks)
			if err != nil {
				t.Fatal(err)
			}
			sent := statements(t) - from - 1 // the second SHOW STATUS counts itself
			t.Logf("%d SKUs, %d acks: %d MySQL statements, %d Redis round trips", skus, len(acks), sent, trips.n.Load())
			if sent > 30 {
				t.Errorf("the audit of %d SKUs sent %d MySQL statements: more than a set-based pass needs (a query per SKU?)", skus, sent)
			}
			if trips.n.Load() > 30 {
				t.Errorf("the audit of %d SKUs made %d Redis round trips: more than pipelined batches need (a call per SKU?)", skus, trips.n.Load())
			}
			if a.SKUsAudited != skus || a.ConfirmedUnits != 2*skus/10 {
				t.Errorf("audited %d SKUs, %d confirmed units; want %d, %d", a.SKUsAudited, a.ConfirmedUnits, skus, 2*skus/10)
			}
			var kept []string
			for _, s := range a.SKUs {
				kept = append(kept, s.SKU)
			}
			if a.LeakedUnits != 1 || a.SKUsWithAnomaly != 1 || len(a.SKUs) != 1 || a.SKUs[0].SKU != broken.SKU {
				t.Errorf("want exactly %s leaking 1 unit, kept alone in the detail; got leaked %d, %d SKUs with anomaly, detail of %v (%v)",
					broken.SKU, a.LeakedUnits, a.SKUsWithAnomaly, kept, a.Violations)
			}
			others := 0
			for _, v := range a.Violations {
				if !strings.Contains(v, broken.SKU) {
					others++
				}
			}
			if a.OrphanReservations != 0 || a.DriftUnits != 0 || a.ReserveAckViolations != 0 || a.LostAcks != 0 || others != 0 {
				t.Errorf("clean SKUs flagged: orphans %d drift %d reserve-ack %d lost %d invariants %d (%v)",
					a.OrphanReservations, a.DriftUnits, a.ReserveAckViolations, a.LostAcks, a.InvariantViolations, a.Violations)
			}
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
