package luatcc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stockbench/stockbench/audit"
	"github.com/stockbench/stockbench/inventory"
	"github.com/stockbench/stockbench/strategies"
)

func newFlagged(t *testing.T) *Strategy {
	t.Helper()
	// A life longer than the test: only a release lowers the flag.
	s, err := New(strategies.Config{DB: env.DB, Redis: env.Redis, SoldOutFlag: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Setup(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSoldOutFlag: with the flag on, an out-of-stock answer turns later
// buyers away in the process (no Redis round trip: counted as
// soldout_flag_refused), and each way stock comes back lowers it so the
// unit is sold again — this process's cancel, refund, restock or expiry
// pass at once, another process's cancel at this process's next recovery
// pass. A repeat of an order this process reserved still gets its
// reservation. The auditor grades the stores after each case.
func TestSoldOutFlag(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		// back gives a unit back; it returns the acks it caused.
		back func(t *testing.T, s *Strategy) []inventory.Ack
		// stock is the initial stock the ledger starts from.
		stock int64
	}{
		{"own cancel", func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "cancel a", s.Cancel(ctx, ref("a")), nil)
			return []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateCancelled}}
		}, 1},
		{"own refund", func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "confirm a", s.Confirm(ctx, ref("a")), nil)
			want(t, "refund a", s.Refund(ctx, ref("a")), nil)
			return []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateConfirmed}, {OrderID: "a", SKU: sku, State: inventory.StateRefunded}}
		}, 1},
		{"own restock", func(t *testing.T, s *Strategy) []inventory.Ack {
			want(t, "restock", s.Restock(ctx, inventory.Restock{ID: "r1", SKU: sku, Qty: 1}), nil)
			return []inventory.Ack{{OrderID: "r1", SKU: sku, State: inventory.AckRestocked, Qty: 1}}
		}, 1},
		{"own expiry pass", func(t *testing.T, s *Strategy) []inventory.Ack {
			if err := s.expireUndecided(ctx, sku, []string{"a"}, time.Now().Add(2*time.Hour)); err != nil {
				t.Fatal(err)
			}
			return nil
		}, 1},
		{"another process's cancel, seen by the recovery pass", func(t *testing.T, s *Strategy) []inventory.Ack {
			other := newStrategy(t)
			want(t, "cancel a elsewhere", other.Cancel(ctx, ref("a")), nil)
			// Still flagged here: this process did not see the release.
			want(t, "reserve before the pass", s.Reserve(ctx, res("c")), inventory.ErrOutOfStock)
			if err := s.recover(ctx); err != nil {
				t.Fatal(err)
			}
			return []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateCancelled}}
		}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := inventory.ResetMySQL(ctx, env.DB); err != nil {
				t.Fatal(err)
			}
			if err := inventory.ResetRedis(ctx, env.Redis); err != nil {
				t.Fatal(err)
			}
			if err := inventory.LoadStock(ctx, env.DB, []inventory.Stock{{SKU: sku, Total: 1, Available: 1}}); err != nil {
				t.Fatal(err)
			}
			s := newFlagged(t)
			want(t, "reserve a", s.Reserve(ctx, res("a")), nil)
			want(t, "reserve b (raises the flag)", s.Reserve(ctx, res("b")), inventory.ErrOutOfStock)
			err := s.Reserve(ctx, res("b"))
			if !errors.Is(err, errSoldOutFlag) || !errors.Is(err, inventory.ErrOutOfStock) {
				t.Fatalf("reserve b again: %v, want the flag's refusal", err)
			}
			want(t, "repeat of a (reserved here)", s.Reserve(ctx, res("a")), nil)
			acks := []inventory.Ack{{OrderID: "a", SKU: sku, State: inventory.StateReserved}}
			acks = append(acks, c.back(t, s)...)
			want(t, "reserve d once stock is back", s.Reserve(ctx, res("d")), nil)
			acks = append(acks, inventory.Ack{OrderID: "d", SKU: sku, State: inventory.StateReserved})
			m := s.Counters()
			if m["soldout_flag_refused"] < 1 || m["soldout_flag_raised"] < 1 || m["soldout_flag_cleared"] < 1 {
				t.Fatalf("flag counters %v: want a refusal, a raise and a clear", m)
			}
			a, err := audit.Auditor{DB: env.DB, Redis: env.Redis, RedisReservations: true,
				Ledger: map[string]int64{sku: c.stock}}.Audit(ctx, acks)
			if err != nil {
				t.Fatal(err)
			}
			if a.Anomalies != 0 {
				t.Fatalf("audit: %d anomalies: %v", a.Anomalies, a.Violations)
			}
		})
	}
}

// TestSoldOutFlagState: the flag's own rules, no store involved — a
// refusal raises it only if no clear happened since its reserve began;
// each kind of clear lowers it; a repeat of an order this process reserved
// is let through; orders past their deadline are forgotten.
func TestSoldOutFlagState(t *testing.T) {
	r := func(id, sku string) inventory.Reservation {
		return inventory.Reservation{OrderID: id, SKU: sku, Qty: 1, Deadline: time.Now().Add(time.Hour)}
	}
	cases := []struct {
		name string
		run  func(f *soldOut)
		// refusedA, refusedB: whether a new order of SKU A, B is refused after run.
		refusedA, refusedB bool
	}{
		{"out of stock raises", func(f *soldOut) {
			_, gen := f.before(r("x", "A"))
			f.after(r("x", "A"), gen, inventory.ErrOutOfStock)
		}, true, false},
		{"a clear during the reserve keeps it down", func(f *soldOut) {
			_, gen := f.before(r("x", "A"))
			f.clear("A")
			f.after(r("x", "A"), gen, inventory.ErrOutOfStock)
		}, false, false},
		{"clear lowers", func(f *soldOut) {
			_, gen := f.before(r("x", "A"))
			f.after(r("x", "A"), gen, inventory.ErrOutOfStock)
			f.clear("A")
		}, false, false},
		{"clearSeen lowers", func(f *soldOut) {
			_, gen := f.before(r("x", "A"))
			f.after(r("x", "A"), gen, inventory.ErrOutOfStock)
			f.clearSeen("A")
		}, false, false},
		{"clearAll lowers every SKU", func(f *soldOut) {
			for _, sku := range []string{"A", "B"} {
				_, gen := f.before(r("x"+sku, sku))
				f.after(r("x"+sku, sku), gen, inventory.ErrOutOfStock)
			}
			f.clearAll()
		}, false, false},
		{"one SKU's clear leaves the other up", func(f *soldOut) {
			for _, sku := range []string{"A", "B"} {
				_, gen := f.before(r("x"+sku, sku))
				f.after(r("x"+sku, sku), gen, inventory.ErrOutOfStock)
			}
			f.clear("A")
		}, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newSoldOut(time.Hour)
			c.run(f)
			for sku, want := range map[string]bool{"A": c.refusedA, "B": c.refusedB} {
				if got, _ := f.before(r("new", sku)); got != want {
					t.Fatalf("SKU %s: refused %v, want %v", sku, got, want)
				}
			}
		})
	}
	// A repeat of an order reserved here passes a raised flag, until the
	// order is forgotten past its deadline.
	f := newSoldOut(time.Hour)
	mine := r("m", "A")
	_, gen := f.before(mine)
	f.after(mine, gen, nil)
	_, gen = f.before(r("x", "A"))
	f.after(r("x", "A"), gen, inventory.ErrOutOfStock)
	if refused, _ := f.before(mine); refused {
		t.Fatal("a repeat of an order reserved here was refused by the flag")
	}
	f.prune(mine.Deadline)
	if refused, _ := f.before(mine); !refused {
		t.Fatal("an order past its deadline was still remembered")
	}
}
