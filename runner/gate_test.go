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
