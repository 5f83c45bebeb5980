package runner_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/stockbench/stockbench/servers"
)

// TestRoundTripsCounted opens pools the way a run does (servers.Open) and
// makes requests whose round trips are known, one kind at a time: the
// counters must move by exactly that many. An uncounted kind, or one
// counted twice (database/sql's prepare fallback, a pipeline counted per
// command), fails.
func TestRoundTripsCounted(t *testing.T) {
	ctx := context.Background()
	c := warmConns(t)
	cases := []struct {
		name         string
		mysql, redis int64
		do           func() error
	}{
		{"exec with args (interpolated)", 1, 0, func() error {
			_, err := c.DB.ExecContext(ctx, "DO ?", 1)
			return err
		}},
		{"query row", 1, 0, func() error {
			var n int
			return c.DB.QueryRowContext(ctx, "SELECT ?", 7).Scan(&n)
		}},
		{"transaction: begin, exec, commit", 3, 0, func() error {
			tx, err := c.DB.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, "DO 1"); err != nil {
				return err
			}
			return tx.Commit()
		}},
		{"transaction rolled back", 2, 0, func() error {
			tx, err := c.DB.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			return tx.Rollback()
		}},
		{"prepare, execute twice, close", 3, 0, func() error {
			st, err := c.DB.PrepareContext(ctx, "DO ?")
			if err != nil {
				return err
			}
			for i := range 2 {
				if _, err := st.ExecContext(ctx, i); err != nil {
					return err
				}
			}
			return st.Close()
		}},
		{"redis command", 0, 1, func() error { return c.Redis.Ping(ctx).Err() }},
		{"redis pipeline of three", 0, 1, func() error {
			_, err := c.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.Ping(ctx)
				p.Ping(ctx)
				p.Ping(ctx)
				return nil
			})
			return err
		}},
	}
	for _, tc := range cases {
		m0, r0 := c.Trips.MySQL.Load(), c.Trips.Redis.Load()
		if err := tc.do(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if dm, dr := c.Trips.MySQL.Load()-m0, c.Trips.Redis.Load()-r0; dm != tc.mysql || dr != tc.redis {
			t.Errorf("%s: counted %d MySQL and %d Redis round trips, want %d and %d", tc.name, dm, dr, tc.mysql, tc.redis)
		}
	}
}

// warmConns is one connection to each store, warmed: no connect (HELLO,
// CLIENT SETINFO — real round trips, but not the case under test) is
// left for a case to count. It is closed when the test ends.
func warmConns(t *testing.T) servers.Conns {
	t.Helper()
	ctx := context.Background()
	c, err := servers.Open(env.Endpoints, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if c.Trips == nil {
		t.Fatal("servers.Open gave no round-trip counters")
	}
	// Warm one connection so that the driver's connect is not in a case.
	if err := c.DB.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Redis.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// go-redis re-sends HELLO on a connection's first pipeline.
	if _, err := c.Redis.Pipelined(ctx, func(p redis.Pipeliner) error { p.Ping(ctx); return nil }); err != nil {
		t.Fatal(err)
	}
	return c
}
