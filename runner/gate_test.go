package runner

import (
	"context"
	"errors"
	"testing"

	"github.com/stockbench/stockbench/inventory"
)

// TestGate: the service model admits up to its limit, queues up to its
// bound, sheds the rest at once, never sheds a follow-up, hands a freed
// slot to the oldest follow-up first, and lets a waiter whose context ended
// go without losing a slot.
func TestGate(t *testing.T) {
	g := newGate(2, 1)
	var tickets []ticket
	for i := range 3 {
		tk, err := g.try(false)
		if err != nil {
			t.Fatalf("request %d shed: %v", i, err)
		}
		tickets = append(tickets, tk)
	}
	if tickets[0].w != nil || tickets[1].w != nil || tickets[2].w == nil {
		t.Fatalf("want two slots and one queued: %+v", tickets)
	}
	if _, err := g.try(false); !errors.Is(err, inventory.ErrBusy) {
		t.Fatalf("fourth new request: %v, want busy", err)
	}
	follow, err := g.try(true)
	if err != nil || follow.w == nil {
		t.Fatalf("follow-up: %+v, %v: want queued, never shed", follow, err)
	}
	// A slot frees: the follow-up, queued last, goes first.
	g.leave()
	select {
	case <-follow.w.ready:
	default:
		t.Fatal("the freed slot did not go to the follow-up")
	}
	select {
	case <-tickets[2].w.ready:
		t.Fatal("the new request went before the follow-up")
	default:
	}
	// The queued new request gives up: its place is free again.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.wait(ctx, tickets[2]); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait: %v", err)
	}
	if _, err := g.try(false); err != nil {
		t.Fatalf("after the waiter left the queue has room: %v", err)
	}
	if shed, peak := g.stats(); shed != 1 || peak != 1 {
		t.Fatalf("stats shed %d peak %d, want 1 and 1", shed, peak)
	}
	// No service model: everything passes.
	var none *gate
	if tk, err := none.try(false); err != nil || !tk.taken {
		t.Fatalf("nil gate: %+v, %v", tk, err)
	}
	none.leave()
}

// TestGateDrop: a ticket given back unused (a run stopping before a
// buyer's first call) frees what it took — a slot, a place in the queue,
// or the slot granted to it while it waited — and nothing more. Each case
// runs many times: giving back a granted slot used to race the grant
// against an ended context, and leak the slot on about half the runs.
func TestGateDrop(t *testing.T) {
	cases := []struct {
		name    string
		queued  bool // the ticket waits in the queue
		granted bool // a slot freed and went to it before the drop
		inUse   int  // slots in use after the drop (the other holder's)
	}{
		{"a slot", false, false, 0},
		{"a place in the queue", true, false, 1},
		{"a slot granted to a waiter", true, true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for range 100 {
				g := newGate(1, 1)
				first, err := g.try(false)
				if err != nil {
					t.Fatal(err)
				}
				tk := first
				if c.queued {
					if tk, err = g.try(false); err != nil || tk.w == nil {
						t.Fatalf("second request: %+v, %v: want queued", tk, err)
					}
					if c.granted {
						g.leave() // the first holder is done: its slot goes to tk
					}
				}
				g.drop(tk)
				g.mu.Lock()
				inUse, queued := g.inUse, g.fresh.Len()+g.follow.Len()
				g.mu.Unlock()
				if inUse != c.inUse || queued != 0 {
					t.Fatalf("after the drop: %d slots in use, %d queued; want %d and 0", inUse, queued, c.inUse)
				}
			}
		})
	}
}
