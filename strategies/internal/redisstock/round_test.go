package redisstock

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockbench/stockbench/internal/waitfor"
	"github.com/stockbench/stockbench/inventory"
)

// TestRoundMembers: a gated fence's round (Ready on a Redis without the
// Try script) drains this member and rebuilds once every other member
// has drained or is gone. A member that quit (stopped with nothing
// undrained) is not waited for; one that stays silent past its lease is
// presumed dead — the round goes on without it and counts it.
func TestRoundMembers(t *testing.T) {
	cases := []struct {
		name     string
		quit     bool // the other member quits before the round
		wantDead int64
	}{
		{"the other member quit", true, 0},
		{"the other member is silent", false, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
				t.Fatal(err)
			}
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
				t.Fatal(err)
			}
			if err := inventory.LoadStock(ctx, env.DB, []inventory.Stock{{SKU: "S", Total: 10, Available: 10}}); err != nil {
				t.Fatal(err)
			}
			var drained atomic.Int64
			drain := func(context.Context) error { drained.Add(1); return nil }
			lease := 300 * time.Millisecond // the silent member's wait: short, asserted nowhere
			a := &Fence{DB: env.DB, Drain: drain, Member: "a", Lease: lease}
			b := &Fence{DB: env.DB, Drain: func(context.Context) error { return nil }, Member: "b", Lease: lease}
			defer a.Stop()
			for _, f := range []*Fence{a, b} {
				if err := f.Join(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if c.quit {
				if err := b.Quit(ctx); err != nil {
					t.Fatal(err)
				}
			}
			s := Store{R: env.Redis, Fence: a}
			if n, err := a.Peers(ctx); err != nil || n != map[bool]int{true: 0, false: 1}[c.quit] {
				t.Fatalf("peers: %d, %v", n, err)
			}
			if err := env.Redis.ScriptFlush(ctx).Err(); err != nil { // a restart, as the fence sees it
				t.Fatal(err)
			}
			if err := s.Ready(ctx); err != nil {
				t.Fatalf("ready: %v", err)
			}
			if ok, err := s.loaded(ctx); err != nil || !ok {
				t.Fatalf("try script after the round: loaded %v, %v", ok, err)
			}
			if drained.Load() != 1 || a.Rebuilds() != 1 || a.Rounds() != 1 || a.PresumedDead() != c.wantDead {
				t.Fatalf("drains %d, rebuilds %d, rounds %d, presumed dead %d; want 1, 1, 1, %d",
					drained.Load(), a.Rebuilds(), a.Rounds(), a.PresumedDead(), c.wantDead)
			}
			var epoch int64
			if err := env.DB.QueryRowContext(ctx, "SELECT epoch FROM redis_fence WHERE instance=''").Scan(&epoch); err != nil || epoch != 1 {
				t.Fatalf("the fence's epoch after one round: %d, %v; want 1", epoch, err)
			}
		})
	}
}

// TestLateMember: a member a round went on without (silent past its
// lease) is late — its relay's check (CheckTx) refuses until it catches
// up: its next Ready runs CatchUp once, on the rebuilt Redis, and brings
// its epoch level. A member that joins after the round (new, nothing
// decided) joins at the fence's epoch and is not late; one restarted on
// its row keeps its epoch, late.
func TestLateMember(t *testing.T) {
	cases := []struct {
		name     string
		joinLate string // "": b was there before the round; "new": b joins after it as a new member
		wantLate bool
	}{
		{"silent through the round", "", true},
		{"restarted on its row after the round", "restart", true},
		{"new after the round", "new", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
				t.Fatal(err)
			}
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
				t.Fatal(err)
			}
			if err := inventory.LoadStock(ctx, env.DB, []inventory.Stock{{SKU: "S", Total: 10, Available: 10}}); err != nil {
				t.Fatal(err)
			}
			lease := 300 * time.Millisecond // the silent member's wait: short, asserted nowhere
			nop := func(context.Context) error { return nil }
			var caught atomic.Int64
			catchUp := func(context.Context) error { caught.Add(1); return nil }
			a := &Fence{DB: env.DB, Drain: nop, Member: "a", Lease: lease}
			b := &Fence{DB: env.DB, Drain: nop, Member: "b", Lease: lease, CatchUp: catchUp}
			defer a.Stop()
			defer b.Stop()
			if err := a.Join(ctx); err != nil {
				t.Fatal(err)
			}
			if c.joinLate != "new" {
				if err := b.Join(ctx); err != nil {
					t.Fatal(err)
				}
				waitfor.Until(t, "b's lease ran out", func() bool { n, err := a.Peers(ctx); return err == nil && n == 0 })
			}
			if err := env.Redis.ScriptFlush(ctx).Err(); err != nil { // a restart, as the fence sees it
				t.Fatal(err)
			}
			if err := (Store{R: env.Redis, Fence: a}).Ready(ctx); err != nil {
				t.Fatalf("a's round: %v", err)
			}
			if c.joinLate != "" {
				if err := b.Join(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if got := checkTx(t, b); errors.Is(got, ErrLate) != c.wantLate {
				t.Fatalf("b's relay check after the round: %v, late want %v", got, c.wantLate)
			}
			if err := (Store{R: env.Redis, Fence: b}).Ready(ctx); err != nil {
				t.Fatalf("b's ready: %v", err)
			}
			want := map[bool]int64{true: 1, false: 0}[c.wantLate]
			if caught.Load() != want || b.CatchUps() != want {
				t.Fatalf("b caught up %d times (counted %d), want %d", caught.Load(), b.CatchUps(), want)
			}
			if err := checkTx(t, b); err != nil {
				t.Fatalf("b's relay check after its catch-up: %v", err)
			}
		})
	}
}

// checkTx runs f's relay check in a transaction of its own.
func checkTx(t *testing.T, f *Fence) error {
	t.Helper()
	tx, err := env.DB.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	return f.CheckTx(context.Background(), tx)
}
