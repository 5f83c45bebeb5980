package runner_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/runner"
	"github.com/stockbench/stockbench/servers"
	"github.com/stockbench/stockbench/strategies/registry"
)

// TestGuard: the guard lets a clean run through and refuses, before
// anything is written, a held lock, a foreign table and a pool the server
// cannot serve.
func TestGuard(t *testing.T) {
	ctx := context.Background()
	if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		pool int
		// arrange sets the stores up and returns an undo.
		arrange func(t *testing.T) func()
		want    string // substring of the refusal; empty: allowed
	}{
		{"clean", 8, func(*testing.T) func() { return func() {} }, ""},
		{"held lock", 8, func(t *testing.T) func() {
			db, err := sql.Open("mysql", env.Endpoints.MySQLDSN)
			if err != nil {
				t.Fatal(err)
			}
			l, err := inventory.AcquireRunLock(ctx, db, env.Redis, "host other pid 42 started earlier", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return func() { l.Release(); db.Close() }
		}, "pid 42"},
		{"foreign table", 8, func(t *testing.T) func() {
			exec(t, "DROP TABLE outbox")
			exec(t, "CREATE TABLE outbox (id INT PRIMARY KEY)")
			return func() { exec(t, "DROP TABLE outbox"); inventory.ResetMySQL(ctx, env.DB) }
		}, "outbox"},
		{"pool beyond max_connections", 1 << 20, func(*testing.T) func() { return func() {} }, "max_connections"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			undo := c.arrange(t)
			defer undo()
			release, err := runner.Guard(ctx, env.Endpoints, env.Conns, c.pool)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if err := release(); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, runner.ErrRefused) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("guard: %v, want a refusal naming %q", err, c.want)
			}
		})
	}
}

// TestPoolWaitRecorded: buyers beyond the pool queue for a connection, and
// the wait is in the run's counters.
func TestPoolWaitRecorded(t *testing.T) {
	ep := env.Endpoints
	conns, err := servers.Open(ep, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer conns.Close()
	e, err := registry.Lookup("rowlock")
	if err != nil {
		t.Fatal(err)
	}
	o := flashOptions(1)
	o.Stock, o.Buyers = 20, 40
	run, err := runner.RunStrategy(context.Background(), conns, e, o.Scenarios[0], o)
	if err != nil {
		t.Fatal(err)
	}
	if run.Audit.OversoldUnits != 0 || run.Audit.LostAcks != 0 || run.Audit.ConfirmedUnits != 20 {
		t.Fatalf("audit through a one-connection pool: %+v", run.Audit)
	}
	if h := run.Harness; h.MySQLPoolWaits <= 0 || h.MySQLPoolWaitMS <= 0 || h.PoolWaitMSPerOp <= 0 {
		t.Fatalf("pool wait not recorded: %+v", h)
	}
}

func exec(t *testing.T, q string) {
	t.Helper()
	if _, err := env.DB.Exec(q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}
