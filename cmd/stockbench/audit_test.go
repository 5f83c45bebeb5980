package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/servers/servertest"
)

// TestAuditCommand builds each anomaly the auditor must name in real stores
// and runs `stockbench audit` on them: the anomaly's figure must be named
// with its count, and the exit code must be 1 (0 for the clean state).
func TestAuditCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	env, stop, err := servertest.Start()
	if err != nil {
		t.Fatalf("servers: %v", err)
	}
	t.Cleanup(stop)
	ctx := context.Background()
	now := time.Now().UTC()
	type order struct {
		id    string
		qty   int64
		state inventory.OrderState
	}
	type res struct { // a live Redis reservation
		id       string
		deadline time.Time
	}
	ok := inventory.Stock{Total: 10, Available: 9, Occupied: 1, Sold: 0} // one reservation "r"
	cases := []struct {
		name   string
		mysql  inventory.Stock // SKU "S"
		orders []order
		redis  *inventory.Stock // stock hash; nil: none
		live   []res
		flags  []string
		acks   []inventory.Ack
		want   []string // figure names that must be reported non-zero, as "name count"
	}{
		{name: "clean", mysql: ok, orders: []order{{"r", 1, inventory.StateReserved}},
			redis: &ok, live: []res{{"r", now.Add(time.Hour)}}, want: []string{"anomalies 0"}},
		{name: "oversold", mysql: inventory.Stock{Total: 2, Sold: 3},
			orders: []order{{"a", 1, inventory.StateConfirmed}, {"b", 1, inventory.StateConfirmed}, {"c", 1, inventory.StateConfirmed}},
			want:   []string{"oversold_units 1"}},
		// MySQL shows 5 units more than the harness ever put in.
		{name: "phantom against the ledger", mysql: inventory.Stock{Total: 15, Available: 15},
			flags: []string{"--ledger", "S=10"}, want: []string{"phantom_units 5", "invariant_violations 1"}},
		// Without a ledger: available counts more units than the total has.
		{name: "phantom beyond the total", mysql: inventory.Stock{Total: 10, Available: 12},
			want: []string{"phantom_units 2"}},
		{name: "leaked", mysql: inventory.Stock{Total: 10, Available: 5, Occupied: 3, Sold: 2},
			orders: []order{{"a", 2, inventory.StateConfirmed}}, want: []string{"leaked_units 3"}},
		{name: "broken invariant", mysql: inventory.Stock{Total: 10, Available: 9},
			want: []string{"invariant_violations 1"}},
		{name: "negative stock", mysql: inventory.Stock{Total: 1, Available: -1, Sold: 2},
			orders: []order{{"a", 1, inventory.StateConfirmed}, {"b", 1, inventory.StateConfirmed}},
			want:   []string{"invariant_violations 1", "oversold_units 1"}},
		// Redis lost its data: every reserve fails from then on.
		{name: "missing redis stock hash", mysql: inventory.Stock{Total: 10, Available: 10},
			flags: []string{"--redis-addr", env.Endpoints.RedisAddr}, want: []string{"missing_redis_stock 1", "invariant_violations 1"}},
		// Redis sold 2 units MySQL does not know about: field by field.
		{name: "drift", mysql: inventory.Stock{Total: 10, Available: 10},
			redis: &inventory.Stock{Total: 10, Available: 8, Sold: 2}, want: []string{"drift_units 4"}},
		// A reserve's undo never ran: Redis holds the unit, MySQL has no order.
		{name: "orphan reservation", mysql: inventory.Stock{Total: 10, Available: 10},
			redis: &inventory.Stock{Total: 10, Available: 9, Occupied: 1}, live: []res{{"x", now.Add(time.Hour)}},
			want: []string{"orphan_reservations 1"}},
		// A cancel committed in MySQL; Redis still holds the unit.
		{name: "reservation MySQL already decided", mysql: inventory.Stock{Total: 10, Available: 10},
			orders: []order{{"x", 1, inventory.StateCancelled}},
			redis:  &inventory.Stock{Total: 10, Available: 9, Occupied: 1}, live: []res{{"x", now.Add(time.Hour)}},
			want: []string{"orphan_reservations 1"}},
		// Past its deadline by an hour, still holding the unit.
		{name: "stale reservation", mysql: ok, orders: []order{{"r", 1, inventory.StateReserved}},
			redis: &ok, live: []res{{"r", now.Add(-time.Hour)}}, want: []string{"stale_reservations 1"}},
		{name: "lost confirm ack", mysql: ok, orders: []order{{"r", 1, inventory.StateReserved}},
			acks: []inventory.Ack{{OrderID: "r", State: inventory.StateConfirmed}}, want: []string{"lost_acks 1"}},
		{name: "reserve ack no store holds", mysql: inventory.Stock{Total: 10, Available: 10},
			acks: []inventory.Ack{{OrderID: "gone", SKU: "S", State: inventory.StateReserved}}, want: []string{"reserve_ack_violations 1"}},
		{name: "cancel ack of a reserved order", mysql: ok, orders: []order{{"r", 1, inventory.StateReserved}},
			acks: []inventory.Ack{{OrderID: "r", State: inventory.StateCancelled}}, want: []string{"cancel_ack_violations 1"}},
		{name: "cancel ack of a confirmed order", mysql: inventory.Stock{Total: 10, Available: 9, Sold: 1},
			orders: []order{{"c", 1, inventory.StateConfirmed}},
			acks:   []inventory.Ack{{OrderID: "c", State: inventory.StateCancelled}}, want: []string{"cancel_ack_violations 1"}},
		{name: "paid buyer refused after reserve", mysql: inventory.Stock{Total: 10, Available: 10},
			orders: []order{{"p", 1, inventory.StateCancelled}},
			acks:   []inventory.Ack{{OrderID: "p", SKU: "S", State: inventory.StateReserved}, {OrderID: "p", SKU: "S", State: inventory.AckRefused}},
			want:   []string{"refused_after_reserve 1"}},
		// lua-tcc's layout: a live Redis reservation needs no MySQL order.
		{name: "redis-only reservations are no orphans", mysql: inventory.Stock{Total: 10, Available: 10},
			redis: &inventory.Stock{Total: 10, Available: 9, Occupied: 1}, live: []res{{"t", now.Add(time.Hour)}},
			flags: []string{"--redis-reservations"}, want: []string{"anomalies 0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
				t.Fatal(err)
			}
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
				t.Fatal(err)
			}
			c.mysql.SKU = "S"
			if err := inventory.LoadStock(ctx, env.DB, []inventory.Stock{c.mysql}); err != nil {
				t.Fatal(err)
			}
			for _, o := range c.orders {
				if _, err := env.DB.Exec("INSERT INTO orders (order_id, sku, qty, state, created_at, expires_at, updated_at) VALUES (?,?,?,?,?,?,?)", o.id, "S", o.qty, string(o.state), now, now.Add(time.Hour), now); err != nil {
					t.Fatal(err)
				}
			}
			args := append([]string{"audit", "--mysql-dsn", env.Endpoints.MySQLDSN}, c.flags...)
			if r := c.redis; r != nil {
				env.Redis.HSet(ctx, inventory.RedisStockKey("S"), "total", r.Total, "available", r.Available, "occupied", r.Occupied, "sold", r.Sold)
				args = append(args, "--redis-addr", env.Endpoints.RedisAddr)
			}
			for _, l := range c.live {
				env.Redis.HSet(ctx, inventory.RedisReservationKey("S", l.id), "qty", 1, "state", "reserved", "deadline", l.deadline.UnixMilli())
				env.Redis.ZAdd(ctx, inventory.RedisLiveKey("S"), redis.Z{Score: float64(l.deadline.UnixMilli()), Member: l.id})
			}
			if len(c.acks) > 0 {
				path := filepath.Join(t.TempDir(), "acks.json")
				b, _ := json.Marshal(c.acks)
				if err := os.WriteFile(path, b, 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--acks", path)
			}
			var out, errb bytes.Buffer
			code := Main(ctx, args, &out, &errb)
			t.Logf("stockbench %s\n%s", strings.Join(args[1:], " "), out.String())
			wantCode := exitFailed
			if c.want[0] == "anomalies 0" {
				wantCode = exitOK
			}
			if code != wantCode {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr: %s", code, wantCode, out.String(), errb.String())
			}
			for _, w := range c.want {
				name, n, _ := strings.Cut(w, " ")
				if !regexp.MustCompile(`(?m)^\s+` + name + `\s+` + n + `$`).MatchString(out.String()) {
					t.Fatalf("output does not report %q:\n%s", w, out.String())
				}
			}
			if strings.Contains(out.String()+errb.String(), "password") {
				t.Fatalf("output mentions a password")
			}
		})
	}
}
